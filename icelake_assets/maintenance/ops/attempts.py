"""A retried op's attempts folded into one result, so the run's change, effects and failures count
every commit of every attempt (Dagster retries the data-file rewrite while partitions fail); and a
call retried in the op while a writer's commit conflicts with it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TypeVar

from icelake_assets.causes import root_cause
from icelake_assets.maintenance.results.base import OpResult

R = TypeVar("R", bound=OpResult)
T = TypeVar("T")
# A commit that conflicts with a writer's is made again on the new snapshot: three attempts in the op,
# then the conflict fails the run, which the sensor retries later (runs/model.py CONFLICTS_BEFORE_FAILURE).
CONFLICT_ATTEMPTS = 3


def retry_on_conflict(call: Callable[[], T], attempts: int = CONFLICT_ATTEMPTS) -> T:
    """``call()``, called again while it fails for a concurrent commit (``commit_conflict``); ``call``
    must plan on fresh metadata each time (a failed commit changed nothing)."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except Exception as err:
            if attempt == attempts or root_cause(err).kind != "commit_conflict":
                raise
    raise AssertionError("unreachable")


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
