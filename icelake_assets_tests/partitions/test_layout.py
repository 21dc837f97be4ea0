"""Layouts: time windows of partition values, and the dimensions a run is scoped by."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from icelake_assets.partitions.layout import (
    PartitionFilterError,
    dimension_fields,
    time_window,
)
from icelake_assets_tests.partitions.conftest import layout_field, one_spec_layout


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


def test_dimension_rules():
    day = layout_field("ts_day", "day", "timestamp", "ts", 1)
    hour = layout_field("u_hour", "hour", "timestamp", "u", 2)
    vendor = layout_field("vendor", "identity", "string", "vendor", 3)
    region = layout_field("region", "identity", "string", "region", 4)
    uid = layout_field("uid", "identity", "uuid", "uid", 5)
    assert dimension_fields(one_spec_layout(day, vendor)) == (day, vendor)  # a multi-partition fits
    assert dimension_fields(one_spec_layout(vendor, region)) == (vendor, region)
    assert dimension_fields(one_spec_layout(day, hour)) == (day,)  # two time fields: the first
    assert dimension_fields(one_spec_layout(vendor, day, region)) == (day,)  # three: the time field
    assert dimension_fields(one_spec_layout(vendor, region, uid)) == (
        vendor,
        region,
    )  # uuid cannot be filtered
    assert dimension_fields(one_spec_layout(uid)) == ()
    assert dimension_fields(one_spec_layout(layout_field("v", "void", "string"))) == ()
