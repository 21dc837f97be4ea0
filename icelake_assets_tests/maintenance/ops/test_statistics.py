"""Column statistics through a real maintenance run on real Spark (issue 33, item 1).

The table a new user tries: day-partitioned, 40 small appends of 500 rows (20,000 rows), mode
enforce. One run compacts it and leaves the current snapshot a Puffin file with an NDV sketch per
column (read back by pyiceberg, and by Spark's optimizer), plus partition statistics; expiry removes
the statistics of the snapshots it expires, and orphan removal never counts them."""

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from dagster import DagsterInstance
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.puffin import PuffinFile
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestamptzType

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.known_tables import known_tables
from icelake_assets.demo.lake import age_all_files
from icelake_assets.health.findings import Severity
from icelake_assets.health.orphans import scan_table_orphans
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark import procedures
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets.planning.table import decide_table
from icelake_assets.types import SNAPSHOT_RUN_ID
from icelake_assets_tests.conftest import catalog_name, new_lake

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestamptzType()),
    NestedField(3, "user_id", LongType()),
    NestedField(4, "page", StringType()),
    NestedField(5, "amount", DoubleType()),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
DAY0 = np.datetime64("2024-01-01T00:00:00", "us")


def _batch(rng: np.random.Generator, first: int, rows: int) -> pa.Table:
    ids = np.arange(first, first + rows)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(DAY0 + (ids % 5).astype("timedelta64[D]"), pa.timestamp("us", tz="UTC")),
            "user_id": pa.array(rng.integers(0, 3_000, rows), pa.int64()),
            "page": pa.array(rng.choice([f"/p/{i}" for i in range(50)], rows)),
            "amount": pa.array(np.round(rng.gamma(2.0, 30.0, rows), 2), pa.float64()),
        }
    )


def _puffin(table, path: str) -> PuffinFile:
    with table.io.new_input(path).open() as stream:
        return PuffinFile(stream.read())


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    thresholds = {
        "mode": "enforce",
        "guards": {"quiet_period_minutes": 0},
        "small_files": {"max_files_per_partition": 20},
    }
    settings = new_lake(tmp_path_factory, thresholds)
    name = catalog_name(settings)
    catalog = open_catalog(settings, name, create=True)
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "events"), SCHEMA, partition_spec=SPEC)
    rng = np.random.default_rng(33)
    for c in range(40):
        table.append(_batch(rng, c * 500, 500))
    ref = TableRef(name, ("ns",), "events")
    before = compute_table_stats(table, settings.thresholds)
    planned = decide_table(before, settings.thresholds, "enforce")
    with DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster"))) as instance:
        [result] = execute_maintenance(build_definitions(settings), instance, raise_on_error=True)
        [mat] = result.get_asset_materialization_events()
    table.refresh()
    return {
        "settings": settings,
        "catalog": catalog,
        "ref": ref,
        "table": table,
        "before": before,
        "planned": planned,
        "md": mat.materialization.metadata,
    }


def test_a_table_without_statistics_fails_the_check_and_plans_compute_statistics(lake):
    from icelake_assets.planning.statistics import statistics_finding

    before = lake["before"]
    finding = statistics_finding(before, lake["settings"].thresholds)
    assert finding.severity is Severity.WARN and "no statistics" in finding.summary
    assert finding.metrics["rows"] == 20_000 and finding.metrics["columns_selected"] == 5
    decision = next(d for d in lake["planned"].decisions if d.op == "compute_statistics")
    assert decision.act and lake["planned"].acting[-1] == "compute_statistics"


