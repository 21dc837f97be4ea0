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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from dagster import (
    AssetKey,
    AssetObservation,
    AssetSelection,
    DefaultSensorStatus,
    DynamicPartitionsDefinition,
    MetadataValue,
    PartitionsDefinition,
    RunRequest,
    RunsFilter,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    TimeWindowPartitionsDefinition,
    sensor,
)

from icelake_assets.audit.metrics import MetricsWriter
from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog import inventory
from icelake_assets.catalog.connection import TableMissingError, TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.catalog.locations import metadata_locations
from icelake_assets.causes import describe
from icelake_assets.health.orphans import KnownTables
from icelake_assets.health.overview import TableBenefit, priority_key, table_benefit
from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance.decide import Outcome, decide_table
from icelake_assets.maintenance.effect import OUTCOME_TABLE_TAG, relaunch_hold
from icelake_assets.maintenance.guards import Verdict
from icelake_assets.orchestration import run_model
from icelake_assets.orchestration.approvals import approval_observation
from icelake_assets.orchestration.assets import table_asset_key
from icelake_assets.orchestration.partitions import dynamic_partition_requests, offending_partition_keys
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.run_model import TABLE_TAG, PoolLimits, TableRuns, pools_by_key, table_runs
from icelake_assets.orchestration.sensor_cursor import TickCursor
from icelake_assets.planning.health import evaluate
from icelake_assets.private_api import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PRIORITY_TAG,
)
from icelake_assets.settings import Policy, Settings

MAINTENANCE_SENSOR = "icelake_maintenance_sensor"
TRIGGER_TAG = "icelake/trigger"
SIGNAL_TAG = "icelake/signal"
OPS_TAG = "icelake/ops"
RANK_TAG = "icelake/priority_rank"  # "<rank>/<tables wanting a run>" in the tick that requested it
MAX_PRIORITY = 1_000_000  # dagster/priority is the benefit (file opens saved per scan), capped
# Outcomes worth re-evaluating on the next tick even when the table did not change.
_RECHECK = {Outcome.DEFERRED, Outcome.ERROR, Outcome.IN_FLIGHT, Outcome.BACKOFF, Outcome.QUEUED_BY_PRIORITY}
# Outcomes of a table that still wants maintenance: the age of its finding carries over.
_WAITING = {Outcome.DEFERRED, Outcome.HELD, Outcome.IN_FLIGHT, Outcome.BACKOFF, Outcome.QUEUED_BY_PRIORITY}


@dataclass
class TableEvaluation:
    ref: TableRef
    outcome: Outcome  # maintenance/decide.py says what each means
    reason: str
    run_requests: list[RunRequest] = field(default_factory=list)
    observation: AssetObservation | None = None
    audit: AuditRecord | None = None
    dynamic_requests: list = field(default_factory=list)
    benefit: TableBenefit | None = None  # the overview's view of the table, for the launch order
    # This tick's orphan scan found files to remove: until a run takes them, the table is scanned again
    # on its next evaluation (a deferred or held table must not forget its orphans until the next scan).
    orphans_pending: bool = False


def _metadata_file(location: str | None) -> str:
    return (location or "").rsplit("/", 1)[-1]


def _observation(key: AssetKey, stats: TableStats, verdict: Verdict, outcome: str) -> AssetObservation:
    numbers = {
        **stats.summary(),
        "candidate_partitions": len(stats.compaction_candidates),
        "recent_writer_commits": getattr(stats, "recent_writer_commits", 0),
    }
    metadata: dict[str, Any] = {f"health/{k}": MetadataValue.int(int(v)) for k, v in numbers.items()}
    metadata["sensor/outcome"] = MetadataValue.text(str(outcome))  # plain text: Dagster serializes it
    metadata["sensor/reason"] = MetadataValue.text(verdict.reason)
    return AssetObservation(asset_key=key, metadata=metadata)


def _relaunch_hold(
    context: SensorEvaluationContext, ref: TableRef, stats: TableStats, policy: Policy
) -> str | None:
    """The table's latest run that recorded an outcome (run tags, see maintenance/effect.py)."""
    records = context.instance.get_run_records(RunsFilter(tags={OUTCOME_TABLE_TAG: str(ref)}), limit=1)
    if not records:
        return None
    record = records[0]
    ended = record.end_time or record.update_timestamp.timestamp()
    age_hours = (time.time() - ended) / 3600
    return relaunch_hold(record.dagster_run.tags, stats.current_snapshot_id, policy, age_hours)


