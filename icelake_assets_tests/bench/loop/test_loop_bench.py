"""The loop and fleet benchmarks measure healing, not waiting: their settings must reach the demo
catalog's tables, whose shipped policy (a 1 min writer quiet period, a 30 s sensor) would otherwise
win over the bench's thresholds."""

from bench.loop.loop_bench import SENSOR_INTERVAL, write_settings
from icelake_assets.catalog.connection import TableRef
from icelake_assets.policies import policy_for


def test_the_bench_settings_reach_the_demo_catalogs_tables(tmp_path):
    settings = write_settings(tmp_path)
    policy = policy_for(settings, TableRef("demo", ("fleet",), "t00"), {})
    assert policy.guards.quiet_period_minutes == 0
    assert policy.sensor.interval_seconds == SENSOR_INTERVAL
