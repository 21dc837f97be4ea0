"""A retried rewrite's attempts folded into one result: counts summed, the first's before, the last's
failures; a call retried while a writer's commit conflicts with it (other failures are not retried)."""

import pytest

from icelake_assets.maintenance.ops.attempts import merge_attempts, retry_on_conflict
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


# compute_statistics registers a statistics file (a metadata commit Iceberg does not retry) and
# expire_data deletes through this: computed again when a writer committed meanwhile.
CONFLICT = "org.apache.iceberg.exceptions.CommitFailedException: Cannot commit: stale table metadata"


def test_a_commit_conflict_is_called_again_and_other_errors_are_not():
    calls = []

    def flaky() -> dict:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError(CONFLICT)
        return {"statistics_file": "s.stats"}

    assert retry_on_conflict(flaky) == {"statistics_file": "s.stats"} and len(calls) == 3

    def conflicting() -> dict:
        calls.append(1)
        raise RuntimeError(CONFLICT)

    calls.clear()
    with pytest.raises(RuntimeError, match="CommitFailedException"):
        retry_on_conflict(conflicting)  # a writer that never stops: three attempts, then the error
    assert len(calls) == 3

    def broken() -> dict:
        calls.append(1)
        raise RuntimeError("java.lang.UnsupportedOperationException: Unsupported type: interval")

    calls.clear()
    with pytest.raises(RuntimeError, match="Unsupported"):
        retry_on_conflict(broken)
    assert len(calls) == 1
