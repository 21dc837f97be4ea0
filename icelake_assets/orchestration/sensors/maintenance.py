"""The self-healing loop: a sensor that reads every table's metadata, records what it saw, and
launches maintenance for the tables (and partitions) whose thresholds are crossed — unless a guard
(writers active, cost over the cap) or the table's mode (observe, propose) says otherwise.

Cost per tick: one catalog query for every table's metadata location (SQL catalogs); a table whose
location did not change since the last tick is not even loaded. Tables are visited round-robin from
a cursor, and a tick stops after its time budget, so thousands of tables fit Dagster's 60 s limit.

Priority: when the instance's global run cap leaves fewer slots than tables wanting a run, the tick
requests the free slots' worth, best first by the overview's ranking (file opens saved per scan,
then the finding's age), and records the others as ``queued_by_priority`` (re-ranked next tick).
"""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from typing import Any

from dagster import (
    AssetSelection,
    DefaultSensorStatus,
    PartitionsDefinition,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.writer import write_audit, write_loop_metrics
from icelake_assets.catalog import inventory
from icelake_assets.catalog.connection import TableMissingError, TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.catalog.locations import metadata_locations
from icelake_assets.health.orphans import KnownTables
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.checks.approvals import approval_observation
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.runs import model as run_model
from icelake_assets.orchestration.runs.model import TABLE_TAG, PoolLimits, TableRuns, pools_by_key, table_runs
from icelake_assets.orchestration.runs.recovery import recover
from icelake_assets.orchestration.sensors.cursor import TickCursor
from icelake_assets.orchestration.sensors.events import (
    OPS_TAG,
    RANK_TAG,
    SIGNAL_TAG,
    TRIGGER_TAG,
    TableEvaluation,
    error_evaluation,
    metadata_file,
    ranked,
    table_evaluation,
    tick_summary,
)
from icelake_assets.orchestration.sensors.loop_metrics import loop_snapshot
from icelake_assets.planning.history import History, LastOutcome, Runs, Seen, finding_since, needs_evaluation
from icelake_assets.planning.outcome import WAITING, Outcome
from icelake_assets.planning.priority import MAX_PRIORITY, rank_launches
from icelake_assets.planning.relaunch import OUTCOME_TABLE_TAG
from icelake_assets.planning.table import plan_table
from icelake_assets.settings import Settings

__all__ = [  # names other modules import from here
    "MAINTENANCE_SENSOR",
    "MAX_PRIORITY",
    "OPS_TAG",
    "RANK_TAG",
    "SIGNAL_TAG",
    "TABLE_TAG",
    "TRIGGER_TAG",
    "TableEvaluation",
    "TickCursor",
    "build_maintenance_sensor",
    "evaluate_table",
    "evaluate_tick",
    "tick_summary",
]

MAINTENANCE_SENSOR = "icelake_maintenance_sensor"


def _last_outcome(context: SensorEvaluationContext, ref: TableRef) -> LastOutcome | None:
    """The table's latest run that recorded an outcome (run tags, see maintenance/results/effect.py)."""
    records = context.instance.get_run_records(RunsFilter(tags={OUTCOME_TABLE_TAG: str(ref)}), limit=1)
    if not records:
        return None
    record = records[0]
    ended = record.end_time or record.update_timestamp.timestamp()
    return LastOutcome(dict(record.dagster_run.tags), ended)


def _runs(state: TableRuns | None, backoff_seconds: float) -> Runs | None:
    if state is None:
        return None
    return Runs(
        state.in_flight,
        state.failures_in_a_row,
        state.retry_at(backoff_seconds),
        state.failure_reason(),
        state.interruptions_in_a_row > 0,
    )


def evaluate_table(
    context: SensorEvaluationContext,
    icelake: IcelakeResource,
    table: DiscoveredTable,
    pdef: PartitionsDefinition | None,
    scan_orphans: bool = False,
    known: Callable[[], KnownTables] | None = None,
    history: History | None = None,
    now: float | None = None,
) -> TableEvaluation:
    """``known``: every table of every catalog (listed once per tick), for the orphan scan;
    ``history``: what the sensor remembers of the table (default: nothing but its last outcome run)."""
    ref = table.ref
    loaded = icelake.load_table(ref)
    effective = icelake.effective_policy(loaded)
    policy = effective.policy
    stats = icelake.stats(loaded, policy)
    # Only what removal may delete counts: not hidden files, not other tables', none of a refused table.
    orphans = (
        icelake.scan_orphans(ref, loaded, policy, known() if known else None).removable
        if scan_orphans
        else None
    )
    history = history or History(last_outcome=lambda: _last_outcome(context, ref))
    plan = plan_table(
        stats,
        policy,
        history,
        time.time() if now is None else now,
        mode=effective.mode,
        orphans=orphans,
        name=str(ref),
    )
    return table_evaluation(context, table, pdef, stats, policy, plan)


def evaluate_tick(
    context: SensorEvaluationContext,
    icelake: IcelakeResource,
    tables: Sequence[DiscoveredTable],
    partitions: Mapping[TableRef, PartitionsDefinition | None],
    budget_seconds: float,
    orphan_scan_seconds: float = 24 * 3600,
    backoff_seconds: float | None = None,
    job_of: Mapping[TableRef, str] | None = None,
    by_table_tag: bool = False,
) -> SensorResult:
    """``job_of``: each table's maintenance job, which its runs target (named in the UI's run list,
    not ``__ASSET_JOB``); ``by_table_tag``: those jobs have no assets, the runs select no asset."""
    started = time.monotonic()
    backoff_seconds = run_model.FAILED_RUN_BACKOFF_SECONDS if backoff_seconds is None else backoff_seconds
    cursor = TickCursor.loads(context.cursor)
    if not tables:
        return SensorResult(skip_reason="no tables discovered", cursor=cursor.dumps())
    by_catalog: dict[str, list[TableRef]] = {}
    for t in tables:
        by_catalog.setdefault(t.ref.catalog, []).append(t.ref)
    locations: dict[TableRef, str | None] = {}
    unreachable: dict[str, Exception] = {}
    for name, refs in by_catalog.items():
        try:
            locations.update(metadata_locations(icelake.catalog(name), refs))
        except Exception as err:  # one unreachable catalog must not stop the others
            unreachable[name] = err
            context.log.warning(f"catalog {name!r} unreachable, its tables are skipped this tick: {err}")
    pools = pools_by_key((t.ref for t in tables), icelake.settings.automation.maintenance_pools)
    limits = PoolLimits(context.instance)
    names = {table_asset_key(t.ref): str(t.ref) for t in tables}
    # Runs whose worker is gone (a host crash leaves them STARTED forever) are failed first, so their
    # tables' pools and the run slots free up and the run model below sees the failure.
    ours = partial(run_model.product_run_tables, pools_by_key=pools, names=names)
    recovered = recover(context.log, context.instance, icelake.settings, icelake.load_table, ours)
    runs = table_runs(context.instance, pools, names=names)
    now = time.time()

    known_cache: list[KnownTables] = []

    def known() -> KnownTables:
        if not known_cache:
            known_cache.append(icelake.known_tables())
        return known_cache[0]

    results: dict[str, TableEvaluation] = {}  # by table name, in the order visited
    # Evaluated tables, settled after the ranking: (name, cursor entry before, unchanged, file, scanned)
    evaluated: list[tuple[str, Seen | None, bool, str, float]] = []
    n = len(tables)
    start = cursor.offset % n
    visited = 0
    for i in range(n):
        if results and time.monotonic() - started > budget_seconds:
            break  # every tick makes progress: at least one table is evaluated
        table = tables[(start + i) % n]
        visited += 1
        name, location = str(table.ref), locations.get(table.ref)
        previous = cursor.seen.get(name)
        # A table seen for the first time is scanned now: its orphan check is never left unknown for
        # an interval. What does not fit the tick's budget waits for the next tick (round robin).
        scanned = (
            previous.scanned_at
            if previous is not None and previous.scanned_at is not None
            else now - orphan_scan_seconds
        )
        if table.ref.catalog in unreachable or location is None:
            missing = unreachable.get(table.ref.catalog) or TableMissingError(
                f"{name} no longer exists in its catalog (skipped until the definitions reload)"
            )
            evaluation = error_evaluation(table.ref, missing, context, table.ref.catalog in unreachable)
            if previous is not None and previous.outcome == Outcome.ERROR:
                evaluation = replace(evaluation, audit=None)  # recorded when it started failing
            cursor.seen[name] = Seen(previous.metadata_file if previous else "", Outcome.ERROR, scanned)
            results[name] = evaluation
            continue
        pool = pools[table_asset_key(table.ref)]
        limits.ensure(pool)
        table_runs_ = _runs(runs.get(table_asset_key(table.ref)), backoff_seconds)
        scan_orphans = now - scanned >= orphan_scan_seconds
        file = metadata_file(location)
        if not needs_evaluation(previous, file, scan_orphans, table_runs_):
            continue  # unchanged since the last tick: nothing to read
        history = History(previous, table_runs_, partial(_last_outcome, context, table.ref))
        try:
            evaluation = evaluate_table(
                context, icelake, table, partitions.get(table.ref), scan_orphans, known, history, now
            )
        except Exception as err:  # missing/corrupt metadata, unreadable storage: this table only
            evaluation = error_evaluation(table.ref, err, context)
        if job_of and (job := job_of.get(table.ref)):
            evaluation = replace(
                evaluation,
                run_requests=tuple(
                    r.with_replaced_attrs(job_name=job, asset_selection=None)
                    if by_table_tag
                    else r.with_replaced_attrs(job_name=job)
                    for r in evaluation.run_requests
                ),
            )
        if evaluation.outcome in (Outcome.HELD, Outcome.PROPOSED) and evaluation.observation is not None:
            # How to approve it, in the UI: the command and the launchpad with the approval filled in.
            evaluation = replace(
                evaluation,
                observation=approval_observation(
                    evaluation.observation,
                    table.ref,
                    str(evaluation.outcome),
                    (evaluation.audit.cost_estimate_bytes or 0) if evaluation.audit else 0,
                    job_of.get(table.ref) if job_of else None,
                ),
            )
        unchanged = previous is not None and previous.metadata_file == file
        evaluated.append((name, previous, unchanged, file, now if scan_orphans else scanned))
        results[name] = evaluation
    cursor.offset = (start + visited) % n

    # When the finding was first seen (an older finding goes first among equal benefits).
    found_at = {name: finding_since(previous, now) for name, previous, *_ in evaluated}
    wanting = [name for name, *_ in evaluated if results[name].outcome == Outcome.LAUNCHED]
    if wanting:
        ahead = icelake.settings.automation.queued_runs_ahead
        free, slots = run_model.free_slots(context.instance, pools, ahead)
        ranks = rank_launches([(w, results[w].benefit) for w in wanting], found_at, free, now)
        ranking = []
        for rank in ranks:
            results[rank.table] = placed = ranked(results[rank.table], rank, slots)
            ranking.append(
                f"{rank.rank}. {placed.ref} {placed.outcome} ({rank.benefit} files/scan, {rank.age})"
            )
        wanting = [rank.table for rank in ranks]  # best first
        context.log.info(
            f"launch order by benefit ({slots}): "
            + "; ".join(ranking[:20])
            + (f" and {len(ranking) - 20} more" if len(ranking) > 20 else "")
        )
    for name, prior, unchanged, file, scanned in evaluated:
        evaluation = results[name]
        # One audit record per change of decision: a table deferred tick after tick is recorded once.
        if unchanged and prior is not None and prior.outcome == evaluation.outcome:
            results[name] = evaluation = replace(evaluation, audit=None)
        since = found_at[name] if evaluation.outcome in WAITING else None
        if evaluation.orphans_pending and evaluation.outcome != Outcome.LAUNCHED:
            # Deferred, held or queued: keep the scan due, so the next evaluation sees the orphans again.
            scanned = (
                prior.scanned_at
                if prior is not None and prior.scanned_at is not None
                else now - orphan_scan_seconds
            )
        cursor.seen[name] = Seen(file, evaluation.outcome, scanned, since)
    evaluations = list(results.values())
    counts: dict[str, int] = {}
    for e in evaluations:
        counts[str(e.outcome)] = counts.get(str(e.outcome), 0) + 1
    acting = [f"{e.ref} {e.outcome}" for e in evaluations if e.outcome != Outcome.SKIPPED]
    context.log.info(
        f"evaluated {len(evaluations)} of {n} tables ({visited} visited) in "
        f"{time.monotonic() - started:.2f}s {counts}"
        + (": " + ", ".join(acting[:20]) if acting else "")
        + (f" and {len(acting) - 20} more" if len(acting) > 20 else "")
    )
    run_requests = [rr for w in wanting for rr in results[w].run_requests]  # best first
    result = SensorResult(
        run_requests=run_requests,
        # A tick that launches nothing says why in the UI's tick list (not "0 runs requested").
        skip_reason=None if run_requests else tick_summary(evaluations, n, visited),
        cursor=cursor.dumps(),
        asset_events=[e.observation for e in evaluations if e.observation],
        dynamic_partitions_requests=[d for e in evaluations for d in e.dynamic_requests] or None,
    )
    # The loop's own state (runs in flight and queued, by table): alerts on a stalled loop. Before
    # _record, whose heartbeat writes the metrics textfile once per tick.
    loop_error = write_loop_metrics(icelake.settings, loop_snapshot(context.instance, pools, names, now))
    if loop_error:
        context.log.error(f"loop metrics of this tick not written: {loop_error}")
    # Last, once the result is built: the audit never records a launch the tick does not request.
    _record(context, icelake.settings, [*recovered, *(e.audit for e in evaluations if e.audit)])
    _refresh_inventory(context, icelake.settings, tables)
    return result


# The catalogs' table names are listed at most this often (one listing per namespace: a REST catalog
# with many namespaces answers slowly), per settings, in this code-server process.
INVENTORY_LIST_SECONDS = 300.0
_LISTED_AT: dict[str, float] = {}


def _refresh_inventory(
    context: SensorEvaluationContext, settings: Settings, tables: Sequence[DiscoveredTable]
) -> None:
    """New and dropped tables: the cached inventory follows them (the next load of the code location
    shows them); the tick log says so. Best effort: a failure is logged, the tick goes on."""
    key, now = inventory.fingerprint(settings), time.monotonic()
    if now - _LISTED_AT.get(key, -INVENTORY_LIST_SECONDS) < INVENTORY_LIST_SECONDS:
        return
    _LISTED_AT[key] = now
    try:
        change = inventory.refresh(settings, [t.ref for t in tables])
    except Exception as err:
        context.log.warning(f"table inventory not refreshed: {err}")
        return
    if change:
        context.log.warning(f"table inventory: {change.describe()}")


def _record(context: SensorEvaluationContext, settings: Settings, records: list[AuditRecord]) -> None:
    """Best effort (audit/writer.py, the path runs use too): a locked audit table or a full metrics
    disk is logged, and the tick goes on. The sensor's heartbeat metric is written on every tick,
    records or not (a stopped sensor alerts)."""
    written = write_audit(settings, records, heartbeat=MAINTENANCE_SENSOR)
    if written.log_error:
        context.log.error(
            f"audit records of this tick not written ({len(records)} decisions): {written.log_error}"
        )
    if written.metrics_error:
        context.log.error(f"metrics of this tick not written: {written.metrics_error}")


def build_maintenance_sensor(
    tables: Sequence[DiscoveredTable],
    partitions: Mapping[TableRef, PartitionsDefinition | None],
    settings: Settings,
    interval_seconds: int,
    jobs: Sequence[Any] = (),
    job_of: Mapping[TableRef, str] | None = None,
    by_table_tag: bool = False,
) -> SensorDefinition:
    """``jobs``: the maintenance jobs (table_groups.maintenance_jobs), the sensor's targets; ``job_of``:
    each table's job among them. Without them the runs target the assets (Dagster's ``__ASSET_JOB``).
    ``by_table_tag``: the jobs have no assets (the project defines the tables'); a run names its
    table by its ``icelake/table`` tag only."""
    keys = [table_asset_key(t.ref) for t in tables]
    targets: dict[str, Any] = (
        {"jobs": list(jobs)}
        if jobs
        else {"asset_selection": AssetSelection.assets(*keys) if keys else AssetSelection.assets()}
    )
    status = (
        DefaultSensorStatus.RUNNING
        if settings.automation.sensor_default_status == "running"
        else DefaultSensorStatus.STOPPED
    )
    budget = settings.automation.tick_budget_seconds

    @sensor(
        name=MAINTENANCE_SENSOR,
        minimum_interval_seconds=interval_seconds,
        **targets,
        default_status=status,
        description="Reads every table's Iceberg metadata; launches maintenance where thresholds are crossed "
        "(guards: writer quiet period, cost cap; modes: observe / propose / enforce).",
    )
    def maintenance_sensor(context: SensorEvaluationContext, icelake: IcelakeResource):
        return evaluate_tick(
            context,
            icelake,
            tables,
            partitions,
            budget,
            settings.automation.orphan_scan_hours * 3600,
            job_of=job_of,
            by_table_tag=by_table_tag,
        )

    return maintenance_sensor
