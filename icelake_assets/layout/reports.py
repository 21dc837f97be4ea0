"""One Iceberg ``ScanReport`` as the product keeps it, parsed from the JSON that Iceberg's
``ScanReportParser`` writes (what the scan reporter jar puts in ``scan_reports.dir``) or from a REST
catalog's ``ReportMetricsRequest`` body (the same fields plus ``report-type``).

Iceberg sanitizes the filter before reporting it (``ExpressionUtil.sanitize``): literals arrive as
``"(2-digit-int)"``, ``"(date-7-days-ago)"`` or ``"(hash-1a2b3c4d)"``, never the queried values. The
miner and the replay therefore work from each filter's columns and operators, not from its values."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from icelake_assets.types import IcelakeError

SCAN_REPORT = "scan-report"


class ScanReportError(IcelakeError, ValueError):
    """A document that is not a scan report (or is malformed): names the field at fault."""


@dataclass(frozen=True)
class ScanReport:
    """What one planned scan read. ``filter`` is Iceberg's expression JSON (``true`` when unfiltered);
    the counters are Iceberg's ``ScanMetricsResult`` (0 when the engine left one out)."""

    table_name: str
    snapshot_id: int
    filter: Any
    schema_id: int
    projected_field_ids: tuple[int, ...] = ()
    projected_field_names: tuple[str, ...] = ()
    result_data_files: int = 0
    skipped_data_files: int = 0
    total_data_manifests: int = 0
    scanned_data_manifests: int = 0
    skipped_data_manifests: int = 0
    total_file_size_bytes: int = 0
    planning_nanos: int = 0
    metadata: Mapping[str, str] = field(default_factory=dict)
    # When the scan ran, as far as the product knows (the report file's time, else its ingestion):
    # not part of Iceberg's JSON; a layout change's effect splits the reports at the change's time.
    recorded_at: datetime | None = field(default=None, compare=False)

    @property
    def considered_data_files(self) -> int:
        """The data files the scan's manifests listed: read plus skipped by their bounds."""
        return self.result_data_files + self.skipped_data_files

    @property
    def skipped_ratio(self) -> float:
        """The share of the listed data files the filter skipped (0 when none were listed)."""
        total = self.considered_data_files
        return self.skipped_data_files / total if total else 0.0

    def to_json(self) -> dict[str, Any]:
        """The ``ScanReportParser`` form (what :func:`parse_scan_report` reads back)."""
        counters = {
            "result-data-files": self.result_data_files,
            "skipped-data-files": self.skipped_data_files,
            "total-data-manifests": self.total_data_manifests,
            "scanned-data-manifests": self.scanned_data_manifests,
            "skipped-data-manifests": self.skipped_data_manifests,
            "total-file-size-in-bytes": self.total_file_size_bytes,
        }
        metrics: dict[str, Any] = {
            name: {"unit": "bytes" if name.endswith("bytes") else "count", "value": value}
            for name, value in counters.items()
        }
        metrics["total-planning-duration"] = {
            "count": 1,
            "time-unit": "nanoseconds",
            "total-duration": self.planning_nanos,
        }
        return {
            "table-name": self.table_name,
            "snapshot-id": self.snapshot_id,
            "filter": self.filter,
            "schema-id": self.schema_id,
            "projected-field-ids": list(self.projected_field_ids),
            "projected-field-names": list(self.projected_field_names),
            "metrics": metrics,
            "metadata": dict(self.metadata),
        }


def _counter(metrics: Mapping[str, Any], name: str) -> int:
    value = metrics.get(name)
    if value is None:
        return 0
    if isinstance(value, Mapping):
        value = value.get("value", 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScanReportError(f"metrics.{name} must be a count, got {value!r}")
    return value


def _planning_nanos(metrics: Mapping[str, Any]) -> int:
    timer = metrics.get("total-planning-duration")
    if not isinstance(timer, Mapping):
        return 0
    total = timer.get("total-duration", 0)
    unit = str(timer.get("time-unit", "nanoseconds")).lower()
    scale = {"nanoseconds": 1, "microseconds": 1_000, "milliseconds": 1_000_000, "seconds": 10**9}
    return int(total) * scale.get(unit, 1) if isinstance(total, int) else 0


def _required(doc: Mapping[str, Any], name: str, kind: type) -> Any:
    if name not in doc:
        raise ScanReportError(f"a scan report needs {name!r}")
    value = doc[name]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ScanReportError(f"{name!r} must be an integer, got {value!r}")
    if kind is str and (not isinstance(value, str) or not value):
        raise ScanReportError(f"{name!r} must be a non-empty string, got {value!r}")
    return value


def parse_scan_report(doc: Mapping[str, Any] | str | bytes) -> ScanReport:
    """A :class:`ScanReport` from ``ScanReportParser`` JSON or a ``ReportMetricsRequest`` body (whose
    ``report-type`` must be ``scan-report``). Raises :class:`ScanReportError` naming the bad field."""
    if isinstance(doc, str | bytes):
        try:
            doc = json.loads(doc)
        except ValueError as err:
            raise ScanReportError(f"not JSON: {err}") from err
    if not isinstance(doc, Mapping):
        raise ScanReportError(f"a scan report is a JSON object, got {type(doc).__name__}")
    kind = doc.get("report-type", SCAN_REPORT)
    if kind != SCAN_REPORT:
        raise ScanReportError(f"report-type {kind!r} is not a scan report")
    metrics = doc.get("metrics") or {}
    if not isinstance(metrics, Mapping):
        raise ScanReportError("'metrics' must be an object")
    ids = doc.get("projected-field-ids") or []
    names = doc.get("projected-field-names") or []
    metadata = doc.get("metadata") or {}
    return ScanReport(
        table_name=_required(doc, "table-name", str),
        snapshot_id=_required(doc, "snapshot-id", int),
        filter=doc.get("filter", True),
        schema_id=int(doc.get("schema-id", 0)),
        projected_field_ids=tuple(int(i) for i in ids),
        projected_field_names=tuple(str(n) for n in names),
        result_data_files=_counter(metrics, "result-data-files"),
        skipped_data_files=_counter(metrics, "skipped-data-files"),
        total_data_manifests=_counter(metrics, "total-data-manifests"),
        scanned_data_manifests=_counter(metrics, "scanned-data-manifests"),
        skipped_data_manifests=_counter(metrics, "skipped-data-manifests"),
        total_file_size_bytes=_counter(metrics, "total-file-size-in-bytes"),
        planning_nanos=_planning_nanos(metrics),
        metadata={str(k): str(v) for k, v in metadata.items()} if isinstance(metadata, Mapping) else {},
    )
