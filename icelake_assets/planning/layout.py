"""Layout drift: the layout_drift finding and the drift the data rewrite acts on.

Past ``layout.max_drift_ratio`` the rewrite (planning/rewrite.py) takes every partition holding a
drift file with ``rewrite-all=true``: files of an older spec are re-partitioned into the current
one, and files out of sort order are rewritten by the table's sort order. The finding and the
rewrite's decision read the same numbers (``drift_acts``), so a failing finding is one the
rewrite acts on."""

from __future__ import annotations

from dataclasses import dataclass

from icelake_assets.health.findings import Finding, Severity, grade
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Evaluation
from icelake_assets.settings import Policy


def grade_drift(drift_ratio: float, policy: Policy) -> Severity:
    """The layout_drift grade of a table's or one partition's drift files per data file."""
    return grade(drift_ratio, policy.layout.max_drift_ratio)


def drift_acts(stats: TableStats, policy: Policy) -> bool:
    """The finding's own rule: more drift files than ``max_drift_ratio`` of the data files."""
    return grade_drift(stats.drift_ratio, policy) is not Severity.OK


@dataclass(frozen=True)
class DriftPlan:
    """The partitions holding drift files the rewrite takes (all of them past the max, else none),
    and what that rewrite moves. ``sort``: some are out of the table's sort order, so the rewrite
    sorts by it (a binpack of several files would leave them overlapping)."""

    partitions: tuple[str, ...] = ()
    old_spec_files: int = 0
    unsorted_files: int = 0
    data_bytes: int = 0
    sort: bool = False
    reason: str = ""


def plan_drift(stats: TableStats, policy: Policy) -> DriftPlan:
    if not drift_acts(stats, policy):
        return DriftPlan()
    parts = [p for p in stats.partitions.values() if p.old_spec_files or p.unsorted_files]
    if not parts:
        return DriftPlan()
    old = sum(p.old_spec_files for p in parts)
    unsorted = sum(p.unsorted_files for p in parts)
    what = [f"{old} written under a spec older than {stats.default_spec_id}"] if old else []
    if unsorted:
        what.append(f"{unsorted} out of sort order on {stats.sort_column}")
    reason = (
        f"{stats.drift_files} of {stats.data_files} files drift (ratio {stats.drift_ratio:.2f}, max "
        f"{policy.layout.max_drift_ratio:g}): {', '.join(what)}"
    )
    return DriftPlan(
        tuple(sorted(p.partition for p in parts)),
        old,
        unsorted,
        sum(p.data_bytes for p in parts),
        bool(unsorted and stats.sort_column),
        reason,
    )


def layout_drift_finding(stats: TableStats, policy: Policy) -> Finding:
    p = policy.layout
    metrics = {
        "drift_files": stats.drift_files,
        "old_spec_files": stats.old_spec_files,
        "unsorted_files": stats.unsorted_files,
        "data_files": stats.data_files,
        "drift_ratio": round(stats.drift_ratio, 4),
        "max_drift_ratio": p.max_drift_ratio,
        "default_spec_id": stats.default_spec_id,
        "sort_order_id": stats.sort_order_id,
    }
    parts = sorted(
        (x for x in stats.partitions.values() if x.drift_files), key=lambda x: (-x.drift_files, x.partition)
    )[:10]
    rows = tuple(
        {
            "partition": x.partition,
            "data_files": x.data_files,
            "old_spec_files": x.old_spec_files,
            "unsorted_files": x.unsorted_files,
            "spec_id": x.spec_id,
        }
        for x in parts
    )
    sort_note = (
        f"{stats.unsorted_files} overlap others of their partition on {stats.sort_column}"
        if stats.sort_column
        else "the table has no comparable sort order"
    )
    summary = (
        f"{stats.drift_files} of {stats.data_files} data files drift (ratio {stats.drift_ratio:.2f}, "
        f"max {p.max_drift_ratio:g}): {stats.old_spec_files} written under an older partition spec than "
        f"{stats.default_spec_id}; {sort_note}"
    )
    if not drift_acts(stats, policy):
        return Finding("layout_drift", Severity.OK, summary, "nothing to rewrite", metrics, rows)
    steps = []
    if stats.old_spec_files:
        steps.append(
            f"rewrite_data_files with rewrite-all=true on partitions of older specs (moves them to spec "
            f"{stats.default_spec_id})"
        )
    if stats.unsorted_files:
        steps.append(f"rewrite_data_files with strategy 'sort' (table sort order, {stats.sort_column} first)")
    severity = grade_drift(stats.drift_ratio, policy)
    return Finding("layout_drift", severity, summary, "; then ".join(steps), metrics, rows)


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    return Evaluation(layout_drift_finding(stats, policy))
