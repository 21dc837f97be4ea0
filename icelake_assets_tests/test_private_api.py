"""The private names of Dagster and pyiceberg live in icelake_assets/private_api.py only, and each still
is what the product relies on: an upgrade that moves or changes one fails here, naming it."""

import ast
import enum
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from icelake_assets import private_api

PACKAGE = Path(private_api.__file__).parent
LIBRARIES = ("dagster", "dagster_pyspark", "dagster_webserver", "dagster_postgres", "pyiceberg")


def _private_imports(path: Path) -> list[str]:
    """`from dagster._x import y`, `import pyiceberg._x`, `from pyiceberg.io.pyarrow import _y`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            if any(part.startswith("_") for part in node.module.split(".")) or any(
                a.name.startswith("_") for a in node.names
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} from {node.module}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in LIBRARIES and any(p.startswith("_") for p in parts):
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} import {alias.name}")
    return found


def test_no_module_but_private_api_imports_a_private_name():
    offenders = [
        hit
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "private_api.py"
        for hit in _private_imports(path)
    ]
    assert offenders == [], "import these through icelake_assets/private_api.py:\n" + "\n".join(offenders)


@pytest.mark.parametrize("name", sorted(private_api.PRIVATE_NAMES))
def test_every_private_name_still_resolves(name):
    assert private_api.resolve(name) is not None


def test_the_private_names_still_have_the_shape_the_product_uses():
    from dagster import DagsterRunStatus

    finished, running = set(private_api.FINISHED_STATUSES), set(private_api.NOT_FINISHED_STATUSES)
    assert not finished & running and (finished | running) <= set(DagsterRunStatus)
    assert {DagsterRunStatus.SUCCESS, DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED} <= finished
    assert {DagsterRunStatus.QUEUED, DagsterRunStatus.STARTING, DagsterRunStatus.STARTED} <= running
    assert {"REQUESTED", "COMPLETED_SUCCESS", "FAILED", "CANCELED"} <= {
        s.name for s in private_api.BulkActionStatus
    }
    assert private_api.BulkActionsFilter(statuses=[private_api.BulkActionStatus.REQUESTED]).statuses
    assert private_api.build_kind_tag("iceberg") == {"dagster/kind/iceberg": ""}
    assert issubclass(private_api.DefinitionsLoadType, enum.Enum)
    assert {"INITIALIZATION", "RECONSTRUCTION"} <= {t.name for t in private_api.DefinitionsLoadType}
    assert callable(private_api.DefinitionsLoadContext.get)
    for tag in ("ASSET_PARTITION_RANGE_START_TAG", "ASSET_PARTITION_RANGE_END_TAG", "PRIORITY_TAG"):
        assert getattr(private_api, tag).startswith("dagster/"), tag
    assert private_api.is_valid_cron_string("*/5 * * * *") and not private_api.is_valid_cron_string("nope")
    params = inspect.signature(private_api.dataframe_to_data_files).parameters
    assert {"table_metadata", "df", "io"} <= set(params)
    params = inspect.signature(private_api.check_pyarrow_schema_compatible).parameters
    assert {"requested_schema", "provided_schema"} <= set(params)


def test_a_vanished_name_fails_loudly_with_what_to_fix(monkeypatch):
    monkeypatch.setitem(private_api.PRIVATE_NAMES, "gone", ("dagster._core.nowhere", "gone", "a test"))
    with pytest.raises(
        private_api.PrivateApiChanged, match=r"dagster\._core\.nowhere\.gone is gone .* a test"
    ):
        private_api.resolve("gone")


def test_importing_it_imports_no_library():
    code = "import sys, icelake_assets.private_api; print([m for m in ('dagster', 'pyiceberg') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_run_worker_still_loads_its_job_where_run_being_loaded_looks():
    """definitions.py builds a run's table groups only when it finds the run on the loader's frame."""
    module, function, argument = private_api.RUN_WORKER_LOADER
    loader = getattr(__import__(module, fromlist=[function]), function)
    assert argument in inspect.signature(loader).parameters
    source = inspect.getsource(loader)
    assert ".get_definition()" in source  # the load happens inside the loader's own frame
    assert private_api.run_being_loaded() is None  # not in a run worker
