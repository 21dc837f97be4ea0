"""A table's health from its metadata: every concern's finding (each from its evaluator, beside the
decision of the same numbers), the score and the status (health/score.py's one rule)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

from icelake_assets.health.findings import Finding
from icelake_assets.health.overview import TableHealth
from icelake_assets.health.score import verdict
from icelake_assets.health.stats import TableStats
from icelake_assets.planning import data_retention, deletes, layout, manifests, rewrite, snapshots, statistics
from icelake_assets.planning.decision import Evaluation
from icelake_assets.planning.op_plans import DecisionInputs, healers, op_plan
from icelake_assets.settings import Policy

# The concerns computable from metadata alone (orphans need a storage listing), by check name.
EVALUATORS: dict[str, Callable[[TableStats, Policy], Evaluation]] = {
    "small_files": rewrite.evaluate,
    "snapshot_retention": snapshots.evaluate,
    "manifest_fragmentation": manifests.evaluate,
    "delete_files": deletes.evaluate,
    "layout_drift": layout.evaluate,
    "statistics": statistics.evaluate,
    "data_retention": data_retention.evaluate,
}


def metadata_findings(stats: TableStats, policy: Policy) -> list[Finding]:
    """The findings computable from metadata alone (orphans need a storage listing), each failing one
    saying why no op will act on it when none will (planning/op_plans.py names the ops that heal it)."""
    findings = [evaluate_concern(stats, policy).finding for evaluate_concern in EVALUATORS.values()]
    return [why_no_op_acts(f, DecisionInputs(stats, policy)) for f in findings]


def why_no_op_acts(finding: Finding, inputs: DecisionInputs) -> Finding:
    """A failing finding whose healing ops will not act (disabled by the table's policy, below their
    own threshold while the finding fails on another number, a store refusal) says so, with each op's
    reason, so the owner sees what would change it; any other finding is returned as it is."""
    if finding.passed:
        return finding
    decided = [d for name in healers(finding.check) if (d := op_plan(name).decide(inputs)) is not None]
    if not decided or any(d.act for d in decided):
        return finding
    why = "; ".join(f"{d.op}: {d.reason}" for d in decided)
    return replace(finding, recommendation=f"{finding.recommendation} (no op will act: {why})")


def evaluate(
    stats: TableStats,
    policy: Policy,
    extra: Iterable[Finding] = (),
    name: str | None = None,
    not_evaluated: Sequence[str] = (),
) -> TableHealth:
    """Metadata findings (plus ``extra``, e.g. an orphan finding), the score and the status by the one
    rule of :func:`~icelake_assets.health.score.verdict`.

    ``name``: how to call the table (default: its pyiceberg name, which has no catalog);
    ``not_evaluated``: checks without a result yet (the table is then never Healthy)."""
    findings = (*metadata_findings(stats, policy), *extra)
    score, status = verdict(stats, policy, findings, not_evaluated)
    return TableHealth(name or stats.table, stats, findings, score, status, policy, tuple(not_evaluated))
