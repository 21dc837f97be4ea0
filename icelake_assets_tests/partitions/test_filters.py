"""Spark filters of a partition scope: quoted literals and columns, merged time ranges."""

from __future__ import annotations

import pytest

from icelake_assets.partitions.filters import PartitionScope, where_clause
from icelake_assets.partitions.layout import (
    LayoutField,
    PartitionFilterError,
)
from icelake_assets_tests.partitions.conftest import layout_field, one_spec_layout


def test_adjacent_days_merge_into_one_range_per_run():
    layout = one_spec_layout(layout_field("ts_day", "day", "timestamptz", "ts"))
    where = where_clause(layout, "cat", [("2024-01-03",), ("2024-01-04",), ("2024-01-05",), ("2024-01-09",)])
    assert where == (
        "((`ts` >= TIMESTAMP '2024-01-03 00:00:00.000000+00:00' AND `ts` < TIMESTAMP '2024-01-06 00:00:00.000000+00:00')"
        " OR (`ts` >= TIMESTAMP '2024-01-09 00:00:00.000000+00:00' AND `ts` < TIMESTAMP '2024-01-10 00:00:00.000000+00:00'))"
    )


def test_timestamp_without_zone_uses_ntz_literals_and_nested_columns_are_quoted_per_part():
    f = LayoutField("pickup_hour", 7, ("trip", "pick`up"), "timestamp", "hour")
    assert where_clause(one_spec_layout(f), "c", [("2024-01-03-05",)]) == (
        "`trip`.`pick``up` >= TIMESTAMP_NTZ '2024-01-03 05:00:00.000000' "
        "AND `trip`.`pick``up` < TIMESTAMP_NTZ '2024-01-03 06:00:00.000000'"
    )


def test_identity_bucket_truncate_and_null_predicates():
    s = layout_field("s", "identity", "string")
    assert where_clause(one_spec_layout(s), "c", [("it's \\",)]) == r"`s` = 'it\'s \\'"
    assert where_clause(one_spec_layout(s), "c", [(None,)]) == "`s` IS NULL"
    b = layout_field("id_bucket", "bucket[16]", "long", "id")
    assert where_clause(one_spec_layout(b), "my cat", [("3",)]) == "`my cat`.system.bucket(16, `id`) = 3"
    t = layout_field("name_trunc", "truncate[2]", "string", "name")
    assert where_clause(one_spec_layout(t), "c", [("ab",)]) == "`c`.system.truncate(2, `name`) = 'ab'"
    with pytest.raises(PartitionFilterError, match="bucket 'x' is not a number"):
        where_clause(one_spec_layout(b), "c", [("x",)])


def test_two_dimensions_group_by_the_non_time_value():
    layout = one_spec_layout(
        layout_field("ts_day", "day", "date", "ts", 1), layout_field("v", "identity", "long", "v", 2)
    )
    where = where_clause(layout, "c", [("2024-01-01", "7"), ("2024-01-02", "7"), ("2024-01-01", "8")])
    assert where == (
        "(`v` = 7 AND `ts` >= DATE '2024-01-01' AND `ts` < DATE '2024-01-03') OR "
        "(`v` = 8 AND `ts` >= DATE '2024-01-01' AND `ts` < DATE '2024-01-02')"
    )


def test_a_scope_needs_partitions():
    with pytest.raises(PartitionFilterError, match="at least one partition"):
        PartitionScope(one_spec_layout(layout_field("s", "identity", "string")), "c", frozenset())


# -- layouts of real tables (pyiceberg, no Spark) -----------------------------------------------------
