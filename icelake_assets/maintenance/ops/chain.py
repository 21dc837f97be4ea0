"""Each maintenance op as one descriptor, and the chain they form in order.

A ``MaintenanceOp`` holds what the product knows of an op: its planning half (name, the checks it
heals, its decision: planning/op_plans.py), its Spark work, its result model (which renders its
metadata and audit details), its effect check, the run inputs it needs and whether it commits
rewritten files. The graph, the effect verdicts, the attempts, the run metadata, ``icelake plan``, the
UI descriptions and docs/loop.md's table iterate ``MAINTENANCE_OPS``; adding an op is one
descriptor here plus its evaluator in planning/."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, cast

from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance.ops import effects, expire_data, restore_points, rewrite, runner, statistics
from icelake_assets.maintenance.results.base import OpResult
from icelake_assets.maintenance.results.effect import OpEffect
from icelake_assets.maintenance.results.expire_data import ExpireDataResult
from icelake_assets.maintenance.results.models import (
    ExpireResult,
    ManifestResult,
    OrphanResult,
    RewriteResult,
    StatisticsResult,
)
from icelake_assets.maintenance.results.restore_points import RestorePointResult
from icelake_assets.planning.op_plans import OP_PLANS, OpPlan, op_plan
from icelake_assets.settings import Policy

R = TypeVar("R", bound=OpResult)
# What an op's work takes besides (spark, ref, table, policy, stats_fn), supplied by the run:
# the orphan scan of the table's storage and the orphan candidates earlier runs recorded (with the
# run's id), the run's partition scope (and approval, progress), the snapshots this run's rewrites
# committed before it, the run's id (names its restore point), or whether an operator approved the run.
RunInput = Literal[
    "orphan_scan",
    "orphan_candidates",
    "partition_scope",
    "data_commits",
    "rewritten_snapshots",
    "run_id",
    "approval",
]
EffectCheck = Callable[[R, TableStats, Policy, int], OpEffect]


@dataclass(frozen=True)
class MaintenanceOp(Generic[R]):
    plan: OpPlan
    result: type[R]
    work: Callable[..., R]  # (spark_fn, ref, table, policy, stats_fn, **inputs) -> R
    effect: EffectCheck[R]
    alias: str  # its short metadata key (the UI's key column is narrow)
    inputs: tuple[RunInput, ...] = ()
    rewrites: bool = False  # commits rewritten files: validation's row baseline starts at the first

    @property
    def name(self) -> str:
        return self.plan.name

    @property
    def heals(self) -> tuple[str, ...]:
        return self.plan.heals

    def own(self, res: OpResult) -> R:
        """``res`` as this op's result (results carry their op's name)."""
        if res.op != self.name:
            raise ValueError(f"a {res.op} result is not {self.name}'s")
        return cast(R, res)

    def find(self, ops: Sequence[OpResult]) -> R | None:
        """This op's result among a run's (merged) results."""
        return next((self.own(o) for o in ops if o.op == self.name), None)

    def judge(self, res: OpResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
        return self.effect(self.own(res), after, policy, others)


RESTORE_POINTS_OP = MaintenanceOp(
    op_plan("manage_restore_points"),
    RestorePointResult,
    restore_points.manage_restore_points,
    effects.restore_points_effect,
    "restore",
    inputs=("run_id",),
)
EXPIRE_DATA_OP = MaintenanceOp(
    op_plan("expire_data"),
    ExpireDataResult,
    expire_data.expire_data,
    effects.expire_data_effect,
    "expire_data",
    inputs=("approval",),
)
EXPIRE_OP = MaintenanceOp(
    op_plan("expire_snapshots"), ExpireResult, runner.expire_snapshots, effects.expire_effect, "expire"
)
ORPHANS_OP = MaintenanceOp(
    op_plan("remove_orphan_files"),
    OrphanResult,
    runner.remove_orphan_files,
    effects.orphans_effect,
    "orphans",
    inputs=("orphan_scan", "orphan_candidates"),
)
REWRITE_OP = MaintenanceOp(
    op_plan("rewrite_data_files"),
    RewriteResult,
    rewrite.rewrite_data_files,
    effects.rewrite_effect,
    "rewrite",
    inputs=("partition_scope",),
    rewrites=True,
)
MANIFESTS_OP = MaintenanceOp(
    op_plan("rewrite_manifests"),
    ManifestResult,
    runner.rewrite_manifests,
    effects.manifests_effect,
    "manifests",
    inputs=("data_commits",),
    rewrites=True,
)
STATISTICS_OP = MaintenanceOp(
    op_plan("compute_statistics"),
    StatisticsResult,
    statistics.compute_statistics,
    effects.statistics_effect,
    "statistics",
    inputs=("rewritten_snapshots",),
)
MAINTENANCE_OPS: tuple[MaintenanceOp[Any], ...] = (
    RESTORE_POINTS_OP,
    EXPIRE_DATA_OP,
    EXPIRE_OP,
    ORPHANS_OP,
    REWRITE_OP,
    MANIFESTS_OP,
    STATISTICS_OP,
)
assert tuple(o.plan for o in MAINTENANCE_OPS) == OP_PLANS, "the chain follows planning/op_plans.py's order"
REWRITING_OPS = tuple(o.name for o in MAINTENANCE_OPS if o.rewrites)


def op_named(name: str) -> MaintenanceOp[Any]:
    for o in MAINTENANCE_OPS:
        if o.name == name:
            return o
    raise KeyError(f"unknown maintenance op {name!r} (known: {', '.join(o.name for o in MAINTENANCE_OPS)})")


def judge_effects(
    ops: Sequence[OpResult], after: TableStats, policy: Policy, others: Mapping[str, int] | None = None
) -> list[OpEffect]:
    """The effect of every op that acted, judged on ``after`` by its own check. ``others``: per op,
    the commits others made on top of it (post_run.commits_by_others): a finding they made fail
    again is ``overtaken``."""
    return [op_named(o.op).judge(o, after, policy, (others or {}).get(o.op, 0)) for o in ops if o.acted]


def chain_markdown() -> str:
    """The chain as docs/loop.md shows it (a test keeps the two equal)."""
    lines = [
        "| # | op | heals | takes from the run | commits rewritten files | what it does |",
        "|---|---|---|---|---|---|",
    ]
    for i, o in enumerate(MAINTENANCE_OPS, 1):
        heals = ", ".join(f"`{c}`" for c in o.heals) or "—"
        inputs = ", ".join(f"`{n}`" for n in o.inputs) or "—"
        lines.append(
            f"| {i} | `{o.name}` | {heals} | {inputs} | {'yes' if o.rewrites else 'no'} | {o.plan.summary} |"
        )
    return "\n".join(lines)
