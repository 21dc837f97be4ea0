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

    def merged_ops(self) -> list[dict[str, Any]]:
        """One outcome per op: the attempts of a retried op folded into one (:func:`merge_attempts`),
        so the run's change, effects and failures count every commit of every attempt."""
        merged: dict[str, list[dict[str, Any]]] = {}
        for o in self.ops:
            merged.setdefault(o["op"], []).append(o)
        return [merge_attempts(attempts) for attempts in merged.values()]

    def rewrite_commits(self) -> int:
        """Commits that this run's data-file rewrite made (partial progress commits per group)."""
        return sum(
            int(o["result"].get("snapshots_committed", 0))
            for o in self.ops
            if o["op"] == "rewrite_data_files" and o["acted"]
        )


# Counts an attempt adds to the ones before it; everything else describes the table as the last
# attempt left it (its failed partitions, its error) or as the first found it (``*_before``).
_SUMMED = (
    "rewritten_data_files_count",
    "added_data_files_count",
    "rewritten_bytes_count",
    "snapshots_committed",
    "dangling_delete_commits",
)
_FIRST = ("data_files_before", "small_files_before", "delete_files_before", "manifests_before")


def merge_attempts(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The attempts of one op (oldest first) as one outcome: it acted if any attempt acted, its
    snapshot_before is the first attempt's, its counts are summed, its failures are the last's."""
    if len(attempts) == 1:
        return attempts[0]
    first, last = attempts[0], attempts[-1]
    acted = [a for a in attempts if a["acted"]]
    result = dict(last["result"])
    for key in _SUMMED:
        values = [a["result"].get(key) for a in attempts]
        if any(isinstance(v, int) and not isinstance(v, bool) for v in values):
            result[key] = sum(v for v in values if isinstance(v, int) and not isinstance(v, bool))
    for key in _FIRST:
        if key in first["result"]:
            result[key] = first["result"][key]
    rewritten = [p for a in attempts for p in a["result"].get("partitions_rewritten", [])]
    if rewritten or "partitions_rewritten" in result:
        result["partitions_rewritten"] = sorted(set(rewritten) - set(result.get("partitions_failed", [])))
    result["attempts"] = len(attempts)
    return {
        **last,
        "acted": bool(acted),
        "reason": f"{len(attempts)} attempts; last: {last['reason']}",
        "duration_s": round(sum(float(a["duration_s"]) for a in attempts), 3),
        "snapshot_before": first["snapshot_before"],
        "result": result,
    }


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
