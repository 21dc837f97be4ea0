"""Row retention through the sensor and Dagster on real Spark (issue 40): the first expiry waits for
approval, then the approved run's expire_data drops the day partitions wholly past the cut-off
without rewriting a file, and deletes rows of an unpartitioned table; exactly the expected ids remain
(pyiceberg and Spark)."""

from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest
from dagster import DagsterInstance
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import LongType, NestedField, TimestampType

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.operate.plan import plan_table
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.planning.guards import APPROVAL_TAG
from icelake_assets.planning.health import evaluate
from icelake_assets.types import SNAPSHOT_OP, SNAPSHOT_RUN_ID
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, sensor_tick

KEEP_DAYS = 7
DAYS = range(1, 11)  # rows 1..10 days old
PER_DAY = 3
NOW = datetime.now(UTC)


def _rows(k: int) -> pa.Table:
    """Day ``k``'s rows: ids k*100.., 30 minutes more than k days old (a run within 30 min agrees)."""
    ts = NOW - timedelta(days=k, minutes=30)
    ids = [k * 100 + i for i in range(PER_DAY)]
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array([ts.replace(tzinfo=None)] * PER_DAY, pa.timestamp("us")),
        }
    )


@pytest.fixture(scope="module")
def instance(tmp_path_factory):
    with DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster"))) as inst:
        yield inst


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    from icelake_assets_tests.conftest import new_lake

    thresholds = {
        **TEST_THRESHOLDS,
        "manifests": {"max_count": 50},
        "mode": "propose",
        "guards": {"quiet_period_minutes": 0},
        "retention": {"column": "ts", "keep_days": KEEP_DAYS},
    }
    settings = new_lake(tmp_path_factory, thresholds)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestampType()))
    by_day = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day")
    )
    days = cat.create_table(("ns", "by_day"), schema, partition_spec=by_day)
    flat = cat.create_table(("ns", "flat"), schema)
    for k in DAYS:
        days.append(_rows(k))
    flat.append(pa.concat_tables([_rows(k) for k in DAYS]))  # one file across the cut-off
    return settings, cat


def _ids_by_pyiceberg(table) -> set[int]:
    table.refresh()
    return set(table.scan().to_arrow()["id"].to_pylist())


def _ids_by_spark(spark, ref: TableRef) -> set[int]:
    spark.sql(f"REFRESH TABLE {table_identifier(ref)}")
    return {r.id for r in spark.sql(f"SELECT id FROM {table_identifier(ref)}").collect()}


def _approved_run(settings, instance, ref: TableRef):
    """The table's maintenance launched approved (as `icelake approve` does), executed in process."""
    defs = build_definitions(settings)
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance,
        asset_selection=[table_asset_key(ref)],
        tags={APPROVAL_TAG: "true"},
        raise_on_error=True,
    )
    [event] = result.get_asset_materialization_events()
    return result.run_id, event.materialization.metadata


def test_the_first_expiry_waits_for_approval(lake, instance):
    settings, cat = lake
    table = cat.load_table(("ns", "by_day"))
    policy = settings.thresholds
    facts = compute_table_stats(table, policy).data_retention
    assert facts is not None and facts.metadata_only and not facts.expired_before
    expected = sum(
        PER_DAY for k in DAYS if NOW - timedelta(days=k, minutes=30) < datetime.fromisoformat(facts.cutoff)
    )
    assert facts.expired_rows == expected > 0

    tick = sensor_tick(build_definitions(settings), settings, instance)
    assert tick.run_requests == []  # nothing launched
    ref = TableRef(catalog_name(settings), ("ns",), "by_day")
    plan = plan_table(settings, ref)
    assert plan.guards == "hold" and "first expiry" in plan.guards_reason and plan.awaiting_approval
    shown = plan.to_json()["data_expiry"]
    assert shown["rows"] == expected and shown["files"] == facts.expired_files and shown["first_expiry"]
    assert shown["metadata_only"] and shown["bytes"] == facts.expired_bytes


def test_approved_day_partitions_past_the_cut_off_drop_without_a_rewrite(lake, instance, spark_for):
    settings, cat = lake
    ref = TableRef(catalog_name(settings), ("ns",), "by_day")
    table = cat.load_table(("ns", "by_day"))
    cutoff = datetime.fromisoformat(compute_table_stats(table, settings.thresholds).data_retention.cutoff)
    kept_days = [k for k in DAYS if NOW - timedelta(days=k, minutes=30) >= cutoff]
    kept_files = {
        t.file.file_path
        for t in table.scan(row_filter=f"ts >= '{cutoff.replace(tzinfo=None).isoformat()}'").plan_files()
    }

    run_id, md = _approved_run(settings, instance, ref)

    assert md["why/expire_data"].value.startswith("acted"), md["why/expire_data"].value
    table.refresh()
    summary = table.current_snapshot().summary
    assert summary.operation.value == "delete"
    assert summary.get("added-data-files") is None and int(summary["deleted-data-files"]) == len(DAYS) - len(
        kept_days
    )
    assert (summary.get(SNAPSHOT_RUN_ID), summary.get(SNAPSHOT_OP)) == (run_id, "expire_data")
    assert {t.file.file_path for t in table.scan().plan_files()} == kept_files  # kept files untouched
    expected = {k * 100 + i for k in kept_days for i in range(PER_DAY)}
    assert _ids_by_pyiceberg(table) == expected == _ids_by_spark(spark_for(settings), ref)
    after = compute_table_stats(table, settings.thresholds)
    assert evaluate(after, settings.thresholds).finding("data_retention").passed
    assert after.data_retention.expired_before  # the next expiry needs no approval


def test_approved_rows_of_an_unpartitioned_table_are_deleted(lake, instance, spark_for):
    settings, cat = lake
    ref = TableRef(catalog_name(settings), ("ns",), "flat")
    table = cat.load_table(("ns", "flat"))
    facts = compute_table_stats(table, settings.thresholds).data_retention
    assert facts.straddling_files == 1 and not facts.metadata_only

    _, md = _approved_run(settings, instance, ref)

    assert md["why/expire_data"].value.startswith("acted"), md["why/expire_data"].value
    table.refresh()
    summary = table.current_snapshot().summary
    assert (
        int(summary["deleted-records"]) - int(summary.get("added-records", 0)) == PER_DAY * 4
    )  # 7..10 days old
    expected = {k * 100 + i for k in range(1, KEEP_DAYS) for i in range(PER_DAY)}  # 1..6 days old kept
    assert _ids_by_pyiceberg(table) == expected == _ids_by_spark(spark_for(settings), ref)
