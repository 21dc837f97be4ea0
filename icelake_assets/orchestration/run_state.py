"""The state one maintenance run hands from op to op: where it started and what each op did.

Typed so that every op reads the same fields; the op outcomes stay plain dicts
(:meth:`~icelake_assets.maintenance.runner.OpOutcome.to_dict`) because they are also the audit's and
the effect verification's input."""

from __future__ import annotations

from dataclasses import dataclass, replace
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


__all__ = ["RunState"]
