"""`icelake layout show TABLE` and the MCP read tool `layout_usage` on a real lake (SQLite catalog,
pyiceberg): reports from an iterable or from the icelake.scan_reports table (none yet: [] and a
message), the usage printed as tables and the choice with its reason, the same as JSON."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from icelake_assets.agents import read_tools
from icelake_assets.audit.scan_reports import ScanReportStore, ingest_documents
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.operate.layout_view import (
    LAYOUT_SCHEMA,
    format_layout,
    layout_json,
    layout_report,
    load_reports,
)
from icelake_assets.settings import Settings
from icelake_assets_tests.conftest import catalog_name, new_lake
from icelake_assets_tests.layout.workloads import SCHEMA, clicks_lake, user_scans


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Settings, TableRef, int]:
    return clicks_lake(tmp_path_factory)


def test_usage_and_choice_from_reports(lake):
    settings, ref, size = lake
    report = layout_report(settings, ref, user_scans(ref, size))
    assert report.choice.recommend is True, report.choice.reason
    assert (report.choice.old_keys, report.choice.new_keys, report.choice.strategy) == ((), ("user",), "sort")
    doc = layout_json(report)
    assert doc["schema"] == LAYOUT_SCHEMA and doc["table"] == str(ref) and doc["reports"] == 20
    assert doc["columns"] == [
        {
            "column": "user",
            "scans": 20,
            "kinds": {"equality": 20},
            "bytes_read": 20 * size,
            "skipped_ratio": 0.0,
            "transforms": [],
        }
    ]
    assert doc["queries"][0]["filter"] == "user eq (hash-1a2b3c4d)"
    assert [c["layout"] for c in doc["candidates"]] == ["current (arrival order)", "sort(user)"]
    assert doc["candidates"][0]["files_read"] > 8 > 2 > doc["candidates"][1]["files_read"]
    assert doc["choice"]["recommend"] is True and doc["choice"]["new_keys"] == ["user"]
    json.dumps(doc)  # plain JSON
    text = format_layout(report)
    assert "column  scans  how" in text and "user    20     equality 20" in text
    assert "sort(user)" in text and text.splitlines()[-1].startswith("recommend: sort(user)")


def test_no_reports_table_yet_is_an_empty_list(lake):
    settings, ref, _ = lake
    assert load_reports(settings, ref) == []
    report = layout_report(settings, ref, [])
    assert report.choice.recommend is False and "no scan reports" in format_layout(report)


def test_reports_from_the_scan_reports_table_and_the_mcp_tool(tmp_path_factory):
    settings = new_lake(tmp_path_factory)
    name = catalog_name(settings)
    catalog = open_catalog(settings, name, create=True)
    catalog.create_namespace("ns")
    catalog.create_table(("ns", "t"), schema=SCHEMA).append(
        pa.table({"id": [1, 2], "user": ["a", "b"]}, schema=SCHEMA)
    )
    ref = TableRef(name, ("ns",), "t")
    mine_, other = user_scans(ref, 100, 3), user_scans(TableRef(name, ("ns",), "other"), 100, 2)
    body = "\n".join(json.dumps(r.to_json()) for r in mine_ + other).encode()
    ingest_documents(ScanReportStore.from_settings(settings), [("reports-1.json", body, None)])
    loaded = load_reports(settings, ref)
    assert loaded == mine_
    doc = read_tools.layout_usage(settings, f"{name}.ns.t")
    assert doc["schema"] == LAYOUT_SCHEMA and doc["reports"] == 3
    assert doc["choice"]["recommend"] is False  # two rows in one file: nothing to skip


def test_the_command_prints_the_same_document(lake, capsys):
    from icelake_assets.cli import main

    settings, ref, _ = lake
    assert main(["--config", str(settings.source), "layout", "show", str(ref), "--json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert (
        doc["schema"] == LAYOUT_SCHEMA
        and doc["reports"] == 0
        and f"no scan reports of {ref} yet" in captured.err
    )
    assert main(["--config", str(settings.source), "layout", "show", str(ref)]) == 0
    assert "keep the layout: no scan reports of the table in the last 30 days" in capsys.readouterr().out
