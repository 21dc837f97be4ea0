"""Health per partition in the Dagster UI: a partitioned table's asset carries, beside its table-level
checks, ``small_files_by_partition``, ``delete_files_by_partition`` and ``layout_drift_by_partition``,
partitioned like the asset (planning/partition_health.py grades each partition on its own numbers).
The UI then shows each check's status per partition, and the asset's partitions page selects the
failing keys for a backfill.

Who reports them (each evaluation names its partition, and the partition's latest materialization as
its target: Dagster shows a partition's check result only while it targets that materialization, so
a maintenance run's materialization clears the statuses it does not report again):

* a run that materializes the table (maintenance, a backfill, the UI's Materialize) evaluates its own
  partitions after maintaining them, or every partition when it maintained the whole table (a
  materialization without a partition clears every partition's status);
* between runs, the health sensor asks for a run of ``icelake_partition_checks`` naming the
  partitions whose files changed since their last report (sensors/partition_reports.py): Dagster
  1.13 stores a run-less evaluation of a partitioned check once per partition (a second one breaks
  a unique index), so the sensor cannot report them itself as it does the table-level checks.

Dagster marks partitioned checks preview: the warning is silenced where the specs are built and said
once per code-location load in its log (:func:`partition_check_definitions`)."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Collection, Iterable, Mapping, Sequence

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetKey,
    AssetRecordsFilter,
    DagsterEventType,
    DagsterInstance,
    MetadataValue,
    PartitionsDefinition,
    PreviewWarning,
    RunsFilter,
    get_dagster_logger,
    partition_loading_context,
)

from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.health.findings import Severity
from icelake_assets.orchestration.checks.group_ops import group_checks
from icelake_assets.orchestration.checks.results import human_sizes, number_value
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.tables.table_groups import TableGroup
from icelake_assets.partitions.layout import partition_layout
from icelake_assets.planning.partition_changes import empty_partition
from icelake_assets.planning.partition_health import PARTITION_CHECKS, PartitionHealth, partition_health
from icelake_assets.private_api import AssetCheckEvaluationTargetMaterializationData
from icelake_assets.settings import ChecksPerTable, SettingsError
from icelake_assets.settings.asset_keys import current_asset_keys
from icelake_assets.types import TableRef

# Next to the table-level check of the same finding in the UI's list of checks (sorted by name).
PARTITION_CHECK_NAMES: dict[str, str] = {check: f"{check}_by_partition" for check in PARTITION_CHECKS}
CHECK_OF_NAME = {name: check for check, name in PARTITION_CHECK_NAMES.items()}
_DESCRIPTIONS = {
    "small_files": "Per partition: a compaction candidate the rewrite takes, graded on its own files.",
    "delete_files": "Per partition: its delete files per data file and deleted rows per row.",
    "layout_drift": "Per partition: its files of an older spec or out of sort order per data file.",
}
_PAGE = 1000  # materializations read per query, looking for the table's latest whole-table one


def partitioned_checks_supported() -> bool:
    """Whether the installed Dagster takes partitioned asset checks: a spec's ``partitions_def`` and an
    evaluation's ``partition`` (read from their signatures, not from the version)."""
    spec = inspect.signature(AssetCheckSpec).parameters
    evaluation = inspect.signature(AssetCheckEvaluation).parameters
    return "partitions_def" in spec and "partition" in evaluation


def partition_checks_enabled(setting: str = "auto", granularity: ChecksPerTable = "each") -> bool:
    """``automation.partition_checks``: ``on`` requires the installed Dagster to take partitioned
    checks; ``auto`` follows it, and leaves them out where each table carries only its health summary
    (``automation.checks_per_table`` resolved to ``summary``: a lake of thousands of tables keeps its
    events down, and partitions multiply them)."""
    if setting == "off":
        return False
    supported = partitioned_checks_supported()
    if setting == "on" and not supported:
        raise SettingsError(
            "automation.partition_checks is on, but the installed Dagster has no partitioned asset checks "
            "(AssetCheckSpec(partitions_def=...)): upgrade Dagster, or set it to auto or off"
        )
    return supported and (setting == "on" or granularity == "each")


