"""The health sensor: every table's checks report from the start, and again after every commit.

Without it a table's checks stay "not evaluated" until the first scheduled or manual check run, and
the UI shows an empty check summary as if all were fine. Each tick reads every table's metadata
location (one query per SQL catalog); for each table whose metadata file changed since the last tick
(a writer's commit, a maintenance run) it evaluates health from pyiceberg metadata (manifests cached)
and reports the metadata checks, the health summary and the configuration check as check evaluations:
no run, no Spark, nothing written. The orphan check lists storage: it keeps its own schedule.

A table whose latest health summary already judged its current metadata file (its maintenance run
reports its checks on the metadata it leaves) is not judged again. A table with a maintenance run in
progress waits until the run ends: the run plans its own checks when
it starts, and an evaluation reported meanwhile (of a half-maintained table) would look newer than the
run's own final result in the UI.

Partitioned tables' checks per partition (checks/partition_checks.py) are reported by a run the sensor
asks for, naming the partitions whose files changed since their last report (partition_reports.py);
the cursor keeps each partition's digest (health_cursor.py).
"""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetSelection,
    AutomationConditionSensorDefinition,
    DagsterInstance,
    DagsterRunStatus,
    DefaultSensorStatus,
    MetadataValue,
    PartitionsDefinition,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)
from pyiceberg.table import Table

from icelake_assets.audit.metrics import record_health
from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable, DiscoveryProblem
from icelake_assets.catalog.locations import metadata_file, metadata_locations
from icelake_assets.health.table_stats import TableStats
from icelake_assets.orchestration.checks.asset_checks import OVERVIEW_KEY, metadata_check_names
from icelake_assets.orchestration.checks.configuration import configuration_result
from icelake_assets.orchestration.checks.health import ORPHAN_CHECK, table_health
from icelake_assets.orchestration.checks.partition_checks import partition_checks_enabled
from icelake_assets.orchestration.checks.partition_report_job import partition_report_job
from icelake_assets.orchestration.checks.partition_summary import partition_metadata, table_partition_report
from icelake_assets.orchestration.checks.results import HEALTH_CHECK, METADATA_FILE, metadata_check_results
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.runs.run_tags import named_tables
from icelake_assets.orchestration.sensors.health_cursor import HealthCursor
from icelake_assets.orchestration.sensors.partition_reports import (
    PartitionReports,
    forget_missing,
    partitions_defs,
    settle_requests,
)
from icelake_assets.planning.partition_health import PartitionReport
from icelake_assets.policies import configuration_report
from icelake_assets.settings import ChecksPerTable, Policy

HEALTH_SENSOR = "icelake_health_sensor"
OVERVIEW_SENSOR = "icelake_overview_sensor"
_IN_PROGRESS = [
    DagsterRunStatus.QUEUED,
    DagsterRunStatus.NOT_STARTED,
    DagsterRunStatus.STARTING,
    DagsterRunStatus.STARTED,
    DagsterRunStatus.CANCELING,
]


def tables_being_maintained(instance) -> set[str]:
    """Tables (by name) with a run in progress, from the table tags every maintenance run carries."""
    runs = instance.get_runs(filters=RunsFilter(statuses=_IN_PROGRESS))
    return {table for run in runs for table in named_tables(run.tags) or ()}


def _evaluation(result: AssetCheckResult) -> AssetCheckEvaluation:
    assert result.asset_key is not None and result.check_name is not None  # check_result sets both
    return AssetCheckEvaluation(
        asset_key=result.asset_key,
        check_name=result.check_name,
        passed=result.passed,
        metadata=result.metadata,
        severity=result.severity,
        description=result.description,
    )


@dataclass(frozen=True)
class TableChecks:
    """A table's check evaluations, and what they were read from (its partitions are graded on it)."""

    evaluations: list[AssetCheckEvaluation]
    table: Table
    policy: Policy
    stats: TableStats
    partitions: PartitionReport  # its partitions graded (the partition reports compare it)


def table_checks(
    icelake: IcelakeResource,
    ref: TableRef,
    fix_job: str | None = None,
    granularity: ChecksPerTable = "each",
    instance: DagsterInstance | None = None,
) -> TableChecks:
    """What the table's metadata and configuration checks would report now (those it has:
    ``automation.checks_per_table``). The verdict is the one every surface shows (table_health: the
    configuration and the recorded orphan check included)."""
    table = icelake.load_table(ref)
    effective = icelake.effective_policy(table)
    health = table_health(icelake, table, ref, instance)
    record_health(icelake.settings, ref, health.status, health.score.score)
    key = table_asset_key(ref)
    partitions = table_partition_report(table, health)
    results = metadata_check_results(
        health,
        key,
        set(metadata_check_names(granularity)),
        fix_job=fix_job,
        by_check=partition_metadata(partitions, key),
    )
    if granularity == "each":
        report = configuration_report(table.metadata.format_version, table.properties, effective)
        results.append(configuration_result(report, effective, key))
    return TableChecks([_evaluation(r) for r in results], table, effective.policy, health.stats, partitions)


