"""Every private name of Dagster and pyiceberg the product uses, in one place.

A patch release inside the pinned ranges may move or change a private name: this module is the one
place to fix, and icelake_assets_tests/test_private_api.py fails loudly (naming the name and what
changed) before anything else does. Each entry says why no public API serves. Names resolve lazily
(PEP 562): importing this module imports neither Dagster nor pyiceberg, so a module of a low layer
(audit, the CLI's fast paths) pays for a library only when it uses one of its names.
"""

from __future__ import annotations

import importlib
from typing import Any

from icelake_assets.types import IcelakeError

# name -> (module, attribute, why no public API)
PRIVATE_NAMES: dict[str, tuple[str, str, str]] = {
    # Run and backfill queries of the run model (one run per table, crash recovery): the public
    # RunsFilter takes statuses, but the finished/unfinished partition of DagsterRunStatus and the
    # backfill filter have no public home.
    "FINISHED_STATUSES": ("dagster._core.storage.dagster_run", "FINISHED_STATUSES", "no public set"),
    "NOT_FINISHED_STATUSES": ("dagster._core.storage.dagster_run", "NOT_FINISHED_STATUSES", "no public set"),
    "BulkActionsFilter": ("dagster._core.execution.backfill", "BulkActionsFilter", "backfill query filter"),
    "BulkActionStatus": ("dagster._core.execution.backfill", "BulkActionStatus", "backfill statuses"),
    # Run tags Dagster itself reads (partition ranges of a backfill run, run priority in the queue).
    "ASSET_PARTITION_RANGE_START_TAG": (
        "dagster._core.storage.tags",
        "ASSET_PARTITION_RANGE_START_TAG",
        "tag names are not exported",
    ),
    "ASSET_PARTITION_RANGE_END_TAG": (
        "dagster._core.storage.tags",
        "ASSET_PARTITION_RANGE_END_TAG",
        "tag names are not exported",
    ),
    "PRIORITY_TAG": ("dagster._core.storage.tags", "PRIORITY_TAG", "tag names are not exported"),
    # The kind badges ("iceberg", "spark") of graph-backed assets: AssetsDefinition.from_graph takes
    # tags, not kinds.
    "build_kind_tag": ("dagster._core.definitions.tags", "build_kind_tag", "from_graph takes no kinds"),
    # The code location's loader: built once per code-server load, not per INITIALIZATION and again
    # per RECONSTRUCTION (definitions.py).
    "DefinitionsLoadContext": (
        "dagster._core.definitions.definitions_load_context",
        "DefinitionsLoadContext",
        "the load context's class is not exported",
    ),
    "DefinitionsLoadType": (
        "dagster._core.definitions.definitions_load_context",
        "DefinitionsLoadType",
        "the load type enum is not exported",
    ),
    # A job selecting assets, before resolution (table_groups.py builds one per group).
    "UnresolvedAssetJobDefinition": (
        "dagster._core.definitions.unresolved_asset_job_definition",
        "UnresolvedAssetJobDefinition",
        "define_asset_job's return type is not exported",
    ),
    # The settings check cron strings with Dagster's own rule, so a schedule never fails at load.
    "is_valid_cron_string": ("dagster._utils.schedules", "is_valid_cron_string", "no public validator"),
    # The audit log writes its data files itself to commit them with its own retry (audit/store.py).
    "dataframe_to_data_files": (
        "pyiceberg.io.pyarrow",
        "_dataframe_to_data_files",
        "Transaction.append writes and commits in one step",
    ),
    "check_pyarrow_schema_compatible": (
        "pyiceberg.io.pyarrow",
        "_check_pyarrow_schema_compatible",
        "the schema check of append is not exported",
    ),
}


class PrivateApiChanged(IcelakeError, ImportError):
    """A private name moved or vanished in an upgrade of Dagster or pyiceberg."""


def resolve(name: str) -> Any:
    module, attribute, why = PRIVATE_NAMES[name]
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise PrivateApiChanged(
            f"{module}.{attribute} is gone ({err}); it was used because {why}: "
            "fix icelake_assets/private_api.py for this release"
        ) from err


def __getattr__(name: str) -> Any:
    if name not in PRIVATE_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = resolve(name)
    globals()[name] = value  # resolved once
    return value


__all__ = sorted(PRIVATE_NAMES)  # noqa: PLE0605
