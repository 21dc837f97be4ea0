"""The launch order when the global run cap leaves fewer slots than tables wanting a run: the
overview's ranking (file opens saved per scan, then the finding's age; health/overview.priority_key).
The first ``free`` keep their launch, the others wait for the next tick."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from icelake_assets.health.overview import TableBenefit, priority_key

MAX_PRIORITY = 1_000_000  # dagster/priority is the benefit (file opens saved per scan), capped


def age_text(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 120
        else (f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h")
    )


@dataclass(frozen=True)
class Rank:
    """One table's place in the launch order of a tick."""

    table: str
    rank: int
    of: int
    benefit: int  # file opens saved per scan
    age: str  # of the finding
    queued: bool  # past the free run slots: no launch this tick

    @property
    def priority(self) -> int:
        return min(self.benefit, MAX_PRIORITY)

    @property
    def why(self) -> str:
        return (
            f"priority {self.rank} of {self.of}: {self.benefit} file opens saved per scan, "
            f"finding {self.age} old"
        )


def rank_launches(
    wanting: Sequence[tuple[str, TableBenefit | None]],
    found_at: Mapping[str, float],
    free: int | None,
    now: float,
) -> list[Rank]:
    """``wanting``: each table that wants a run, with its benefit; ``found_at``: when each finding was
    first seen; ``free``: the free run slots (None: no cap). Best first."""
    ordered = sorted(
        wanting,
        key=lambda tb: priority_key(tb[1], found_at[tb[0]]) if tb[1] is not None else (1,),
    )
    return [
        Rank(
            table,
            rank,
            len(ordered),
            benefit.benefit if benefit is not None else 0,
            age_text(now - found_at[table]),
            free is not None and rank > free,
        )
        for rank, (table, benefit) in enumerate(ordered, 1)
    ]
