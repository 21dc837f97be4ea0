"""The stages of a maintenance-sensor tick (sensors/maintenance.py composes them and wires the result
into Dagster): recover → observe → plan → order and cap → settle → requests. Each stage takes and
returns frozen values; only the cursor of the tick before is read, a new one is returned."""

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache, partial

from dagster import AssetKey, PartitionsDefinition, RunsFilter, SensorEvaluationContext, SensorResult

from icelake_assets.audit.records import AuditRecord
from icelake_assets.catalog.connection import TableMissingError, TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.catalog.locations import metadata_file, metadata_locations
from icelake_assets.health.orphan_phases import removable_orphans
from icelake_assets.health.orphans import KnownTables
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.checks.approvals import approval_observation
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.runs import model as run_model
from icelake_assets.orchestration.runs.model import PoolLimits, TableRuns, pools_by_key, table_runs
from icelake_assets.orchestration.runs.recovery import recover
from icelake_assets.orchestration.sensors.cursor import TickCursor
from icelake_assets.orchestration.sensors.events import (
    TableEvaluation,
    error_evaluation,
    shared_run_request,
    table_evaluation,
    tick_summary,
)
from icelake_assets.orchestration.sensors.prefetch import Prefetch
from icelake_assets.orchestration.sensors.recent_scans import recent_scan, remember_scan
from icelake_assets.planning.history import History, LastOutcome, Runs, Seen, needs_evaluation
from icelake_assets.planning.outcome import WAITING, Outcome
from icelake_assets.planning.relaunch import OUTCOME_TABLE_TAG, outcome_filter, outcome_of
from icelake_assets.planning.table import plan_table


@dataclass(frozen=True)
class TickOptions:
    """``job_of``: each table's maintenance job, which its runs target; ``by_table_tag``: those jobs
    have no assets, the runs select no asset."""

    budget_seconds: float
    orphan_scan_seconds: float
    backoff_seconds: float
    job_of: Mapping[TableRef, str] | None = None
    by_table_tag: bool = False


@dataclass(frozen=True)
class TickClock:
    started: float  # time.monotonic() at the tick's start: the budget runs from it
    now: float  # epoch seconds, after recovery: the time every decision of the tick is made at


@dataclass(frozen=True)
class RecoveredRuns:
    """The instance's runs of the product's tables, after the runs of lost workers were failed."""

    pools: Mapping[AssetKey, str]  # each table's run pool
    names: Mapping[AssetKey, str]  # each table's Iceberg name
    limits: PoolLimits
    runs: Mapping[AssetKey, TableRuns]
    recovered: tuple[AuditRecord, ...]  # the recovery's decisions, written with the tick's
    read_since: float  # the finished runs read are those that ended after this (epoch s)


@dataclass(frozen=True)
class CatalogView:
    locations: Mapping[TableRef, str | None]  # each table's metadata location (None: dropped)
    unreachable: Mapping[str, Exception]  # catalogs that did not answer, with the cause


@dataclass(frozen=True)
class Evaluated:
    """A table evaluated this tick, its cursor entry settled once the launch order is known."""

    name: str
    previous: Seen | None  # its cursor entry before this tick
    unchanged: bool  # the same metadata file as the tick before
    file: str
    scanned_at: float  # when its orphans were last listed, this tick's scan included


@dataclass(frozen=True)
class TickPlan:
    evaluations: Mapping[str, TableEvaluation]  # by table name, in the order visited
    evaluated: tuple[Evaluated, ...]  # the tables read (not the unreadable ones), in the order visited
    unreadable: Mapping[str, Seen]  # cursor entries of tables whose metadata could not be located
    visited: int
    next_offset: int  # where the next tick starts (round robin)


@dataclass(frozen=True)
class LaunchOrder:
    evaluations: Mapping[str, TableEvaluation]  # the plan's, those wanting a run placed in the order
    launching: tuple[tuple[str, ...], ...]  # the runs requested, best first: the tables of each
    found_at: Mapping[str, float]  # when each evaluated table's finding was first seen


@dataclass(frozen=True)
class SettledTick:
    evaluations: Mapping[str, TableEvaluation]  # audit records only where a decision changed
    cursor: TickCursor