def _run_requests(
    table: DiscoveredTable,
    pdef: PartitionsDefinition | None,
    stats: TableStats,
    ops: Sequence[str],
    tags: dict[str, str],
) -> list[RunRequest]:
    """One run per table, so one Spark application: the range of its offending time partitions (the
    rewrite takes only the candidates within it), the offending partition of a dynamic asset when
    there is one, or else the whole table (table-wide ops, several dynamic or multi-dimension keys)."""
    key = table_asset_key(table.ref)
    keys = (
        offending_partition_keys(table, stats, pdef)
        if pdef is not None and "rewrite_data_files" in ops
        else []
    )
    if keys and isinstance(pdef, TimeWindowPartitionsDefinition) and len(keys) > 1:
        # Keys are Iceberg's own time values (2024-01-03, 2024-01-03-05, ...): they sort by time.
        return [
            RunRequest(
                asset_selection=[key],
                tags={
                    **tags,
                    ASSET_PARTITION_RANGE_START_TAG: min(keys),
                    ASSET_PARTITION_RANGE_END_TAG: max(keys),
                },
            )
        ]
    if len(keys) == 1:
        return [RunRequest(asset_selection=[key], partition_key=keys[0], tags=tags)]
    return [RunRequest(asset_selection=[key], tags=tags)]


def _audit(ref: TableRef, decision: str, reason: str, **fields: Any) -> AuditRecord:
    return AuditRecord(
        table_name=str(ref), kind="decision", decision=decision, trigger="sensor", reason=reason, **fields
    )


def _error(ref: TableRef, err: Exception, context: SensorEvaluationContext) -> TableEvaluation:
    """A table that cannot be evaluated (missing or corrupt metadata, unreadable storage, dropped, its
    catalog unreachable): an error outcome for it alone; the tick goes on with the others."""
    reason = describe(err)
    context.log.warning(f"{ref}: not evaluated: {reason}")
    observation = AssetObservation(
        asset_key=table_asset_key(ref),
        metadata={"sensor/outcome": MetadataValue.text("error"), "sensor/reason": MetadataValue.text(reason)},
    )
    return TableEvaluation(
        ref, Outcome.ERROR, reason, observation=observation, audit=_audit(ref, "error", reason)
    )


def evaluate_table(
    context: SensorEvaluationContext,
    icelake: IcelakeResource,
    table: DiscoveredTable,
    pdef: PartitionsDefinition | None,
    scan_orphans: bool = False,
    known: Callable[[], KnownTables] | None = None,
) -> TableEvaluation:
    """``known``: every table of every catalog (listed once per tick), for the orphan scan."""
    ref = table.ref
    key = table_asset_key(ref)
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
    decided = decide_table(stats, policy, effective.mode, orphans)
    decisions, verdict, outcome = decided.decisions, decided.verdict, decided.outcome
    if outcome == Outcome.LAUNCHED and (why := _relaunch_hold(context, ref, stats, policy)):
        outcome, verdict = Outcome.BACKOFF, Verdict("skip", why, verdict.ops, verdict.details)
    observation = _observation(key, stats, verdict, outcome)
    evaluation = TableEvaluation(
        ref,
        outcome,
        verdict.reason,
        observation=observation,
        benefit=table_benefit(evaluate(stats, policy, name=str(ref))),
        orphans_pending=any(d.op == "remove_orphan_files" and d.act for d in decisions),
    )
    if outcome == Outcome.LAUNCHED:
        # Only the partitions the rewrite will take (Iceberg would skip the others: plan.plan_rewrite).
        planned = replace(stats, compaction_candidates=list(decided.rewrite.partitions))
        tags = {
            TABLE_TAG: str(ref),
            TRIGGER_TAG: "sensor",
            SIGNAL_TAG: verdict.reason[:200],
            OPS_TAG: ",".join(verdict.ops),
        }
        evaluation.run_requests = _run_requests(table, pdef, planned, verdict.ops, tags)
        keys = [k for r in evaluation.run_requests if (k := r.partition_key)]
        if keys and isinstance(pdef, DynamicPartitionsDefinition):
            evaluation.dynamic_requests = dynamic_partition_requests(
                table, stats, context.instance, keys=keys
            )
    if outcome != Outcome.OBSERVED:
        decision = {
            "launched": "launched",
            "proposed": "proposed",
            "deferred": "deferred",
            "held": "held",
        }.get(outcome, "skipped")
        evaluation.audit = _audit(
            ref,
            decision,
            verdict.reason,
            signals={d.op: d.signals for d in decisions},
            policy=policy.model_dump(mode="json"),
            partitions=tuple(_requested_partitions(evaluation.run_requests)),
            partitions_reason="compaction candidates" if evaluation.run_requests else None,
            writer_check={k: v for k, v in verdict.details.items() if "writer" in k or "quiet" in k},
            cost_estimate_bytes=int(verdict.details.get("estimated_rewrite_bytes", 0)),
            snapshot_before=stats.current_snapshot_id,
        )
    return evaluation


