"""Delete files: the delete_files finding, and whether a rewrite applies the deletes (the delete
ratios crossed: the same grade that fails the finding)."""

from __future__ import annotations

from icelake_assets.health.findings import Finding, Severity, grade, worst
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Evaluation
from icelake_assets.settings import Policy


def delete_severity(stats: TableStats, policy: Policy) -> Severity:
    p = policy.delete_files
    return worst(
        grade(stats.delete_file_ratio, p.max_file_ratio), grade(stats.delete_record_ratio, p.max_record_ratio)
    )


def deletes_crossed(stats: TableStats, policy: Policy) -> bool:
    """Merge-on-read tables: delete files past their ratio make every read merge them, so compact."""
    return stats.delete_files > 0 and delete_severity(stats, policy) is not Severity.OK


def delete_files_finding(stats: TableStats, policy: Policy) -> Finding:
    p = policy.delete_files
    metrics = {
        "delete_files": stats.delete_files,
        "position_delete_files": stats.position_delete_files,
        "equality_delete_files": stats.equality_delete_files,
        "delete_bytes": stats.delete_bytes,
        "position_delete_records": stats.position_delete_records,
        "equality_delete_records": stats.equality_delete_records,
        "data_files": stats.data_files,
        "records": stats.records,
        "delete_file_ratio": round(stats.delete_file_ratio, 4),
        "delete_record_ratio": round(stats.delete_record_ratio, 4),
        "max_file_ratio": p.max_file_ratio,
        "max_record_ratio": p.max_record_ratio,
    }
    parts = sorted(
        (x for x in stats.partitions.values() if x.delete_files),
        key=lambda x: (-x.delete_files, -x.delete_records, x.partition),
    )[:10]
    rows = tuple(
        {
            "partition": x.partition,
            "delete_files": x.delete_files,
            "position": x.position_delete_files,
            "equality": x.equality_delete_files,
            "deleted_rows": x.delete_records,
            "data_files": x.data_files,
            "records": x.records,
        }
        for x in parts
    )
    severity = worst(
        grade(stats.delete_file_ratio, p.max_file_ratio), grade(stats.delete_record_ratio, p.max_record_ratio)
    )
    summary = (
        f"{stats.delete_files} delete files ({stats.position_delete_files} position, "
        f"{stats.equality_delete_files} equality) for {stats.data_files} data files "
        f"(ratio {stats.delete_file_ratio:.2f}, max {p.max_file_ratio:g}); {stats.delete_records} deleted rows "
        f"for {stats.records} rows (ratio {stats.delete_record_ratio:.3f}, max {p.max_record_ratio:g})"
    )
    if severity is Severity.OK:
        return Finding("delete_files", severity, summary, "nothing to apply", metrics, rows)
    if stats.equality_delete_files:
        advice = (
            "run rewrite_data_files with delete-file-threshold=1 on the partitions with deletes: equality "
            "deletes are applied at every read until data files are rewritten"
        )
    else:
        advice = (
            "run rewrite_data_files with delete-file-threshold=1 on the partitions with deletes "
            "(or rewrite_position_delete_files to merge them)"
        )
    return Finding("delete_files", severity, summary, advice, metrics, rows)


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    """No op of its own: the rewrite applies the deletes (planning/rewrite.py, deletes_crossed)."""
    return Evaluation(delete_files_finding(stats, policy))