# -- definitions ------------------------------------------------------------------------------------


def _specs(table: DiscoveredTable, partitions_def: PartitionsDefinition) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(
            name,
            asset=table_asset_key(table.ref),
            partitions_def=partitions_def,
            description=_DESCRIPTIONS[check],
        )
        for check, name in PARTITION_CHECK_NAMES.items()
    ]


def build_partition_checks(group: TableGroup) -> AssetChecksDefinition:
    """One op for the partition checks of a partitioned group's tables (their partitions definition is
    the group's: Dagster requires a check's to be its asset's). In a run of some partitions it reports
    those; in a run without a partition, every partition the definition holds."""
    assert group.partitions_def is not None
    pdef = group.partitions_def

    def evaluate(
        context: AssetCheckExecutionContext, icelake: IcelakeResource, t: DiscoveredTable, selected: set[str]
    ) -> Iterable[AssetCheckEvaluation]:
        ranged = context.has_partition_key or context.has_partition_key_range
        keys = list(context.partition_keys) if ranged else None
        # Evaluations, not AssetCheckResults: a result names at most the step's one partition.
        return partition_check_evaluations(context.instance, icelake, t.ref, keys, selected, pdef)

    return group_checks(
        f"{group.name}__partition_checks",
        group.tables,
        lambda t: _specs(t, pdef),
        evaluate,
        "Health per partition from Iceberg metadata: the run's partitions, or every one",
    )


def partition_check_definitions(groups: Sequence[TableGroup], enabled: bool) -> list[AssetChecksDefinition]:
    """The partition checks of every partitioned group, none when ``enabled`` is false or the tables'
    assets are the project's own (their partitions are the project's, not the product's)."""
    partitioned = [g for g in groups if g.partitions_def is not None]
    if not enabled or not partitioned or current_asset_keys().defined_by_project:
        return []
    with warnings.catch_warnings():  # once for the code location, not once per table (below)
        warnings.simplefilter("ignore", PreviewWarning)
        checks = [build_partition_checks(g) for g in partitioned]
    tables = sum(len(g.tables) for g in partitioned)
    get_dagster_logger("icelake").info(
        f"checks per partition on {tables} partitioned table(s) (automation.partition_checks; Dagster "
        "marks partitioned asset checks preview)"
    )
    return checks


# -- evaluations ------------------------------------------------------------------------------------


def valid_keys(
    partitions_def: PartitionsDefinition, keys: Iterable[str], instance: DagsterInstance
) -> set[str]:
    """The keys the asset's partitions hold now (time windows end where the code location loaded them;
    dynamic keys exist once added)."""
    with partition_loading_context(dynamic_partitions_store=instance):
        return set(partitions_def.filter_valid_partition_keys(set(keys)))


def partition_check_evaluations(
    instance: DagsterInstance,
    icelake: IcelakeResource,
    ref: TableRef,
    keys: Sequence[str] | None,
    names: Collection[str],
    partitions_def: PartitionsDefinition | None = None,
) -> list[AssetCheckEvaluation]:
    """The evaluations of the checks ``names`` for ``keys`` (a key without files passes), or for every
    partition ``partitions_def`` holds, from the table's metadata now."""
    table = icelake.load_table(ref)
    policy = icelake.effective_policy(table).policy
    stats = icelake.stats(table, policy)
    report = partition_health(stats, policy, partition_layout(table, with_earliest=False))
    by_key = {p.key: p for p in report.partitions if p.key is not None}
    if keys is None:
        held = valid_keys(partitions_def, by_key, instance) if partitions_def is not None else set(by_key)
        keys = sorted(held)
    partitions = [by_key.get(k) or empty_partition(k, policy, stats.small_file_limit_bytes) for k in keys]
    return evaluations(instance, table_asset_key(ref), str(ref), partitions, names)