def _requested_partitions(requests: Sequence[RunRequest]) -> list[str]:
    out = []
    for r in requests:
        if r.partition_key:
            out.append(str(r.partition_key))
        elif ASSET_PARTITION_RANGE_START_TAG in r.tags:
            out.append(f"{r.tags[ASSET_PARTITION_RANGE_START_TAG]}...{r.tags[ASSET_PARTITION_RANGE_END_TAG]}")
    return out


def _hold_back(
    evaluation: TableEvaluation, runs: TableRuns | None, now: float, backoff_seconds: float
) -> None:
    """A launch the run model forbids becomes a deferral: the table's maintenance is already queued or
    running (launched by anyone), or its last run failed and the backoff is not over."""
    if evaluation.outcome != Outcome.LAUNCHED or runs is None:
        return
    retry_at = runs.retry_at(backoff_seconds)
    if runs.in_flight:
        reason = f"maintenance already queued or running ({runs.in_flight})"
        outcome = Outcome.IN_FLIGHT
    elif retry_at is not None and retry_at > now:
        cause = runs.failure_reason()
        reason = (
            f"the last {runs.failures_in_a_row} maintenance run(s) failed; retrying after "
            f"{datetime.fromtimestamp(retry_at, tz=UTC):%Y-%m-%d %H:%M:%S} UTC"
            + (f" (last failure: {cause})" if cause else "")
        )
        outcome = Outcome.BACKOFF
    else:
        return
    _defer(evaluation, outcome, reason)


def _defer(evaluation: TableEvaluation, outcome: Outcome, reason: str, **metadata: Any) -> None:
    """Turn a launch into a deferral: no run, observation and audit (decision ``deferred``) say why."""
    evaluation.outcome, evaluation.reason = outcome, reason
    evaluation.run_requests, evaluation.dynamic_requests = [], []
    if evaluation.observation is not None:
        md = {**evaluation.observation.metadata, **metadata}
        md["sensor/outcome"], md["sensor/reason"] = (
            MetadataValue.text(str(outcome)),
            MetadataValue.text(reason),
        )
        evaluation.observation = AssetObservation(asset_key=evaluation.observation.asset_key, metadata=md)
    if evaluation.audit is not None:
        evaluation.audit = replace(
            evaluation.audit, decision="deferred", reason=reason, partitions=(), partitions_reason=None
        )