def test_after_maintenance_the_current_snapshot_has_a_puffin_ndv_blob_per_column(lake):
    table = lake["table"]
    current = table.current_snapshot()
    assert current.summary.operation.value == "replace"  # the run compacted the 40 appends
    assert current.summary[SNAPSHOT_RUN_ID]  # the compaction names its run
    [stats_file] = [s for s in table.metadata.statistics if s.snapshot_id == current.snapshot_id]
    puffin = _puffin(table, stats_file.statistics_path)
    blobs = {b.fields[0]: b for b in puffin.footer.blobs}
    assert sorted(blobs) == [1, 2, 3, 4, 5]
    assert {b.type for b in blobs.values()} == {"apache-datasketches-theta-v1"}
    data = table.scan().to_arrow()
    for field in SCHEMA.fields:
        exact = pc.count_distinct(data[field.name]).as_py()
        estimate = int(blobs[field.field_id].properties["ndv"])
        assert abs(estimate - exact) <= 0.03 * exact, (field.name, estimate, exact)
    # Partitioned: the partition statistics of the same snapshot are registered too.
    assert [p.snapshot_id for p in table.metadata.partition_statistics] == [current.snapshot_id]
    # The run shows it, and its effect is proven on the metadata.
    md = lake["md"]
    assert md["effect/statistics"].value.startswith("effective:")
    assert md["statistics/file"].value == stats_file.statistics_path
    assert md["statistics/ndv"].value["id"] == int(blobs[1].properties["ndv"])
    after = compute_table_stats(table, lake["settings"].thresholds)
    assert after.statistics.current and after.statistics.ndv.keys() == blobs.keys()


def test_the_audit_records_the_statistics_files(lake):
    table = lake["table"]
    [op] = [r for r in AuditLog.from_settings(lake["settings"]).records() if r.op == "compute_statistics"]
    assert op.decision == "acted" and "no statistics" in op.reason
    res = op.results
    assert res["statistics_file"] == table.metadata.statistics[0].statistics_path
    assert res["statistics_snapshot_id"] == table.current_snapshot().snapshot_id
    assert res["registered"] is True and res["ndv_read_back"] == 5
    assert res["columns"] == ["id", "ts", "user_id", "page", "amount"]
    assert res["partition_statistics_file"] == table.metadata.partition_statistics[0].statistics_path


def test_spark_cost_based_optimizer_reads_the_ndv(lake, spark_for):
    """Spark 3.5 gets a column's distinct count from Iceberg's scan statistics (with the cost-based
    optimizer on), for the current snapshot's statistics file."""
    spark = spark_for(lake["settings"])
    ref = lake["ref"]
    spark.conf.set("spark.sql.cbo.enabled", "true")
    try:
        plan = spark.table(procedures.table_identifier(ref))._jdf.queryExecution().optimizedPlan()
        columns = plan.stats().attributeStats()  # Scala: Map[Attribute, ColumnStat]
        output = [plan.output().apply(i) for i in range(plan.output().size())]
        seen = {
            a.name(): int(columns.get(a).get().distinctCount().get())
            for a in output
            if columns.get(a).isDefined()
        }
    finally:
        spark.conf.set("spark.sql.cbo.enabled", "false")
    assert seen == lake["md"]["statistics/ndv"].value


def test_expiry_and_orphan_removal_keep_the_statistics_consistent(lake, spark_for):
    from icelake_assets.maintenance.ops.statistics import compute_statistics

    settings, table, ref = lake["settings"], lake["table"], lake["ref"]
    policy = settings.thresholds
    first = table.metadata.statistics[0].statistics_path
    first_partition = table.metadata.partition_statistics[0].statistics_path
    # 3,000 new rows (15 % > max_stale_ratio 10 %): the statistics are stale, the op computes them again.
    table.append(_batch(np.random.default_rng(1), 20_000, 3_000))
    spark = spark_for(settings)
    done = compute_statistics(lambda: spark, ref, table, policy, lambda t: compute_table_stats(t, policy))
    assert done.acted and "changed 15%" in done.reason and done.registered
    table.refresh()
    assert {s.statistics_path for s in table.metadata.statistics} == {first, done.statistics_file}
    # Orphan removal: every file is old, and no statistics file is an orphan.
    age_all_files(table, 5)
    listing = known_tables(settings)
    scan = scan_table_orphans(lake["catalog"], ref, table, policy.orphans.older_than_hours, listing)
    assert scan.orphans == []
    # Expiry of every snapshot but the current removes their statistics, in metadata and in storage.
    procedures.expire_snapshots(spark, ref, datetime.now(UTC), 1)
    table.refresh()
    assert [s.statistics_path for s in table.metadata.statistics] == [done.statistics_file]
    assert [s.snapshot_id for s in table.metadata.partition_statistics] == [
        table.current_snapshot().snapshot_id
    ]
    for gone in (first, first_partition):
        assert not table.io.new_input(gone).exists()
    assert table.io.new_input(done.statistics_file).exists()
    scan = scan_table_orphans(
        lake["catalog"], ref, table, policy.orphans.older_than_hours, known_tables(settings)
    )
    assert scan.orphans == []
