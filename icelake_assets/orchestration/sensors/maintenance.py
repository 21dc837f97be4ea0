"""The self-healing loop: a sensor that reads every table's metadata, records what it saw, and
launches maintenance for the tables (and partitions) whose thresholds are crossed — unless a guard
(writers active, cost over the cap) or the table's mode (observe, propose) says otherwise.

Cost per tick: one catalog query for every table's metadata location (SQL catalogs); a table whose
location did not change since the last tick is not even loaded. Tables are visited round-robin from
a cursor, and a tick stops after its time budget, so thousands of tables fit Dagster's 60 s limit.

Priority: when the instance's global run cap leaves fewer slots than tables wanting a run, the tick
requests the free slots' worth in the launch order (planning/priority.py: tables waited past
``automation.max_wait_minutes`` first, then benefit within the fair share of run time, then those
over it), and records the others as ``queued_by_priority`` (re-ranked next tick).
"""

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from dagster import (
    AssetSelection,
    DefaultSensorStatus,
    PartitionsDefinition,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    sensor,
)

from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.writer import write_audit, write_loop_metrics
from icelake_assets.catalog import inventory
from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.runs import model as run_model
from icelake_assets.orchestration.runs.model import TABLE_TAG
from icelake_assets.orchestration.sensors.cursor import TickCursor
from icelake_assets.orchestration.sensors.events import (
    OPS_TAG,
    RANK_TAG,
    SIGNAL_TAG,
    TRIGGER_TAG,
    TableEvaluation,
    tick_summary,
)
from icelake_assets.orchestration.sensors.launch_order import order_and_cap
from icelake_assets.orchestration.sensors.loop_metrics import loop_snapshot, table_lags
from icelake_assets.orchestration.sensors.tick_stages import (
    TickClock,
    TickOptions,
    evaluate_table,
    observe_catalogs,
    plan_tables,
    recover_runs,
    settle,
    tick_requests,
)
from icelake_assets.planning.priority import MAX_PRIORITY
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
    backoff = run_model.FAILED_RUN_BACKOFF_SECONDS if backoff_seconds is None else backoff_seconds
    options = TickOptions(budget_seconds, orphan_scan_seconds, backoff, job_of, by_table_tag)
    cursor = TickCursor.loads(context.cursor)
    if not tables:
        return SensorResult(skip_reason="no tables discovered", cursor=cursor.dumps())
    runs = recover_runs(context, icelake, tables)
    catalogs = observe_catalogs(context, icelake, tables)
    clock = TickClock(started, time.time())
    try:
        plan = plan_tables(context, icelake, tables, partitions, cursor, catalogs, runs, options, clock)
    finally:
        icelake.drop_prefetched()  # what the budget left unread, and the loaders' threads
    order = order_and_cap(context, icelake.settings.automation, plan, runs, clock.now)
    settled = settle(cursor, plan, order, clock.now, orphan_scan_seconds)
    result = tick_requests(context, settled, order.launching, len(tables), plan.visited, started)
    # The loop's own state (runs in flight and queued, by table): alerts on a stalled loop. Before
    # _record, whose heartbeat writes the metrics textfile once per tick.
    snapshot = loop_snapshot(context.instance, runs.pools, runs.names, clock.now)
    snapshot = replace(snapshot, lags=table_lags(settled.cursor.seen, clock.now))
    loop_error = write_loop_metrics(icelake.settings, snapshot)
    if loop_error:
        context.log.error(f"loop metrics of this tick not written: {loop_error}")
    # Last, once the result is built: the audit never records a launch the tick does not request.
    audits = [e.audit for e in settled.evaluations.values() if e.audit]
    _record(context, icelake.settings, [*runs.recovered, *audits])
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
