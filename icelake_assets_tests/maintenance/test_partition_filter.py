"""Partition scope and Spark filters: keys, time windows, evolved specs (pyiceberg metadata only),
then the filters run through real Spark on real tables: each selects exactly its partition's rows,
and rewrite_data_files under a bucket filter compacts exactly that bucket."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
)
from pyiceberg.types import LongType, NestedField, StringType, TimestampType, TimestamptzType

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.lake import append
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance import procedures
from icelake_assets.maintenance.partition_filter import (
    LayoutField,
    PartitionFilterError,
    PartitionLayout,
    PartitionScope,
    dimension_fields,
    key_value,
    parse_label,
    partition_layout,
    partition_values,
    time_window,
    value_key,
    where_clause,
)
from icelake_assets_tests.conftest import catalog_name, new_lake

UTC = UTC
TRICKY = [
    'it\'s "quoted" \\ back',
    "DROP TABLE t; -- SELECT * FROM x WHERE 1=1",
    "Ünïcødé ☕ 東京",
    "a|b...c",
    "~tilde",
    "null",
    "",
    " padded ",
    None,
]


def _f(name, transform, source_type, source=None, source_id=1, earliest=None) -> LayoutField:
    return LayoutField(name, source_id, (source or name.split("_")[0],), source_type, transform, earliest)


def _layout(*fields: LayoutField) -> PartitionLayout:
    return PartitionLayout("ns.t", 0, fields, {0: fields}, (0,))


# -- pure ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", TRICKY)
def test_every_value_has_a_dagster_safe_key_that_maps_back_exactly(value):
    key = value_key(value)
    assert key_value(key) == value
    assert not any(bad in key for bad in ("...", "|", "\n", "\t", "\0"))


def test_plain_values_are_their_own_keys_and_null_is_distinct_from_the_string_null():
    for value in ('it\'s "quoted" \\ back', "DROP TABLE t; --", "Ünïcødé ☕ 東京", "null"):
        assert value_key(value) == value
    assert value_key(None) != value_key("null")


@pytest.mark.parametrize(
    "transform,value,start,end",
    [
        ("hour", "2024-01-03-23", datetime(2024, 1, 3, 23, tzinfo=UTC), datetime(2024, 1, 4, tzinfo=UTC)),
        ("day", "2024-12-31", datetime(2024, 12, 31, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
        ("month", "2024-02", datetime(2024, 2, 1, tzinfo=UTC), datetime(2024, 3, 1, tzinfo=UTC)),
        ("year", "2024", datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
    ],
)
def test_time_windows_follow_icebergs_partition_values(transform, value, start, end):
    assert time_window(transform, value) == (start, end)


def test_a_malformed_time_value_is_refused_with_the_expected_format():
    with pytest.raises(
        PartitionFilterError, match=r"'2024-1-3x' is not a day partition \(expected %Y-%m-%d\)"
    ):
        time_window("day", "2024-1-3x")


def test_adjacent_days_merge_into_one_range_per_run():
    layout = _layout(_f("ts_day", "day", "timestamptz", "ts"))
    where = where_clause(layout, "cat", [("2024-01-03",), ("2024-01-04",), ("2024-01-05",), ("2024-01-09",)])
    assert where == (
        "((`ts` >= TIMESTAMP '2024-01-03 00:00:00.000000+00:00' AND `ts` < TIMESTAMP '2024-01-06 00:00:00.000000+00:00')"
        " OR (`ts` >= TIMESTAMP '2024-01-09 00:00:00.000000+00:00' AND `ts` < TIMESTAMP '2024-01-10 00:00:00.000000+00:00'))"
    )


def test_timestamp_without_zone_uses_ntz_literals_and_nested_columns_are_quoted_per_part():
    f = LayoutField("pickup_hour", 7, ("trip", "pick`up"), "timestamp", "hour")
    assert where_clause(_layout(f), "c", [("2024-01-03-05",)]) == (
        "`trip`.`pick``up` >= TIMESTAMP_NTZ '2024-01-03 05:00:00.000000' "
        "AND `trip`.`pick``up` < TIMESTAMP_NTZ '2024-01-03 06:00:00.000000'"
    )


def test_identity_bucket_truncate_and_null_predicates():
    s = _f("s", "identity", "string")
    assert where_clause(_layout(s), "c", [("it's \\",)]) == r"`s` = 'it\'s \\'"
    assert where_clause(_layout(s), "c", [(None,)]) == "`s` IS NULL"
    b = _f("id_bucket", "bucket[16]", "long", "id")
    assert where_clause(_layout(b), "my cat", [("3",)]) == "`my cat`.system.bucket(16, `id`) = 3"
    t = _f("name_trunc", "truncate[2]", "string", "name")
    assert where_clause(_layout(t), "c", [("ab",)]) == "`c`.system.truncate(2, `name`) = 'ab'"
    with pytest.raises(PartitionFilterError, match="bucket 'x' is not a number"):
        where_clause(_layout(b), "c", [("x",)])


def test_two_dimensions_group_by_the_non_time_value():
    layout = _layout(_f("ts_day", "day", "date", "ts", 1), _f("v", "identity", "long", "v", 2))
    where = where_clause(layout, "c", [("2024-01-01", "7"), ("2024-01-02", "7"), ("2024-01-01", "8")])
    assert where == (
        "(`v` = 7 AND `ts` >= DATE '2024-01-01' AND `ts` < DATE '2024-01-03') OR "
        "(`v` = 8 AND `ts` >= DATE '2024-01-01' AND `ts` < DATE '2024-01-02')"
    )


def test_dimension_rules():
    day = _f("ts_day", "day", "timestamp", "ts", 1)
    hour = _f("u_hour", "hour", "timestamp", "u", 2)
    vendor = _f("vendor", "identity", "string", "vendor", 3)
    region = _f("region", "identity", "string", "region", 4)
    uid = _f("uid", "identity", "uuid", "uid", 5)
    assert dimension_fields(_layout(day, vendor)) == (day, vendor)  # a multi-partition fits
    assert dimension_fields(_layout(vendor, region)) == (vendor, region)
    assert dimension_fields(_layout(day, hour)) == (day,)  # two time fields: the first
    assert dimension_fields(_layout(vendor, day, region)) == (day,)  # three: the time field
    assert dimension_fields(_layout(vendor, region, uid)) == (vendor, region)  # uuid cannot be filtered
    assert dimension_fields(_layout(uid)) == ()
    assert dimension_fields(_layout(_f("v", "void", "string"))) == ()


def test_labels_parse_as_pyiceberg_writes_them():
    assert parse_label("a%2Fb=x%3Dy/s=it%27s+ok") == [("a/b", "x=y"), ("s", "it's ok")]
    assert parse_label("<unpartitioned>") == []


def test_a_label_null_is_null_except_for_strings_where_it_may_also_be_the_string():
    s, v = _f("s", "identity", "string", "s", 1), _f("v", "identity", "long", "v", 2)
    assert partition_values(_layout(s), "s=null", 0, (None,)) == (("null",), (None,))
    assert partition_values(_layout(v), "v=null", 0, (None,)) == ((None,),)
    assert partition_values(_layout(s, v), "s=it%27s/v=null") == (("it's", None),)
    scope = PartitionScope(_layout(s), "c", frozenset({("null",)}))
    assert scope.values_of("s=null", 0, (None,)) == [("null",)] and scope.where() == "`s` = 'null'"


def test_a_scope_needs_partitions():
    with pytest.raises(PartitionFilterError, match="at least one partition"):
        PartitionScope(_layout(_f("s", "identity", "string")), "c", frozenset())


# -- layouts of real tables (pyiceberg, no Spark) -----------------------------------------------------


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    settings = new_lake(tmp_path_factory, thresholds={"small_files": {"max_files_per_partition": 2}})
    Path(settings.catalogs[catalog_name(settings)]["uri"][len("sqlite:///") :]).parent.mkdir(
        parents=True, exist_ok=True
    )
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    return settings, cat


def _ts(*days_hours):
    return pa.array(
        [datetime(2024, 1, d, h, tzinfo=UTC) for d, h in days_hours], pa.timestamp("us", tz="UTC")
    )


def test_evolved_spec_day_to_month_maps_old_days_into_their_month(lake):
    settings, cat = lake
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestamptzType()))
    t = cat.create_table(
        ("ns", "evolved"),
        schema=schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")),
    )
    append(t, pa.table({"id": pa.array([1, 2], pa.int64()), "ts": _ts((3, 5), (4, 1))}))
    with t.update_spec() as spec:
        spec.remove_field("ts_day")
        spec.add_field("ts", MonthTransform(), "ts_month")
    append(t, pa.table({"id": pa.array([3], pa.int64()), "ts": _ts((20, 0))}))
    t.refresh()
    layout = partition_layout(t)
    assert layout.evolved and [f.name for f in layout.dimensions] == ["ts_month"]
    assert layout.dimensions[0].earliest == "2024-01"  # from the old day partitions' summaries
    stats = compute_table_stats(t, settings.thresholds)
    mapped = {
        label: partition_values(layout, label, p.spec_id, p.values) for label, p in stats.partitions.items()
    }
    assert mapped == {
        "ts_day=2024-01-03": (("2024-01",),),
        "ts_day=2024-01-04": (("2024-01",),),
        "ts_month=2024-01": (("2024-01",),),
    }


def test_an_older_unpartitioned_spec_belongs_to_no_partition(lake):
    settings, cat = lake
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestampType()))
    t = cat.create_table(("ns", "late_partitioned"), schema=schema)
    append(
        t,
        pa.table(
            {"id": pa.array([1], pa.int64()), "ts": pa.array([datetime(2024, 1, 1)], pa.timestamp("us"))}
        ),
    )
    with t.update_spec() as spec:
        spec.add_field("ts", HourTransform(), "ts_hour")
    append(
        t,
        pa.table(
            {"id": pa.array([2], pa.int64()), "ts": pa.array([datetime(2024, 1, 2, 7)], pa.timestamp("us"))}
        ),
    )
    t.refresh()
    layout = partition_layout(t)
    assert layout.live_spec_ids == (0, 1) and layout.dimensions[0].earliest == "2024-01-02-07"
    stats = compute_table_stats(t, settings.thresholds)
    mapped = {
        label: partition_values(layout, label, p.spec_id, p.values) for label, p in stats.partitions.items()
    }
    assert mapped == {"<unpartitioned>": (), "ts_hour=2024-01-02-07": (("2024-01-02-07",),)}


# -- the filters through real Spark -----------------------------------------------------------------


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
                "ts": _ts(*[(1 + i % 2, 23) for i in range(2 * n)]),
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
