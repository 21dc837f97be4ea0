"""The launch order when the global run cap leaves fewer slots than tables wanting a run. Three rules,
in this order, each explained in the table's :attr:`Rank.why`:

1. **waited past the bound**: a table that has wanted a run for longer than ``max_wait_seconds`` (since
   its finding was first seen failing) goes first, oldest first, so no table waits for ever behind
   higher-benefit ones;
2. **benefit**: the overview's ranking (file opens saved per scan, then the finding's age;
   health/overview.priority_key) among the tables within their fair share of the run time;
3. **over its fair share**: a table (or namespace) whose maintenance runs took more than an equal share
   of the run time of the window goes after those under theirs, by benefit among themselves.

The first ``free`` keep their launch, the others wait for the next tick."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property

from icelake_assets.health.overview import TableBenefit, priority_key

MAX_PRIORITY = 1_000_000  # dagster/priority is the benefit (file opens saved per scan), capped


def age_text(seconds: float) -> str:
    return (
        f"{seconds:.0f} s"
        if seconds < 120
        else (f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h")
    )


def share_group(table: str, by: str) -> str:
    """A table's fair-share group: itself, or its catalog and namespace (``by="namespace"``)."""
    return table.rsplit(".", 1)[0] if by == "namespace" else table


class Rule(StrEnum):
    """Which rule placed a table in the launch order (the order of the members is the order's)."""

    WAITED = "waited past the bound"
    BENEFIT = "benefit"
    OVER_SHARE = "over its fair share"


@dataclass(frozen=True)
class Usage:
    """The maintenance run time of the window, by share group (a table, or a namespace):
    ``groups``: each table wanting a run → its group; ``used``: seconds its group's runs took in the
    window; every group competing (wanting a run or having used time) has an equal share of the total."""

    groups: Mapping[str, str]
    used: Mapping[str, float]
    window_seconds: float

    @cached_property  # once per tick, not once per table ranked (thousands may want a run)
    def fair_seconds(self) -> float:
        competing = set(self.groups.values()) | {g for g, s in self.used.items() if s > 0}
        return sum(self.used.values()) / len(competing) if competing else 0.0

    @staticmethod
    def of(wanting: Sequence[str], used: Mapping[str, float], by: str, window_seconds: float) -> Usage:
        """``used``: run seconds by table name; ``by``: "table" or "namespace" (its catalog and namespace)."""
        by_group: dict[str, float] = {}
        for table, seconds in used.items():
            by_group[share_group(table, by)] = by_group.get(share_group(table, by), 0.0) + seconds
        return Usage({w: share_group(w, by) for w in wanting}, by_group, window_seconds)

    def used_by(self, table: str) -> float:
        return self.used.get(self.groups.get(table, table), 0.0)

    def over(self, table: str) -> bool:
        return self.used_by(table) > self.fair_seconds


@dataclass(frozen=True)
class Rank:
    """One table's place in the launch order of a tick."""

    table: str
    rank: int
    of: int
    benefit: int  # file opens saved per scan
    age: str  # of the finding
    queued: bool  # past the free run slots: no launch this tick
    rule: Rule = Rule.BENEFIT
    waited_seconds: float = 0.0  # since the table's finding was first seen (it has wanted a run since)
    share: str = ""  # its group's run time against its fair share, when fair share was weighed
    bound: str = ""  # the wait bound, when one applies

    @property
    def priority(self) -> int:
        return min(self.benefit, MAX_PRIORITY)

    @property
    def why(self) -> str:
        rule = {
            Rule.WAITED: f"waited {self.age}, past the bound of {self.bound}",
            Rule.BENEFIT: "by benefit" + (f" ({self.share})" if self.share else ""),
            Rule.OVER_SHARE: f"over its fair share ({self.share})",
        }[self.rule]
        return (
            f"priority {self.rank} of {self.of}, {rule}: {self.benefit} file opens saved per scan, "
            f"finding {self.age} old"
        )


def _share_text(usage: Usage | None, table: str) -> str:
    if usage is None or usage.fair_seconds == 0:
        return ""  # no run time in the window: nothing to weigh
    return (
        f"ran {age_text(usage.used_by(table))} of the last {age_text(usage.window_seconds)}, "
        f"fair share {age_text(usage.fair_seconds)}"
    )


def rank_launches(
    wanting: Sequence[tuple[str, TableBenefit | None]],
    found_at: Mapping[str, float],
    free: int | None,
    now: float,
    max_wait_seconds: float | None = None,
    usage: Usage | None = None,
) -> list[Rank]:
    """``wanting``: each table that wants a run, with its benefit; ``found_at``: when each finding was
    first seen; ``free``: the free run slots (None: no cap); ``max_wait_seconds``: the bound past which
    a waiting table goes first (None: none); ``usage``: the window's run time (None: not weighed).
    Best first; ties are broken by the table's name, so the order is deterministic."""

    def rule(table: str) -> Rule:
        if max_wait_seconds is not None and now - found_at[table] > max_wait_seconds:
            return Rule.WAITED
        return Rule.OVER_SHARE if usage is not None and usage.over(table) else Rule.BENEFIT

    rules = {table: rule(table) for table, _ in wanting}
    order = list(Rule)

    def key(tb: tuple[str, TableBenefit | None]) -> tuple:
        table, benefit = tb
        tier = order.index(rules[table])
        if rules[table] == Rule.WAITED:
            return (tier, found_at[table], table)
        return (tier, *(priority_key(benefit, found_at[table]) if benefit is not None else (1,)), table)

    ordered = sorted(wanting, key=key)
    return [
        Rank(
            table,
            rank,
            len(ordered),
            benefit.benefit if benefit is not None else 0,
            age_text(now - found_at[table]),
            free is not None and rank > free,
            rules[table],
            now - found_at[table],
            _share_text(usage, table),
            age_text(max_wait_seconds) if max_wait_seconds is not None else "",
        )
        for rank, (table, benefit) in enumerate(ordered, 1)
    ]
