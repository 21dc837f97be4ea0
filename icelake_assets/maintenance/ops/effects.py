"""Each op's effect check: did it fix the finding that triggered it? Judged on the table's metadata
after the ops (the incremental manifest cache makes this cost only the run's new manifests). The
verdicts and what they mean: maintenance/results/effect.py; each op's descriptor (ops/chain.py) names
its check here."""

from __future__ import annotations

from dataclasses import replace

from icelake_assets.health.findings import Severity
from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance.results.effect import Effect, OpEffect, finding_effect, overtaken, worst
from icelake_assets.maintenance.results.expire_data import ExpireDataResult
from icelake_assets.maintenance.results.models import (
    ExpireResult,
    ManifestResult,
    OrphanResult,
    RewriteResult,
    StatisticsResult,
)
from icelake_assets.maintenance.results.restore_points import RestorePointResult
from icelake_assets.planning.data_retention import retention_finding
from icelake_assets.planning.deletes import delete_files_finding
from icelake_assets.planning.layout import layout_drift_finding
from icelake_assets.planning.manifests import manifest_finding
from icelake_assets.planning.rewrite import small_files_finding
from icelake_assets.planning.snapshots import snapshot_finding
from icelake_assets.planning.statistics import statistics_finding
from icelake_assets.settings import Policy


