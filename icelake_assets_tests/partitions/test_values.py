"""The partition values a partition of health's stats stands for: labels, nulls, evolved specs."""

from __future__ import annotations

from datetime import datetime

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    DayTransform,
    HourTransform,
    MonthTransform,
)
from pyiceberg.types import LongType, NestedField, TimestampType, TimestamptzType

from icelake_assets.demo.lake import append
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.partitions.filters import PartitionScope
from icelake_assets.partitions.layout import partition_layout
from icelake_assets.partitions.values import parse_label, partition_values
from icelake_assets_tests.partitions.conftest import layout_field, one_spec_layout, timestamps


def test_labels_parse_as_pyiceberg_writes_them():
    assert parse_label("a%2Fb=x%3Dy/s=it%27s+ok") == [("a/b", "x=y"), ("s", "it's ok")]
    assert parse_label("<unpartitioned>") == []


def test_a_label_null_is_null_except_for_strings_where_it_may_also_be_the_string():
    s, v = layout_field("s", "identity", "string", "s", 1), layout_field("v", "identity", "long", "v", 2)
    assert partition_values(one_spec_layout(s), "s=null", 0, (None,)) == (("null",), (None,))
    assert partition_values(one_spec_layout(v), "v=null", 0, (None,)) == ((None,),)
    assert partition_values(one_spec_layout(s, v), "s=it%27s/v=null") == (("it's", None),)
    scope = PartitionScope(one_spec_layout(s), "c", frozenset({("null",)}))
    assert scope.values_of("s=null", 0, (None,)) == [("null",)] and scope.where() == "`s` = 'null'"


def test_evolved_spec_day_to_month_maps_old_days_into_their_month(lake):
    settings, cat = lake
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestamptzType()))
    t = cat.create_table(
        ("ns", "evolved"),
        schema=schema,
        partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")),
    )
    append(t, pa.table({"id": pa.array([1, 2], pa.int64()), "ts": timestamps((3, 5), (4, 1))}))
    with t.update_spec() as spec:
        spec.remove_field("ts_day")
        spec.add_field("ts", MonthTransform(), "ts_month")
    append(t, pa.table({"id": pa.array([3], pa.int64()), "ts": timestamps((20, 0))}))
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
