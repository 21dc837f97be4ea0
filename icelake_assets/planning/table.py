"""One table's maintenance plan.

``decide_table``: from its metadata, policy and mode alone, each op's decision, the guards' verdict and
what the mode makes of it; shared with ``icelake plan`` / ``icelake approve`` (operate/), so the
preview is the decision the sensor takes. ``plan_table``: that decision, then what the sensor
remembers (planning/history.py: the last ineffective run, runs queued or running, the backoff after
failed runs) and the table's launch priority: the sensor only converts the TablePlan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from icelake_assets.health.orphan_phases import PendingSummary
from icelake_assets.health.overview import TableBenefit, table_benefit
from icelake_assets.health.stats import TableStats
from icelake_assets.planning import health, rewrite, statistics
from icelake_assets.planning.decision import Decision
from icelake_assets.planning.guards import Verdict, evaluate_guards, run_guard
from icelake_assets.planning.history import History
from icelake_assets.planning.op_plans import DecisionInputs, SizedFile, decisions
from icelake_assets.planning.outcome import OUTCOMES as OUTCOMES, Outcome
from icelake_assets.planning.relaunch import relaunch_hold
from icelake_assets.policies import decide_action
from icelake_assets.settings import Mode, Policy


@dataclass(frozen=True)
class TableDecision:
    """``outcome``: what the sensor records for the table (launched, proposed, observed, deferred,
    held, skipped); ``action``: what the mode makes of a guards' ``launch`` (launch, record, nothing)."""

    decisions: tuple[Decision, ...]
    verdict: Verdict
    rewrite: rewrite.RewritePlan
    action: str
    outcome: Outcome
    statistics: statistics.StatisticsPlan | None = None  # what compute_statistics would sketch

    @property
    def acting(self) -> tuple[str, ...]:
        return tuple(d.op for d in self.decisions if d.act)

    @property
    def awaiting_approval(self) -> bool:
        """Held by the cost guard, or proposed (mode propose): an operator's approval launches it."""
        return self.outcome in (Outcome.HELD, Outcome.PROPOSED)


def op_decisions(
    stats: TableStats,
    policy: Policy,
    orphans: Sequence[SizedFile] | None,
    statistics_refused: statistics.StatisticsRefusal | None = None,
    orphan_pending: PendingSummary | None = None,
) -> list[Decision]:
    """Each op's decision in chain order (planning/op_plans.py); ``orphans`` (the removable orphan
    files) only when storage was listed (None: the orphan op is not decided), ``orphan_pending`` those
    in their recovery window; ``statistics_refused``: the store refused the last run's statistics file
    (compute_statistics then waits)."""
    return decisions(
        DecisionInputs(
            stats, policy, orphans, statistics_refused=statistics_refused, orphan_pending=orphan_pending
        )
    )


def decide_table(
    stats: TableStats,
    policy: Policy,
    mode: Mode,
    orphans: Sequence[SizedFile] | None = None,
    statistics_refused: statistics.StatisticsRefusal | None = None,
    orphan_pending: PendingSummary | None = None,
) -> TableDecision:
    """The decision the maintenance sensor takes for a table in ``mode`` (see TableDecision)."""
    decisions = op_decisions(stats, policy, orphans, statistics_refused, orphan_pending)
    planned = rewrite.plan_rewrite(stats, policy)
    verdict = evaluate_guards(
        stats,
        decisions,
        policy.guards.quiet_period_minutes,
        policy.guards.max_rewrite_bytes,
        partitions=planned.partitions,
        position_delete_bytes=planned.position_delete_bytes,
    )
    action = decide_action(mode, verdict.action == "launch")
    outcome = {"defer": Outcome.DEFERRED, "hold": Outcome.HELD, "skip": Outcome.SKIPPED}.get(
        verdict.action, Outcome.LAUNCHED
    )
    if verdict.action == "launch":
        outcome = {"launch": Outcome.LAUNCHED, "record": Outcome.PROPOSED, "nothing": Outcome.OBSERVED}[
            action
        ]
    return TableDecision(
        tuple(decisions), verdict, planned, action, outcome, statistics.plan_statistics(stats, policy)
    )


# The audit's word for a table's outcome (observed tables are not recorded).
_RECORDED = {
    Outcome.LAUNCHED: "launched",
    Outcome.PROPOSED: "proposed",
    Outcome.DEFERRED: "deferred",
    Outcome.HELD: "held",
}


@dataclass(frozen=True)
class TablePlan:
    """What the sensor does with a table on a tick.

    ``outcome``/``reason``: what it records and shows; ``record``: the audit's decision word (None:
    not recorded, mode observe); ``decisions``: each op's; ``verdict``: the guards' (its reason is
    ``reason`` unless the run model held the launch back); ``rewrite``: the partitions the rewrite
    takes; ``priority``: the overview's view of the table, which ranks the launches."""

    outcome: Outcome
    reason: str
    record: str | None
    decisions: tuple[Decision, ...]
    verdict: Verdict
    rewrite: rewrite.RewritePlan
    priority: TableBenefit

    @property
    def orphans_pending(self) -> bool:
        """Its orphan scan found files to remove: until a run takes them, the table is scanned again
        on its next evaluation (a deferred or held table must not forget them until the next scan)."""
        return any(d.op == "remove_orphan_files" and d.act for d in self.decisions)


def plan_table(
    stats: TableStats,
    policy: Policy,
    history: History,
    now: float,
    *,
    mode: Mode,
    orphans: Sequence[SizedFile] | None = None,
    name: str | None = None,
    orphan_pending: PendingSummary | None = None,
) -> TablePlan:
    """The table's decision (decide_table), then the guards only the sensor's memory can apply, in
    this order: the store's refusal of the last run's statistics file (compute_statistics waits and
    the table is decided again without it), an ineffective last run on the same table and policy
    (relaunch hold: ``backoff``, recorded as skipped), then a run queued or running (``in_flight``) or
    the backoff after failed runs (``backoff``), both recorded as deferred. ``now``: epoch s;
    ``name``: the table's full name."""
    decided = decide_table(stats, policy, mode, orphans, orphan_pending=orphan_pending)
    outcome = decided.outcome
    lapse = policy.loop.relaunch_backoff_hours * 3600
    last = (
        history.last_outcome()
        if outcome == Outcome.LAUNCHED
        and history.last_outcome is not None
        and history.outcome_may_count(now, lapse)
        else None
    )
    age_hours = (now - last.ended_at) / 3600 if last is not None else None
    if last is not None and statistics.OP in decided.acting:
        if refused := statistics.statistics_refusal(last.tags, policy, age_hours):
            decided = decide_table(
                stats, policy, mode, orphans, statistics_refused=refused, orphan_pending=orphan_pending
            )
            outcome = decided.outcome
    verdict = decided.verdict
    reason, record = verdict.reason, _RECORDED.get(outcome, "skipped")
    if outcome == Outcome.LAUNCHED and last is not None:
        if why := relaunch_hold(last.tags, stats.current_snapshot_id, policy, age_hours):
            outcome, reason, record = Outcome.BACKOFF, why, "skipped"
            verdict = Verdict("skip", why, verdict.ops, verdict.details)
    if outcome == Outcome.LAUNCHED and (held := run_guard(history.runs, now)):
        kind, reason = held
        outcome, record = (Outcome.IN_FLIGHT if kind == "in_flight" else Outcome.BACKOFF), "deferred"
    return TablePlan(
        outcome,
        reason,
        None if outcome == Outcome.OBSERVED else record,
        decided.decisions,
        verdict,
        decided.rewrite,
        table_benefit(health.evaluate(stats, policy, name=name)),
    )