def expire_data_effect(res: ExpireDataResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
    """Effective when data_retention passes after the run. Merge-on-read deletes leave the files' bounds
    reaching past the cut-off until a rewrite applies them: rows went, the check still counts them."""
    progress = f"{res.rows_removed} rows older than {res.cutoff} deleted"
    finding = retention_finding(after, policy)
    if not finding.passed and res.rows_removed and not res.metadata_only and res.files_added == 0:
        why = f"{progress} by delete files; {finding.summary} until a rewrite applies them"
        return OpEffect(res.op, "partial", why, finding.check)
    return finding_effect(res.op, finding, progress, others)


def expire_effect(res: ExpireResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
    progress = f"{res.snapshots_before} → {res.snapshots_after} snapshots"
    return finding_effect(res.op, snapshot_finding(after, policy), progress, others)


def orphans_effect(res: OrphanResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
    found, removed, pending = res.scan.orphans_found, res.orphans_removed, res.pending_files
    # Orphans in their recovery window were recorded, not left: removing them now would be wrong.
    done = removed + pending
    effect: Effect = "effective" if done >= found else ("partial" if done else "ineffective")
    waiting = f", {pending} pending their recovery window" if pending else ""
    return OpEffect(res.op, effect, f"{removed} of {found} orphan files removed{waiting}", "orphan_files")


def manifests_effect(res: ManifestResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
    before = res.manifests_before
    now = res.manifests_after if res.manifests_after is not None else after.manifests
    finding = manifest_finding(after, policy)
    if finding.passed and (before is None or now < before or now <= 1):
        return OpEffect(res.op, "effective", f"{before} → {now} manifests", finding.check)
    if finding.passed:
        why = f"the manifest count did not drop ({before} → {now})"
        return OpEffect(res.op, "ineffective", why, finding.check)
    return finding_effect(res.op, finding, f"{before} → {now} manifests", others)


def rewrite_effect(res: RewriteResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
    """The data rewrite's partitions and the position-delete compaction, the worse of the two."""
    parts = [
        *(
            [_data_effect(res, after, policy, others)]
            if res.partitions_rewritten or res.partitions_failed
            else []
        ),
        *([e] if (e := _position_effect(res, after, policy)) is not None else []),
    ]
    return worst(parts or [_data_effect(res, after, policy, others)])


def _data_effect(res: RewriteResult, after: TableStats, policy: Policy, others: int = 0) -> OpEffect:
    named = [*res.partitions_rewritten, *res.partitions_failed]
    finding = small_files_finding(after, policy)
    if res.snapshots_committed == 0 and res.error_kind == "access_denied":
        return OpEffect(
            res.op,
            "failed",
            f"access denied, nothing committed for {len(named)} named partitions: {res.error}",
            finding.check,
            tuple(named),
        )
    if res.snapshots_committed == 0:
        error = f" ({res.error})" if res.error else ""
        return OpEffect(
            res.op,
            "ineffective",
            f"Iceberg committed nothing for {len(named)} named partitions{error}",
            finding.check,
            tuple(named),
        )
    if res.drift_partitions:
        drift = _drift_effect(res, after, policy, others)
        compacted = [p for p in named if p not in set(res.drift_partitions)]
        return (
            worst([drift, _compaction_effect(res, after, policy, others, compacted)]) if compacted else drift
        )
    return _compaction_effect(res, after, policy, others, named)


def _drift_effect(res: RewriteResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
    """The drift part of a rewrite: effective when layout_drift passes, partial when the drift files
    dropped but it still fails."""
    finding = layout_drift_finding(after, policy)
    before = res.drift_files_before or 0
    moved = f"{before} → {after.drift_files} drift files in {len(res.drift_partitions)} partitions"
    if finding.passed:
        return OpEffect(res.op, "effective", f"layout_drift passes ({moved})", finding.check)
    still = tuple(
        p for p in res.drift_partitions if p in after.partitions and after.partitions[p].drift_files
    )
    if after.drift_files < before:
        why = f"drift files dropped ({moved}) but {finding.summary}"
        return OpEffect(res.op, "partial", why, finding.check, still)
    if others:
        return replace(overtaken(res.op, finding.check, moved, others, finding.summary), still_failing=still)
    why = f"layout_drift still fails after rewrite_data_files ({moved}): {finding.summary}"
    return OpEffect(res.op, "ineffective", why, finding.check, still)


def _compaction_effect(
    res: RewriteResult, after: TableStats, policy: Policy, others: int, named: list[str]
) -> OpEffect:
    """The small-file (and delete-applying) part of a rewrite that committed, on ``named``."""
    finding = small_files_finding(after, policy)
    still = tuple(p for p in named if p in set(after.compaction_candidates))
    progress = f"{res.data_files_before} → {res.data_files_after} data files"
    # A rewrite that applied deletes is done only when its partitions hold no delete files any more.
    left = sum(after.partitions[p].delete_files for p in named if p in after.partitions)
    if not still and left and "delete-file-threshold" in res.options:
        deletes = delete_files_finding(after, policy)
        dangling_error = res.dangling.error if res.dangling is not None else None
        error = f"; {dangling_error}" if dangling_error else ""
        return OpEffect(
            res.op,
            "partial",
            f"its partitions are compacted ({progress}) but still hold {left} delete files "
            f"({deletes.check}: {deletes.summary}){error}",
            deletes.check,
            tuple(p for p in named if p in after.partitions and after.partitions[p].delete_files),
        )
    if not still:
        return OpEffect(
            res.op,
            "effective",
            f"none of its {len(named)} partitions is a compaction candidate any more ({progress})",
            finding.check,
        )
    effect: Effect = "partial" if len(still) < len(named) else "ineffective"
    most = after.partitions.get(still[0])
    detail = (
        f"{still[0]} still holds {most.data_files} files ({most.small_files} small)" if most else still[0]
    )
    why = (
        f"{len(still)} of {len(named)} partitions are still compaction candidates ({progress}; "
        f"e.g. {detail}; max {policy.small_files.max_files_per_partition} files per partition)"
    )
    if effect == "ineffective" and others:
        return replace(overtaken(res.op, finding.check, progress, others, why), still_failing=still)
    return OpEffect(res.op, effect, why, finding.check, still)


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


def statistics_effect(res: StatisticsResult, after: TableStats, policy: Policy, others: int) -> OpEffect:
    """Effective when the statistics finding passes on statistics of the current snapshot itself."""
    finding = statistics_finding(after, policy)
    if res.error:
        return OpEffect(res.op, "ineffective", f"no statistics: {res.error}", finding.check)
    facts = after.statistics
    if finding.passed and facts.current:
        # The partition statistics are a second file the finding does not judge: a store that refused
        # it is said here, once per run, beside the table statistics that were registered.
        partition = (
            f"; partition statistics not written: {res.partition_statistics_error}"
            if res.partition_statistics_error
            else ""
        )
        return OpEffect(
            res.op,
            "effective",
            f"{len(res.ndv)} NDV sketches for snapshot {facts.snapshot_id} ({finding.summary}){partition}",
            finding.check,
        )
    why = finding.summary if not finding.passed else f"the statistics are of snapshot {facts.snapshot_id}"
    return finding_effect(
        res.op, replace(finding, severity=Severity.WARN, summary=why), "statistics written", others
    )


def restore_points_effect(
    res: RestorePointResult, after: TableStats, policy: Policy, others: int
) -> OpEffect:
    """Effective when every tag it created is there after the run and none it removed is."""
    names = {r.name for r in after.snapshot_refs if not r.is_branch}
    missing = [n for n in res.created if n not in names]
    left = [n for n in res.removed if n in names]
    progress = f"{len(res.created)} restore points created, {len(res.removed)} removed"
    if not missing and not left:
        return OpEffect(res.op, "effective", progress)
    why = ", ".join([*(f"{n} is missing" for n in missing), *(f"{n} is still there" for n in left)])
    return OpEffect(res.op, "ineffective", f"{progress}, but {why}")
