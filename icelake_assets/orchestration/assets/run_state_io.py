"""Where a run's state waits between its ops: a file per step output under the instance's storage
(as Dagster's FilesystemIOManager keeps it), written as JSON by the results' one codec
(maintenance/results/codec.py) instead of a pickle, so an upgrade that moves or changes a class
cannot strand a run's state. State pickled by an earlier version still loads: its classes are
looked up where they live now."""

from __future__ import annotations

import importlib
import importlib.util
import io
import json
import pickle
from typing import Any

from dagster import (
    ConfigurableIOManagerFactory,
    InitResourceContext,
    InputContext,
    IOManager,
    MetadataValue,
    OutputContext,
)
from pydantic import Field
from upath import UPath

from icelake_assets.maintenance.results.codec import decode, encode
from icelake_assets.orchestration.assets.run_state import RunStates

# Modules of the results before maintenance/ had rooms (state pickled by those versions names them).
_MOVED_MODULES = {
    "icelake_assets.maintenance.results": "icelake_assets.maintenance.results.models",
    "icelake_assets.maintenance.result_types": "icelake_assets.maintenance.results.base",
    "icelake_assets.maintenance.delete_results": "icelake_assets.maintenance.results.deletes",
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        moved = _MOVED_MODULES.get(module)
        if moved is not None and (importlib.util.find_spec(module) is None or not _has(module, name)):
            module = moved
        return super().find_class(module, name)


def _has(module: str, name: str) -> bool:
    return hasattr(importlib.import_module(module), name)


def load_legacy(data: bytes) -> Any:
    """State an earlier version pickled, with its classes found where they live now."""
    return _Unpickler(io.BytesIO(data)).load()


class RunStateIOManager(IOManager):
    """A step's state in ``<base>/<run id>/<step key>/<output>`` (the path Dagster's filesystem IO
    managers give an op output: earlier state is found; a re-execution reads its parent run's). Unlike
    them it logs no line per step output and input: a shared run of many tables has ten steps per
    pool it carries, and every log line is an event-log write."""

    def __init__(self, base_path: UPath) -> None:
        self.base_path = base_path

    def path(self, context: InputContext | OutputContext) -> UPath:
        return self.base_path.joinpath(*context.get_identifier())

    def handle_output(self, context: OutputContext, obj: Any) -> None:
        if not isinstance(obj, RunStates):
            raise TypeError(f"the run state store keeps RunStates, not {type(obj).__name__}")
        path = self.path(context)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"run_states": encode(obj)}))
        context.add_output_metadata({"path": MetadataValue.path(str(path))})

    def load_input(self, context: InputContext) -> Any:
        return self.load_from_path(self.path(context))

    @staticmethod
    def load_from_path(path: UPath) -> Any:
        data = path.read_bytes()
        if data[:1] != b"{":
            return load_legacy(data)
        return decode(RunStates, json.loads(data)["run_states"])


class RunStateStore(ConfigurableIOManagerFactory[RunStateIOManager]):
    """The run state's IO manager; ``base_dir`` defaults to the instance's storage directory."""

    base_dir: str | None = Field(default=None, description="Where step outputs are kept.")

    def create_io_manager(self, context: InitResourceContext) -> RunStateIOManager:
        base = self.base_dir or (context.instance.storage_directory() if context.instance else ".")
        return RunStateIOManager(base_path=UPath(base))
