"""A partitioned table's table-level checks name their failing partitions at a glance, on a real lake
(SQLite catalog, pyiceberg) and a real Dagster instance: ``small_files``, ``delete_files``,
``layout_drift`` and the health summary carry how many partitions fail, the worst ones by Dagster key
with their numbers and a link to the asset's partitions page, whether a check run or the health
sensor reports them; the overview asset counts the unhealthy partitions; an unpartitioned table's
checks carry none of it."""

from __future__ import annotations

import pytest
from dagster import DagsterInstance

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.operate.partition_health import read_partition_health
from icelake_assets.orchestration.checks.asset_checks import OVERVIEW_KEY
from icelake_assets.orchestration.checks.partition_summary import partitions_page, summarize, summary_metadata
from icelake_assets.orchestration.checks.results import HEALTH_CHECK
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.project import HEALTH_JOB, build_definitions
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.sensors import partition_reports
from icelake_assets.orchestration.sensors.health import HEALTH_SENSOR
from icelake_assets.planning.partition_health import PartitionReport
from icelake_assets.types import TableRef
from icelake_assets_tests.conftest import sensor_tick
from icelake_assets_tests.operate.test_partition_health import degraded_lake

SUMMARISED = ("small_files", "delete_files", "layout_drift", HEALTH_CHECK)
ADDED = {"failing_partitions", "worst_partition_keys", "partitions_page"}
# days 2024-03-02 and 2024-03-05: 7 small files each, max 5 per partition (1.4 times the threshold)
WORST = "2024-03-02 (WARN, 1.4x: 7 files), 2024-03-05 (WARN, 1.4x: 7 files)"


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    settings, days, flat = degraded_lake(tmp_path_factory)
    return settings, days, flat, build_definitions(settings)


def _by_table(evaluations) -> dict[tuple[str, str], dict]:
    return {(e.asset_key.to_user_string(), e.check_name): e.metadata for e in evaluations}


def _assert_summarised(found: dict[tuple[str, str], dict], days: str, flat: str) -> None:
    key = table_asset_key(TableRef.parse(days))
    page = f"/assets/{'/'.join(key.path)}?view=partitions"
    assert page == partitions_page(key) and page.startswith("/assets/") and page.count("/") == 4
    name, flat_name = key.to_user_string(), table_asset_key(TableRef.parse(flat)).to_user_string()
    for check in ("small_files", HEALTH_CHECK):
        md = found[(name, check)]
        assert md["failing_partitions"].value == 2
        assert md["worst_partition_keys"].value == WORST
        assert md["partitions_page"].value == page
    for check in ("delete_files", "layout_drift"):  # none failing: the count (plotted) and the link
        md = found[(name, check)]
        assert md["failing_partitions"].value == 0 and "worst_partition_keys" not in md
        assert md["partitions_page"].value == page
    # small_files keeps its table of Iceberg partitions by file count beside the keys
    assert len(found[(name, "small_files")]["worst_partitions"].value.records) == 6
    # The unpartitioned table fails small_files too, and its results carry none of it.
    assert "failing_checks" in found[(flat_name, HEALTH_CHECK)]
    for check in SUMMARISED:
        assert not ADDED & set(found[(flat_name, check)])


def test_a_check_run_names_the_failing_partitions_and_the_overview_counts_them(lake, tmp_path):
    settings, days, flat, defs = lake
    icelake = {"icelake": IcelakeResource(config_path=settings.source)}
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        result = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance, resources=icelake)
        assert result.success
        _assert_summarised(_by_table(result.get_asset_check_evaluations()), days, flat)

        (overview,) = [m for m in result.get_asset_materialization_events() if m.asset_key == OVERVIEW_KEY]
        md = overview.materialization.metadata
        assert md["unhealthy_partitions"].value == 2  # plotted: the lake's sum
        rows = {r.data["table"]: r.data for r in md["ranking"].value.records}
        assert rows[days]["unhealthy_partitions"] == 2 and rows[flat]["unhealthy_partitions"] is None
        assert "| unhealthy partitions |" in md["overview"].value


def test_the_health_sensor_names_them_grading_the_partitions_once(lake, tmp_path, monkeypatch):
    settings, days, flat, defs = lake
    # The table-level checks' grading serves the partition reports: a second grading would fail here.
    monkeypatch.setattr(partition_reports, "partition_health", _not_again)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        tick = sensor_tick(defs, settings, instance, HEALTH_SENSOR)
    _assert_summarised(_by_table(tick.asset_events), days, flat)
    assert tick.run_requests  # the partition reports were compared and asked for


def _not_again(*_args, **_kwargs) -> PartitionReport:
    raise AssertionError("the partitions were graded a second time")


def test_the_worst_are_capped_and_the_rest_counted(lake):
    settings, days, _, _ = lake
    ref = TableRef.parse(days)
    report, _, _ = read_partition_health(settings, ref, open_catalog(settings, ref.catalog))
    one = summarize(report, top=1)
    assert set(one) == set(SUMMARISED)
    assert (one["small_files"].partitions, one["small_files"].failing) == (6, 2)
    assert [w.key for w in one[HEALTH_CHECK].worst] == ["2024-03-02"]
    md = summary_metadata(one["small_files"], table_asset_key(ref))
    assert md["worst_partition_keys"].value == "2024-03-02 (WARN, 1.4x: 7 files) and 1 more"
