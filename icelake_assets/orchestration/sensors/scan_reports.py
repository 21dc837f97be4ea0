"""The sensor that ingests the engines' scan reports (audit/scan_reports.py) every
``scan_reports.interval_seconds``: metadata and small JSON files only, no Spark, no run launched. Its
tick says what it ingested; its cursor keeps the running totals."""

from __future__ import annotations

import json

from dagster import (
    DefaultSensorStatus,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    sensor,
)

from icelake_assets.audit.scan_reports import IngestResult, ScanReportStore, ingest_dir
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.settings import Settings

SCAN_REPORTS_SENSOR = "icelake_scan_reports"
_TOTALS = ("files", "reports", "skipped_duplicates", "rejected")


def tick_summary(result: IngestResult) -> str:
    text = (
        f"{result.reports} reports from {result.files} files into {result.table}; "
        f"{result.skipped_duplicates} already ingested, {result.rejected} rejected"
    )
    return text + ("; retention ran" if result.retention_ran else "")


def next_cursor(cursor: str | None, result: IngestResult) -> str:
    """Running totals since the sensor started, and the last tick's counts."""
    try:
        totals = json.loads(cursor)["totals"] if cursor else {}
    except (ValueError, KeyError, TypeError):
        totals = {}  # a cursor of another version starts the totals again
    totals = {k: int(totals.get(k, 0)) + int(getattr(result, k)) for k in _TOTALS}
    return json.dumps({"totals": totals, "last": result.to_json()}, sort_keys=True)


def build_scan_reports_sensor(settings: Settings) -> SensorDefinition | None:
    """None unless ``scan_reports.dir`` is set."""
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
        return SensorResult(skip_reason=SkipReason(summary), cursor=next_cursor(context.cursor, result))

    return scan_reports_sensor
