"""A retried rewrite's attempts folded into one result: counts summed, the first's before, the last's
failures."""

from icelake_assets.maintenance.ops.attempts import merge_attempts
from icelake_assets.maintenance.results.models import DanglingDeletes, ExpireResult, RewriteResult


def _attempt(n: int, failed: tuple[str, ...], rewritten: tuple[str, ...], **kw) -> RewriteResult:
    return RewriteResult(
        acted=True,
        reason=f"attempt {n}",
        duration_s=1.25,
        snapshot_before=10 + n,
        attempt=n,
        procedure={
            "rewritten_data_files_count": 10 * n,
            "added_data_files_count": n,
            "failed_data_files_count": 3,
        },
        snapshots_committed=n,
        data_files_before=100 - n,
        partitions_rewritten=rewritten,
        partitions_failed=failed,
        **kw,
    )


def test_one_attempt_is_itself():
    one = _attempt(1, (), ("a",))
    assert merge_attempts([one]) is one


def test_attempts_add_their_commits_and_keep_the_last_failures():
    first = _attempt(1, ("b", "c"), ("a",), dangling=DanglingDeletes(commits=1))
    last = _attempt(2, ("c",), ("b",), error="boom", dangling=DanglingDeletes(commits=2, error="late"))
    merged = merge_attempts([first, last])
    assert merged.acted and merged.reason == "2 attempts; last: attempt 2"
    assert merged.duration_s == 2.5 and merged.snapshot_before == 11 and merged.merged_attempts == 2
    assert merged.rewritten_data_files_count == 30 and merged.added_data_files_count == 3
    assert merged.procedure["failed_data_files_count"] == 3  # not a count to add up
    assert merged.snapshots_committed == 3 and merged.data_files_before == 99
    assert merged.partitions_rewritten == ("a", "b") and merged.partitions_failed == ("c",)
    assert merged.error == "boom" and merged.dangling == DanglingDeletes(commits=3, error="late")
    assert merged.details()["attempts"] == 2


def test_a_last_attempt_that_did_nothing_keeps_what_the_earlier_ones_did():
    first = _attempt(1, (), ("a",), error="boom")
    idle = RewriteResult(acted=False, reason="nothing to do", attempt=2)
    merged = merge_attempts([first, idle])
    assert merged.acted and not merged.failed  # the last attempt's (absent) failures
    assert merged.partitions_rewritten == ("a",) and merged.snapshots_committed == 1
    assert merged.rewritten_data_files_count == 10


def test_other_ops_keep_the_last_attempt():
    a, b = ExpireResult(acted=False, reason="x"), ExpireResult(acted=True, reason="y", snapshots_expired=2)
    merged = merge_attempts([a, b])
    assert merged.acted and merged.snapshots_expired == 2 and merged.merged_attempts == 2
