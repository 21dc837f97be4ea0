"""The ScanReport model (layout/reports.py): Iceberg's ScanReportParser JSON and a REST catalog's
ReportMetricsRequest body parse to the same report; a bad document is refused naming the field."""

from __future__ import annotations

import json

import pytest

from icelake_assets.layout.reports import ScanReport, ScanReportError, parse_scan_report

# As Iceberg 1.10's ScanReportParser writes it (counters as {unit, value}, the timer in nanoseconds,
# literals sanitized).
ICEBERG_JSON = {
    "table-name": "lake.ns.events",
    "snapshot-id": 7421,
    "filter": {"type": "eq", "term": "vendor", "value": "(hash-3f2a10b4)"},
    "schema-id": 0,
    "projected-field-ids": [1, 3],
    "projected-field-names": ["id", "vendor"],
    "metrics": {
        "total-planning-duration": {"count": 1, "time-unit": "nanoseconds", "total-duration": 2_500_000},
        "result-data-files": {"unit": "count", "value": 2},
        "skipped-data-files": {"unit": "count", "value": 18},
        "total-data-manifests": {"unit": "count", "value": 3},
        "scanned-data-manifests": {"unit": "count", "value": 1},
        "skipped-data-manifests": {"unit": "count", "value": 2},
        "total-file-size-in-bytes": {"unit": "bytes", "value": 4096},
    },
    "metadata": {"engine-name": "spark"},
}


def test_iceberg_json_and_a_rest_body_give_the_same_report():
    report = parse_scan_report(json.dumps(ICEBERG_JSON))
    assert report.table_name == "lake.ns.events" and report.snapshot_id == 7421
    assert report.projected_field_names == ("id", "vendor")
    assert (report.result_data_files, report.skipped_data_files, report.considered_data_files) == (2, 18, 20)
    assert report.skipped_ratio == pytest.approx(0.9)
    assert report.total_file_size_bytes == 4096 and report.planning_nanos == 2_500_000
    assert report.metadata == {"engine-name": "spark"}
    rest = parse_scan_report({**ICEBERG_JSON, "report-type": "scan-report"})
    assert rest == report
    assert parse_scan_report(report.to_json()) == report


def test_counters_an_engine_left_out_are_zero_and_unfiltered_scans_are_true():
    doc = {"table-name": "lake.ns.t", "snapshot-id": 1, "schema-id": 0, "metrics": {}}
    report = parse_scan_report(doc)
    assert report.filter is True and report.skipped_ratio == 0.0
    assert report == ScanReport("lake.ns.t", 1, True, 0)


@pytest.mark.parametrize(
    ("doc", "cause"),
    [
        ("{not json", "not JSON"),
        ([1, 2], "a JSON object"),
        ({**ICEBERG_JSON, "report-type": "commit-report"}, "'commit-report' is not a scan report"),
        ({k: v for k, v in ICEBERG_JSON.items() if k != "table-name"}, "needs 'table-name'"),
        ({**ICEBERG_JSON, "snapshot-id": "7"}, "'snapshot-id' must be an integer"),
        (
            {**ICEBERG_JSON, "metrics": {"result-data-files": {"value": -1}}},
            "result-data-files must be a count",
        ),
    ],
)
def test_a_bad_document_is_refused_naming_the_field(doc, cause):
    with pytest.raises(ScanReportError, match=cause):
        parse_scan_report(doc)