def table_check_evaluations(
    icelake: IcelakeResource,
    ref: TableRef,
    fix_job: str | None = None,
    granularity: ChecksPerTable = "each",
    instance: DagsterInstance | None = None,
) -> list[AssetCheckEvaluation]:
    return table_checks(icelake, ref, fix_job, granularity, instance).evaluations


# A cursor entry for a table reported as not evaluated (never equal to a metadata location): the table
# is tried again on every tick, and its failure is reported once per metadata version.
_FAILED = "failed:"


def not_evaluated(ref: TableRef, problem: DiscoveryProblem) -> AssetCheckEvaluation:
    """The table's health summary failing with the reason it could not be evaluated: a table that
    cannot be read shows red in the UI with its cause, not its last (stale) result."""
    return AssetCheckEvaluation(
        asset_key=table_asset_key(ref),
        check_name=HEALTH_CHECK,
        passed=False,
        severity=AssetCheckSeverity.ERROR,
        description=f"not evaluated: {problem}",
        metadata={"error": MetadataValue.text(str(problem))},
    )


def _with_orphan_results(context: SensorEvaluationContext, locations: dict[TableRef, str | None]) -> None:
    """A table's orphan check evaluated since the last tick changes its verdict (health.table_health
    reads it) though its metadata did not change: its latest evaluation joins what the cursor compares
    (one query for every table), so the health summary is reported again, not left Unknown."""
    keys = {ref: AssetCheckKey(table_asset_key(ref), ORPHAN_CHECK) for ref, loc in locations.items() if loc}
    if not keys:
        return
    latest = context.instance.event_log_storage.get_latest_asset_check_execution_by_key(list(keys.values()))
    for ref, key in keys.items():
        record = latest.get(key)
        if record is not None and record.status.value != "PLANNED":  # evaluated, not just planned
            locations[ref] = f"{locations[ref]}#orphan_files:{record.id}"


def _reported_at(record) -> float:
    """When a check execution was last written: its evaluation's time (a row's id is that of its
    planned event, and a run plans its checks in no set order)."""
    return record.event.timestamp if record.event is not None else record.create_timestamp


def _judged_already(context: SensorEvaluationContext, changed: Mapping[TableRef, str]) -> set[TableRef]:
    """Of the tables whose metadata changed since the last tick, those whose latest health summary
    judged the metadata file they are at now, after their latest orphan check: a maintenance run
    reports its tables' checks on the metadata it leaves, so judging them again here would add one
    evaluation of each check to the event log and nothing else (one query for every table)."""
    health = {ref: AssetCheckKey(table_asset_key(ref), HEALTH_CHECK) for ref in changed}
    orphans = {ref: AssetCheckKey(table_asset_key(ref), ORPHAN_CHECK) for ref in changed}
    latest = context.instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [*health.values(), *orphans.values()]
    )
    judged: set[TableRef] = set()
    for ref, location in changed.items():
        record, orphan = latest.get(health[ref]), latest.get(orphans[ref])
        event = None if record is None or record.event is None else record.event.dagster_event
        if record is None or event is None or event.event_type_value != "ASSET_CHECK_EVALUATION":
            continue
        entry = event.asset_check_evaluation_data.metadata.get(METADATA_FILE)
        newer = orphan is None or _reported_at(orphan) <= _reported_at(record)
        if entry is not None and entry.value == metadata_file(location.split("#", 1)[0]) and newer:
            judged.add(ref)
    return judged