def _age(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 120
        else (f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h")
    )


def _prioritize(
    wanting: list[TableEvaluation], found_at: dict[str, float], free: int | None, slots: str, now: float
) -> tuple[list[TableEvaluation], list[str]]:
    """Rank the tables that want a run by the overview's ranking (benefit, then the finding's age);
    the first ``free`` keep their run requests (tagged with ``dagster/priority`` so the run queue
    starts the most beneficial first), the others become ``queued_by_priority``. Returns the ranked
    evaluations and the ranking as log lines."""
    ordered = sorted(
        wanting,
        key=lambda e: priority_key(e.benefit, found_at[str(e.ref)]) if e.benefit is not None else (1,),
    )
    lines = []
    for rank, e in enumerate(ordered, 1):
        benefit = e.benefit.benefit if e.benefit is not None else 0
        age = _age(now - found_at[str(e.ref)])
        why = f"priority {rank} of {len(ordered)}: {benefit} file opens saved per scan, finding {age} old"
        extra = {
            "sensor/priority_rank": MetadataValue.int(rank),
            "sensor/benefit_files": MetadataValue.int(benefit),
        }
        if free is not None and rank > free:
            _defer(
                e,
                Outcome.QUEUED_BY_PRIORITY,
                f"{why}; the free run slots went to higher-ranked tables ({slots}); "
                "ranked again on the next tick",
                **extra,
            )
        else:
            tags = {PRIORITY_TAG: str(min(benefit, MAX_PRIORITY)), RANK_TAG: f"{rank}/{len(ordered)}"}
            e.run_requests = [r.with_replaced_attrs(tags={**r.tags, **tags}) for r in e.run_requests]
            if e.observation is not None:
                e.observation = AssetObservation(
                    asset_key=e.observation.asset_key, metadata={**e.observation.metadata, **extra}
                )
            if e.audit is not None:
                e.audit = replace(e.audit, reason=f"{why}; {e.audit.reason}")
        lines.append(f"{rank}. {e.ref} {e.outcome} ({benefit} files/scan, {age})")
    return ordered, lines


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
    runs = table_runs(context.instance, pools, names={table_asset_key(t.ref): str(t.ref) for t in tables})
    now = time.time()

    known_cache: list[KnownTables] = []

    def known() -> KnownTables:
        if not known_cache:
            known_cache.append(icelake.known_tables())
        return known_cache[0]

    results: list[TableEvaluation] = []
    # Evaluated tables, settled after the ranking: (evaluation, cursor entry before, unchanged, ...)
    evaluated: list[tuple[TableEvaluation, list | None, bool, str, float]] = []
    n = len(tables)
    start = cursor.offset % n
    visited = 0
    for i in range(n):
        if results and time.monotonic() - started > budget_seconds:
            break  # every tick makes progress: at least one table is evaluated
        table = tables[(start + i) % n]
        visited += 1
        name, location = str(table.ref), locations.get(table.ref)
        previous: list[Any] = cursor.seen.get(name) or []  # [] (never seen) is falsy like None
        # A table seen for the first time is scanned now: its orphan check is never left unknown for
        # an interval. What does not fit the tick's budget waits for the next tick (round robin).
        scanned = float(previous[2]) if previous and len(previous) > 2 else now - orphan_scan_seconds
        if table.ref.catalog in unreachable or location is None:
            missing = unreachable.get(table.ref.catalog) or TableMissingError(
                f"{name} no longer exists in its catalog (skipped until the definitions reload)"
            )
            evaluation = _error(table.ref, missing, context)
            if previous and previous[1] == "error":
                evaluation.audit = None  # recorded when it started failing
            cursor.seen[name] = [previous[0] if previous else "", "error", scanned]
            results.append(evaluation)
            continue
        pool = pools[table_asset_key(table.ref)]
        limits.ensure(pool)
        table_state = runs.get(table_asset_key(table.ref))
        scan_orphans = now - scanned >= orphan_scan_seconds
        unchanged = bool(previous) and previous[0] == _metadata_file(location)
        # A launched table whose run failed since is looked at again (and retried after its backoff).
        failed_since = (
            table_state is not None and not table_state.in_flight and table_state.failures_in_a_row > 0
        )
        if (
            unchanged
            and not scan_orphans
            and previous[1] not in _RECHECK
            and not (previous[1] == "launched" and failed_since)
        ):
            continue  # unchanged since the last tick: nothing to read
        try:
            evaluation = evaluate_table(
                context, icelake, table, partitions.get(table.ref), scan_orphans, known
            )
        except Exception as err:  # missing/corrupt metadata, unreadable storage: this table only
            evaluation = _error(table.ref, err, context)
        _hold_back(evaluation, table_state, now, backoff_seconds)
        if job_of and (job := job_of.get(table.ref)):
            evaluation.run_requests = [
                r.with_replaced_attrs(job_name=job, asset_selection=None)
                if by_table_tag
                else r.with_replaced_attrs(job_name=job)
                for r in evaluation.run_requests
            ]
        if evaluation.outcome in (Outcome.HELD, Outcome.PROPOSED) and evaluation.observation is not None:
            # How to approve it, in the UI: the command and the launchpad with the approval filled in.
            evaluation.observation = approval_observation(
                evaluation.observation,
                table.ref,
                str(evaluation.outcome),
                (evaluation.audit.cost_estimate_bytes or 0) if evaluation.audit else 0,
                job_of.get(table.ref) if job_of else None,
            )
        evaluated.append(
            (evaluation, previous, unchanged, _metadata_file(location), now if scan_orphans else scanned)
        )
        results.append(evaluation)
    cursor.offset = (start + visited) % n

    # When the finding was first seen (an older finding goes first among equal benefits).
    found_at = {
        str(e.ref): float(p[3]) if p and len(p) > 3 and p[3] is not None and p[1] in _WAITING else now
        for e, p, *_ in evaluated
    }
    wanting = [e for e, *_ in evaluated if e.outcome == Outcome.LAUNCHED]
    if wanting:
        ahead = icelake.settings.automation.queued_runs_ahead
        free, slots = run_model.free_slots(context.instance, pools, ahead)
        wanting, ranking = _prioritize(wanting, found_at, free, slots, now)
        context.log.info(
            f"launch order by benefit ({slots}): "
            + "; ".join(ranking[:20])
            + (f" and {len(ranking) - 20} more" if len(ranking) > 20 else "")
        )
    for evaluation, prior, unchanged, metadata_file, scanned in evaluated:
        # One audit record per change of decision: a table deferred tick after tick is recorded once.
        if unchanged and prior and prior[1] == evaluation.outcome:
            evaluation.audit = None
        since = found_at[str(evaluation.ref)] if evaluation.outcome in _WAITING else None
        if evaluation.orphans_pending and evaluation.outcome != Outcome.LAUNCHED:
            # Deferred, held or queued: keep the scan due, so the next evaluation sees the orphans again.
            scanned = float(prior[2]) if prior and len(prior) > 2 else now - orphan_scan_seconds
        cursor.seen[str(evaluation.ref)] = [metadata_file, str(evaluation.outcome), scanned, since]
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r.outcome)] = counts.get(str(r.outcome), 0) + 1
    acting = [f"{r.ref} {r.outcome}" for r in results if r.outcome != Outcome.SKIPPED]
    context.log.info(
        f"evaluated {len(results)} of {n} tables ({visited} visited) in {time.monotonic() - started:.2f}s "
        f"{counts}"
        + (": " + ", ".join(acting[:20]) if acting else "")
        + (f" and {len(acting) - 20} more" if len(acting) > 20 else "")
    )
    run_requests = [rr for r in wanting for rr in r.run_requests]  # best first
    result = SensorResult(
        run_requests=run_requests,
        # A tick that launches nothing says why in the UI's tick list (not "0 runs requested").
        skip_reason=None if run_requests else tick_summary(results, n, visited),
        cursor=cursor.dumps(),
        asset_events=[r.observation for r in results if r.observation],
        dynamic_partitions_requests=[d for r in results for d in r.dynamic_requests] or None,
    )
    # Last, once the result is built: the audit never records a launch the tick does not request.
    _record(context, icelake.settings, [r.audit for r in results if r.audit])
    _refresh_inventory(context, icelake.settings, tables)
    return result


