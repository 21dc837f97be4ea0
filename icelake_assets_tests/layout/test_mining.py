"""Mining a table's scan reports: filtered columns by kind and count, selectivity from the reports'
counters, projected columns, the heaviest query shapes; other tables' and unreadable reports apart."""

from __future__ import annotations

from typing import Any

from icelake_assets.layout.filters import PredicateKind
from icelake_assets.layout.mining import mine, same_table
from icelake_assets.layout.reports import ScanReport

CITY = {"type": "eq", "term": "city", "value": "(hash-1a2b3c4d)"}
WEEK = {
    "type": "and",
    "left": {"type": "gt-eq", "term": "ts", "value": "(date-7-days-ago)"},
    "right": {"type": "in", "term": "city", "values": ["(hash-1a2b3c4d)", "(hash-00000001)"]},
}


def report(
    filter_: Any, read: int, skipped: int, size: int, table: str = "lake.ns.trips", **kw: Any
) -> ScanReport:
    return ScanReport(
        table,
        1,
        filter_,
        0,
        result_data_files=read,
        skipped_data_files=skipped,
        total_file_size_bytes=size,
        **kw,
    )


def reports() -> list[ScanReport]:
    return [
        *[report(CITY, 2, 8, 200, projected_field_names=("city", "fare")) for _ in range(3)],
        *[report(WEEK, 5, 5, 500, projected_field_names=("ts",)) for _ in range(2)],
        report(True, 10, 0, 1000),
        report({"type": "and", "left": True}, 10, 0, 1000),  # not an expression: counted apart
        report(CITY, 1, 0, 1, table="lake.ns.other"),
    ]


def test_columns_by_kind_and_count():
    usage = mine(reports(), "lake.ns.trips")
    assert (usage.reports, usage.unparsed, usage.unfiltered) == (7, 1, 1)
    city, ts = usage.columns
    assert (city.column, city.scans, ts.column, ts.scans) == ("city", 5, "ts", 2)
    assert {(k.kind, k.scans) for k in city.kinds} == {(PredicateKind.EQUALITY, 3), (PredicateKind.IN, 2)}
    assert ts.scans_of(PredicateKind.RANGE) == 2 and ts.selective_scans == 2
    assert city.bytes_read == 3 * 200 + 2 * 500
    # city's scans read 3*2 + 2*5 = 16 of 3*10 + 2*10 = 50 listed files.
    assert abs(city.skipped_ratio - (1 - 16 / 50)) < 1e-9


def test_selectivity_shapes_and_projection():
    usage = mine(reports(), "lake.ns.trips")
    assert (usage.files_read, usage.files_considered) == (3 * 2 + 2 * 5 + 10, 50 + 10)
    assert abs(usage.measured_skipped_ratio - (1 - 26 / 60)) < 1e-9
    # Heaviest first (a tie: more scans first): the week (2 x 500), unfiltered (1000), the city (3 x 200).
    assert [(s.text, s.scans, s.bytes_read) for s in usage.shapes] == [
        ("(ts gt-eq (date-7-days-ago) and city in ((hash-1a2b3c4d), (hash-00000001)))", 2, 1000),
        ("true", 1, 1000),
        ("city eq (hash-1a2b3c4d)", 3, 600),
    ]
    assert usage.shapes[2].skipped_ratio == 0.8 and usage.shapes[2].weight == 600
    assert [(p.column, p.scans) for p in usage.projected] == [("city", 3), ("fare", 3), ("ts", 2)]


def test_the_same_filter_as_text_or_document_is_one_shape():
    import json

    usage = mine([report(CITY, 1, 1, 10), report(json.dumps(CITY), 1, 1, 10)], "ns.trips")
    assert len(usage.shapes) == 1 and usage.shapes[0].scans == 2


def test_no_reports_and_table_names():
    usage = mine(reports(), "lake.ns.nothing")
    assert (usage.reports, usage.columns, usage.shapes, usage.measured_skipped_ratio) == (0, (), (), 0.0)
    assert same_table("spark_catalog.ns.t", "lake.ns.t") is False
    assert same_table("ns.t", "lake.ns.t") and same_table("LAKE.NS.T", "lake.ns.t")
