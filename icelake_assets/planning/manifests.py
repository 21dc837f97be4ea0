"""Manifests: the manifest_fragmentation finding and the rewrite_manifests decision (one threshold:
more manifests than ``manifests.max_count``)."""

from __future__ import annotations

from icelake_assets.health.findings import Finding, Severity, grade
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Decision, Evaluation, disabled
from icelake_assets.settings import Policy


def manifest_finding(stats: TableStats, policy: Policy) -> Finding:
    p = policy.manifests
    metrics = {
        "manifests": stats.manifests,
        "max_manifests": p.max_count,
        "small_manifests": stats.small_manifests,
        "data_manifests": stats.data_manifests,
        "delete_manifests": stats.delete_manifests,
        "manifest_bytes": stats.manifest_bytes,
        "entries_per_manifest": round(stats.entries_per_manifest, 2),
        "max_entries_per_manifest": stats.max_entries_per_manifest,
        "files_per_manifest": round(stats.data_files / stats.manifests, 2) if stats.manifests else 0.0,
    }
    severity = grade(stats.manifests, p.max_count)
    detail = (
        f"{stats.manifests} manifests ({stats.small_manifests} small, "
        f"{stats.entries_per_manifest:.0f} entries each)"
    )
    if severity is Severity.OK:
        return Finding("manifest_fragmentation", severity, detail, "nothing to rewrite", metrics)
    return Finding(
        "manifest_fragmentation", severity, f"{detail}; max {p.max_count}", "run rewrite_manifests", metrics
    )


def decide_manifests(stats: TableStats, policy: Policy, rewrite_commits: int = 0) -> Decision:
    """``rewrite_commits``: snapshots this run's rewrite_data_files committed. Past one (partial
    progress), each commit added its own manifests: they are consolidated in the same run, so a run
    leaves at most one manifest rewrite on top of its rewrite commits."""
    if off := disabled("rewrite_manifests", policy):
        return off
    p = policy.manifests
    signals = {"manifests": stats.manifests, "max_manifests": p.max_count, "rewrite_commits": rewrite_commits}
    if grade(stats.manifests, p.max_count) is not Severity.OK:  # the finding's own grade
        return Decision("rewrite_manifests", True, f"{stats.manifests} manifests > {p.max_count}", signals)
    if rewrite_commits > 1 and stats.manifests > 1:
        return Decision(
            "rewrite_manifests",
            True,
            f"rewrite_data_files committed {rewrite_commits} snapshots (partial progress): "
            f"consolidate their {stats.manifests} manifests",
            signals,
        )
    return Decision("rewrite_manifests", False, f"{stats.manifests} manifests ≤ {p.max_count}", signals)


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    return Evaluation(manifest_finding(stats, policy), decide_manifests(stats, policy))