def _last_outcome(context: SensorEvaluationContext, ref: TableRef) -> LastOutcome | None:
    """The table's latest run that recorded an outcome (run tags, see maintenance/verify/post_run.py):
    its own keys (a run of several tables carries one set per table), else the run-wide ones that
    runs of earlier versions recorded."""
    table = str(ref)
    records = context.instance.get_run_records(RunsFilter(tags=outcome_filter(table)), limit=1)
    if not records:
        records = context.instance.get_run_records(RunsFilter(tags={OUTCOME_TABLE_TAG: table}), limit=1)
    if not records:
        return None
    record = records[0]
    ended = record.end_time or record.update_timestamp.timestamp()
    return LastOutcome(outcome_of(record.dagster_run.tags, table), ended)


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


def _scan_due_from(previous: Seen | None, now: float, orphan_scan_seconds: float) -> float:
    """When the table's orphans were last listed; a table never scanned counts as due now, so its
    orphan check is never left unknown for an interval."""
    if previous is not None and previous.scanned_at is not None:
        return previous.scanned_at
    return now - orphan_scan_seconds


def evaluate_table(
    context: SensorEvaluationContext,
    icelake: IcelakeResource,
    table: DiscoveredTable,
    pdef: PartitionsDefinition | None,
    scan_orphans: bool = False,
    known: Callable[[], KnownTables] | None = None,
    history: History | None = None,
    now: float | None = None,
    reuse_scan_within: float = 0.0,
) -> TableEvaluation:
    """``known``: every table of every catalog (listed once per tick), for the orphan scan;
    ``history``: what the sensor remembers of the table (default: nothing but its last outcome run);
    ``reuse_scan_within``: a scan of the same metadata file this recent is reused (recent_scans.py)."""
    ref = table.ref
    now = time.time() if now is None else now
    loaded = icelake.load_table(ref)
    effective = icelake.effective_policy(loaded)
    policy = effective.policy
    stats = icelake.stats(loaded, policy)
    # Only what removal may delete counts: not hidden files, not other tables', none of a refused table.
    orphans, pending = None, None
    if scan_orphans:
        location, older_than = loaded.metadata_location, policy.orphans.older_than_hours
        scan = recent_scan(ref, location, older_than, now, reuse_scan_within)
        if scan is None:
            scan = icelake.scan_orphans(ref, loaded, policy, known() if known else None)
            remember_scan(ref, location, older_than, now, scan)
        phases = icelake.orphan_phases(ref, scan, policy, now)
        orphans = removable_orphans(scan, phases)
        pending = phases.summary() if phases is not None else None
    history = history or History(last_outcome=lambda: _last_outcome(context, ref))
    plan = plan_table(
        stats,
        policy,
        history,
        now,
        mode=effective.mode,
        orphans=orphans,
        name=str(ref),
        orphan_pending=pending,
    )
    return table_evaluation(context, table, pdef, stats, policy, plan)


def recover_runs(
    context: SensorEvaluationContext, icelake: IcelakeResource, tables: Sequence[DiscoveredTable]
) -> RecoveredRuns:
    """Runs whose worker is gone (a host crash leaves them STARTED forever) are failed first, so their
    tables' pools and the run slots free up and the run model read after them sees the failure."""
    pools = pools_by_key((t.ref for t in tables), icelake.settings.automation.maintenance_pools)
    limits = PoolLimits(context.instance)
    names = {table_asset_key(t.ref): str(t.ref) for t in tables}
    ours = partial(run_model.product_run_tables, pools_by_key=pools, names=names)
    recovered = recover(context.log, context.instance, icelake.settings, icelake.load_table, ours)
    now = time.time()
    runs = table_runs(context.instance, pools, now, names=names)
    return RecoveredRuns(pools, names, limits, runs, tuple(recovered), now - run_model.HISTORY_SECONDS)


def observe_catalogs(
    context: SensorEvaluationContext, icelake: IcelakeResource, tables: Sequence[DiscoveredTable]
) -> CatalogView:
    """Every table's metadata location: one query per SQL catalog, bounded concurrent loads elsewhere."""
    by_catalog: dict[str, list[TableRef]] = {}
    for t in tables:
        by_catalog.setdefault(t.ref.catalog, []).append(t.ref)
    concurrency = icelake.settings.automation.catalog_concurrency
    locations: dict[TableRef, str | None] = {}
    unreachable: dict[str, Exception] = {}
    for name, refs in by_catalog.items():
        try:
            locations.update(metadata_locations(icelake.catalog(name), refs, concurrency))
        except Exception as err:  # one unreachable catalog must not stop the others
            unreachable[name] = err
            context.log.warning(f"catalog {name!r} unreachable, its tables are skipped this tick: {err}")
    return CatalogView(locations, unreachable)


