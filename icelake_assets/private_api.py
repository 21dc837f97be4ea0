"""Every private name of Dagster and pyiceberg the product uses, in one place.

A patch release inside the pinned ranges may move or change a private name: this module is the one
place to fix, and icelake_assets_tests/test_private_api.py fails loudly (naming the name and what
changed) before anything else does. Each entry says why no public API serves. Names resolve lazily
(PEP 562): importing this module imports neither Dagster nor pyiceberg, so a module of a low layer
(audit, the CLI's fast paths) pays for a library only when it uses one of its names.
"""

from __future__ import annotations

import importlib
import sys
from types import FrameType
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
    # Run monitoring fails a run past this many seconds (a backstop behind the run leases).
    "MAX_RUNTIME_SECONDS_TAG": (
        "dagster._core.storage.tags",
        "MAX_RUNTIME_SECONDS_TAG",
        "tag names are not exported",
    ),
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
    # The implicit job of a code location's assets (backfills and partition runs launch it): a run
    # worker's definitions must define the job its run names.
    "IMPLICIT_ASSET_JOB_NAME": (
        "dagster._core.definitions.assets.job.asset_job",
        "IMPLICIT_ASSET_JOB_NAME",
        "the implicit job's name is not exported",
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
    # A step raises it to end its run CANCELED (what Dagster's own interrupt raises): a terminated run
    # whose worker fenced itself (maintenance/spark/fencing.py) ends as Terminate says, not as a failure.
    "DagsterExecutionInterruptedError": (
        "dagster._core.errors",
        "DagsterExecutionInterruptedError",
        "the interrupt error is not exported",
    ),
    # The run storage's key-value table: the storage sets and gets keys, but deletes none (the
    # product's run keys are removed once their run is settled: runs/housekeeping.py).
    "KeyValueStoreTable": (
        "dagster._core.storage.runs.schema",
        "KeyValueStoreTable",
        "the storage has no delete for its key-value store",
    ),
    # A partitioned check's result counts for its partition only while it names the partition's latest
    # materialization (its "target"): the per-partition checks (orchestration/checks/partition_checks.py)
    # report outside the asset's step, where Dagster does not fill it in.
    "AssetCheckEvaluationTargetMaterializationData": (
        "dagster._core.definitions.asset_checks.asset_check_evaluation",
        "AssetCheckEvaluationTargetMaterializationData",
        "the target of a check evaluation is not exported",
    ),
    # The layout replay (layout/replay.py) asks of a laid-out sample's files what a scan would ask
    # of real ones: Iceberg's inclusive-metrics rules, which pyiceberg applies only inside planning.
    "InclusiveMetricsEvaluator": (
        "pyiceberg.expressions.visitors",
        "_InclusiveMetricsEvaluator",
        "the metrics evaluator of scan planning is not exported",
    ),
    "check_pyarrow_schema_compatible": (
        "pyiceberg.io.pyarrow",
        "_check_pyarrow_schema_compatible",
        "the schema check of append is not exported",
    ),
}


# Where a run worker loads its job: ``dagster api execute_run`` and the code server's spawned worker
# both call core_execute_run(recon_job, dagster_run, ...) of this module, which loads the definitions.
RUN_WORKER_LOADER = ("dagster._grpc.impl", "core_execute_run", "dagster_run")


def run_being_loaded() -> Any | None:
    """The DagsterRun a run worker is loading the definitions for, or None (a code server, a test,
    a step worker). Dagster gives a ``@definitions`` function no handle on the run (the load context
    has only the load type and the code server's metadata), so this reads the argument of the
    loader's frame on the call stack. Used only to build less (definitions.py): when Dagster
    changes the loader, the run worker builds everything, as before, and test_private_api fails."""
    module, function, argument = RUN_WORKER_LOADER
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == function and frame.f_globals.get("__name__") == module:
            return frame.f_locals.get(argument)  # definitions.py checks it is a DagsterRun
        frame = frame.f_back
    return None


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


__all__ = [*sorted(PRIVATE_NAMES), "RUN_WORKER_LOADER", "run_being_loaded"]  # noqa: PLE0605
