"""Partition values as Dagster-safe key strings and back, exactly."""

from __future__ import annotations

import pytest

from icelake_assets.partitions.keys import (
    dimension_name,
    key_parts,
    key_value,
    value_key,
    values_of_key,
)
from icelake_assets.partitions.layout import (
    PartitionFilterError,
)
from icelake_assets_tests.partitions.conftest import TRICKY, layout_field, one_spec_layout


@pytest.mark.parametrize("value", TRICKY)
def test_every_value_has_a_dagster_safe_key_that_maps_back_exactly(value):
    key = value_key(value)
    assert key_value(key) == value
    assert not any(bad in key for bad in ("...", "|", "\n", "\t", "\0"))


def test_plain_values_are_their_own_keys_and_null_is_distinct_from_the_string_null():
    for value in ('it\'s "quoted" \\ back', "DROP TABLE t; --", "Ünïcødé ☕ 東京", "null"):
        assert value_key(value) == value
    assert value_key(None) != value_key("null")


def test_partition_values_and_key_parts_map_both_ways():
    day = layout_field("ts_day", "day", "date", "ts", 1)
    cat = layout_field("cat", "identity", "string", "cat", 2)
    two = one_spec_layout(day, cat)
    assert key_parts(two, ("2024-01-02", "a|b")) == {"ts_day": "2024-01-02", "cat": "~s:a%7Cb"}
    assert key_parts(two, (None, "x")) is None  # a null time value has no key
    assert values_of_key(two, "~s:a%7Cb|2024-01-02") == ("2024-01-02", "a|b")  # sorted dimension names
    assert values_of_key(two, "k", {"ts_day": "2024-01-02", "cat": "~null"}) == ("2024-01-02", None)
    assert values_of_key(one_spec_layout(cat), "~null") == (None,)
    assert dimension_name(layout_field("a-b c", "identity", "string")) == "a_b_c"
    with pytest.raises(PartitionFilterError, match="not a day partition"):
        values_of_key(one_spec_layout(day), "2024-01-0x")
    with pytest.raises(PartitionFilterError, match="is not partitioned"):
        values_of_key(one_spec_layout(), "x")