def _unreadable(
    context: SensorEvaluationContext,
    ref: TableRef,
    catalogs: CatalogView,
    previous: Seen | None,
    scanned: float,
) -> tuple[TableEvaluation, Seen]:
    """A table whose catalog is unreachable or which is gone from it: an error, and its cursor entry."""
    down = ref.catalog in catalogs.unreachable
    missing = catalogs.unreachable.get(ref.catalog) or TableMissingError(
        f"{ref} no longer exists in its catalog (skipped until the definitions reload)"
    )
    evaluation = error_evaluation(ref, missing, context, down)
    if previous is not None and previous.outcome == Outcome.ERROR:
        evaluation = replace(evaluation, audit=None)  # recorded when it started failing
    return evaluation, Seen(previous.metadata_file if previous else "", Outcome.ERROR, scanned)


def _in_dagster_terms(evaluation: TableEvaluation, ref: TableRef, options: TickOptions) -> TableEvaluation:
    """The runs target the table's maintenance job (named in the UI's run list, not ``__ASSET_JOB``);
    a decision waiting for approval says how to approve it, in the UI."""
    job = options.job_of.get(ref) if options.job_of else None
    if job:
        requests = tuple(
            r.with_replaced_attrs(job_name=job, asset_selection=None)
            if options.by_table_tag
            else r.with_replaced_attrs(job_name=job)
            for r in evaluation.run_requests
        )
        evaluation = replace(evaluation, run_requests=requests)
    if evaluation.outcome in (Outcome.HELD, Outcome.PROPOSED) and evaluation.observation is not None:
        # The command and the launchpad with the approval filled in.
        cost = (evaluation.audit.cost_estimate_bytes or 0) if evaluation.audit else 0
        observation = approval_observation(evaluation.observation, ref, str(evaluation.outcome), cost, job)
        evaluation = replace(evaluation, observation=observation)
    return evaluation


def plan_tables(
    context: SensorEvaluationContext,
    icelake: IcelakeResource,
    tables: Sequence[DiscoveredTable],
    partitions: Mapping[TableRef, PartitionsDefinition | None],
    cursor: TickCursor,
    catalogs: CatalogView,
    runs: RecoveredRuns,
    options: TickOptions,
    clock: TickClock,
) -> TickPlan:
    """Tables are visited round-robin from the cursor until the time budget is spent; a table whose
    metadata did not change since the last tick is not read."""
    known = cache(icelake.known_tables)  # listed once per tick, by the first orphan scan needing it
    evaluations: dict[str, TableEvaluation] = {}
    evaluated: list[Evaluated] = []
    unreadable: dict[str, Seen] = {}
    n, now = len(tables), clock.now
    start, visited = cursor.offset % n, 0
    ordered = [tables[(start + i) % n].ref for i in range(n)]
    prefetch = Prefetch(icelake, ordered, catalogs.locations, cursor.seen)  # changed tables, loaded ahead
    for i in range(n):
        if evaluations and time.monotonic() - clock.started > options.budget_seconds:
            break  # every tick makes progress: at least one table is evaluated
        table = tables[(start + i) % n]
        visited += 1
        ref, name, location = table.ref, str(table.ref), catalogs.locations.get(table.ref)
        previous = cursor.seen.get(name)
        # What does not fit the tick's budget waits for the next tick (round robin).
        scanned = _scan_due_from(previous, now, options.orphan_scan_seconds)
        if ref.catalog in catalogs.unreachable or location is None:
            evaluations[name], unreadable[name] = _unreadable(context, ref, catalogs, previous, scanned)
            continue
        runs.limits.ensure(runs.pools[table_asset_key(ref)])
        recent_runs = _runs(runs.runs.get(table_asset_key(ref)), options.backoff_seconds)
        scan_orphans = now - scanned >= options.orphan_scan_seconds
        file = metadata_file(location)
        if not needs_evaluation(previous, file, scan_orphans, recent_runs):
            continue  # unchanged since the last tick: nothing to read
        state = runs.runs.get(table_asset_key(ref))
        quiet_since = state.last_finished if state and state.last_finished else runs.read_since
        history = History(previous, recent_runs, partial(_last_outcome, context, ref), quiet_since)
        unchanged = previous is not None and previous.metadata_file == file
        # A waiting table keeps its scan due (settle): while its metadata file is unchanged, the last
        # scan serves, up to the scan interval.
        waiting = unchanged and previous is not None and previous.outcome in WAITING
        reuse = options.orphan_scan_seconds if waiting else 0.0
        try:
            prefetch.before_reading(ref)
            evaluation = evaluate_table(
                context, icelake, table, partitions.get(ref), scan_orphans, known, history, now, reuse
            )
        except Exception as err:  # missing/corrupt metadata, unreadable storage: this table only
            evaluation = error_evaluation(ref, err, context)
        evaluations[name] = _in_dagster_terms(evaluation, ref, options)
        evaluated.append(Evaluated(name, previous, unchanged, file, now if scan_orphans else scanned))
    return TickPlan(evaluations, tuple(evaluated), unreadable, visited, (start + visited) % n)