def evaluate_health_tick(
    context: SensorEvaluationContext,
    icelake: IcelakeResource,
    tables: Sequence[DiscoveredTable],
    fix_jobs: Mapping[TableRef, str],
    budget_seconds: float,
    granularity: ChecksPerTable = "each",
    partition_checks: bool = False,
) -> SensorResult:
    started = time.monotonic()
    cursor = HealthCursor.loads(context.cursor)
    seen = cursor.tables
    pdefs = partitions_defs(context, tables) if partition_checks else {}
    if partition_checks:
        settle_requests(context, cursor)
    else:  # switched off: nothing kept, so switched on again every partition is reported once
        cursor.pending.clear()
    forget_missing(cursor, pdefs)
    reports = PartitionReports(cursor)
    locations: dict[TableRef, str | None] = {}
    down: dict[str, DiscoveryProblem] = {}
    by_catalog: dict[str, list[TableRef]] = {}
    for t in tables:
        by_catalog.setdefault(t.ref.catalog, []).append(t.ref)
    concurrency = icelake.settings.automation.catalog_concurrency
    for name, refs in by_catalog.items():
        try:
            locations.update(metadata_locations(icelake.catalog(name), refs, concurrency))
        except Exception as err:  # one catalog that is down: an error for its tables only
            down[name] = DiscoveryProblem.from_error(name, err)
            context.log.warning(str(down[name]))
    _with_orphan_results(context, locations)
    events: list[AssetCheckEvaluation] = []
    evaluated: list[str] = []
    failed: list[str] = []
    left = 0
    busy = tables_being_maintained(context.instance)
    changed = {
        t.ref: loc
        for t in tables
        if (loc := locations.get(t.ref))
        and t.ref.catalog not in down
        and seen.get(str(t.ref)) != loc
        and str(t.ref) not in busy
    }
    judged = _judged_already(context, changed) if changed else set()
    for t in tables:
        name, location = str(t.ref), locations.get(t.ref)
        if t.ref.catalog in down:
            failure: DiscoveryProblem | None = down[t.ref.catalog]
            location = ""
        elif location is None or name in busy:
            continue
        elif seen.get(name) == location:
            if name in cursor.due and t.ref in pdefs:  # only its partitions, asked for again
                _partitions_only(context, icelake, t.ref, reports, pdefs[t.ref])
            continue
        elif t.ref in judged:
            seen[name] = location  # judged on this metadata already (its maintenance run's checks)
            continue
        elif evaluated and time.monotonic() - started > budget_seconds:
            left += 1  # the next tick goes on where this one stopped: these are still unseen
            continue
        else:
            try:
                checks = table_checks(icelake, t.ref, fix_jobs.get(t.ref), granularity, context.instance)
                events.extend(checks.evaluations)
                if t.ref in pdefs:
                    reports.compare(
                        context,
                        t.ref,
                        checks.table,
                        checks.stats,
                        checks.policy,
                        pdefs[t.ref],
                        checks.partitions,
                    )
                failure = None
            except Exception as err:  # missing, unreadable metadata or manifests: this table only
                failure = DiscoveryProblem.from_error(t.ref.catalog, err, t.ref)
                context.log.warning(f"{name}: checks not evaluated: {failure}")
        if failure is None:
            seen[name] = location
            evaluated.append(name)
        elif seen.get(name) != _FAILED + location:
            events.append(not_evaluated(t.ref, failure))
            seen[name] = _FAILED + location
            failed.append(name)
    request = reports.run_request()
    if not events and request is None:
        return SensorResult(skip_reason="no table changed since the last tick", cursor=cursor.dumps())
    elapsed = time.monotonic() - started
    context.log.info(
        f"checks reported for {len(evaluated)} changed table(s) in {elapsed:.2f}s"
        + (f", {len(failed)} not evaluated: {', '.join(failed[:20])}" if failed else "")
        + (f"; {left} left for the next tick" if left else "")
        + (
            f"; partition checks asked for {reports.keys} partition(s) of {len(reports.asked)} table(s)"
            if request
            else ""
        )
    )
    return SensorResult(
        asset_events=events, run_requests=[request] if request else None, cursor=cursor.dumps()
    )


def _partitions_only(
    context: SensorEvaluationContext,
    icelake: IcelakeResource,
    ref: TableRef,
    reports: PartitionReports,
    partitions_def: PartitionsDefinition,
) -> None:
    """A table due again whose metadata did not change: its partitions are compared, no check reported."""
    try:
        table = icelake.load_table(ref)
        policy = icelake.effective_policy(table).policy
        reports.compare(context, ref, table, icelake.stats(table, policy), policy, partitions_def)
    except Exception as err:  # stays due: tried again on the next tick
        context.log.warning(f"{ref}: partitions not compared: {err}")


def build_health_sensor(
    tables: Sequence[DiscoveredTable],
    fix_jobs: Mapping[TableRef, str],
    interval_seconds: int,
    budget_seconds: float,
    granularity: ChecksPerTable = "each",
    partition_checks: bool | None = None,
) -> SensorDefinition:
    """``partition_checks``: whether tables carry checks per partition (checks/partition_checks.py),
    reported by the runs of ``icelake_partition_checks`` this sensor asks for; None: ``auto``."""
    if partition_checks is None:
        partition_checks = partition_checks_enabled("auto", granularity)

    # Running by default whatever the maintenance sensor's status: it only reads metadata.
    @sensor(
        name=HEALTH_SENSOR,
        minimum_interval_seconds=interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        jobs=[partition_report_job] if partition_checks else None,
        description="Reports every table's metadata checks and health summary when its metadata changed "
        "(pyiceberg only: no run, no Spark, nothing written); the checks per partition of the partitions "
        "whose files changed, through one run of icelake_partition_checks.",
    )
    def health_sensor(context: SensorEvaluationContext, icelake: IcelakeResource):
        return evaluate_health_tick(
            context, icelake, tables, fix_jobs, budget_seconds, granularity, partition_checks
        )

    return health_sensor


def build_overview_sensor(interval_seconds: int) -> AutomationConditionSensorDefinition:
    """Evaluates the lake overview's automation condition (checks/asset_checks.py: after a table's maintenance or
    checks) every ``interval_seconds``. Running by default like the health sensor: it launches only
    the overview's runs (pyiceberg metadata, no Spark). Named and running, unlike the
    ``default_automation_condition_sensor`` Dagster would otherwise add (stopped by default)."""
    return AutomationConditionSensorDefinition(
        OVERVIEW_SENSOR,
        target=AssetSelection.assets(OVERVIEW_KEY),
        default_status=DefaultSensorStatus.RUNNING,
        minimum_interval_seconds=interval_seconds,
        description="Refreshes the lake overview after a table's maintenance run or its checks' report "
        "(pyiceberg metadata only, no Spark).",
    )
