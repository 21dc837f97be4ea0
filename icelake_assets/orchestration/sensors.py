"""The self-healing loop: a sensor that reads every table's metadata, records what it saw, and
launches maintenance for the tables (and partitions) whose thresholds are crossed — unless a guard
(writers active, cost over the cap) or the table's mode (observe, propose) says otherwise.

Cost per tick: one catalog query for every table's metadata location (SQL catalogs); a table whose
location did not change since the last tick is not even loaded. Tables are visited round-robin from
a cursor, and a tick stops after its time budget, so thousands of tables fit Dagster's 60 s limit.
"""

import json
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

from dagster import (
    AssetKey,
    AssetObservation,
    AssetsDefinition,
    AssetSelection,
    DefaultScheduleStatus,
    DefaultSensorStatus,
    MetadataValue,
    RunRequest,
    ScheduleDefinition,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    define_asset_job,
    sensor,
)

from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import CatalogUnavailableError, TableMissingError, TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.catalog.locations import metadata_locations
from icelake_assets.health.orphans import find_orphans
from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance import plan
from icelake_assets.maintenance.guards import Verdict, evaluate_guards
from icelake_assets.metrics import MetricsWriter
from icelake_assets.orchestration.assets import table_asset_key
from icelake_assets.orchestration.partitions import dynamic_partition_requests, offending_partition_keys
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.policies import decide_action
from icelake_assets.settings import Policy, Settings

MAINTENANCE_SENSOR = "icelake_maintenance_sensor"
TABLE_TAG = "icelake/table"  # dagster.yaml limits runs per unique value of this tag to one
TRIGGER_TAG = "icelake/trigger"
SIGNAL_TAG = "icelake/signal"
OPS_TAG = "icelake/ops"
# Outcomes worth re-evaluating on the next tick even when the table did not change.
_RECHECK = {"deferred", "error"}


@dataclass
class TickCursor:
    """Where the last tick stopped, and per table the metadata file it saw and what it decided."""

    offset: int = 0
    # table -> [metadata file, outcome, time of its last orphan scan (epoch s)]
    seen: dict[str, list] = field(default_factory=dict)

    @classmethod
    def loads(cls, text: str | None) -> "TickCursor":
        if not text:
            return cls()
        try:
            data = json.loads(text)
            return cls(int(data.get("offset", 0)), {k: list(v) for k, v in data.get("seen", {}).items()})
        except (ValueError, TypeError, AttributeError):
            return cls()  # an unreadable cursor only costs one full evaluation

    def dumps(self) -> str:
        return json.dumps({"offset": self.offset, "seen": self.seen}, separators=(",", ":"))


@dataclass
class TableEvaluation:
    ref: TableRef
    outcome: str  # launched, proposed, deferred, held, skipped, observed, error
    reason: str
    run_requests: list[RunRequest] = field(default_factory=list)
    observation: AssetObservation | None = None
    audit: AuditRecord | None = None
    dynamic_requests: list = field(default_factory=list)


def _metadata_file(location: str | None) -> str:
    return (location or "").rsplit("/", 1)[-1]


def _decisions(stats: TableStats, policy: Policy, orphans: list | None) -> list[plan.Decision]:
    decisions = [plan.decide_expire(stats, policy), plan.decide_rewrite(stats, policy),
                 plan.decide_manifests(stats, policy)]
    if orphans is not None:  # listed this tick (a storage listing: at most every orphan_scan_hours)
        decisions.insert(1, plan.decide_orphans(len(orphans), sum(o.size for o in orphans), policy))
    return decisions


def _observation(key: AssetKey, stats: TableStats, verdict: Verdict, outcome: str) -> AssetObservation:
    numbers = {
        "data_files": stats.data_files, "small_files": stats.small_files, "snapshots": stats.snapshots,
        "manifests": stats.manifests, "records": stats.records, "data_bytes": stats.data_bytes,
        "delete_files": stats.position_delete_files + stats.equality_delete_files,
        "candidate_partitions": len(stats.compaction_candidates),
        "recent_writer_commits": getattr(stats, "recent_writer_commits", 0),
    }
    metadata: dict[str, Any] = {f"health/{k}": MetadataValue.int(int(v)) for k, v in numbers.items()}
    metadata["sensor/outcome"] = MetadataValue.text(outcome)
    metadata["sensor/reason"] = MetadataValue.text(verdict.reason)
    return AssetObservation(asset_key=key, metadata=metadata)


def _partition_keys(table: DiscoveredTable, asset: AssetsDefinition, stats: TableStats,
                    rewrite_acts: bool) -> list[str | None]:
    """Which runs to request: the offending partitions of a partitioned asset (one run each), or one
    whole-table run (unpartitioned assets, and table-wide ops alone)."""
    if asset.partitions_def is None or not rewrite_acts:
        return [None]
    keys = offending_partition_keys(table, stats, asset.partitions_def)
    return list(keys) or [None]


