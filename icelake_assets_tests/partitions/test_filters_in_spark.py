"""The filters through real Spark on real tables: each selects exactly its partition's rows, and
rewrite_data_files under a bucket filter compacts exactly that bucket."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    IdentityTransform,
)
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

from icelake_assets.catalog.connection import TableRef
from icelake_assets.demo.lake import append
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark import procedures
from icelake_assets.partitions.filters import PartitionScope
from icelake_assets.partitions.layout import partition_layout
from icelake_assets_tests.conftest import catalog_name
from icelake_assets_tests.partitions.conftest import TRICKY, timestamps


@pytest.fixture(scope="module")
def spark_tables(lake):
    """``ns.tricky``: identity(category) over TRICKY values plus day(ts) on timestamptz;
    ``ns.bucketed``: bucket(4, id), three files per bucket."""
    settings, cat = lake
    schema = Schema(
        NestedField(1, "id", LongType()),
        NestedField(2, "ts", TimestamptzType()),
        NestedField(3, "category", StringType()),
    )
    tricky = cat.create_table(
        ("ns", "tricky"),
        schema=schema,
        partition_spec=PartitionSpec(
            PartitionField(3, 1000, IdentityTransform(), "category"),
            PartitionField(2, 1001, DayTransform(), "ts_day"),
        ),
    )
    n = len(TRICKY)
    append(
        tricky,
        pa.table(
            {
                "id": pa.array(range(2 * n), pa.int64()),
                "ts": timestamps(*[(1 + i % 2, 23) for i in range(2 * n)]),
                "category": pa.array(TRICKY + TRICKY, pa.string()),
            }
        ),
    )
    bucketed = cat.create_table(
        ("ns", "bucketed"),
        schema=Schema(NestedField(1, "id", LongType())),
        partition_spec=PartitionSpec(PartitionField(1, 1000, BucketTransform(4), "id_bucket")),
    )
    for c in range(3):
        append(bucketed, pa.table({"id": pa.array(range(c * 40, c * 40 + 40), pa.int64())}))
    return settings, tricky, bucketed


def test_each_identity_filter_selects_exactly_its_rows_in_spark(spark_tables, spark_for):
    settings, tricky, _ = spark_tables
    spark = spark_for(settings)
    layout = partition_layout(tricky)
    ref = TableRef(catalog_name(settings), ("ns",), "tricky")
    rows = tricky.scan().to_arrow().to_pylist()
    for i, value in enumerate(TRICKY):  # each value has one row on each day; days alternate
        day = ("2024-01-01", "2024-01-02")[i % 2]
        where = PartitionScope(layout, ref.catalog, frozenset({(value, day)})).where()
        got = spark.sql(f"SELECT id FROM {procedures.table_identifier(ref)} WHERE {where}").collect()
        want = {r["id"] for r in rows if r["category"] == value and r["ts"].strftime("%Y-%m-%d") == day}
        assert {r.id for r in got} == want and len(want) == 1, (value, day, where)


def test_rewrite_under_a_bucket_filter_compacts_exactly_that_bucket(spark_tables, spark_for):
    settings, _, bucketed = spark_tables
    ref = TableRef(catalog_name(settings), ("ns",), "bucketed")
    before = {
        k: p.data_files for k, p in compute_table_stats(bucketed, settings.thresholds).partitions.items()
    }
    assert set(before.values()) == {3} and len(before) == 4
    where = PartitionScope(partition_layout(bucketed), ref.catalog, frozenset({("2",)})).where()
    res = procedures.rewrite_data_files(
        spark_for(settings), ref, options={"min-input-files": "2"}, where=where
    )
    bucketed.refresh()
    after = {
        k: p.data_files for k, p in compute_table_stats(bucketed, settings.thresholds).partitions.items()
    }
    assert res["rewritten_data_files_count"] == 3
    assert after == {**before, "id_bucket=2": 1}
