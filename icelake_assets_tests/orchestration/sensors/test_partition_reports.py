"""The health sensor reports checks per partition only where files changed (real sensor ticks, a real
Dagster instance, a real day-partitioned lake, no Spark): the first tick asks one run for every
partition, an unchanged tick for none, a tick after an append into one day for that day only; a
report run that failed is asked for again though the table's metadata did not change."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance, DagsterRun, DagsterRunStatus
from dagster._core.utils import make_new_run_id

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.orchestration.checks.partition_report_job import (
    PARTITION_REPORT_JOB,
    REPORT_OP,
    REPORT_TAG,
)
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.sensors.health import HEALTH_SENSOR
from icelake_assets.orchestration.sensors.health_cursor import HealthCursor
from icelake_assets_tests.conftest import catalog_name, sensor_tick
from icelake_assets_tests.health.conftest import batch
from icelake_assets_tests.operate.test_partition_health import degraded_lake

DAYS = [f"2024-03-0{d}" for d in range(1, 7)]


@pytest.fixture
def lake(tmp_path_factory, tmp_path):
    settings, days, flat = degraded_lake(tmp_path_factory)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        yield settings, days, build_definitions(settings), instance


def _tick(lake, cursor=None):
    settings, _, defs, instance = lake
    return sensor_tick(defs, settings, instance, HEALTH_SENSOR, cursor)


def _asked(tick) -> dict[str, list[str]]:
    """The partitions the tick's one report run names, by table (none: no run asked for)."""
    requests = tick.run_requests or []
    assert len(requests) <= 1
    return requests[0].run_config["ops"][REPORT_OP]["config"]["tables"] if requests else {}


def _run(lake, tick, tables: dict[str, list[str]] | None = None):
    """The run the daemon launches for the tick's request (``tables``: another config, same request)."""
    _, _, defs, instance = lake
    [request] = tick.run_requests
    config = request.run_config if tables is None else {"ops": {REPORT_OP: {"config": {"tables": tables}}}}
    return defs.resolve_job_def(PARTITION_REPORT_JOB).execute_in_process(
        instance=instance, run_config=config, tags=request.tags, raise_on_error=False
    )


def test_the_first_tick_reports_every_partition_an_unchanged_one_none_an_append_its_day(lake):
    settings, days, defs, instance = lake
    assert defs.get_sensor_def(HEALTH_SENSOR).job_name == PARTITION_REPORT_JOB
    first = _tick(lake)
    assert _asked(first) == {days: DAYS}  # the partitioned table only, every partition
    assert {e.check_name for e in first.asset_events if not e.check_name.endswith("_by_partition")}
    assert not any(e.partition for e in first.asset_events)  # the table-level checks, run-less as before
    assert REPORT_TAG in first.run_requests[0].tags
    result = _run(lake, first)
    assert result.success and len(result.get_asset_check_evaluations()) == 3 * len(DAYS)

    unchanged = _tick(lake, first.cursor)
    assert not unchanged.run_requests and not unchanged.asset_events
    assert "no table changed" in unchanged.skip_message
    assert HealthCursor.loads(unchanged.cursor).partitions[days].keys() == set(DAYS)

    table = open_catalog(settings, catalog_name(settings)).load_table(("ns", "days"))
    table.append(batch(range(5000, 5010), 3))  # a file more in 2024-03-04
    appended = _tick(lake, unchanged.cursor)
    assert _asked(appended) == {days: ["2024-03-04"]}
    assert {e.asset_key.to_user_string() for e in appended.asset_events} == {days.replace(".", "/")}
    evaluations = _run(lake, appended).get_asset_check_evaluations()
    assert {(e.partition, e.check_name) for e in evaluations} == {
        ("2024-03-04", n)
        for n in ("small_files_by_partition", "delete_files_by_partition", "layout_drift_by_partition")
    }
    assert not _tick(lake, appended.cursor).run_requests


def test_a_report_run_that_failed_or_never_ran_is_asked_for_again(lake):
    settings, days, defs, instance = lake
    first = _tick(lake)
    # The run of that request fails (a table it cannot read): its partitions are due again, though
    # the table's metadata did not change since.
    missing = f"{days.rsplit('.', 1)[0]}.nope"
    assert not _run(lake, first, {missing: ["2024-03-01"]}).success
    again = _tick(lake, first.cursor)
    assert _asked(again) == {days: DAYS} and not again.asset_events  # the table's checks not again

    # A request whose run never appeared (the daemon did not launch it): asked for again too.
    third = _tick(lake, again.cursor)
    assert _asked(third) == {days: DAYS}
    # While its run is in progress, a tick does not ask twice; once it succeeded, nothing is left.
    run = instance.add_run(
        DagsterRun(
            job_name=PARTITION_REPORT_JOB,
            run_id=make_new_run_id(),
            status=DagsterRunStatus.STARTED,
            tags=dict(third.run_requests[0].tags),
        )
    )
    during = _tick(lake, third.cursor)
    assert not during.run_requests and HealthCursor.loads(during.cursor).pending
    instance.report_run_failed(run)  # it ended badly after all: asked for again
    assert _asked(_tick(lake, during.cursor)) == {days: DAYS}
