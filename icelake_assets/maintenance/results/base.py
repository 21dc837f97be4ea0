"""The base of every op's typed result (maintenance/results/models.py): what one op did to one table in one
attempt, and the plain-JSON pieces results are made of (a procedure's row, the audit's details)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar, Literal, Self

# One row of an Iceberg procedure's output (``CALL ... system.*``), kept whole for the audit: its
# columns differ between Iceberg versions, the ones read here have typed accessors.
Scalar = str | int | float | bool | None
ProcedureRow = Mapping[str, Scalar]
Details = dict[str, object]


@dataclass(frozen=True)
class MetadataItem:
    """A value of an op's result that the run's materialization shows beside its numbers, by kind
    (orchestration turns each kind into Dagster's metadata value)."""

    key: str
    kind: Literal["int", "json", "path"]
    value: object


def count_of(row: ProcedureRow, key: str) -> int | None:
    """A count of a procedure row, None when absent or not a number (as the metadata leaves it out)."""
    value = row.get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


# Every op's result class by its op's name, filled as each class is declared (the codec reads it).
RESULT_CLASSES: dict[str, type[OpResult]] = {}


@dataclass(frozen=True, kw_only=True)
class OpResult:
    """What one op did to one table in one attempt: whether it acted and why, its signals, its time
    and the snapshots around it; subclasses add what the op itself measured."""

    op: ClassVar[str] = ""
    acted: bool
    reason: str
    signals: Mapping[str, object] = field(default_factory=dict)
    duration_s: float = 0.0
    snapshot_before: int | None = None
    snapshot_after: int | None = None
    attempt: int = 1  # the op's attempt (Dagster retries the rewrite while partitions fail)
    merged_attempts: int | None = None  # the attempts folded into this one (merge_attempts)
    # The post-run effect verification's verdict on this op (maintenance/results/effect.py), for the audit.
    effect: str | None = None
    effect_reason: str | None = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.op:
            RESULT_CLASSES[cls.op] = cls

    def _details(self) -> Details:
        return {}

    def details(self) -> Details:
        """The op's result as the audit records it (the ``result`` of the former outcome dicts)."""
        out = self._details()
        if self.merged_attempts is not None:
            out["attempts"] = self.merged_attempts
        if self.effect is not None:
            out["effect"], out["effect_reason"] = self.effect, self.effect_reason
        return out

    def to_dict(self) -> Details:
        return {
            "op": self.op,
            "acted": self.acted,
            "reason": self.reason,
            "signals": dict(self.signals),
            "result": self.details(),
            "duration_s": self.duration_s,
            "snapshot_before": self.snapshot_before,
            "snapshot_after": self.snapshot_after,
            "attempt": self.attempt,
        }

    def with_effect(self, effect: str, reason: str) -> OpResult:
        return replace(self, effect=effect, effect_reason=reason)

    # What each op renders and counts, overridden by the ops that have it (maintenance/results/models.py).
    def metrics(self) -> dict[str, int | None]:
        """The numbers worth plotting, by metadata key (None: not measured)."""
        return {}

    def did(self) -> str:
        """What the op did when it acted, numbers first, each naming what it counts."""
        return self.reason

    def metadata_items(self) -> tuple[MetadataItem, ...]:
        """What the materialization shows of it beside its numbers (files, partition keys)."""
        return ()

    def folded(self, attempts: Sequence[Self]) -> Self:
        """This, the last attempt, with what the earlier ``attempts`` (oldest first) add."""
        return self

    def data_commits(self) -> int:
        """Commits of a data-file rewrite (the manifest rewrite consolidates them)."""
        return 0

    def snapshots_rewritten(self) -> int:
        """Snapshots of rewritten files it committed (statistics follow them)."""
        return 0

    def expiry_commits(self) -> dict[int, int]:
        """Snapshots that deleted rows on purpose (row retention), each with the live rows its summary
        says it removed: validation expects exactly that change from them."""
        return {}

    def expiry_mismatch(self) -> str | None:
        """What the op's own counts of the rows it meant to delete contradict (validation fails)."""
        return None
