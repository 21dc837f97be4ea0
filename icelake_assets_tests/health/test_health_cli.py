"""`icelake health`: the findings as a table for people outside the UI."""

import pytest

from icelake_assets.cli import main
from icelake_assets.demo.lake import build_demo_lake
from icelake_assets_tests.conftest import catalog_name, new_lake


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    settings = new_lake(tmp_path_factory)
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    return settings


def test_health_prints_status_findings_and_the_ranking(demo, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ICELAKE_HEALTH_CACHE", str(tmp_path / "cache.sqlite"))
    name = catalog_name(demo)
    assert main(["--config", demo.source, "health", "--overview", "--orphans"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any(line.startswith(f"{name}.events.clicks") and "Critical" in line for line in lines)
    assert any(f"{name}.sales.orders" in line and "orphan_files" in line and "WARN" in line for line in lines)
    assert "what to fix first" in out and "pickup_at_day=" in out
    ranking = out.split("what to fix first")[1].splitlines()
    assert f"{name}.taxi.trips" in ranking[3]  # first row after the header lines
    assert (tmp_path / "cache.sqlite").exists()


def test_one_table_and_fail_on(demo, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("ICELAKE_HEALTH_CACHE", "off")
    assert main(["--config", demo.source, "health", "sales.orders", "--fail-on", "warn"]) == 0
    assert main(["--config", demo.source, "health", "events.clicks", "--fail-on", "error"]) == 1
    out = capsys.readouterr().out
    assert "manifest_fragmentation" in out and "taxi.trips" not in out


def test_a_missing_table_is_a_clear_error(demo, capsys):
    assert main(["--config", demo.source, "health", "nope.nothing"]) == 2
    assert "does not exist" in capsys.readouterr().err
