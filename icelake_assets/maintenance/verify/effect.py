"""Did each maintenance op fix what triggered it? Re-evaluated from metadata after the ops (the
incremental manifest cache makes this cost only the run's new manifests), free of Dagster.

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

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance.results.models import (
    ExpireResult,
    ManifestResult,
    OpResult,
    OrphanResult,
    RewriteResult,
    StatisticsResult,
)
from icelake_assets.planning.deletes import delete_files_finding
from icelake_assets.planning.manifests import manifest_finding
from icelake_assets.planning.relaunch import (
    OUTCOME_SNAPSHOT_TAG as OUTCOME_SNAPSHOT_TAG,
    OUTCOME_TABLE_TAG as OUTCOME_TABLE_TAG,
    OUTCOME_TAG as OUTCOME_TAG,
    POLICY_HASH_TAG as POLICY_HASH_TAG,
    policy_hash as policy_hash,
    relaunch_hold as relaunch_hold,
)
from icelake_assets.planning.rewrite import small_files_finding
from icelake_assets.planning.snapshots import snapshot_finding
from icelake_assets.planning.statistics import statistics_finding
from icelake_assets.settings import Policy

Effect = Literal["effective", "partial", "overtaken", "ineffective", "failed"]
_RANK = {"effective": 0, "partial": 1, "overtaken": 2, "ineffective": 3, "failed": 4}


@dataclass(frozen=True)
class OpEffect:
    op: str
    effect: Effect
    reason: str
    check: str | None = None  # the finding re-evaluated
    still_failing: tuple[str, ...] = ()  # partitions of a rewrite that are still candidates

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finding_effect(op: str, finding: Finding, progress: str, others: int = 0) -> OpEffect:
    """``others``: commits made on top of the op by others than its run (writers)."""
    if finding.passed:
        return OpEffect(op, "effective", f"{finding.check} passes: {finding.summary}", finding.check)
    if others:
        return _overtaken(op, finding.check, progress, others, finding.summary)
    return OpEffect(
        op,
        "ineffective",
        f"{finding.check} still fails after {op} ({progress}): {finding.summary}",
        finding.check,
    )


def _overtaken(op: str, check: str, progress: str, others: int, summary: str) -> OpEffect:
    return OpEffect(
        op,
        "overtaken",
        f"{check} fails again after {op} ({progress}): {others} commit(s) by others landed on top of "
        f"it during the run, so the next state is judged afresh: {summary}",
        check,
    )


def _rewrite_effect(res: RewriteResult, after: TableStats, policy: Policy, others: int = 0) -> OpEffect:
    named = [*res.partitions_rewritten, *res.partitions_failed]
    finding = small_files_finding(after, policy)
    if res.snapshots_committed == 0 and res.error_kind == "access_denied":
        return OpEffect(
            "rewrite_data_files",
            "failed",
            f"access denied, nothing committed for {len(named)} named partitions: {res.error}",
            finding.check,
            tuple(named),
        )
    if res.snapshots_committed == 0:
        error = f" ({res.error})" if res.error else ""
        return OpEffect(
            "rewrite_data_files",
            "ineffective",
            f"Iceberg committed nothing for {len(named)} named partitions{error}",
            finding.check,
            tuple(named),
        )
    still = tuple(p for p in named if p in set(after.compaction_candidates))
    progress = f"{res.data_files_before} → {res.data_files_after} data files"
    # A rewrite that applied deletes is done only when its partitions hold no delete files any more.
    left = sum(after.partitions[p].delete_files for p in named if p in after.partitions)
    if not still and left and "delete-file-threshold" in res.options:
        deletes = delete_files_finding(after, policy)
        dangling_error = res.dangling.error if res.dangling is not None else None
        error = f"; {dangling_error}" if dangling_error else ""
        return OpEffect(
            "rewrite_data_files",
            "partial",
            f"its partitions are compacted ({progress}) but still hold {left} delete files "
            f"({deletes.check}: {deletes.summary}){error}",
            deletes.check,
            tuple(p for p in named if p in after.partitions and after.partitions[p].delete_files),
        )
    if not still:
        return OpEffect(
            "rewrite_data_files",
            "effective",
            f"none of its {len(named)} partitions is a compaction candidate any more ({progress})",
            finding.check,
        )
    effect: Effect = "partial" if len(still) < len(named) else "ineffective"
    worst = after.partitions.get(still[0])
    detail = (
        f"{still[0]} still holds {worst.data_files} files ({worst.small_files} small)" if worst else still[0]
    )
    why = (
        f"{len(still)} of {len(named)} partitions are still compaction candidates ({progress}; "
        f"e.g. {detail}; max {policy.small_files.max_files_per_partition} files per partition)"
    )
    if effect == "ineffective" and others:
        return replace(_overtaken(res.op, finding.check, progress, others, why), still_failing=still)
    return OpEffect("rewrite_data_files", effect, why, finding.check, still)


def _position_effect(res: RewriteResult, after: TableStats, policy: Policy) -> OpEffect | None:
    """The position-delete compaction's part of a rewrite: effective when the delete_files finding
    passes (its data files untouched), partial when it merged some files but the finding still fails."""
    pd = res.position_deletes
    if pd is None:
        return None
    finding = delete_files_finding(after, policy)
    moved = (
        f"{pd.delete_files_before} → {pd.delete_files_after} delete files in {len(pd.partitions)} partitions"
    )
    if pd.error or not pd.commits:
        why = f"position deletes not compacted ({pd.error or 'Iceberg committed nothing'})"
        return OpEffect(res.op, "ineffective", why, finding.check, pd.partitions)
    if finding.passed:
        return OpEffect(
            res.op, "effective", f"position deletes compacted: {moved}, data files untouched", finding.check
        )
    effect: Effect = (
        "partial" if (pd.delete_files_after or 0) < (pd.delete_files_before or 0) else "ineffective"
    )
    return OpEffect(
        res.op, effect, f"position deletes compacted ({moved}) but {finding.summary}", finding.check
    )


def _worst(effects: Sequence[OpEffect]) -> OpEffect:
    """One effect for an op that did two things (a data rewrite and a position-delete compaction)."""
    if len(effects) == 1:
        return effects[0]
    worst = max(effects, key=lambda e: _RANK[e.effect])
    still = tuple(dict.fromkeys(p for e in effects for p in e.still_failing))
    return OpEffect(worst.op, worst.effect, "; ".join(e.reason for e in effects), worst.check, still)


def _statistics_effect(res: StatisticsResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
    """Effective when the statistics finding passes on statistics of the current snapshot itself."""
    finding = statistics_finding(after, policy)
    if res.error:
        return OpEffect(res.op, "ineffective", f"no statistics: {res.error}", finding.check)
    facts = after.statistics
    if finding.passed and facts.current:
        return OpEffect(
            res.op,
            "effective",
            f"{len(res.ndv)} NDV sketches for snapshot {facts.snapshot_id} ({finding.summary})",
            finding.check,
        )
    why = finding.summary if not finding.passed else f"the statistics are of snapshot {facts.snapshot_id}"
    return _finding_effect(
        res.op, replace(finding, severity=Severity.WARN, summary=why), "statistics written", others
    )


def verify_effects(
    ops: Sequence[OpResult], after: TableStats, policy: Policy, others: Mapping[str, int] | None = None
) -> list[OpEffect]:
    """The effect of every op that acted, judged on ``after``. ``others``: per op, the commits others
    made on top of it (post_run.commits_by_others); a finding they made fail again is ``overtaken``."""
    effects = []
    for o in ops:
        if not o.acted:
            continue
        op = o.op
        n = (others or {}).get(op, 0)
        if isinstance(o, RewriteResult):
            parts = [
                *(
                    [_rewrite_effect(o, after, policy, n)]
                    if o.partitions_rewritten or o.partitions_failed
                    else []
                ),
                *([e] if (e := _position_effect(o, after, policy)) is not None else []),
            ]
            effects.append(_worst(parts or [_rewrite_effect(o, after, policy, n)]))
        elif isinstance(o, ExpireResult):
            progress = f"{o.snapshots_before} → {o.snapshots_after} snapshots"
            effects.append(_finding_effect(op, snapshot_finding(after, policy), progress, n))
        elif isinstance(o, ManifestResult):
            before = o.manifests_before
            now = o.manifests_after if o.manifests_after is not None else after.manifests
            finding = manifest_finding(after, policy)
            if finding.passed and (before is None or now < before or now <= 1):
                effects.append(OpEffect(op, "effective", f"{before} → {now} manifests", finding.check))
            elif finding.passed:
                why = f"the manifest count did not drop ({before} → {now})"
                effects.append(OpEffect(op, "ineffective", why, finding.check))
            else:
                effects.append(_finding_effect(op, finding, f"{before} → {now} manifests", n))
        elif isinstance(o, StatisticsResult):
            effects.append(_statistics_effect(o, after, policy, n))
        elif isinstance(o, OrphanResult):
            found, removed = o.scan.orphans_found, o.orphans_removed
            effect: Effect = "effective" if removed >= found else ("partial" if removed else "ineffective")
            effects.append(OpEffect(op, effect, f"{removed} of {found} orphan files removed", "orphan_files"))
    return effects


def run_outcome(effects: Sequence[OpEffect]) -> Effect | None:
    """The worst effect of the run's ops; None when no op acted."""
    return max((e.effect for e in effects), key=_RANK.__getitem__, default=None)
