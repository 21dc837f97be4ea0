"""The lake overview refreshes by itself after a table's maintenance and after its checks are reported
(a health sensor tick): its automation condition evaluated by Dagster's own evaluator against a real
instance, on the test-scale demo lake (pyiceberg only, no Spark)."""

import pytest
from dagster import (
    AssetMaterialization,
    AssetObservation,
    DagsterInstance,
    DefaultSensorStatus,
    evaluate_automation_conditions,
)

from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.orchestration.checks.asset_checks import OVERVIEW_KEY
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.sensors.health import HEALTH_SENSOR, OVERVIEW_SENSOR
from icelake_assets.types import TableRef
from icelake_assets_tests.conftest import catalog_name, sensor_tick


@pytest.fixture
def lake(make_lake, tmp_path):
    settings = make_lake(extra={"automation": {"sensor_default_status": "stopped"}})
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        yield settings, build_definitions(settings), instance


def test_the_overview_refreshes_after_a_health_tick_and_after_a_tables_maintenance(lake):
    settings, defs, instance = lake
    # Its own sensor, running by default (Dagster's default automation sensor would start stopped),
    # at the lake's sensor interval; no default sensor is added beside it.
    sensor = defs.get_sensor_def(OVERVIEW_SENSOR)
    assert sensor.default_status is DefaultSensorStatus.RUNNING
    health_interval = defs.get_sensor_def(HEALTH_SENSOR).minimum_interval_seconds
    assert health_interval == 300  # the lake's sensor interval
    assert sensor.minimum_interval_seconds == health_interval
    assert "default_automation_condition_sensor" not in {
        s.name for s in defs.get_repository_def().sensor_defs
    }

    first = evaluate_automation_conditions(defs, instance)
    assert first.total_requested == 0  # nothing happened yet

    # A health sensor tick reports every table's checks (no run): the overview is requested, once.
    tick = sensor_tick(defs, settings, instance, HEALTH_SENSOR)
    assert tick.asset_events
    for event in tick.asset_events:
        instance.report_runless_asset_event(event)
    after_checks = evaluate_automation_conditions(defs, instance, cursor=first.cursor)
    assert after_checks.get_num_requested(OVERVIEW_KEY) == 1 and after_checks.total_requested == 1
    quiet = evaluate_automation_conditions(defs, instance, cursor=after_checks.cursor)
    assert quiet.total_requested == 0  # handled: not requested again until a table changes

    # A table's maintenance (its materialization) requests it again: an unpartitioned table's, and
    # one partition of a partitioned table's (trips: day partitions).
    name = catalog_name(settings)
    clicks = table_asset_key(TableRef(name, ("events",), "clicks"))
    instance.report_runless_asset_event(AssetMaterialization(asset_key=clicks))
    after_run = evaluate_automation_conditions(defs, instance, cursor=quiet.cursor)
    assert after_run.get_num_requested(OVERVIEW_KEY) == 1
    trips = table_asset_key(TableRef(name, ("taxi",), "trips"))
    day = defs.resolve_assets_def(trips).partitions_def.get_last_partition_key()
    handled = evaluate_automation_conditions(defs, instance, cursor=after_run.cursor)
    assert handled.total_requested == 0
    instance.report_runless_asset_event(AssetMaterialization(asset_key=trips, partition=day))
    after_partition = evaluate_automation_conditions(defs, instance, cursor=handled.cursor)
    assert after_partition.get_num_requested(OVERVIEW_KEY) == 1

    # The maintenance sensor's observation of a table on each tick (deferred, nothing to do) does not.
    settled = evaluate_automation_conditions(defs, instance, cursor=after_partition.cursor)
    instance.report_runless_asset_event(AssetObservation(asset_key=clicks, metadata={"outcome": "deferred"}))
    observed = evaluate_automation_conditions(defs, instance, cursor=settled.cursor)
    assert settled.total_requested == 0 and observed.total_requested == 0


def test_a_table_maintained_while_the_overview_runs_brings_another_refresh(lake):
    """The overview's run reads the lake once. A table maintained after the overview was requested, whose
    run ends before the overview's within one tick of its sensor (once a minute), must bring another
    refresh: its own materialization reset the condition and the table's change was lost (the refresh
    after the last run of a heal then waited on a health sensor report)."""
    settings, defs, instance = lake
    clicks = table_asset_key(TableRef(catalog_name(settings), ("events",), "clicks"))
    first = evaluate_automation_conditions(defs, instance)
    instance.report_runless_asset_event(AssetMaterialization(asset_key=clicks))
    requested = evaluate_automation_conditions(defs, instance, cursor=first.cursor)
    assert requested.get_num_requested(OVERVIEW_KEY) == 1

    instance.report_runless_asset_event(AssetMaterialization(asset_key=clicks))  # maintained again
    instance.report_runless_asset_event(AssetMaterialization(asset_key=OVERVIEW_KEY))  # then it ends
    again = evaluate_automation_conditions(defs, instance, cursor=requested.cursor)
    assert again.get_num_requested(OVERVIEW_KEY) == 1
    assert evaluate_automation_conditions(defs, instance, cursor=again.cursor).total_requested == 0


def test_the_overview_sensor_ticks_at_most_once_a_minute_whatever_the_sensors_interval(make_lake):
    """Its condition is evaluated over every table's asset and checks: a lake whose sensors tick
    every 10 s evaluates it every minute (automation.overview_min_interval_seconds)."""
    fast = make_lake(thresholds={"sensor": {"interval_seconds": 10}})
    build_demo_lake(fast, catalog=catalog_name(fast), scale="test")
    defs = build_definitions(fast)
    assert defs.get_sensor_def(HEALTH_SENSOR).minimum_interval_seconds == 10
    assert defs.get_sensor_def(OVERVIEW_SENSOR).minimum_interval_seconds == 60
    slower = make_lake(
        thresholds={"sensor": {"interval_seconds": 10}},
        extra={"automation": {"overview_min_interval_seconds": 120}},
    )
    build_demo_lake(slower, catalog=catalog_name(slower), scale="test")
    assert build_definitions(slower).get_sensor_def(OVERVIEW_SENSOR).minimum_interval_seconds == 120
