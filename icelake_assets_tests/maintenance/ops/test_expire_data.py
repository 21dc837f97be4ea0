"""The retention condition expire_data deletes by: quoted column, a literal of the column's type."""

from datetime import UTC, datetime

import pytest

from icelake_assets.health.retention_column import RetentionColumn
from icelake_assets.maintenance.ops.expire_data import RetentionPredicateError, retention_condition

CUTOFF = datetime(2024, 3, 6, 12, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("col", "condition"),
    [
        (RetentionColumn(1, "ts", "timestamptz"), "`ts` < TIMESTAMP '2024-03-06 12:30:00.000000+00:00'"),
        (RetentionColumn(1, "ts", "timestamp"), "`ts` < TIMESTAMP_NTZ '2024-03-06 12:30:00.000000'"),
        (RetentionColumn(1, "d", "date"), "`d` < DATE '2024-03-06'"),
        (RetentionColumn(1, "e", "epoch", unit="seconds"), "`e` < 1709728200"),
        (RetentionColumn(1, "e", "epoch", unit="milliseconds"), "`e` < 1709728200000"),
        (RetentionColumn(1, "e", "epoch", unit="days"), "`e` < 19788"),
        (RetentionColumn(1, "we`ird", "string", format="%Y-%m-%d"), "`we``ird` < '2024-03-06'"),
        (RetentionColumn(1, "s.at", "string", format="%Y%m%d%H"), "`s`.`at` < '2024030612'"),
    ],
)
def test_the_condition_compares_the_column_with_a_literal_of_its_type(col, condition):
    assert retention_condition(col, CUTOFF) == condition


def test_a_format_that_does_not_sort_as_text_is_refused():
    with pytest.raises(RetentionPredicateError, match="does not sort as text"):
        retention_condition(RetentionColumn(1, "d", "string", format="%d.%m.%Y"), CUTOFF)


@pytest.mark.parametrize(
    ("col", "condition"),
    [
        # 12:30 UTC is 13:30 in Paris in March (CET): the column stores that wall time.
        (
            RetentionColumn(1, "ts", "timestamp", zone="Europe/Paris"),
            "`ts` < TIMESTAMP_NTZ '2024-03-06 13:30:00.000000'",
        ),
        (RetentionColumn(1, "d", "date", zone="Pacific/Kiritimati"), "`d` < DATE '2024-03-07'"),
        (RetentionColumn(1, "s", "string", format="%Y%m%d%H", zone="America/New_York"), "`s` < '2024030607'"),
        # A long counts from the epoch, which is UTC: the zone does not apply.
        (RetentionColumn(1, "e", "epoch", unit="seconds", zone="Europe/Paris"), "`e` < 1709728200"),
        (
            RetentionColumn(1, "ts", "timestamptz", zone="Europe/Paris"),
            "`ts` < TIMESTAMP '2024-03-06 12:30:00.000000+00:00'",
        ),
    ],
)
def test_wall_time_columns_compare_in_the_policys_zone(col, condition):
    assert retention_condition(col, CUTOFF) == condition
