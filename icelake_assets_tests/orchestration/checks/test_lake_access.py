"""A catalog that is down, or a table whose metadata.json is truncated, is an error for itself only
(issue 19): the code location loads the other catalog's tables and says which catalog and table are
left out and why (the overview's description and its ``catalogs_reachable`` check); ``icelake
health`` reports every readable table, then the problems, and exits 2. Real SQLite catalogs, a real
Dagster instance; no Spark."""

from __future__ import annotations

import pyarrow as pa
import pytest
import yaml
from dagster import AssetKey, DagsterInstance

from icelake_assets import cli
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.catalog.discovery import discover_lake
from icelake_assets.demo.lake import local_path
from icelake_assets.orchestration.checks.asset_checks import HEALTH_JOB, OVERVIEW_KEY
from icelake_assets.orchestration.checks.lake_access import CATALOGS_CHECK
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.settings import load_settings
from icelake_assets_tests.conftest import TEST_THRESHOLDS


@pytest.fixture
def lake(tmp_path):
    (tmp_path / "lake" / "warehouse").mkdir(parents=True)
    config = tmp_path / "icelake.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "catalogs": {
                    "good": {
                        "type": "sql",
                        "uri": "sqlite:///lake/catalog.db",
                        "warehouse": "lake/warehouse",
                    },
                    "gone": {"type": "sql", "uri": "sqlite:///missing/catalog.db", "warehouse": "lake/gone"},
                },
                "thresholds": TEST_THRESHOLDS,
            }
        )
    )
    settings = load_settings(config)
    cat = open_catalog(settings, "good", create=True)
    cat.create_namespace("ns")
    for name in ("ok", "broken"):
        t = cat.create_table(("ns", name), pa.schema([("id", pa.int64())]))
        t.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    broken = cat.load_table(("ns", "broken"))
    path = local_path(broken.metadata_location)
    path.write_bytes(path.read_bytes()[:40])  # a truncated metadata.json
    return settings


def test_discovery_names_the_down_catalog_and_the_unreadable_table_and_keeps_the_rest(lake):
    found = discover_lake(lake)
    assert [str(t.ref) for t in found.tables] == ["good.ns.ok"]
    (down,) = found.down_catalogs
    assert down.catalog == "gone" and "does not exist" in down.cause
    (unreadable,) = found.unreadable_tables
    assert str(unreadable.table) == "good.ns.broken" and "cannot be read" in unreadable.cause


def test_the_code_location_loads_and_says_which_catalog_is_down(lake, tmp_path):
    defs = build_definitions(lake)
    keys = {k.to_user_string() for a in defs.assets or () for k in getattr(a, "keys", ())}
    assert "good/ns/ok" in keys and not any(k.startswith("gone/") for k in keys)
    overview = defs.resolve_assets_def(OVERVIEW_KEY)
    description = overview.descriptions_by_key[OVERVIEW_KEY]
    assert "catalog 'gone'" in description and "good.ns.broken" in description

    (tmp_path / "home").mkdir()
    instance = DagsterInstance.local_temp(str(tmp_path / "home"))
    result = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance, raise_on_error=False)
    check = next(e for e in result.get_asset_check_evaluations() if e.check_name == CATALOGS_CHECK)
    assert not check.passed and check.severity.value == "ERROR"
    assert "catalog 'gone'" in check.description and "good.ns.broken" in check.description
    assert check.metadata["catalogs/down"].value == 1 and check.metadata["tables/unreadable"].value == 1
    # the working catalog's table was checked in the same run
    ok = [e for e in result.get_asset_check_evaluations() if e.asset_key == AssetKey(["good", "ns", "ok"])]
    assert ok


def test_icelake_health_reports_the_readable_tables_then_the_problems(lake, capsys):
    code = cli.main(["--config", lake.source, "health"])
    out, err = capsys.readouterr()
    assert code == 2
    assert "good.ns.ok" in out
    assert "catalog 'gone'" in err and "does not exist" in err and "good.ns.broken" in err