_SUMMARY_MAX = 900


def tick_summary(results: Sequence[TableEvaluation], total: int, visited: int) -> str:
    """Why a tick launched nothing, for its skip reason: the outcomes, then each table that is not
    simply fine with its reason (deferred, held, errors first)."""
    if not results:
        return f"nothing changed in the {visited} of {total} tables visited: no metadata to read"
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r.outcome)] = counts.get(str(r.outcome), 0) + 1
    head = f"{len(results)} of {total} tables evaluated, no run: " + ", ".join(
        f"{n} {outcome}" for outcome, n in sorted(counts.items(), key=lambda kv: -kv[1])
    )
    details = [f"{r.ref} {r.outcome}: {r.reason}" for r in results if r.outcome != Outcome.SKIPPED]
    text = head + (" | " + "; ".join(details) if details else "")
    return text if len(text) <= _SUMMARY_MAX else text[: _SUMMARY_MAX - 1] + "…"


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
    """Best effort: a locked audit table or a full metrics disk is logged, and the tick goes on. The
    sensor's heartbeat metric is written on every tick, records or not (a stopped sensor alerts)."""
    if records and settings.audit.enabled:
        try:
            AuditLog.from_settings(settings).append(records)
        except Exception as err:
            context.log.error(f"audit records of this tick not written ({len(records)} decisions): {err}")
    try:
        metrics = MetricsWriter.from_settings(settings)
        for record in records:
            metrics.record(record)
        metrics.sensor_ticked(MAINTENANCE_SENSOR)
        metrics.flush()
    except Exception as err:
        context.log.error(f"metrics of this tick not written: {err}")


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
