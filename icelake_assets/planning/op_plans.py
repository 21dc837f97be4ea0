"""The maintenance ops as the decision core knows them, in chain order: each op's name, the health
checks it heals and its decision from one table's numbers (the evaluator of its concern module).

This is the planning half of an op's descriptor; maintenance/ops/chain.py adds its Spark work, result,
effect check and rendering. The sensor's plan, ``icelake plan``, the checks' links to the job that
heals them and the graph all follow this one order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from icelake_assets.health.findings import CHECKS
from icelake_assets.health.orphan_phases import PendingSummary
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.data_retention import decide_expire_data
from icelake_assets.planning.decision import Decision
from icelake_assets.planning.manifests import decide_manifests
from icelake_assets.planning.orphans import decide_orphans
from icelake_assets.planning.restore_points import RESTORE_POINTS, decide_restore_points
from icelake_assets.planning.rewrite import decide_rewrite
from icelake_assets.planning.snapshots import decide_expire
from icelake_assets.planning.statistics import StatisticsRefusal, decide_statistics
from icelake_assets.settings import Policy

EXPIRE_DATA = "expire_data"
EXPIRE = "expire_snapshots"
ORPHANS = "remove_orphan_files"
REWRITE = "rewrite_data_files"
MANIFESTS = "rewrite_manifests"
STATISTICS = "compute_statistics"


class SizedFile(Protocol):
    @property
    def size(self) -> int: ...


@dataclass(frozen=True)
class DecisionInputs:
    """What any op's decision may read: the table's numbers and policy; ``orphans``: the removable
    orphan files when storage was listed (None: not listed, the orphan op is not decided);
    ``rewrite_commits``: snapshots this run's rewrites committed before the op (0 in a plan)."""

    stats: TableStats
    policy: Policy
    orphans: Sequence[SizedFile] | None = None
    rewrite_commits: int = 0
    statistics_refused: StatisticsRefusal | None = None  # the store refused the last run's statistics
    orphan_pending: PendingSummary | None = None  # orphans in their recovery window (two phases)


@dataclass(frozen=True)
class OpPlan:
    """One op for the decision core: ``heals`` the checks whose failure it answers; ``decide``
    returns its decision, or None when its inputs are not there (orphans without a listing)."""

    name: str
    heals: tuple[str, ...]
    summary: str  # what it does, in one line (UI descriptions, docs/loop.md)
    decide: Callable[[DecisionInputs], Decision | None]


def _orphans(i: DecisionInputs) -> Decision | None:
    if i.orphans is None:
        return None
    return decide_orphans(len(i.orphans), sum(o.size for o in i.orphans), i.policy, i.orphan_pending)


OP_PLANS: tuple[OpPlan, ...] = (
    OpPlan(
        RESTORE_POINTS,
        (),
        "tags the current snapshot as a restore point when one is due; removes restore points past their age",
        lambda i: decide_restore_points(i.stats, i.policy),
    ),
    OpPlan(
        EXPIRE_DATA,
        ("data_retention",),
        "deletes rows past the retention cut-off (whole partitions metadata-only where they align)",
        lambda i: decide_expire_data(i.stats, i.policy),
    ),
    OpPlan(
        EXPIRE,
        ("snapshot_retention",),
        "expires snapshots past the retention policy (count and age)",
        lambda i: decide_expire(i.stats, i.policy),
    ),
    OpPlan(
        ORPHANS,
        ("orphan_files",),
        "records files no snapshot references (older than the policy's age), removes them a recovery window later",
        _orphans,
    ),
    OpPlan(
        REWRITE,
        ("small_files", "delete_files", "layout_drift"),
        "compacts small files, applies or compacts delete files, rewrites files of older specs",
        lambda i: decide_rewrite(i.stats, i.policy),
    ),
    OpPlan(
        MANIFESTS,
        ("manifest_fragmentation",),
        "rewrites the current snapshot's manifests into fewer",
        lambda i: decide_manifests(i.stats, i.policy, i.rewrite_commits),
    ),
    OpPlan(
        STATISTICS,
        ("statistics",),
        "writes NDV sketches (Puffin) and partition statistics for the current snapshot",
        lambda i: decide_statistics(i.stats, i.policy, i.rewrite_commits, refused=i.statistics_refused),
    ),
)


def op_plan(name: str) -> OpPlan:
    for plan in OP_PLANS:
        if plan.name == name:
            return plan
    raise KeyError(f"unknown maintenance op {name!r} (known: {', '.join(p.name for p in OP_PLANS)})")


def healers(check: str) -> tuple[str, ...]:
    """The ops that heal ``check``, in chain order."""
    return tuple(p.name for p in OP_PLANS if check in p.heals)


def decisions(inputs: DecisionInputs) -> list[Decision]:
    """Every op's decision, in chain order (an op whose inputs are missing is left out)."""
    return [d for plan in OP_PLANS if (d := plan.decide(inputs)) is not None]


__all__ = ["CHECKS", "OP_PLANS", "DecisionInputs", "OpPlan", "decisions", "healers", "op_plan"]