def evaluations(
    instance: DagsterInstance,
    asset_key: AssetKey,
    table: str,
    partitions: Sequence[PartitionHealth],
    names: Collection[str],
) -> list[AssetCheckEvaluation]:
    targets = materialization_targets(instance, asset_key, [p.key for p in partitions if p.key is not None])
    out = []
    for p in partitions:
        assert p.key is not None
        for f in p.findings:
            name = PARTITION_CHECK_NAMES[f.check]
            if name not in names:
                continue
            metadata: dict[str, MetadataValue] = {k: number_value(v) for k, v in f.metrics.items()}
            if sizes := human_sizes(f.metrics):
                metadata["sizes"] = MetadataValue.text(sizes)
            metadata["iceberg_partitions"] = MetadataValue.text(", ".join(p.labels) or "(no files)")
            metadata["recommendation"] = MetadataValue.text(f.recommendation)
            if not f.passed:  # the command that heals exactly the failing partitions of this check
                metadata["backfill"] = MetadataValue.text(
                    f"icelake backfill {table} --unhealthy --check {f.check}"
                )
            out.append(
                AssetCheckEvaluation(
                    asset_key=asset_key,
                    check_name=name,
                    passed=f.passed,
                    metadata=metadata,
                    severity=AssetCheckSeverity.ERROR
                    if f.severity is Severity.ERROR
                    else AssetCheckSeverity.WARN,
                    description=f"{p.key}: {f.summary}. Recommendation: {f.recommendation}",
                    partition=p.key,
                    target_materialization_data=targets.get(p.key),
                )
            )
    return out


def materialization_targets(
    instance: DagsterInstance, asset_key: AssetKey, keys: Sequence[str]
) -> Mapping[str, AssetCheckEvaluationTargetMaterializationData]:
    """Per key, the materialization its check result must name to count (Dagster's rule: the latest of
    the partition's own and the asset's latest one without a partition); none before any."""
    if not keys:
        return {}
    storage = instance.event_log_storage
    own = storage.get_latest_storage_id_by_partition(
        asset_key, DagsterEventType.ASSET_MATERIALIZATION, set(keys)
    )
    whole = _latest_whole(instance, asset_key)
    wanted = {k: max(own.get(k, 0), whole) for k in keys}
    ids = sorted({i for i in wanted.values() if i})
    if not ids:
        return {}
    found = instance.fetch_materializations(AssetRecordsFilter(asset_key, storage_ids=ids), limit=len(ids))
    records = {r.storage_id: r for r in found.records}
    return {
        k: AssetCheckEvaluationTargetMaterializationData(
            storage_id=r.storage_id, run_id=r.run_id, timestamp=r.timestamp
        )
        for k, i in wanted.items()
        if (r := records.get(i)) is not None
    }


def keys_a_run_will_report(instance: DagsterInstance, ref: TableRef, keys: Sequence[str]) -> set[str]:
    """Of ``keys``, those a run in progress planned to evaluate (a maintenance run of them): its
    evaluation fills the row it planned, older than one written now, so a report written meanwhile
    would stay the latest, of the partition before its maintenance."""
    check = AssetCheckKey(table_asset_key(ref), PARTITION_CHECK_NAMES[PARTITION_CHECKS[0]])
    infos = instance.event_log_storage.get_asset_check_partition_info([check], partition_keys=list(keys))
    planned = {
        i.partition_key: i.latest_planned_run_id
        for i in infos
        if i.partition_key is not None and i.latest_execution_status.value == "PLANNED"
    }
    if not planned:
        return set()
    runs = instance.get_runs(filters=RunsFilter(run_ids=sorted(set(planned.values()))))
    running = {r.run_id for r in runs if not r.is_finished}
    return {k for k, run_id in planned.items() if run_id in running}


def _latest_whole(instance: DagsterInstance, asset_key: AssetKey) -> int:
    """The storage id of the asset's latest materialization without a partition (a whole-table run), 0
    when none: read newest first, usually within the first page (whole-table runs are the common ones)."""
    cursor: str | None = None
    while True:
        page = instance.fetch_materializations(asset_key, limit=_PAGE, cursor=cursor)
        for record in page.records:
            if record.partition_key is None:
                return record.storage_id
        if not page.has_more:
            return 0
        cursor = page.cursor
