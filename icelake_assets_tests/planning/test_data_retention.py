"""What an unapproved expiry may delete is bounded by the last approved one (issue 50): a stray value,
a policy edit or a cut-off that jumps needs approval again, and no run removes more than
``max_delete_fraction`` of the rows unapproved. The approved expiry is a pyiceberg delete carrying
the snapshot properties expire_data's commit carries (maintenance/ops/expire_data.py), so the
metadata is what a real run leaves; the Spark path is covered by orchestration/test_data_retention_loop.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
from pyiceberg.expressions import LessThan
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.health.stats import compute_table_stats
from icelake_assets.planning.data_retention import approval_needed, decide_expire_data
from icelake_assets.planning.guards import evaluate_guards
from icelake_assets.settings import Policy
from icelake_assets.types import (
    SNAPSHOT_OP,
    SNAPSHOT_RETENTION_CUTOFF,
    SNAPSHOT_RETENTION_KEEP_DAYS,
    SNAPSHOT_RETENTION_POLICY,
)

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "epoch_ms", LongType()))
DAY_MS = 86_400_000


def _policy(**retention) -> Policy:
    section = {"column": "epoch_ms", "keep_days": 30, "unit": "milliseconds", "since": "newest", **retention}
    return Policy.model_validate({"retention": section})


def _rows(ids: range, newest_ms: int) -> pa.Table:
    """Row i is i days older than ``newest_ms``."""
    ids = list(ids)
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "epoch_ms": pa.array([newest_ms - i * DAY_MS for i in ids], pa.int64()),
    })  # fmt: skip


def _approved_expiry(table, policy: Policy, now: float) -> None:
    """What an approved expire_data commits: the rows past the cut-off, the binding in the summary."""
    facts = compute_table_stats(table, policy, now=now).data_retention
    assert facts is not None and facts.cutoff_key is not None
    table.delete(
        LessThan("epoch_ms", facts.cutoff_key),
        snapshot_properties={
            SNAPSHOT_OP: "expire_data",
            SNAPSHOT_RETENTION_POLICY: policy.retention.digest(),
            SNAPSHOT_RETENTION_KEEP_DAYS: repr(facts.keep_days),
            SNAPSHOT_RETENTION_CUTOFF: facts.raw_cutoff,
        },
    )


def _verdict(table, policy: Policy, now: float):
    stats = compute_table_stats(table, policy, now=now)
    return stats, evaluate_guards(
        stats, [decide_expire_data(stats, policy)], 0, policy.guards.max_rewrite_bytes
    )


def _retention_table(new_table, now: float):
    """600 rows a day apart, the newest at ``now``; one file per 100 rows."""
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC, schema=SCHEMA)
    for start in range(0, 600, 100):
        table.append(_rows(range(start, start + 100), int(now * 1000)))
    return table


def test_a_row_dated_2099_after_an_approved_expiry_deletes_nothing(new_table):
    now = datetime.now(UTC).timestamp()  # the approved expiry commits at the wall clock's time
    policy = _policy()
    table = _retention_table(new_table, now)
    _approved_expiry(table, policy, now)
    kept = len(table.scan().to_arrow())
    assert kept == 31  # the newest 30 days and the newest one
    table.append(_rows(range(1), int(datetime(2099, 1, 1, tzinfo=UTC).timestamp() * 1000)))  # a clock bug

    stats, verdict = _verdict(table, policy, now + 3600)
    f = stats.data_retention
    # Before: the 2099 row was the newest, the cut-off 2098-12-02, every other row past it (launched).
    assert f.rows == 0 and verdict.action == "skip", (f, verdict)
    assert f.future_files == 1 and f.future_value.startswith("2099-01-01")


def test_the_cut_off_jumping_past_the_time_that_passed_needs_approval_again(new_table):
    now = datetime.now(UTC).timestamp()  # the approved expiry commits at the wall clock's time
    policy = _policy(max_delete_fraction=1.0)  # the jump alone holds it
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC, schema=SCHEMA)
    stopped = now - 20 * 86_400  # the writer stopped 20 days ago: the last 30 days before it are kept
    table.append(_rows(range(600), int(stopped * 1000)))
    _approved_expiry(table, policy, now)
    assert len(table.scan().to_arrow()) == 31
    table.append(_rows(range(1), int((now + 86_400) * 1000)))  # it resumes a day later
    stats, verdict = _verdict(table, policy, now + 86_400)
    # The cut-off moves 21 days in one day: the approval saw none of those rows go.
    assert stats.data_retention.straddling_files == 1  # the 31 kept rows, 21 of them now past it
    assert verdict.action == "hold" and "cut-off moved 21.00 days" in verdict.reason, verdict.reason
    assert "1.00 days that passed" in verdict.reason


def test_a_policy_edit_after_an_approved_expiry_needs_approval_again(new_table):
    now = datetime.now(UTC).timestamp()  # the approved expiry commits at the wall clock's time
    table = _retention_table(new_table, now)
    _approved_expiry(table, _policy(), now)
    # The operator counts from now instead of the newest value, five days on.
    stats, verdict = _verdict(table, _policy(since="now"), now + 5 * 86_400)
    assert verdict.action == "hold" and "retention policy" in verdict.reason and "changed" in verdict.reason
    # Read in seconds, the milliseconds are 1000x later: after now, never expired (and reported).
    stats, verdict = _verdict(table, _policy(unit="seconds"), now)
    assert verdict.action == "skip" and stats.data_retention.future_files == 1
    # A smaller keep_days: the rows it would take were kept by the approval.
    stats, verdict = _verdict(table, _policy(keep_days=10), now)
    assert verdict.action == "hold" and "keep_days lowered from 30 to 10" in verdict.reason
    # A larger one keeps more: no approval, nothing to do.
    assert _verdict(table, _policy(keep_days=40), now)[1].action == "skip"


def test_a_run_may_remove_at_most_the_delete_fraction_unapproved(new_table):
    now = datetime.now(UTC).timestamp()  # the approved expiry commits at the wall clock's time
    policy = _policy(since="now", max_delete_fraction=0.5)
    table = _retention_table(new_table, now)
    _approved_expiry(table, policy, now)  # 31 rows kept
    # 40 days on, with no new data: 31 rows are past the cut-off: all of the table.
    stats, verdict = _verdict(table, policy, now + 40 * 86_400)
    assert stats.data_retention.expired_rows == 31 and stats.data_retention.data_rows == 31
    assert verdict.action == "hold" and "over retention.max_delete_fraction 0.5" in verdict.reason
    # Ten days on, ten of the 31 rows go: within the fraction and the time that passed.
    stats, verdict = _verdict(table, policy, now + 10 * 86_400)
    f = stats.data_retention
    assert (f.expired_rows, f.straddling_files) == (0, 1) and verdict.action == "launch", verdict.reason


def test_an_expiry_committed_without_its_binding_needs_approval(new_table):
    now = datetime.now(UTC).timestamp()  # the approved expiry commits at the wall clock's time
    policy = _policy()
    table = _retention_table(new_table, now)
    table.delete(LessThan("id", 0), snapshot_properties={SNAPSHOT_OP: "expire_data"})  # an older release
    table.delete(
        LessThan("epoch_ms", int(now * 1000) - 500 * DAY_MS), snapshot_properties={SNAPSHOT_OP: "expire_data"}
    )
    stats, verdict = _verdict(table, policy, now + 86_400)
    assert verdict.action == "hold" and "recorded no retention policy" in verdict.reason


def test_the_binding_survives_a_day_of_normal_expiry(new_table):
    """The steady state: a daily run with the clock moving a day needs no approval."""
    now = datetime.now(UTC).timestamp()  # the approved expiry commits at the wall clock's time
    policy = _policy(since="now")
    table = _retention_table(new_table, now)
    _approved_expiry(table, policy, now)
    table.append(_rows(range(1), int((now + 86_400) * 1000)))
    stats, verdict = _verdict(table, policy, now + 86_400 + timedelta(hours=1).total_seconds())
    assert approval_needed(stats.data_retention, policy.retention) is None
    assert verdict.action == "launch" and stats.data_retention.straddling_files == 1


def test_the_digest_binds_how_values_map_to_time_not_how_long_they_are_kept():
    base = _policy().retention
    for change in ({"unit": "seconds"}, {"since": "now"}, {"timezone": "Asia/Tokyo"}, {"column": "ts"}):
        assert _policy(**change).retention.digest() != base.digest(), change
    assert _policy(keep_days=90, max_delete_fraction=0.1).retention.digest() == base.digest()
