"""The state one maintenance run hands from op to op: where it started and what each op did
(typed op results, maintenance/results/models.py)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from icelake_assets.maintenance.ops.attempts import merge_attempts
from icelake_assets.maintenance.results.base import OpResult


@dataclass(frozen=True)
class RunState:
    table: str
    # The snapshot the run started from (validation moves it to where the first rewrite started).
    before_snapshot_id: int | None
    # The table's measures when the run started (stats summary: data_files, snapshots, ...).
    before: dict[str, int]
    ops: tuple[OpResult, ...] = ()
    # Spark, pyiceberg and DuckDB's agreement, when the policy asks for the cross-engine proof.
    cross_engine: str | None = None

    def with_op(self, outcome: OpResult) -> RunState:
        return replace(self, ops=(*self.ops, outcome))

    def acted(self) -> list[OpResult]:
        return [o for o in self.ops if o.acted]

    def merged_ops(self) -> list[OpResult]:
        """One result per op: the attempts of a retried op folded into one (:func:`merge_attempts`),
        so the run's change, effects and failures count every commit of every attempt."""
        merged: dict[str, list[OpResult]] = {}
        for o in self.ops:
            merged.setdefault(o.op, []).append(o)
        return [merge_attempts(attempts) for attempts in merged.values()]

    def rewrite_commits(self) -> int:
        """Commits that this run's data-file rewrite made (partial progress commits per group)."""
        return sum(o.data_commits() for o in self.ops)

    def rewrote(self) -> int:
        """Snapshots this run's rewrites (data files, position deletes, manifests) committed:
        statistics follow them."""
        return sum(o.snapshots_rewritten() for o in self.ops)


@dataclass(frozen=True)
class RunStates:
    """The states of every table a run maintains (a run may select several tables of a group), by
    table name, and the tables an op failed on (left out of the later ops, reported at validation)."""

    tables: dict[str, RunState] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def with_table(self, key: str, state: RunState) -> RunStates:
        return replace(self, tables={**self.tables, key: state})

    def with_error(self, key: str, error: str) -> RunStates:
        return replace(self, errors={**self.errors, key: error})


__all__ = ["RunState", "RunStates", "merge_attempts"]
