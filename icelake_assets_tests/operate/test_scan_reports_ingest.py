"""`icelake layout ingest FILE ...`: REST ReportMetricsRequest bodies, JSON arrays and JSON lines,
stdin; the same content twice adds nothing; a bad input appends nothing and names itself."""

import io
import json

import pytest

from icelake_assets.audit.scan_reports import ScanReportStore
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.cli import main
from icelake_assets.layout.reports import ScanReport, ScanReportError
from icelake_assets.operate.scan_reports import INGEST_SCHEMA, ingest_inputs


def _body(table: str, skipped: int) -> dict:
    report = ScanReport(table, 11, {"type": "lt", "term": "ts", "value": "(date-7-days-ago)"}, 0)
    doc = report.to_json()
    doc["metrics"]["skipped-data-files"]["value"] = skipped
    return {"report-type": "scan-report", **doc}  # the REST form: a ReportMetricsRequest


@pytest.fixture
def lake(make_lake):
    settings = make_lake()
    open_catalog(settings, next(iter(settings.catalogs)), create=True)
    return settings


def _rows(settings) -> list[dict]:
    table = ScanReportStore.from_settings(settings).table(create=False)
    return [] if table is None else table.scan().to_arrow().to_pylist()


def test_rest_bodies_json_lines_and_stdin_are_ingested_once(lake, tmp_path):
    body = tmp_path / "body.json"
    body.write_text(json.dumps(_body("cat.db.a", 4)))
    lines = tmp_path / "server.jsonl"
    lines.write_text("\n".join(json.dumps(_body(f"cat.db.l{i}", i)) for i in range(3)) + "\n\n")
    stdin = io.BytesIO(json.dumps([_body("cat.db.s1", 1), _body("cat.db.s2", 2)]).encode())
    result = ingest_inputs(lake, [str(body), str(lines), "-"], stdin=stdin)
    assert (result.files, result.reports, result.skipped_duplicates) == (3, 6, 0)
    rows = {r["table_name"]: r for r in _rows(lake)}
    assert sorted(rows) == ["cat.db.a", "cat.db.l0", "cat.db.l1", "cat.db.l2", "cat.db.s1", "cat.db.s2"]
    assert rows["cat.db.a"]["skipped_data_files"] == 4
    assert json.loads(rows["cat.db.l1"]["filter_json"])["type"] == "lt"
    assert rows["cat.db.s1"]["source_file"].startswith("stdin@sha256:")
    again = ingest_inputs(lake, [str(body), str(lines)])
    assert (again.reports, again.skipped_duplicates) == (0, 2) and len(_rows(lake)) == 6


def test_a_bad_input_appends_nothing_and_is_named(lake, tmp_path):
    good, bad = tmp_path / "good.json", tmp_path / "bad.jsonl"
    good.write_text(json.dumps(_body("cat.db.a", 1)))
    bad.write_text(json.dumps(_body("cat.db.b", 1)) + "\n{not json\n")
    with pytest.raises(ScanReportError, match=r"bad\.jsonl.*line 2"):
        ingest_inputs(lake, [str(good), str(bad)])
    commit = tmp_path / "commit.json"
    commit.write_text(json.dumps({"report-type": "commit-report", "table-name": "t", "snapshot-id": 1}))
    with pytest.raises(ScanReportError, match="not a scan report"):
        ingest_inputs(lake, [str(commit)])
    assert _rows(lake) == []


def test_the_command_prints_its_counts_as_json(lake, tmp_path, capsys):
    body = tmp_path / "body.json"
    body.write_text(json.dumps(_body("cat.db.a", 1)))
    assert main(["--config", lake.source, "layout", "ingest", "--json", str(body)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["schema"] == INGEST_SCHEMA and out["reports"] == 1 and out["table"].endswith("scan_reports")
    assert main(["--config", lake.source, "layout", "ingest", str(body)]) == 0
    assert "0 reports from 1 inputs" in capsys.readouterr().out
    # Without FILEs: the configured folder, which this lake has none of.
    assert main(["--config", lake.source, "layout", "ingest"]) == 2
    assert "scan_reports.dir is not set" in capsys.readouterr().err
