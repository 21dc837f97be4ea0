"""Did each maintenance op fix what triggered it? Each op's effect check (maintenance/ops/effects.py)
re-evaluates its findings from metadata after the ops; this module holds the verdicts.

An op that acted is
* ``effective`` when the finding that triggered it passes afterwards (for a rewrite: none of the
  partitions it named is still a compaction candidate);
* ``partial`` when some of its partitions were fixed and others were not;
* ``overtaken`` when its finding fails again because others committed on top of it (a writer's new
  files or snapshots landed after the op, during the run): not the same nothing again, so the sensor
  judges the table afresh rather than holding the plan;
* ``ineffective`` when it committed nothing, or its finding still fails (with the reason);
* ``failed`` when it was denied access to the table's storage: not a plan that does nothing, a
  permission to fix (the run fails and is retried after its backoff, not held as ineffective).
The run's outcome is the worst of its ops'. ``relaunch_hold`` (planning/relaunch.py) keeps the sensor from relaunching an
ineffective plan on an unchanged table until the policy changes or a backoff passes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from icelake_assets.health.findings import Finding

Effect = Literal["effective", "partial", "overtaken", "ineffective", "failed"]
RANK = {"effective": 0, "partial": 1, "overtaken": 2, "ineffective": 3, "failed": 4}


@dataclass(frozen=True)
class OpEffect:
    op: str
    effect: Effect
    reason: str
    check: str | None = None  # the finding re-evaluated
    still_failing: tuple[str, ...] = ()  # partitions of a rewrite that are still candidates

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def finding_effect(op: str, finding: Finding, progress: str, others: int = 0) -> OpEffect:
    """Effective when ``finding`` passes after ``op``; ``others``: commits made on top of the op by
    others than its run (writers), which make a finding failing again ``overtaken``."""
    if finding.passed:
        return OpEffect(op, "effective", f"{finding.check} passes: {finding.summary}", finding.check)
    if others:
        return overtaken(op, finding.check, progress, others, finding.summary)
    return OpEffect(
        op,
        "ineffective",
        f"{finding.check} still fails after {op} ({progress}): {finding.summary}",
        finding.check,
    )


def overtaken(op: str, check: str, progress: str, others: int, summary: str) -> OpEffect:
    return OpEffect(
        op,
        "overtaken",
        f"{check} fails again after {op} ({progress}): {others} commit(s) by others landed on top of "
        f"it during the run, so the next state is judged afresh: {summary}",
        check,
    )


def worst(effects: Sequence[OpEffect]) -> OpEffect:
    """One effect for an op that did two things (a data rewrite and a position-delete compaction)."""
    if len(effects) == 1:
        return effects[0]
    bad = max(effects, key=lambda e: RANK[e.effect])
    still = tuple(dict.fromkeys(p for e in effects for p in e.still_failing))
    return OpEffect(bad.op, bad.effect, "; ".join(e.reason for e in effects), bad.check, still)


def run_outcome(effects: Sequence[OpEffect]) -> Effect | None:
    """The worst effect of the run's ops; None when no op acted."""
    return max((e.effect for e in effects), key=RANK.__getitem__, default=None)