def settle(
    cursor: TickCursor, plan: TickPlan, order: LaunchOrder, now: float, orphan_scan_seconds: float
) -> SettledTick:
    """What the next tick remembers of each table, and which decisions are audited."""
    evaluations = dict(order.evaluations)
    seen: dict[str, Seen] = {}
    for table in plan.evaluated:
        evaluation = evaluations[table.name]
        previous = table.previous
        # One audit record and one observation per change of decision: a table deferred or queued tick
        # after tick is recorded and observed once (its latest observation still says why; the overview
        # and the lag gauge keep its waiting time current). Each observation is two event-log writes,
        # which a lake of hundreds of waiting tables paid on every tick.
        if table.unchanged and previous is not None and previous.outcome == evaluation.outcome:
            evaluations[table.name] = evaluation = replace(evaluation, audit=None, observation=None)
        since = order.found_at[table.name] if evaluation.outcome in WAITING else None
        scanned = table.scanned_at
        if evaluation.orphans_pending and evaluation.outcome != Outcome.LAUNCHED:
            # Deferred, held or queued: keep the scan due, so the next evaluation sees the orphans again.
            scanned = _scan_due_from(previous, now, orphan_scan_seconds)
        seen[table.name] = Seen(table.file, evaluation.outcome, scanned, since)
    # The unreadable tables' entries first, then the evaluated ones': the order the cursor lists them.
    entries = {**cursor.seen, **plan.unreadable, **seen}
    return SettledTick(evaluations, TickCursor(plan.next_offset, entries))


def tick_requests(
    context: SensorEvaluationContext,
    settled: SettledTick,
    launching: Sequence[Sequence[str]],
    total: int,
    visited: int,
    started: float,
) -> SensorResult:
    """The tick's result: the run requests best first, the observations and the new cursor; the tick
    log says what was decided."""
    evaluations = list(settled.evaluations.values())
    counts: dict[str, int] = {}
    for e in evaluations:
        counts[str(e.outcome)] = counts.get(str(e.outcome), 0) + 1
    acting = [f"{e.ref} {e.outcome}" for e in evaluations if e.outcome != Outcome.SKIPPED]
    context.log.info(
        f"evaluated {len(evaluations)} of {total} tables ({visited} visited) in "
        f"{time.monotonic() - started:.2f}s {counts}"
        + (": " + ", ".join(acting[:20]) if acting else "")
        + (f" and {len(acting) - 20} more" if len(acting) > 20 else "")
    )
    run_requests = []
    for tables in launching:
        members = [settled.evaluations[name] for name in tables]
        if len(members) > 1:
            run_requests.append(shared_run_request(members))
        else:
            run_requests.extend(members[0].run_requests)
    return SensorResult(
        run_requests=run_requests,
        # A tick that launches nothing says why in the UI's tick list (not "0 runs requested").
        skip_reason=None if run_requests else tick_summary(evaluations, total, visited),
        cursor=settled.cursor.dumps(),
        asset_events=[e.observation for e in evaluations if e.observation],
        dynamic_partitions_requests=[d for e in evaluations for d in e.dynamic_requests] or None,
    )
