"""The data_retention finding and the expire_data decision from metadata alone (pyiceberg tables in a
SQLite catalog, no Spark): the retention column's bounds place every data file against the cut-off."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.health.data_retention import RetentionFacts, place_files
from icelake_assets.health.findings import Severity
from icelake_assets.health.manifests import ManifestSummary
from icelake_assets.health.retention_column import OutOfRange, RetentionColumn, sortable_format
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.planning.data_retention import decide_expire_data, retention_finding
from icelake_assets.planning.guards import evaluate_guards
from icelake_assets.planning.health import metadata_findings
from icelake_assets.settings import Policy
from icelake_assets_tests.health.conftest import batch

NOW = datetime(2024, 3, 11, 12, 30, tzinfo=UTC).timestamp()  # START (2024-03-01) + 10.5 days


def retention(**section) -> Policy:
    return Policy.model_validate({"retention": {"column": "ts", "keep_days": 5, **section}})


def test_off_it_passes_and_expire_data_does_not_act(new_table):
    table = new_table()
    table.append(batch(range(10), 0))
    stats = compute_table_stats(table, Policy(), now=NOW)
    assert stats.data_retention is None
    finding = retention_finding(stats, Policy())
    assert finding.passed and finding.summary == "retention not configured"
    assert not decide_expire_data(stats, Policy()).act


def test_day_partitions_wholly_past_the_cut_off_are_counted_and_drop_without_rewrite(new_table):
    table = new_table()  # day(ts)
    for day in range(10):
        table.append(batch(range(day * 10, day * 10 + 10), day))  # one file per day, 10 rows
    policy = retention()
    stats = compute_table_stats(table, policy, now=NOW)
    f = stats.data_retention
    assert f is not None and f.grain == "day"
    # now - 5 days = 2024-03-06 12:30, lowered to the day: days 0..4 (2024-03-01..05) are past it.
    assert f.cutoff == "2024-03-06T00:00:00+00:00"
    assert (f.expired_files, f.expired_rows, f.straddling_files, f.unbounded_files) == (5, 50, 0, 0)
    assert f.expired_bytes == sum(
        t.file.file_size_in_bytes for t in table.scan(row_filter="ts < '2024-03-06T00:00:00'").plan_files()
    )
    assert f.metadata_only and not f.expired_before
    finding = retention_finding(stats, policy)
    assert finding.severity is Severity.WARN and "5 files (50 rows) wholly past it" in finding.summary
    d = decide_expire_data(stats, policy)
    assert d.act and d.signals["rewrite_bytes"] == 0 and d.signals["first_expiry"] is True
    assert d.signals["expire_rows"] == 50 and d.signals["expire_files"] == 5


def test_a_file_across_the_cut_off_straddles_it_and_is_rewritten(new_table):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC)
    table.append(batch(range(40), [i % 10 for i in range(40)]))  # days 0..9 in one file
    table.append(batch(range(40, 50), 1))  # wholly past
    table.append(batch(range(50, 60), 9))  # kept
    policy = retention()
    f = compute_table_stats(table, policy, now=NOW).data_retention
    assert f is not None and f.grain is None
    assert f.cutoff == "2024-03-06T12:30:00+00:00"  # not partitioned by ts: not lowered
    assert (f.expired_files, f.expired_rows) == (1, 10)
    assert (f.straddling_files, f.straddling_rows) == (1, 40)  # an upper bound of its expired rows
    assert f.rows == 50 and not f.metadata_only


def test_since_newest_counts_from_the_newest_value(new_table):
    table = new_table()
    for day in range(10):
        table.append(batch(range(day * 10, day * 10 + 10), day))
    later = datetime(2030, 1, 1, tzinfo=UTC).timestamp()  # a table that stopped receiving data
    policy = retention(since="newest")
    f = compute_table_stats(table, policy, now=later).data_retention
    assert f is not None and f.newest is not None and f.newest.startswith("2024-03-10")
    assert f.cutoff == "2024-03-05T00:00:00+00:00" and f.expired_files == 4
    # From now, every row is past it.
    assert compute_table_stats(table, retention(), now=later).data_retention.expired_files == 10


def test_an_epoch_column_and_a_string_column_in_their_own_terms(new_table):
    schema = Schema(
        NestedField(1, "id", LongType()), NestedField(2, "ms", LongType()), NestedField(3, "d", StringType())
    )
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC, schema=schema)
    for day in (1, 8):  # 2024-03-02 and 2024-03-09
        ms = int(datetime(2024, 3, 1 + day, tzinfo=UTC).timestamp() * 1000)
        table.append(
            pa.table({
                "id": pa.array([day], pa.int64()),
                "ms": pa.array([ms], pa.int64()),
                "d": pa.array([f"2024-03-{1 + day:02d}"], pa.string()),
            })
        )  # fmt: skip
    epoch = Policy.model_validate({"retention": {"column": "ms", "keep_days": 5, "unit": "milliseconds"}})
    f = compute_table_stats(table, epoch, now=NOW).data_retention
    assert f is not None and f.problem is None and f.kind == "epoch" and f.expired_files == 1
    text = Policy.model_validate({"retention": {"column": "d", "keep_days": 5, "format": "%Y-%m-%d"}})
    f = compute_table_stats(table, text, now=NOW).data_retention
    assert f is not None and f.problem is None and f.cutoff_key == "2024-03-06" and f.expired_files == 1


@pytest.mark.parametrize(
    ("section", "cause"),
    [
        ({"column": "nope"}, "the table has no column 'nope'"),
        ({"unit": "seconds"}, "'unit' and 'format' are for long and string columns"),
        ({"column": "id"}, "retention needs its 'unit'"),
        ({"column": "vendor", "format": "%d/%m/%Y"}, "does not sort as text"),
        ({"column": "v", "unit": "days"}, "needs a timestamp, date, long or string column"),
    ],
)
def test_a_policy_the_table_cannot_serve_is_a_failing_finding_naming_the_cause(new_table, section, cause):
    table = new_table()
    table.append(batch(range(10), 0))
    policy = retention(**section)
    stats = compute_table_stats(table, policy, now=NOW)
    [finding] = [f for f in metadata_findings(stats, policy) if f.check == "data_retention"]
    assert not finding.passed and cause in finding.summary
    d = decide_expire_data(stats, policy)
    assert not d.act and cause in d.reason


def test_only_formats_that_sort_like_time_compare_as_text():
    for ok in ("%Y-%m-%d", "%Y%m%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H"):
        assert sortable_format(ok) is None, ok
    for bad in ("%d/%m/%Y", "%Y-%d-%m", "%b %Y", "%y%m%d", "plain"):
        assert sortable_format(bad), bad


def test_the_first_expiry_is_held_for_approval_and_the_approval_lets_it_go(new_table):
    table = new_table()
    for day in range(10):
        table.append(batch(range(day * 10, day * 10 + 10), day))
    policy = retention()
    stats = compute_table_stats(table, policy, now=NOW)
    decisions = [decide_expire_data(stats, policy)]
    held = evaluate_guards(stats, decisions, 0, policy.guards.max_rewrite_bytes)
    assert held.action == "hold" and "first expiry" in held.reason and "50 rows in 5 files" in held.reason
    assert held.details["expire_rows"] == 50 and held.details["estimated_rewrite_bytes"] == 0
    approved = evaluate_guards(stats, decisions, 0, policy.guards.max_rewrite_bytes, approved=True)
    assert approved.action == "launch"


LONG_MAX = 9_223_372_036_854_775_807
EPOCH_SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "ms", LongType()))


def _ms_rows(ids, when) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "ms": pa.array(when, pa.int64())})


def _ms(day: int) -> int:
    return int(datetime(2024, 3, 1 + day, tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize("since", ["now", "newest"])
def test_a_long_max_sentinel_is_a_finding_naming_it_and_every_other_check_goes_on(new_table, since):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC, schema=EPOCH_SCHEMA)
    for day in range(10):
        table.append(_ms_rows([day], [_ms(day)]))
    table.append(_ms_rows([99], [LONG_MAX]))  # "end of time"
    policy = Policy.model_validate(
        {"retention": {"column": "ms", "keep_days": 5, "unit": "milliseconds", "since": since}}
    )
    stats = compute_table_stats(table, policy, now=NOW)  # raised OverflowError before
    f = stats.data_retention
    assert f is not None and f.problem is None
    assert (f.future_files, f.future_rows, f.future_value) == (1, 1, repr(LONG_MAX))
    # The sentinel never moves the cut-off: it counts from now (or from the newest real value).
    assert f.cutoff == ("2024-03-06T12:30:00+00:00" if since == "now" else "2024-03-05T00:00:00+00:00")
    findings = {x.check: x for x in metadata_findings(stats, policy)}
    assert str(LONG_MAX) in findings["data_retention"].summary and "ms" in findings["data_retention"].summary
    assert not findings["data_retention"].passed
    assert "small_files" in findings and "snapshot_retention" in findings  # the rest go on


def _summary(bounds: list[tuple[object, object]], rows: int = 10) -> ManifestSummary:
    """One manifest of data files with these (lower, upper) bounds on the column (what a Spark
    writer leaves for values pyarrow cannot write: a year past 9999)."""
    n = len(bounds)
    return ManifestSummary(
        0, ("",), ((),), np.zeros(n, np.int32), np.zeros(n, np.int8), np.full(n, 1000, np.int64),
        np.full(n, rows, np.int64), 2, tuple(lo for lo, _ in bounds), tuple(hi for _, hi in bounds),
    )  # fmt: skip


US = 1_000_000
DAY_US = 86_400 * US
MARCH_1 = int(datetime(2024, 3, 1, tzinfo=UTC).timestamp()) * US
YEAR_10238 = MARCH_1 + 3_000_000 * DAY_US


@pytest.mark.parametrize("since", ["now", "newest"])
@pytest.mark.parametrize(
    "far",
    [YEAR_10238, 2**63 - 1],  # a year past 9999, Long.MAX microseconds
)
def test_a_timestamp_past_year_9999_is_after_now_not_an_error(since, far):
    col = RetentionColumn(2, "ts", "timestamp")
    with pytest.raises(OutOfRange, match="ts value"):
        col.time(far)
    files = [(MARCH_1 + d * DAY_US, MARCH_1 + d * DAY_US + 1) for d in range(10)] + [
        (far, far),
        (MARCH_1, far),
    ]
    facts = RetentionFacts("ts", 5, since)
    f = place_files(facts, col, [_summary(files)], datetime.fromtimestamp(NOW, UTC))
    assert f.problem is None and (f.future_files, f.future_value) == (2, repr(far))
    assert f.cutoff == ("2024-03-06T12:30:00+00:00" if since == "now" else "2024-03-05T00:00:00.000001+00:00")
    assert (f.expired_files, f.straddling_files) == ((6, 1) if since == "now" else (4, 2))


def test_a_newest_value_before_year_1_is_a_problem_naming_it_not_an_error():
    col = RetentionColumn(2, "ms", "epoch", unit="milliseconds")
    low = -(2**63)  # Long.MIN: "beginning of time"
    f = place_files(RetentionFacts("ms", 5, "newest"), col, [_summary([(low, low)])], datetime.now(UTC))
    assert f.problem is not None and str(low) in f.problem and "'ms'" in f.problem


def test_since_newest_ignores_a_value_dated_after_now_and_counts_from_the_real_newest(new_table):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC, schema=EPOCH_SCHEMA)
    table.append(_ms_rows(list(range(10)), [_ms(d) for d in range(10)]))
    before = compute_table_stats(table, Policy.model_validate(_newest_ms()), now=NOW).data_retention
    table.append(_ms_rows([99], [int(datetime(2099, 1, 1, tzinfo=UTC).timestamp() * 1000)]))  # a clock bug
    after = compute_table_stats(table, Policy.model_validate(_newest_ms()), now=NOW).data_retention
    assert after.cutoff == before.cutoff and after.rows == before.rows  # every row past 2099 - 5 d before
    assert after.future_files == 1 and after.future_value.startswith("2099-01-01")


def _newest_ms() -> dict:
    return {"retention": {"column": "ms", "keep_days": 5, "unit": "milliseconds", "since": "newest"}}


def test_a_newest_value_within_the_skew_counts_as_now(new_table):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC, schema=EPOCH_SCHEMA)
    soon = int(NOW * 1000) + 12 * 3_600_000  # half a day ahead: inside the default skew of a day
    table.append(_ms_rows([1, 2], [_ms(0), soon]))
    f = compute_table_stats(table, Policy.model_validate(_newest_ms()), now=NOW).data_retention
    assert f.future_files == 0 and f.cutoff == "2024-03-06T12:30:00+00:00"  # now - 5 days, not soon - 5


def test_a_timestamp_without_zone_holds_wall_time_in_the_policys_zone(new_table):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC)
    table.append(batch(range(10), list(range(10))))
    utc = compute_table_stats(table, retention(), now=NOW).data_retention
    tokyo = compute_table_stats(table, retention(timezone="Asia/Tokyo"), now=NOW).data_retention
    assert utc.cutoff == tokyo.cutoff == "2024-03-06T12:30:00+00:00"
    # The same instant is 21:30 on the wall in Tokyo: the column's key is 9 hours later.
    assert tokyo.cutoff_key - utc.cutoff_key == 9 * 3_600 * 1_000_000


def test_an_unknown_time_zone_is_refused_naming_it():
    with pytest.raises(ValueError, match="'Mars/Olympus' is not an IANA time zone"):
        retention(timezone="Mars/Olympus")
