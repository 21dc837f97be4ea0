"""The sensor that ingests the engines' scan reports (audit/scan_reports.py) every
``scan_reports.interval_seconds``: metadata and small JSON files only, no Spark, no run launched. Its
tick says what it ingested; its cursor keeps the running totals.

Then it chooses the layout of the maintained tables that gained reports (checks/layout_checks.py),
each at most every ``scan_reports.choose_every_hours`` and ``choose_per_tick`` tables a tick (a
sample is read and replayed; the rest wait in the cursor for a later tick), and reports the
``layout_from_queries`` check. A recommended change is audited as proposed, or applied when the
table's policy is in mode ``enforce`` with ``layout.auto``."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from dagster import (
    DefaultSensorStatus,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from icelake_assets.audit.scan_reports import IngestResult, ScanReportStore, ingest_dir
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.layout.mining import same_table
from icelake_assets.orchestration.checks.layout_checks import choose_for_table
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.settings import Settings
from icelake_assets.types import TableRef

SCAN_REPORTS_SENSOR = "icelake_scan_reports"
_TOTALS = ("files", "reports", "skipped_duplicates", "rejected")


def tick_summary(result: IngestResult) -> str:
    text = (
        f"{result.reports} reports from {result.files} files into {result.table}; "
        f"{result.skipped_duplicates} already ingested, {result.rejected} rejected"
    )
    return text + ("; retention ran" if result.retention_ran else "")


def _read(cursor: str | None) -> dict:
    try:
        doc = json.loads(cursor) if cursor else {}
    except ValueError:
        doc = {}  # a cursor of another version starts again
    return doc if isinstance(doc, dict) else {}


def next_cursor(
    cursor: str | None,
    result: IngestResult,
    pending: Sequence[str] = (),
    chosen: dict[str, float] | None = None,
) -> str:
    """Running totals since the sensor started, the last tick's counts, the tables waiting for a
    layout choice and when each table's layout was last chosen."""
    doc = _read(cursor)
    before = doc.get("totals")
    before = before if isinstance(before, dict) else {}
    totals = {k: int(before.get(k, 0)) + int(getattr(result, k)) for k in _TOTALS}
    return json.dumps(
        {"totals": totals, "last": result.to_json(), "pending": sorted(pending), "chosen": chosen or {}},
        sort_keys=True,
    )


def due_for_choice(
    cursor: str | None,
    gained: Sequence[str],
    tables: Sequence[TableRef],
    now: float,
    every_hours: float,
    per_tick: int,
) -> tuple[list[TableRef], list[str], dict[str, float]]:
    """(the tables to choose for now, the ones left waiting, when each was last chosen). ``gained``:
    the engines' names of the tables that gained reports; tables the lake does not maintain are
    left out (a scan of another catalog's table reports too)."""
    doc = _read(cursor)
    chosen = {str(k): float(v) for k, v in (doc.get("chosen") or {}).items()}
    waiting = {str(t) for t in doc.get("pending") or ()}
    for name in gained:
        waiting.update(str(t) for t in tables if same_table(name, str(t)))
    known = {str(t): t for t in tables}
    ready = sorted(n for n in waiting if n in known and now - chosen.get(n, 0.0) >= every_hours * 3600)
    now_refs = [known[n] for n in ready[:per_tick]]
    left = sorted(n for n in waiting if n in known and n not in ready[:per_tick])
    return now_refs, left, chosen


def build_scan_reports_sensor(
    settings: Settings, tables: Sequence[DiscoveredTable] = ()
) -> SensorDefinition | None:
    """None unless ``scan_reports.dir`` is set; ``tables``: the maintained tables (their layout is
    chosen after their reports arrive)."""
    refs = [t.ref for t in tables]
    if settings.scan_reports.dir is None:
        return None

    @sensor(
        name=SCAN_REPORTS_SENSOR,
        minimum_interval_seconds=settings.scan_reports.interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Ingests the engines' scan reports from scan_reports.dir into the scan reports "
        "table, exactly once (no Spark, no run)",
    )
    def scan_reports_sensor(context: SensorEvaluationContext, icelake: IcelakeResource):
        current = icelake.settings
        store = ScanReportStore.from_settings(current, icelake.catalog(current.scan_reports_catalog()))
        result = ingest_dir(current, store)
        summary = tick_summary(result)
        if result.rejected:
            context.log.warning(f"{summary} (kept under rejected/ with their cause)")
        else:
            context.log.info(summary)
        now = time.time()
        sr = current.scan_reports
        due, waiting, chosen = due_for_choice(
            context.cursor, result.tables, refs, now, sr.choose_every_hours, sr.choose_per_tick
        )
        events = []
        for ref in due:
            try:
                outcome = choose_for_table(current, ref)
            except Exception as err:  # one table's choice (unreadable, dropped) never stops the ingest
                context.log.warning(f"{ref}: layout not chosen: {err}")
                continue
            chosen[str(ref)] = now
            context.log.info(f"{ref}: {outcome.summary}")
            events.append(outcome.evaluation)
        if due:
            summary += f"; layout chosen for {len(events)} of {len(due)} tables"
        return SensorResult(
            asset_events=events,
            skip_reason=None if events else SkipReason(summary),
            cursor=next_cursor(context.cursor, result, waiting, chosen),
        )

    return scan_reports_sensor