def evaluate_table(context: SensorEvaluationContext, icelake: IcelakeResource, table: DiscoveredTable,
                   asset: AssetsDefinition, scan_orphans: bool = False) -> TableEvaluation:
    ref = table.ref
    key = table_asset_key(ref)
    loaded = icelake.load_table(ref)
    effective = icelake.effective_policy(loaded)
    policy = effective.policy
    stats = icelake.stats(loaded, policy)
    orphans = find_orphans(loaded, policy.orphans.older_than_hours) if scan_orphans else None
    decisions = _decisions(stats, policy, orphans)
    verdict = evaluate_guards(stats, decisions, policy.guards.quiet_period_minutes, policy.guards.max_rewrite_bytes,
                              partitions=plan.rewrite_candidates(stats, policy))
    action = decide_action(effective.mode, verdict.action == "launch")
    outcome = {"defer": "deferred", "hold": "held", "skip": "skipped"}.get(verdict.action, "launched")
    if verdict.action == "launch":
        outcome = {"launch": "launched", "record": "proposed", "nothing": "observed"}[action]
    evaluation = TableEvaluation(ref, outcome, verdict.reason, observation=_observation(key, stats, verdict, outcome))
    if outcome == "launched":
        snapshot = stats.current_snapshot_id
        keys = _partition_keys(table, asset, stats, "rewrite_data_files" in verdict.ops)
        tags = {TABLE_TAG: str(ref), TRIGGER_TAG: "sensor", SIGNAL_TAG: verdict.reason[:200],
                OPS_TAG: ",".join(verdict.ops)}
        for pk in keys:
            evaluation.run_requests.append(RunRequest(
                run_key=f"{ref}@{snapshot}:{pk or 'all'}", asset_selection=[key], partition_key=pk, tags=tags))
        if any(keys):
            evaluation.dynamic_requests = dynamic_partition_requests(table, stats, context.instance,
                                                                     keys=[k for k in keys if k])
    if outcome != "observed":
        decision = {"launched": "launched", "proposed": "proposed", "deferred": "deferred", "held": "held"}.get(
            outcome, "skipped")
        evaluation.audit = AuditRecord(
            table_name=str(ref), kind="decision", decision=decision, trigger="sensor", reason=verdict.reason,
            signals={d.op: d.signals for d in decisions}, policy=policy.model_dump(mode="json"),
            partitions=tuple(k for r in evaluation.run_requests if (k := r.partition_key)),
            partitions_reason="compaction candidates" if evaluation.run_requests else None,
            writer_check={k: v for k, v in verdict.details.items() if "writer" in k or "quiet" in k},
            cost_estimate_bytes=int(verdict.details.get("estimated_rewrite_bytes", 0)),
            snapshot_before=stats.current_snapshot_id,
        )
    return evaluation


def evaluate_tick(context: SensorEvaluationContext, icelake: IcelakeResource, tables: Sequence[DiscoveredTable],
                  assets: dict[TableRef, AssetsDefinition], budget_seconds: float,
                  orphan_scan_seconds: float = 24 * 3600) -> SensorResult:
    started = time.monotonic()
    cursor = TickCursor.loads(context.cursor)
    if not tables:
        return SensorResult(skip_reason="no tables discovered", cursor=cursor.dumps())
    by_catalog: dict[str, list[TableRef]] = {}
    for t in tables:
        by_catalog.setdefault(t.ref.catalog, []).append(t.ref)
    locations: dict[TableRef, str | None] = {}
    for name, refs in by_catalog.items():
        locations.update(metadata_locations(icelake.catalog(name), refs))

    results: list[TableEvaluation] = []
    n = len(tables)
    start = cursor.offset % n
    visited = 0
    for i in range(n):
        if results and time.monotonic() - started > budget_seconds:
            break  # every tick makes progress: at least one table is evaluated
        table = tables[(start + i) % n]
        visited += 1
        name, location = str(table.ref), locations.get(table.ref)
        if location is None:
            context.log.warning(f"{name} no longer exists in its catalog: skipped until the definitions reload")
            continue
        previous = cursor.seen.get(name)
        # A table seen for the first time is scanned at a fixed point of the next interval (by its
        # name's hash), so 1,000 new tables spread their storage listings over the interval.
        scanned = (float(previous[2]) if previous and len(previous) > 2
                   else time.time() - zlib.crc32(name.encode()) % max(1, int(orphan_scan_seconds)))
        scan_orphans = time.time() - scanned >= orphan_scan_seconds
        if (previous and previous[0] == _metadata_file(location) and previous[1] not in _RECHECK
                and not scan_orphans):
            continue  # unchanged since the last tick: nothing to read
        try:
            evaluation = evaluate_table(context, icelake, table, assets[table.ref], scan_orphans)
        except (TableMissingError, CatalogUnavailableError) as err:
            context.log.warning(f"{name}: {err}")
            cursor.seen[name] = [_metadata_file(location), "error", scanned]
            continue
        # One audit record per change of decision: a table deferred tick after tick is recorded once.
        if previous and previous[0] == _metadata_file(location) and previous[1] == evaluation.outcome:
            evaluation.audit = None
        cursor.seen[name] = [_metadata_file(location), evaluation.outcome, time.time() if scan_orphans else scanned]
        results.append(evaluation)
    cursor.offset = (start + visited) % n
    _record(icelake.settings, [r.audit for r in results if r.audit])
    counts: dict[str, int] = {}
    for r in results:
        counts[r.outcome] = counts.get(r.outcome, 0) + 1
    acting = [f"{r.ref} {r.outcome}" for r in results if r.outcome != "skipped"]
    context.log.info(
        f"evaluated {len(results)} of {n} tables ({visited} visited) in {time.monotonic() - started:.2f}s "
        f"{counts}" + (": " + ", ".join(acting[:20]) if acting else "")
        + (f" and {len(acting) - 20} more" if len(acting) > 20 else ""))
    return SensorResult(
        run_requests=[rr for r in results for rr in r.run_requests],
        cursor=cursor.dumps(),
        asset_events=[r.observation for r in results if r.observation],
        dynamic_partitions_requests=[d for r in results for d in r.dynamic_requests] or None,
    )


