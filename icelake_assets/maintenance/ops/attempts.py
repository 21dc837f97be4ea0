"""A retried op's attempts folded into one result, so the run's change, effects and failures count
every commit of every attempt (Dagster retries the data-file rewrite while partitions fail)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar, cast

from icelake_assets.maintenance.results.models import DanglingDeletes, ManifestResult, OpResult, RewriteResult

R = TypeVar("R", bound=OpResult)

# Procedure counts an attempt adds to the ones before it.
_SUMMED_PROCEDURE = ("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count")


def merge_attempts(attempts: Sequence[R]) -> R:
    """The attempts of one op (oldest first) as one result: it acted if any attempt acted, its
    snapshot_before is the first attempt's, its counts are summed, its failures are the last's."""
    if len(attempts) == 1:
        return attempts[0]
    first, last = attempts[0], attempts[-1]
    merged = replace(
        _merged(last, attempts),
        acted=any(a.acted for a in attempts),
        reason=f"{len(attempts)} attempts; last: {last.reason}",
        duration_s=round(sum(a.duration_s for a in attempts), 3),
        snapshot_before=first.snapshot_before,
        merged_attempts=len(attempts),
    )
    return cast(R, merged)


def _merged(last: OpResult, attempts: Sequence[OpResult]) -> OpResult:
    """The last attempt with what the earlier ones add."""
    if isinstance(last, RewriteResult):
        return _rewrite(last, attempts)
    if isinstance(last, ManifestResult):
        return _manifests(last, attempts)
    return last


def _rewrite(last: RewriteResult, attempts: Sequence[OpResult]) -> RewriteResult:
    """Counts add up over the attempts, ``*_before`` is the first's, failures are the last's."""
    tries = [a for a in attempts if isinstance(a, RewriteResult)]
    procedure = dict(last.procedure)
    for key in _SUMMED_PROCEDURE:
        counts = [c for a in tries if (c := _int_value(a.procedure.get(key))) is not None]
        if counts:
            procedure[key] = sum(counts)
    committed = [a.snapshots_committed for a in tries if a.snapshots_committed is not None]
    dangling = [a.dangling for a in tries if a.dangling is not None]
    merged = replace(
        last,
        procedure=procedure,
        snapshots_committed=sum(committed) if committed else last.snapshots_committed,
        dangling=(
            replace(last.dangling or DanglingDeletes(), commits=sum(d.commits for d in dangling))
            if dangling
            else last.dangling
        ),
    )
    first = tries[0] if tries else None
    if first is not None and first.acted:
        merged = replace(
            merged,
            data_files_before=first.data_files_before,
            small_files_before=first.small_files_before,
            delete_files_before=first.delete_files_before,
        )
    rewritten = {p for a in tries for p in a.partitions_rewritten}
    if rewritten or last.acted:
        merged = replace(merged, partitions_rewritten=tuple(sorted(rewritten - set(last.partitions_failed))))
    return merged


def _manifests(last: ManifestResult, attempts: Sequence[OpResult]) -> ManifestResult:
    first = attempts[0]
    if isinstance(first, ManifestResult) and first.acted:
        return replace(last, manifests_before=first.manifests_before)
    return last


def _int_value(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


__all__ = ["merge_attempts"]
