"""Delete files: the delete_files finding, whether a rewrite applies the deletes (the delete ratios
crossed: the same grade that fails the finding), and where compacting position deletes alone
(rewrite_position_delete_files) heals the finding without rewriting data files.

Applying deletes rewrites every data file a delete touches (rewrite_data_files with
delete-file-threshold=1): worth it when many rows are deleted (readers skip them for good) or the
files are small anyway. When the deleted rows are few (the record ratio passes) and the finding
fails on the number of delete files alone, merging each partition's position deletes into one file
costs the delete files' bytes instead of the data's. Equality deletes are always applied by a data
rewrite (no Iceberg action compacts them), and format v3 tables keep one deletion vector per data
file (nothing to merge)."""

from __future__ import annotations

from dataclasses import dataclass

from icelake_assets.health.findings import Finding, Severity, grade, worst
from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning.decision import Evaluation
from icelake_assets.settings import Policy


def ratio_of(part: int, whole: int) -> float:
    """``part`` per ``whole`` (TableStats' rule for its delete ratios): any part of nothing is 1."""
    return part / whole if whole else float(part > 0)


def grade_deletes(file_ratio: float, record_ratio: float, policy: Policy) -> Severity:
    """The delete_files grade of a table's or one partition's ratios (delete files per data file,
    deleted rows per row): the worse of the two against their max."""
    p = policy.delete_files
    return worst(grade(file_ratio, p.max_file_ratio), grade(record_ratio, p.max_record_ratio))


def delete_severity(stats: TableStats, policy: Policy) -> Severity:
    return grade_deletes(stats.delete_file_ratio, stats.delete_record_ratio, policy)


def deletes_crossed(stats: TableStats, policy: Policy) -> bool:
    """Merge-on-read tables: delete files past their ratio make every read merge them, so compact."""
    return stats.delete_files > 0 and delete_severity(stats, policy) is not Severity.OK


@dataclass(frozen=True)
class PositionDeleteCompaction:
    """The partitions whose position deletes are compacted alone, the bytes that reads and writes
    again (their delete files), the data bytes a delete-applying rewrite would have rewritten there,
    the delete files predicted afterwards (table-wide), and why (or why not)."""

    partitions: tuple[str, ...]
    delete_bytes: int
    data_bytes: int
    delete_files_after: int
    reason: str


def position_files_left(p: PartitionStats, granularity: str) -> int:
    """Position delete files a rewrite of all of ``p``'s leaves: one for the partition when the table
    writes partition-scoped deletes, else one per data file they point into (Spark's default, file
    granularity), bounded by its data files when a delete file may point into several."""
    if not p.position_delete_files:
        return 0
    if granularity == "partition":
        return 1
    if p.deleted_data_files >= 0:
        return min(p.deleted_data_files, p.position_delete_files)
    return min(p.data_files, p.position_delete_files)


def position_delete_compaction(stats: TableStats, policy: Policy) -> PositionDeleteCompaction:
    """Where rewrite_position_delete_files replaces the data rewrite (see the module docstring): the
    partitions holding only position deletes that merge into fewer files (position_files_left), over
    data files that are not a small-file compaction candidate, chosen only when the finding is
    predicted to pass afterwards (the other partitions' deletes applied by the data rewrite)."""
    p = policy.delete_files

    def none(why: str) -> PositionDeleteCompaction:
        return PositionDeleteCompaction((), 0, 0, stats.delete_files, why)

    if not deletes_crossed(stats, policy):
        return none("the delete ratios are not crossed")
    if stats.format_version >= 3:
        return none("format v3: one deletion vector per data file, nothing to merge")
    if grade(stats.delete_record_ratio, p.max_record_ratio) is not Severity.OK:
        return none(
            f"{stats.delete_records} deleted rows of {stats.records} (ratio {stats.delete_record_ratio:.3f}, "
            f"max {p.max_record_ratio:g}): applying them by rewriting the data pays"
        )
    small = set(stats.compaction_candidates)
    left = {x.partition: position_files_left(x, stats.delete_granularity) for x in stats.partitions.values()}
    position = [
        x
        for x in stats.partitions.values()
        if x.data_files
        and not x.equality_delete_files
        and x.partition not in small
        and left[x.partition] < x.position_delete_files
    ]
    if not position:
        return none(
            "no partition holds only position deletes that merge into fewer files over data files that "
            "are not small"
        )
    orphaned = sum(x.delete_files for x in stats.partitions.values() if x.delete_files and not x.data_files)
    after = sum(left[x.partition] for x in position) + orphaned
    ratio = after / stats.data_files if stats.data_files else float(after > 0)
    if grade(ratio, p.max_file_ratio) is not Severity.OK:
        return none(
            f"compacting position deletes would leave {after} delete files for {stats.data_files} data files "
            f"(ratio {ratio:.2f}, max {p.max_file_ratio:g}): apply them by rewriting the data"
        )
    delete_bytes = sum(x.delete_bytes for x in position)
    data_bytes = sum(x.data_bytes for x in position)
    return PositionDeleteCompaction(
        tuple(sorted(x.partition for x in position)),
        delete_bytes,
        data_bytes,
        after,
        f"{sum(x.position_delete_files for x in position)} position delete files of {len(position)} partitions "
        f"merged into {after - orphaned} ({delete_bytes} bytes) instead of rewriting {data_bytes} bytes of data "
        f"(deleted rows ratio {stats.delete_record_ratio:.3f} ≤ {p.max_record_ratio:g}; "
        f"{after} delete files left for {stats.data_files} data files)",
    )


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
    severity = delete_severity(stats, policy)
    summary = (
        f"{stats.delete_files} delete files ({stats.position_delete_files} position, "
        f"{stats.equality_delete_files} equality) for {stats.data_files} data files "
        f"(ratio {stats.delete_file_ratio:.2f}, max {p.max_file_ratio:g}); {stats.delete_records} deleted rows "
        f"for {stats.records} rows (ratio {stats.delete_record_ratio:.3f}, max {p.max_record_ratio:g})"
    )
    if severity is Severity.OK:
        return Finding("delete_files", severity, summary, "nothing to apply", metrics, rows)
    compaction = position_delete_compaction(stats, policy)
    if compaction.partitions:
        advice = (
            f"run rewrite_position_delete_files on the {len(compaction.partitions)} partitions with position "
            "deletes only (merges them; the data files stay)"
            + (
                "; rewrite_data_files with delete-file-threshold=1 on the others"
                if len(compaction.partitions) < sum(1 for x in stats.partitions.values() if x.delete_files)
                else ""
            )
        )
    elif stats.equality_delete_files:
        advice = (
            "run rewrite_data_files with delete-file-threshold=1 on the partitions with deletes: equality "
            "deletes are applied at every read until data files are rewritten"
        )
    else:
        advice = (
            f"run rewrite_data_files with delete-file-threshold=1 on the partitions with deletes "
            f"(position deletes are not compacted alone: {compaction.reason})"
        )
    return Finding("delete_files", severity, summary, advice, metrics, rows)


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    """No op of its own: the rewrite applies or compacts the deletes (planning/rewrite.py, deletes_crossed)."""
    return Evaluation(delete_files_finding(stats, policy))