def _record(settings: Settings, records: list[AuditRecord]) -> None:
    if not records:
        return
    if settings.audit.enabled:
        AuditLog.from_settings(settings).append(records)
    metrics = MetricsWriter.from_settings(settings)
    for record in records:
        metrics.record(record)
    metrics.flush()


def build_maintenance_sensor(tables: Sequence[DiscoveredTable], assets: dict[TableRef, AssetsDefinition],
                             settings: Settings, interval_seconds: int) -> SensorDefinition:
    keys = [table_asset_key(t.ref) for t in tables]
    status = (DefaultSensorStatus.RUNNING if settings.automation.sensor_default_status == "running"
              else DefaultSensorStatus.STOPPED)
    budget = settings.automation.tick_budget_seconds

    @sensor(
        name=MAINTENANCE_SENSOR,
        minimum_interval_seconds=interval_seconds,
        asset_selection=AssetSelection.assets(*keys) if keys else AssetSelection.assets(),
        default_status=status,
        description="Reads every table's Iceberg metadata; launches maintenance where thresholds are crossed "
                    "(guards: writer quiet period, cost cap; modes: observe / propose / enforce).",
    )
    def maintenance_sensor(context: SensorEvaluationContext, icelake: IcelakeResource):
        return evaluate_tick(context, icelake, tables, assets, budget,
                             settings.automation.orphan_scan_hours * 3600)

    return maintenance_sensor


def build_check_schedules(settings: Settings, checks_job, orphan_checks_job) -> list[ScheduleDefinition]:
    """Each schedule is named after the job it runs: ``<job>_schedule``."""
    status = (DefaultScheduleStatus.RUNNING if settings.automation.schedules_default_status == "running"
              else DefaultScheduleStatus.STOPPED)
    return [
        ScheduleDefinition(name=f"{checks_job.name}_schedule", job=checks_job,
                           cron_schedule=settings.automation.checks_cron, default_status=status,
                           description="Every table's metadata checks (pyiceberg only, no Spark)"),
        ScheduleDefinition(name=f"{orphan_checks_job.name}_schedule", job=orphan_checks_job,
                           cron_schedule=settings.automation.orphan_checks_cron, default_status=status,
                           description="Orphan-file checks: they list storage, so they run less often"),
    ]


def build_table_schedules(tables: Sequence[DiscoveredTable], assets: dict[TableRef, AssetsDefinition],
                          policies: dict[TableRef, Any]) -> list[ScheduleDefinition]:
    """Cron as an alternative trigger: a table whose policy sets ``schedule.cron`` (and enforces) gets
    a schedule running its whole-table maintenance; each op still acts only past its threshold."""
    schedules = []
    for t in tables:
        effective = policies[t.ref]
        cron = effective.policy.schedule.cron
        if not cron or effective.mode != "enforce":
            continue
        job = define_asset_job(f"icelake_scheduled__{t.ref.safe_name}", selection=AssetSelection.assets(assets[t.ref]),
                               tags={TABLE_TAG: str(t.ref), TRIGGER_TAG: "schedule"})
        schedules.append(ScheduleDefinition(
            name=f"{t.ref.safe_name}__maintenance_schedule", job=job, cron_schedule=cron,
            execution_timezone=effective.policy.schedule.timezone, default_status=DefaultScheduleStatus.RUNNING,
            description=f"Maintenance of {t.ref} on its policy's cron ({cron})"))
    return schedules
