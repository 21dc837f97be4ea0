"""icelake_scan_reports: defined only when scan_reports.dir is set; a tick ingests the folder, says so
and keeps running totals in its cursor."""

import json

from dagster import DagsterInstance, build_sensor_context

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.layout.reports import ScanReport
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.sensors.scan_reports import SCAN_REPORTS_SENSOR, build_scan_reports_sensor


def test_the_sensor_exists_only_with_a_folder(make_lake, tmp_path):
    off = make_lake()
    assert SCAN_REPORTS_SENSOR not in {s.name for s in build_definitions(off, tables=[]).sensors or ()}
    on = make_lake(extra={"scan_reports": {"dir": str(tmp_path / "r"), "interval_seconds": 30}})
    sensor = next(s for s in build_definitions(on, tables=[]).sensors or () if s.name == SCAN_REPORTS_SENSOR)
    assert sensor.minimum_interval_seconds == 30


def test_a_tick_ingests_and_counts(make_lake, tmp_path):
    folder = tmp_path / "r" / "20260301"
    folder.mkdir(parents=True)
    settings = make_lake(extra={"scan_reports": {"dir": str(tmp_path / "r")}})
    open_catalog(settings, next(iter(settings.catalogs)), create=True)
    for i in range(3):
        (folder / f"{i}.json").write_text(json.dumps(ScanReport(f"c.db.t{i}", 1, True, 0).to_json()))
    (folder / "bad.json").write_text("[]")
    sensor = build_scan_reports_sensor(settings)
    assert sensor is not None
    with DagsterInstance.ephemeral() as instance:
        resources = {"icelake": IcelakeResource(config_path=settings.source)}
        context = build_sensor_context(instance=instance, resources=resources)
        result = sensor.evaluate_tick(context)
        assert "3 reports from 4 files" in result.skip_message and "1 rejected" in result.skip_message
        cursor = json.loads(result.cursor)
        assert cursor["totals"] == {"files": 4, "reports": 3, "skipped_duplicates": 0, "rejected": 1}
        again = sensor.evaluate_tick(
            build_sensor_context(instance=instance, resources=resources, cursor=result.cursor)
        )
        assert "0 reports from 0 files" in again.skip_message
        assert json.loads(again.cursor)["totals"]["reports"] == 3


def _tick_with_reports(settings, folder, scans, cursor=None):
    """Write ``scans`` as one report file, then one tick of the sensor over the lake's tables."""
    from icelake_assets.catalog.discovery import discover_tables

    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{len(list(folder.iterdir()))}.json").write_text(
        "\n".join(json.dumps(s.to_json()) for s in scans)
    )
    sensor = build_scan_reports_sensor(settings, discover_tables(settings))
    assert sensor is not None
    with DagsterInstance.ephemeral() as instance:
        resources = {"icelake": IcelakeResource(config_path=settings.source)}
        return sensor.evaluate_tick(
            build_sensor_context(instance=instance, resources=resources, cursor=cursor)
        )


def test_a_table_that_gained_reports_gets_its_layout_check_and_a_proposal(tmp_path_factory, tmp_path):
    from icelake_assets.audit.store import AuditLog
    from icelake_assets.orchestration.checks.layout_checks import LAYOUT_CHECK
    from icelake_assets_tests.layout.workloads import clicks_lake, user_scans

    folder = tmp_path / "r"
    settings, ref, size = clicks_lake(tmp_path_factory, extra={"scan_reports": {"dir": str(folder)}})
    result = _tick_with_reports(settings, folder / "20260301", user_scans(ref, size))
    [evaluation] = result.asset_events
    assert evaluation.check_name == LAYOUT_CHECK and evaluation.passed is False
    assert evaluation.metadata["sort_keys_chosen"].value == "user"
    assert evaluation.metadata["apply"].value == f"`icelake layout apply {ref}`"
    [proposed] = [r for r in AuditLog.from_settings(settings).records(str(ref)) if r.op == "change_layout"]
    assert proposed.decision == "proposed" and proposed.results["choice"]["reports_used"] == 20
    cursor = json.loads(result.cursor)
    assert cursor["pending"] == [] and str(ref) in cursor["chosen"]
    # New reports within choose_every_hours: ingested, the choice waits in the cursor.
    again = _tick_with_reports(settings, folder / "20260302", user_scans(ref, size, 2), result.cursor)
    assert again.asset_events == [] and json.loads(again.cursor)["pending"] == [str(ref)]


def test_in_enforce_with_layout_auto_the_sensor_applies_the_sort(tmp_path_factory, tmp_path):
    from icelake_assets.catalog.connection import load_table
    from icelake_assets.layout.table_layout import sort_keys
    from icelake_assets_tests.layout.workloads import clicks_lake, user_scans

    folder = tmp_path / "r"
    thresholds = {"mode": "enforce", "layout": {"auto": True}}
    settings, ref, size = clicks_lake(tmp_path_factory, thresholds, {"scan_reports": {"dir": str(folder)}})
    result = _tick_with_reports(settings, folder / "20260301", user_scans(ref, size))
    [evaluation] = result.asset_events
    assert evaluation.passed and evaluation.metadata["applied"].value.startswith("applied: sort order user")
    table = load_table(open_catalog(settings, ref.catalog), ref)
    assert sort_keys(table) == ("user",)
