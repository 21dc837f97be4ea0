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


def test_down_catalogs_and_unreadable_tables_are_errors_for_themselves_only(tmp_path, capsys, monkeypatch):
    """Issue 19: every readable table's report is complete, then one error line per catalog or table
    that could not be read (its cause, no secret), and exit 2."""
    from icelake_assets_tests.broken_lake import PASSWORD, broken_lake

    lake = broken_lake(tmp_path, monkeypatch)
    monkeypatch.setenv("ICELAKE_HEALTH_CACHE", "off")
    assert main(["--config", lake.settings.source, "health", "--orphans", "--overview"]) == 2
    out, err = capsys.readouterr()
    rows = [line.split()[0] for line in out.split("\n\n")[0].splitlines()[2:]]
    assert rows == ["good.ns.ok", "other.ns.far"]
    assert "what to fix first" in out
    lines = err.strip().splitlines()
    assert all(line.startswith("icelake: error: ") for line in lines), err
    assert len(lines) == 4, err
    expected = {
        "catalog 'pg'": "Connection refused",
        "catalog 'gone'": "/nonexistent/dir/catalog.db does not exist",
        "table good.ns.truncated": "EOF while parsing",
        "table good.ns.bad_manifests": "utf-8",
    }
    for what, cause in expected.items():
        assert any(what in line and cause in line for line in lines), (what, err)
    assert PASSWORD not in out + err
