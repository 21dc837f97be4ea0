"""Layout drift: the layout_drift finding (no op of its own: a rewrite with rewrite-all or sort
fixes it, on an operator's word)."""

from __future__ import annotations

from icelake_assets.health.findings import Finding, Severity, grade
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Evaluation
from icelake_assets.settings import Policy


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
    severity = grade(stats.drift_ratio, p.max_drift_ratio)
    if severity is Severity.OK:
        return Finding("layout_drift", severity, summary, "nothing to rewrite", metrics, rows)
    steps = []
    if stats.old_spec_files:
        steps.append(
            f"rewrite_data_files with rewrite-all=true on partitions of older specs (moves them to spec "
            f"{stats.default_spec_id})"
        )
    if stats.unsorted_files:
        steps.append(f"rewrite_data_files with strategy 'sort' (table sort order, {stats.sort_column} first)")
    return Finding("layout_drift", severity, summary, "; then ".join(steps), metrics, rows)


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    return Evaluation(layout_drift_finding(stats, policy))
