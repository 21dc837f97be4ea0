"""A retried op's attempts folded into one result, so the run's change, effects and failures count
every commit of every attempt (Dagster retries the data-file rewrite while partitions fail)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TypeVar

from icelake_assets.maintenance.results.base import OpResult

R = TypeVar("R", bound=OpResult)


def merge_attempts(attempts: Sequence[R]) -> R:
    """The attempts of one op (oldest first) as one result: it acted if any attempt acted, its
    snapshot_before is the first attempt's, its counts are summed (each result's ``folded``), its
    failures are the last's."""
    if len(attempts) == 1:
        return attempts[0]
    first, last = attempts[0], attempts[-1]
    return replace(
        last.folded(attempts),
        acted=any(a.acted for a in attempts),
        reason=f"{len(attempts)} attempts; last: {last.reason}",
        duration_s=round(sum(a.duration_s for a in attempts), 3),
        snapshot_before=first.snapshot_before,
        merged_attempts=len(attempts),
    )


__all__ = ["merge_attempts"]
