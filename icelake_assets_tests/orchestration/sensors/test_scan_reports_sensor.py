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
