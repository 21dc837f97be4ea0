"""`icelake layout apply TABLE` on a real lake (SQLite catalog, pyiceberg, reports in the scan
reports table): a recommended sort is applied and audited; nothing recommended is refused naming why
(exit 1, nothing committed); --keys sets the operator's columns; a second change waits out
layout.min_days_between_changes unless --force."""

from __future__ import annotations

import json

import pytest

from icelake_assets.audit.scan_reports import ScanReportStore, ingest_documents
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.cli import main
from icelake_assets.layout.table_layout import sort_keys
from icelake_assets_tests.layout.workloads import clicks_lake, user_scans


@pytest.fixture
def lake(tmp_path_factory):
    settings, ref, size = clicks_lake(tmp_path_factory)
    return settings, ref, size


def _ingest(settings, scans, name: str = "r.json") -> None:
    body = "\n".join(json.dumps(s.to_json()) for s in scans).encode()
    ingest_documents(ScanReportStore.from_settings(settings), [(name, body, None)])


def _keys(settings, ref) -> tuple[str, ...]:
    return sort_keys(load_table(open_catalog(settings, ref.catalog), ref))


def test_a_recommended_sort_is_applied_and_audited(lake, capsys):
    settings, ref, size = lake
    _ingest(settings, user_scans(ref, size))
    assert main(["--config", settings.source, "layout", "apply", str(ref), "--by", "ana", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["new_keys"] == ["user"] and doc["old_keys"] == [] and doc["choice"]["recommend"] is True
    assert doc["predicted"]["skipped_fraction"] > 0.5
    assert _keys(settings, ref) == ("user",)
    [record] = [r for r in AuditLog.from_settings(settings).records(str(ref)) if r.op == "change_layout"]
    assert record.decision == "acted" and record.results["by"] == "ana" and record.trigger == "manual"
    # Again at once: the keys are the table's now, and another change must wait 7 days.
    assert main(["--config", settings.source, "layout", "apply", str(ref), "--keys", "id"]) == 1
    assert "min_days_between_changes is 7" in capsys.readouterr().err
    assert _keys(settings, ref) == ("user",)
    assert main(["--config", settings.source, "layout", "apply", str(ref), "--keys", "id", "--force"]) == 0
    assert _keys(settings, ref) == ("id",) and "sort order user -> id" in capsys.readouterr().out


def test_nothing_recommended_is_refused_naming_why_and_commits_nothing(lake, capsys):
    settings, ref, _ = lake
    assert main(["--config", settings.source, "layout", "apply", str(ref)]) == 1
    assert "nothing to apply: no scan reports of the table" in capsys.readouterr().err
    assert _keys(settings, ref) == ()
    assert main(["--config", settings.source, "layout", "apply", str(ref), "--keys", "nope"]) == 1
    assert "no column nope" in capsys.readouterr().err
    assert not [r for r in AuditLog.from_settings(settings).records(str(ref)) if r.op == "change_layout"]
