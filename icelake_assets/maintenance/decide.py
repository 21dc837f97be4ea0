"""One table's maintenance decision from its metadata: each op's decision, the guards' verdict and
what the table's mode makes of it. Shared by the maintenance sensor (orchestration/sensors.py) and
``icelake plan`` / ``icelake approve`` (operator/), so the preview is the decision the sensor takes.

No Dagster and no Spark: statistics come from pyiceberg metadata (health/stats.py). What only the
sensor knows (runs queued or running, the backoff after a failed run, the global run cap) is not here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance import plan
from icelake_assets.maintenance.guards import Verdict, evaluate_guards
from icelake_assets.policies import decide_action
from icelake_assets.settings import Mode, Policy


class Outcome(StrEnum):
    """What the maintenance sensor records for a table on a tick. The values are the words the audit,
    the cursor, the run tags and the UI show (a StrEnum: each equals its word)."""

    # The table's decision (decide_table): metadata, policy and mode alone.
    LAUNCHED = "launched"  # a run is requested
    PROPOSED = "proposed"  # mode propose: what would be launched, recorded, nothing launched
    OBSERVED = "observed"  # mode observe: checks only
    DEFERRED = "deferred"  # a writer committed within the quiet period
    HELD = "held"  # the cost guard: over guards.max_rewrite_bytes, awaiting approval
    SKIPPED = "skipped"  # no op past its threshold
    # What the sensor adds from the instance and the tick (orchestration/sensors.py, run_model.py).
    IN_FLIGHT = "in_flight"  # a run of the table is queued or running
    BACKOFF = "backoff"  # a failed or ineffective run: not relaunched yet
    QUEUED_BY_PRIORITY = "queued_by_priority"  # under the global run cap, a better table went first
    ERROR = "error"  # the table could not be evaluated (its own fault only)


# Sensor outcomes a table's decision can have before the run model (in flight, backoff, priority).
OUTCOMES = (
    Outcome.LAUNCHED,
    Outcome.PROPOSED,
    Outcome.OBSERVED,
    Outcome.DEFERRED,
    Outcome.HELD,
    Outcome.SKIPPED,
)


@dataclass(frozen=True)
class TableDecision:
    """``outcome``: what the sensor records for the table (launched, proposed, observed, deferred,
    held, skipped); ``action``: what the mode makes of a guards' ``launch`` (launch, record, nothing)."""

    decisions: tuple[plan.Decision, ...]
    verdict: Verdict
    rewrite: plan.RewritePlan
    action: str
    outcome: Outcome

    @property
    def acting(self) -> tuple[str, ...]:
        return tuple(d.op for d in self.decisions if d.act)

    @property
    def awaiting_approval(self) -> bool:
        """Held by the cost guard, or proposed (mode propose): an operator's approval launches it."""
        return self.outcome in (Outcome.HELD, Outcome.PROPOSED)


def op_decisions(stats: TableStats, policy: Policy, orphans: Sequence[Any] | None) -> list[plan.Decision]:
    """Each op's decision; ``orphans`` (the removable orphan files, each with a ``size``) only when
    storage was listed (None: the orphan op is not decided)."""
    decisions = [
        plan.decide_expire(stats, policy),
        plan.decide_rewrite(stats, policy),
        plan.decide_manifests(stats, policy),
    ]
    if orphans is not None:
        decisions.insert(1, plan.decide_orphans(len(orphans), sum(o.size for o in orphans), policy))
    return decisions


def decide_table(
    stats: TableStats, policy: Policy, mode: Mode, orphans: Sequence[Any] | None = None
) -> TableDecision:
    """The decision the maintenance sensor takes for a table in ``mode`` (see TableDecision)."""
    decisions = op_decisions(stats, policy, orphans)
    rewrite = plan.plan_rewrite(stats, policy)
    verdict = evaluate_guards(
        stats,
        decisions,
        policy.guards.quiet_period_minutes,
        policy.guards.max_rewrite_bytes,
        partitions=rewrite.partitions,
    )
    action = decide_action(mode, verdict.action == "launch")
    outcome = {"defer": Outcome.DEFERRED, "hold": Outcome.HELD, "skip": Outcome.SKIPPED}.get(
        verdict.action, Outcome.LAUNCHED
    )
    if verdict.action == "launch":
        outcome = {"launch": Outcome.LAUNCHED, "record": Outcome.PROPOSED, "nothing": Outcome.OBSERVED}[
            action
        ]
    return TableDecision(tuple(decisions), verdict, rewrite, action, outcome)
