"""compute_statistics' registration of a statistics file: a metadata commit Iceberg does not retry, so
the op computes again when a writer committed meanwhile (other failures are not retried)."""

import pytest

from icelake_assets.maintenance.ops.statistics import _retrying

CONFLICT = "org.apache.iceberg.exceptions.CommitFailedException: Cannot commit: stale table metadata"


def test_a_commit_conflict_is_computed_again_and_other_errors_are_not():
    calls = []

    def flaky() -> dict:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError(CONFLICT)
        return {"statistics_file": "s.stats"}

    assert _retrying(flaky) == {"statistics_file": "s.stats"} and len(calls) == 3

    def conflicting() -> dict:
        calls.append(1)
        raise RuntimeError(CONFLICT)

    calls.clear()
    with pytest.raises(RuntimeError, match="CommitFailedException"):
        _retrying(conflicting)  # a writer that never stops: three attempts, then the error
    assert len(calls) == 3

    def broken() -> dict:
        calls.append(1)
        raise RuntimeError("java.lang.UnsupportedOperationException: Unsupported type: interval")

    calls.clear()
    with pytest.raises(RuntimeError, match="Unsupported"):
        _retrying(broken)
    assert len(calls) == 1
