"""Scan reports ingested into icelake.scan_reports on a real SQLite catalog: exactly once (across a
crash between the append and the deletions), malformed files set aside with their cause, retention by
age at most once a day."""

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from icelake_assets.audit.scan_reports import (
    RETENTION_PROPERTY,
    ScanReportStore,
    ingest_dir,
    ingest_documents,
    reports_days,
)
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.layout.reports import ScanReport

DAY = 24 * 3600.0


def _report(table: str = "lake.db.events", skipped: int = 3) -> ScanReport:
    return ScanReport(
        table_name=table,
        snapshot_id=7,
        filter={"type": "eq", "term": "country", "value": "(2-digit-int)"},
        schema_id=0,
        projected_field_ids=(1, 2),
        projected_field_names=("id", "country"),
        result_data_files=1,
        skipped_data_files=skipped,
        total_file_size_bytes=1234,
        planning_nanos=5_000_000,
    )


@pytest.fixture
def lake(make_lake, tmp_path):
    reports = tmp_path / "reports"
    settings = make_lake(extra={"scan_reports": {"dir": str(reports)}})
    open_catalog(settings, next(iter(settings.catalogs)), create=True)
    return settings, reports


def _write(folder: Path, name: str, text: str) -> Path:
    day = folder / "20260301"
    day.mkdir(parents=True, exist_ok=True)
    (day / name).write_text(text)
    return day / name


def _rows(settings) -> list[dict]:
    table = ScanReportStore.from_settings(settings).table(create=False)
    return [] if table is None else table.scan().to_arrow().to_pylist()


def test_two_files_become_two_rows_and_a_second_ingest_adds_nothing(lake):
    settings, folder = lake
    _write(folder, "a.json", json.dumps(_report().to_json()))
    _write(folder, "b.json", json.dumps(_report("lake.db.other", skipped=0).to_json()))
    # A reporter's file still being written (hidden) is neither read nor removed.
    _write(folder, ".c.json.tmp", "{")
    first = ingest_dir(settings)
    assert (first.files, first.reports, first.skipped_duplicates, first.rejected) == (2, 2, 0, 0)
    rows = sorted(_rows(settings), key=lambda r: r["table_name"])
    assert [r["table_name"] for r in rows] == ["lake.db.events", "lake.db.other"]
    assert rows[0]["skipped_data_files"] == 3 and rows[0]["projected_field_names"] == ["id", "country"]
    assert json.loads(rows[0]["filter_json"])["term"] == "country"
    assert rows[0]["source_file"].endswith("/20260301/a.json") and rows[0]["reported_at"] is not None
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == [".c.json.tmp"]
    again = ingest_dir(settings)
    assert (again.files, again.reports) == (0, 0) and len(_rows(settings)) == 2


def test_a_crash_after_the_append_neither_loses_nor_doubles_a_report(lake, monkeypatch):
    settings, folder = lake
    _write(folder, "a.json", json.dumps(_report().to_json()))
    _write(folder, "b.json", json.dumps(_report().to_json()))
    # The process dies after its commit, before it deletes the files.
    from icelake_assets.audit.scan_reports import ReportFolder

    monkeypatch.setattr(ReportFolder, "delete", lambda self, paths: None)
    assert ingest_dir(settings).reports == 2
    assert len(list(folder.rglob("*.json"))) == 2
    monkeypatch.undo()
    result = ingest_dir(settings)
    assert (result.files, result.reports, result.skipped_duplicates) == (2, 0, 2)
    assert len(_rows(settings)) == 2 and not list(folder.rglob("*.json"))


def test_a_malformed_file_is_set_aside_with_its_cause_and_the_others_ingested(lake):
    settings, folder = lake
    _write(folder, "good.json", json.dumps(_report().to_json()))
    _write(folder, "bad.json", json.dumps({"snapshot-id": 1}))
    result = ingest_dir(settings)
    assert (result.reports, result.rejected) == (1, 1)
    rejected = folder / "rejected" / "20260301" / "bad.json"
    assert json.loads(rejected.read_text()) == {"snapshot-id": 1}
    assert "table-name" in (folder / "rejected" / "20260301" / "bad.json.error.txt").read_text()
    assert not (folder / "20260301" / "bad.json").exists()
    assert ingest_dir(settings).rejected == 0  # not retried


def test_retention_deletes_only_rows_older_than_the_days_at_most_daily(lake):
    settings, _ = lake
    store = ScanReportStore.from_settings(settings)
    now = time.time()
    for age_days, name in ((40, "old"), (29, "recent"), (0, "today")):
        doc = json.dumps(_report(f"lake.db.{name}").to_json()).encode()
        ingest_documents(store, [(name, doc, None)], now=now - age_days * DAY)
    assert store.apply_retention(30, now)
    assert sorted(r["table_name"] for r in _rows(settings)) == ["lake.db.recent", "lake.db.today"]
    table = store.table(create=False)
    assert table is not None and int(table.properties[RETENTION_PROPERTY]) == int(now * 1000)
    # Within a day of the last run, nothing runs (even with a shorter window).
    assert not store.apply_retention(1, now + 3600)
    assert len(_rows(settings)) == 2
    assert store.apply_retention(2, now + DAY + 1)
    assert [r["table_name"] for r in _rows(settings)] == ["lake.db.today"]
    ingested = [r["ingested_at"] for r in _rows(settings)]
    assert ingested[0] >= datetime.fromtimestamp(now - 1, tz=UTC)


def test_the_days_kept_are_the_lakes_layout_reports_days(make_lake):
    assert reports_days(make_lake()) == 30
    assert reports_days(make_lake(thresholds={"layout": {"reports_days": 7}})) == 7
