"""Findings: one per health concern, with a severity, numeric metrics and a one-line recommendation.

Severity boundaries, the same for every concern: a concern is OK while its value is at or under its
threshold, WARN once it is over it, and ERROR once it reaches ``ERROR_FACTOR`` (4) times it.

======================  =====================================================  ===================================
check                   value graded                                           threshold (policy)
======================  =====================================================  ===================================
small_files             files of the busiest compaction-candidate partition    small_files.max_files_per_partition
snapshot_retention      snapshots (also WARN: oldest older than the max age)   snapshots.max_count / max_age_hours
                        when some may expire (min_age_hours, min_keep, refs)
manifest_fragmentation  manifests of the current snapshot                      manifests.max_count
delete_files            delete files / data files; deleted rows / data rows    delete_files.max_file_ratio,
                                                                               delete_files.max_record_ratio
layout_drift            data files of an older spec or out of sort order       layout.max_drift_ratio
                        / data files
orphan_files            unreferenced files older than orphans.older_than_hours  orphans.max_count
======================  =====================================================  ===================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from icelake_assets.health.retention import expiry_forecast, kept_reason
from icelake_assets.health.stats import SIZE_BUCKETS, TableStats
from icelake_assets.settings import Policy

ERROR_FACTOR = 4
CHECKS = (
    "small_files",
    "snapshot_retention",
    "manifest_fragmentation",
    "delete_files",
    "layout_drift",
    "orphan_files",
)
MiB = 1_048_576


class Severity(str, Enum):
    OK = "OK"
    WARN = "WARN"
    ERROR = "ERROR"

    @property
    def rank(self) -> int:
        return {"OK": 0, "WARN": 1, "ERROR": 2}[self.value]


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    summary: str
    recommendation: str
    metrics: dict[str, int | float] = field(default_factory=dict)
    rows: tuple[dict[str, object], ...] = ()  # worst partitions, shown as a table

    @property
    def passed(self) -> bool:
        return self.severity is Severity.OK


def grade(value: float, threshold: float) -> Severity:
    if value <= threshold:
        return Severity.OK
    return Severity.ERROR if value >= threshold * ERROR_FACTOR else Severity.WARN


_grade = grade  # the first version's name


def worst(*severities: Severity) -> Severity:
    return max(severities, key=lambda s: s.rank)


def _mb(n: float) -> float:
    return round(n / MiB, 3)


def small_files_finding(stats: TableStats, policy: Policy) -> Finding:
    sf = policy.small_files
    worst_parts = [p for p in stats.worst_partitions(10) if p.data_files]
    rows = tuple(
        {
            "partition": p.partition,
            "data_files": p.data_files,
            "small_files": p.small_files,
            "avg_file_mb": _mb(p.avg_file_bytes),
            "records": p.records,
        }
        for p in worst_parts
    )
    metrics: dict[str, int | float] = {
        "data_files": stats.data_files,
        "small_files": stats.small_files,
        "fragment_files": stats.fragment_files,
        "candidate_partitions": len(stats.compaction_candidates),
        "candidate_files": stats.candidate_files,
        "candidate_bytes": stats.candidate_bytes,
        "partitions": len(stats.partitions),
        "data_bytes": stats.data_bytes,
        "target_file_size_bytes": stats.target_file_size_bytes,
        "small_file_limit_bytes": stats.small_file_limit_bytes,
        "file_size_p10_bytes": stats.file_size_p10,
        "file_size_p50_bytes": stats.file_size_p50,
        "file_size_p90_bytes": stats.file_size_p90,
        "small_file_ratio": round(stats.small_files / stats.data_files, 4) if stats.data_files else 0.0,
    }
    metrics.update({f"files_{name}": stats.size_histogram.get(name, 0) for name, _ in SIZE_BUCKETS})
    if not stats.compaction_candidates:
        return Finding(
            "small_files",
            Severity.OK,
            f"no partition has > {sf.max_files_per_partition} files averaging "
            f"< {_mb(sf.max_avg_file_bytes)} MB "
            f"({stats.small_files} of {stats.data_files} files are small)",
            "nothing to compact",
            metrics,
            rows,
        )
    busiest = max(stats.partitions[p].data_files for p in stats.compaction_candidates)
    severity = grade(busiest, sf.max_files_per_partition)
    return Finding(
        "small_files",
        severity,
        f"{len(stats.compaction_candidates)} partitions hold {stats.candidate_files} files averaging under "
        f"{_mb(sf.max_avg_file_bytes)} MB (worst: {busiest} files; max {sf.max_files_per_partition})",
        f"run rewrite_data_files ({sf.strategy}) on the {len(stats.compaction_candidates)} candidate partitions",
        metrics,
        rows,
    )


def snapshot_finding(stats: TableStats, policy: Policy) -> Finding:
    """Graded like expiry decides (maintenance/plan.py decide_expire): past the count or age limit
    AND with snapshots expiry may remove. Snapshots all too young, among the newest ``min_keep`` or
    held by branches and tags are what expiry keeps: that passes, saying why."""
    p = policy.snapshots
    metrics = {
        "snapshots": stats.snapshots,
        "oldest_snapshot_age_hours": round(stats.oldest_snapshot_age_hours, 3),
        "snapshots_last_24h": stats.snapshots_last_24h,
        "max_snapshots": p.max_count,
        "max_snapshot_age_hours": p.max_age_hours,
        "min_keep": p.min_keep,
        "min_snapshot_age_hours": p.min_age_hours,
    }
    severity = grade(stats.snapshots, p.max_count)
    too_old = stats.snapshots > p.min_keep and stats.oldest_snapshot_age_hours > p.max_age_hours
    if severity is Severity.OK and too_old:
        severity = Severity.WARN
    if severity is Severity.OK:
        return Finding(
            "snapshot_retention",
            severity,
            f"{stats.snapshots} snapshots, oldest {stats.oldest_snapshot_age_hours:.1f} h",
            "nothing to expire",
            metrics,
        )
    fc = expiry_forecast(stats, policy)
    metrics["expirable_snapshots"] = fc.count
    if not fc.count:
        return Finding(
            "snapshot_retention",
            Severity.OK,
            f"{stats.snapshots} snapshots (max {p.max_count}), oldest "
            f"{stats.oldest_snapshot_age_hours:.1f} h, none may expire yet: "
            f"{kept_reason(fc, p.min_keep)}",
            f"nothing to expire before snapshots are {fc.cutoff_age_hours:g} h old",
            metrics,
        )
    return Finding(
        "snapshot_retention",
        severity,
        f"{stats.snapshots} snapshots (max {p.max_count}, {stats.snapshots_last_24h} in the last 24 h), "
        f"oldest {stats.oldest_snapshot_age_hours:.1f} h (max {p.max_age_hours:g} h); "
        f"{fc.count} may expire",
        f"run expire_snapshots: {fc.count} snapshots older than {fc.cutoff_age_hours:g} h go "
        f"({kept_reason(fc, p.min_keep)})",
        metrics,
    )


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


def orphan_finding(
    orphan_count: int,
    orphan_bytes: int,
    policy: Policy,
    sample: Sequence[str] = (),
    hidden_files: int = 0,
    skipped: Mapping[str, int] | None = None,
    refused: str | None = None,
    deferred: str | None = None,
) -> Finding:
    """``hidden_files``: not orphans by Iceberg's rule; ``skipped``: files left alone because another
    table owns them, by reason; ``refused``: why this table is never cleaned automatically;
    ``deferred``: why it is not cleaned now (a table that may overlap it cannot be read)."""
    p = policy.orphans
    skipped = dict(skipped or {})
    metrics = {
        "orphan_files": orphan_count,
        "orphan_bytes": orphan_bytes,
        "max_orphans": p.max_count,
        "orphan_older_than_hours": p.older_than_hours,
        "hidden_files": hidden_files,
        "skipped_other_tables": sum(skipped.values()),
        "cleanup_refused": int(refused is not None),
        "cleanup_deferred": int(deferred is not None),
    }
    rows: tuple[dict[str, object], ...] = tuple({"path": path} for path in list(sample)[:10])
    notes = "".join(f"; {n} files skipped ({reason})" for reason, n in sorted(skipped.items()))
    if refused:
        notes += f"; never removed automatically: {refused}"
    elif deferred:
        notes += f"; not removed now: {deferred}"
    if orphan_count <= p.max_count:
        return Finding(
            "orphan_files",
            Severity.OK,
            f"{orphan_count} unreferenced files older than {p.older_than_hours:g} h{notes}",
            "nothing to remove",
            metrics,
            rows,
        )
    severity = Severity.ERROR if orphan_count >= max(1, p.max_count) * ERROR_FACTOR else Severity.WARN
    action = (
        f"review and delete them by hand (maintenance never cleans this table: {refused})"
        if refused
        else f"make the unreadable table readable again, then remove_orphan_files runs ({deferred})"
        if deferred
        else "run remove_orphan_files (after expire_snapshots, never concurrently with it)"
    )
    return Finding(
        "orphan_files",
        severity,
        f"{orphan_count} unreferenced files ({orphan_bytes} B) older than {p.older_than_hours:g} h{notes}",
        action,
        metrics,
        rows,
    )


METADATA_FINDINGS = {
    "small_files": small_files_finding,
    "snapshot_retention": snapshot_finding,
    "manifest_fragmentation": manifest_finding,
    "delete_files": delete_files_finding,
    "layout_drift": layout_drift_finding,
}


def metadata_findings(stats: TableStats, policy: Policy) -> list[Finding]:
    """The findings computable from metadata alone (orphans need a storage listing)."""
    return [finding(stats, policy) for finding in METADATA_FINDINGS.values()]
