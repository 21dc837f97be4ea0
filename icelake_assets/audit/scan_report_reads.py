"""Reading a table's scan reports back from the scan reports table (audit/scan_reports.py writes
them): the last ``layout.reports_days`` days, each report once (an input ingested twice at the same
moment by the sensor and a command is counted once, by its report id), with the time it ran."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from pyiceberg.expressions import GreaterThanOrEqual

from icelake_assets.audit.scan_reports import ScanReportStore
from icelake_assets.layout.mining import same_table
from icelake_assets.layout.reports import ScanReport
from icelake_assets.policies import resolve_policy
from icelake_assets.settings import Settings
from icelake_assets.types import TableRef


def load_reports(settings: Settings, ref: TableRef, now: datetime | None = None) -> list[ScanReport]:
    """``ref``'s reports ingested in the last ``layout.reports_days`` days, from the scan reports table
    ([] when that table does not exist yet)."""
    store = ScanReportStore.from_settings(settings)
    table = store.table(create=False)
    if table is None or table.current_snapshot() is None:
        return []
    days = resolve_policy(settings, ref).policy.layout.reports_days
    since = (now or datetime.now(UTC)) - timedelta(days=days)
    rows = table.scan(row_filter=GreaterThanOrEqual(term="ingested_at", value=since)).to_arrow().to_pylist()
    # A file ingested twice at once (the sensor and a command racing) is counted once: by report id.
    unique = {row["report_id"]: row for row in rows if same_table(str(row["table_name"]), str(ref))}
    return [_report(row) for row in unique.values()]


def _report(row: dict[str, Any]) -> ScanReport:
    metadata = json.loads(row.get("metadata_json") or "{}")
    return ScanReport(
        table_name=row["table_name"],
        snapshot_id=row["snapshot_id"],
        filter=json.loads(row["filter_json"]),
        schema_id=row["schema_id"],
        projected_field_ids=tuple(row.get("projected_field_ids") or ()),
        projected_field_names=tuple(row.get("projected_field_names") or ()),
        result_data_files=row["result_data_files"],
        skipped_data_files=row["skipped_data_files"],
        total_data_manifests=row["total_data_manifests"],
        scanned_data_manifests=row["scanned_data_manifests"],
        skipped_data_manifests=row["skipped_data_manifests"],
        total_file_size_bytes=row["total_file_size_bytes"],
        planning_nanos=row["planning_nanos"],
        metadata={str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, dict) else {},
        recorded_at=row.get("reported_at") or row.get("ingested_at"),
    )
