"""A catalog that is down is an error for its tables only, and so is a table that cannot be read
(issue 19), through the code location's own load, real Dagster runs and sensor ticks on real SQLite
catalogs (tests/broken_lake.py): the healthy catalog's tables load, are checked and launched; what
is left out is named with its cause where the UI shows it. No Spark."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetCheckEvaluation, AssetKey, DagsterInstance
from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType

from icelake_assets.orchestration.checks.asset_checks import HEALTH_CHECK, HEALTH_JOB, OVERVIEW_KEY
from icelake_assets.orchestration.checks.lake_access import CATALOGS_CHECK
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.project import build_definitions, load_definitions
from icelake_assets.orchestration.sensors.health import HEALTH_SENSOR
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG
from icelake_assets_tests.broken_lake import PASSWORD, PASSWORD_ENV, broken_lake
from icelake_assets_tests.conftest import sensor_tick


@pytest.fixture
def instance(tmp_path):
    (tmp_path / "dagster_home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "dagster_home")) as inst:
        yield inst


def _checks(result) -> dict[tuple[str, str], AssetCheckEvaluation]:
    return {(e.asset_key.to_user_string(), e.check_name): e for e in result.get_asset_check_evaluations()}


def test_the_code_location_loads_the_working_catalogs_and_shows_what_is_left_out(
    tmp_path, monkeypatch, instance
):
    lake = broken_lake(tmp_path / "lake", monkeypatch)
    monkeypatch.setenv("ICELAKE_CONFIG", lake.settings.source)
    defs = load_definitions(DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION))
    keys = {k.to_user_string() for a in defs.assets or () for k in getattr(a, "keys", ())}
    assert {"good/ns/ok", "good/ns/bad_manifests", "other/ns/far"} <= keys
    assert not any(k.startswith(("pg/", "gone/")) or k == "good/ns/truncated" for k in keys)

    # At load: the overview asset's description names each catalog and table left out, and why.
    description = defs.resolve_assets_def(OVERVIEW_KEY).descriptions_by_key[OVERVIEW_KEY]
    assert "catalog 'pg'" in description and "Connection refused" in description
    assert "catalog 'gone'" in description and "/nonexistent/dir/catalog.db does not exist" in description
    assert "table good.ns.truncated" in description and "EOF while parsing" in description
    assert PASSWORD not in description

    # A health run: the working tables are checked; a table whose manifests cannot be read does not
    # stop the overview, which names it, nor the catalogs check on the overview, which names the rest.
    result = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance, raise_on_error=False)
    overview = result.asset_materializations_for_node("icelake__health_overview")
    assert overview, "the overview materializes although one table cannot be evaluated"
    left_out = overview[-1].metadata["left_out"].value
    assert "good.ns.bad_manifests" in str(left_out) and "utf-8" in str(left_out)
    checks = _checks(result)
    assert checks[("good/ns/ok", HEALTH_CHECK)].description
    assert checks[("other/ns/far", HEALTH_CHECK)].description
    lake_check = checks[("icelake/health_overview", CATALOGS_CHECK)]
    assert not lake_check.passed and lake_check.severity.value == "ERROR"
    for named in ("catalog 'pg'", "catalog 'gone'", "good.ns.truncated"):
        assert named in (lake_check.description or "")
    assert PASSWORD not in str(lake_check.metadata) and PASSWORD not in (lake_check.description or "")


def test_the_load_warns_through_dagster_and_succeeds(tmp_path, monkeypatch):
    lake = broken_lake(tmp_path / "lake", monkeypatch)
    env = {**os.environ, "ICELAKE_CONFIG": lake.settings.source, PASSWORD_ENV: PASSWORD}
    env.pop("DAGSTER_HOME", None)
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "dagster"),
            "definitions",
            "validate",
            "-m",
            "icelake_assets.definitions",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout + done.stderr)  # Dagster's log colours
    assert done.returncode == 0, output
    warnings = [line for line in output.splitlines() if " - WARNING - " in line]
    assert any("catalog 'pg'" in line and "Connection refused" in line for line in warnings), output
    assert any("catalog 'gone'" in line for line in warnings), output
    assert any("good.ns.truncated" in line for line in warnings), output
    assert PASSWORD not in output


def test_sensors_and_checks_go_on_with_the_working_catalog_when_another_goes_down(
    tmp_path, monkeypatch, instance
):
    lake = broken_lake(
        tmp_path / "lake", monkeypatch, files=25, mode="enforce", guards={"quiet_period_minutes": 0}
    )
    defs = build_definitions(lake.settings)
    lake.take_down_other()  # up when the definitions loaded, down at tick and check time

    tick = sensor_tick(defs, lake.settings, instance)
    assert [r.tags[TABLE_TAG] for r in tick.run_requests] == [str(lake.ok)]
    outcomes = {
        e.asset_key.to_user_string(): (e.metadata["sensor/outcome"].value, e.metadata["sensor/reason"].value)
        for e in tick.asset_events
    }
    assert outcomes["other/ns/far"][0] == "error" and "other.db does not exist" in outcomes["other/ns/far"][1]
    assert outcomes["good/ns/bad_manifests"][0] == "error"

    # The health sensor reports the working table's checks, and the health of each table it cannot
    # evaluate fails with the cause (once: the next tick reports nothing new).
    health = sensor_tick(defs, lake.settings, instance, sensor=HEALTH_SENSOR)
    reported = {(e.asset_key.to_user_string(), e.check_name): e for e in health.asset_events}
    assert reported[("good/ns/ok", HEALTH_CHECK)].description
    for ref, cause in ((lake.far, "other.db does not exist"), (lake.bad_manifests, "utf-8")):
        failed = reported[(table_asset_key(ref).to_user_string(), HEALTH_CHECK)]
        assert not failed.passed and failed.severity.value == "ERROR"
        assert "not evaluated" in (failed.description or "") and cause in (failed.description or "")
    again = sensor_tick(defs, lake.settings, instance, sensor=HEALTH_SENSOR, cursor=health.cursor)
    assert not again.asset_events

    # A health run: the working catalog's checks evaluate; the catalogs check names the one down.
    result = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance, raise_on_error=False)
    checks = _checks(result)
    assert checks[("good/ns/ok", HEALTH_CHECK)].description
    assert ("other/ns/far", HEALTH_CHECK) not in checks
    lake_check = checks[("icelake/health_overview", CATALOGS_CHECK)]
    assert not lake_check.passed and "catalog 'other'" in (lake_check.description or "")
    assert result.asset_materializations_for_node("icelake__health_overview")
    assert AssetKey(["good", "ns", "ok"]) in {e.asset_key for e in result.get_asset_check_evaluations()}
