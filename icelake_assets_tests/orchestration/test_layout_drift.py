"""Layout drift healed by the maintenance sensor's rewrite (issue 39), on real Spark through Dagster.

An unpartitioned table is compacted, then gains an identity partition field; new appends land and
are compacted in their partitions. The one compacted file of the old spec is left: 1 of 4 files
drift (ratio 0.25, max 0.1), layout_drift fails. Before, nothing acted on it and the table stayed
Critical; now the sensor's next run rewrites that file alone into the current spec."""

import pyarrow as pa
import pytest
from dagster import DagsterInstance

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.health.score import HealthStatus
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.planning.health import evaluate
from icelake_assets_tests.conftest import catalog_name, sensor_tick
from icelake_assets_tests.orchestration.sensor_runs import maintain

APPENDS = 20
CATS = ("c0", "c1", "c2")


def _batch(start: int) -> pa.Table:
    ids = list(range(start, start + 3 * len(CATS)))
    return pa.table(
        {"id": pa.array(ids, pa.int64()), "cat": pa.array([CATS[i % len(CATS)] for i in range(len(ids))])}
    )


@pytest.fixture
def instance(tmp_path):
    with DagsterInstance.local_temp(str(tmp_path)) as inst:
        yield inst


def test_the_sensor_heals_layout_drift_left_by_a_partition_evolution(make_lake, instance):
    thresholds = {
        "mode": "enforce",
        "guards": {"quiet_period_minutes": 0},
        "small_files": {"max_files_per_partition": 8, "target_file_size_bytes": 1024 * 1024},
    }
    settings = make_lake(thresholds=thresholds)
    policy = settings.thresholds
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), _batch(0).schema)
    for i in range(APPENDS):
        table.append(_batch(i * 100))
    tick, _ = maintain(settings, instance, None)  # 20 small files compacted into one
    table.refresh()
    with table.update_spec() as update:
        update.add_identity("cat")
    for i in range(APPENDS):
        table.append(_batch(10_000 + i * 100))
    tick, _ = maintain(settings, instance, tick.cursor)  # the new spec's 3 partitions compacted
    table.refresh()
    stats = compute_table_stats(table, policy)
    rows = table.scan().to_arrow().num_rows
    assert (stats.old_spec_files, stats.data_files, stats.drift_ratio) == (1, 4, 0.25)
    assert not evaluate(stats, policy).finding("layout_drift").passed

    tick, md = maintain(settings, instance, tick.cursor)
    assert md["why/rewrite"].value.startswith("acted: 1 of 4 files drift (ratio 0.25, max 0.1)")
    assert md["effect/rewrite"].value.startswith("effective: layout_drift passes")
    table.refresh()
    # Only the old spec's file was rewritten: the where left the compacted partitions alone.
    summary = table.current_snapshot().summary
    assert summary.operation.value == "replace"
    assert (summary["deleted-data-files"], summary["added-data-files"]) == ("1", str(len(CATS)))
    after = compute_table_stats(table, policy)
    health = evaluate(after, policy)
    assert health.finding("layout_drift").passed and health.status is HealthStatus.HEALTHY
    specs = {task.file.spec_id for task in table.scan().plan_files()}
    assert specs == {table.spec().spec_id}
    assert table.scan().to_arrow().num_rows == rows == 2 * APPENDS * 9
    # Healed: the next tick has nothing to do.
    defs = build_definitions(settings)
    assert sensor_tick(defs, settings, instance, cursor=tick.cursor).run_requests == []
