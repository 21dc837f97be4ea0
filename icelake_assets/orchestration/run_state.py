"""The state one maintenance run hands from op to op: where it started and what each op did.

Typed so that every op reads the same fields; the op outcomes stay plain dicts
(:meth:`~icelake_assets.maintenance.runner.OpOutcome.to_dict`) because they are also the audit's and
the effect verification's input."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


@dataclass(frozen=True)
class RunState:
    table: str
    # The snapshot the run started from (validation moves it to where the first rewrite started).
    before_snapshot_id: int | None
    # The table's measures when the run started (stats summary: data_files, snapshots, ...).
    before: dict[str, int]
    ops: tuple[dict[str, Any], ...] = ()
    # Spark, pyiceberg and DuckDB's agreement, when the policy asks for the cross-engine proof.
    cross_engine: str | None = None

    def with_op(self, outcome: dict[str, Any]) -> RunState:
        return replace(self, ops=(*self.ops, outcome))

    def acted(self) -> list[dict[str, Any]]:
        return [o for o in self.ops if o["acted"]]

    def rewrite_commits(self) -> int:
        """Commits that this run's data-file rewrite made (partial progress commits per group)."""
        return sum(
            int(o["result"].get("snapshots_committed", 0))
            for o in self.ops
            if o["op"] == "rewrite_data_files" and o["acted"]
        )


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


__all__ = ["RunState", "RunStates"]
