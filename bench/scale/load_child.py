"""One fresh-process definitions load for bench/scale/scale_bench.py and bench/scale/definitions_bench.py
(``python -m bench.scale.load_child MODE [MODULE]``; MODULE defaults to the product's definitions).

Its own module, so that nothing is imported before the clock starts: ``import dagster`` is timed
first (mode ``import`` stops there: the baseline), then the code location is loaded the way
Dagster's code server loads it, then the snapshot the code server sends the webserver is built.
Prints one line ``RESULT {json}``: the phases in seconds, the asset keys, the number of asset checks
and the job names."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

MODULE = "icelake_assets.definitions"


def load_repository(module: str = MODULE) -> Any:
    """The RepositoryDefinition of ``module``, loaded as Dagster's code server loads a python_module
    target (``LoadedRepositories``: works whether ``defs`` is a Definitions or a ``@definitions``
    function taking a DefinitionsLoadContext)."""
    from dagster._core.origin import get_python_environment_entry_point
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._grpc.server import LoadedRepositories

    origin = LoadableTargetOrigin(
        executable_path=sys.executable, module_name=module, working_directory=os.getcwd()
    )
    loaded = LoadedRepositories(
        origin,
        container_image=None,
        entry_point=get_python_environment_entry_point(sys.executable),
        container_context=None,
    )
    repos = list(loaded.definitions_by_name.values())
    if len(repos) != 1:
        raise RuntimeError(f"{module}: {len(repos)} repositories loaded, expected 1")
    return repos[0]


def main(mode: str, module: str = MODULE) -> None:
    started = time.perf_counter()
    import dagster  # noqa: F401

    imported = time.perf_counter()
    out: dict[str, Any] = {"import_dagster": imported - started}
    if mode == "load":
        from dagster._core.remote_representation.external_data import RepositorySnap
        from dagster._serdes import serialize_value

        repo = load_repository(module)
        loaded = time.perf_counter()
        snap = RepositorySnap.from_def(repo, defer_snapshots=True)  # what the webserver asks for
        snapped = time.perf_counter()
        size = len(serialize_value(snap))
        out |= {
            "load": loaded - imported,
            "snapshot": snapped - loaded,
            "serialize": time.perf_counter() - snapped,
            "snapshot_bytes": size,
            "asset_keys": [list(n.asset_key.path) for n in snap.asset_nodes],
            "asset_checks": len(snap.asset_check_nodes or ()),
            "jobs": sorted(j.name for j in snap.job_refs or ()),
        }
    elif mode != "import":
        raise SystemExit(f"unknown mode {mode!r}: import or load")
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "load", *sys.argv[2:3])
