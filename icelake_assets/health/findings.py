"""Findings: one per health concern, with a severity, numeric metrics and a recommendation.

Severity boundaries (documented in the README): a concern is WARN once its threshold is crossed and
ERROR once it reaches ``ERROR_FACTOR`` times the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from icelake_assets.health.stats import TableStats
from icelake_assets.settings import Policy

ERROR_FACTOR = 4


class Severity(str, Enum):
    OK = "OK"
    WARN = "WARN"
    ERROR = "ERROR"


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


def _grade(value: float, threshold: float) -> Severity:
    if value <= threshold:
        return Severity.OK
    return Severity.ERROR if value >= threshold * ERROR_FACTOR else Severity.WARN


def small_files_finding(stats: TableStats, policy: Policy) -> Finding:
    sf = policy.small_files
    worst = [p for p in stats.worst_partitions(10) if p.data_files]
    rows = tuple(
        {"partition": p.partition, "data_files": p.data_files, "small_files": p.small_files,
         "avg_file_mb": round(p.avg_file_bytes / 1_048_576, 3), "records": p.records}
        for p in worst
    )
    metrics = {"data_files": stats.data_files, "small_files": stats.small_files,
               "candidate_partitions": len(stats.compaction_candidates), "candidate_files": stats.candidate_files,
               "partitions": len(stats.partitions), "data_bytes": stats.data_bytes,
               "target_file_size_bytes": stats.target_file_size_bytes}
    if not stats.compaction_candidates:
        return Finding("small_files", Severity.OK,
                       f"no partition has > {sf.max_files_per_partition} files averaging < {sf.max_avg_file_bytes} B",
                       "nothing to compact", metrics, rows)
    busiest = max(stats.partitions[p].data_files for p in stats.compaction_candidates)
    severity = _grade(busiest, sf.max_files_per_partition)
    return Finding(
        "small_files", severity,
        f"{len(stats.compaction_candidates)} partitions hold {stats.candidate_files} files averaging under "
        f"{sf.max_avg_file_bytes} B (worst: {busiest} files)",
        f"run rewrite_data_files ({sf.strategy}) on the {len(stats.compaction_candidates)} candidate partitions",
        metrics, rows,
    )


def snapshot_finding(stats: TableStats, policy: Policy) -> Finding:
    p = policy.snapshots
    metrics = {"snapshots": stats.snapshots, "oldest_snapshot_age_hours": round(stats.oldest_snapshot_age_hours, 3),
               "max_snapshots": p.max_count, "max_snapshot_age_hours": p.max_age_hours}
    severity = _grade(stats.snapshots, p.max_count)
    too_old = stats.snapshots > p.min_keep and stats.oldest_snapshot_age_hours > p.max_age_hours
    if severity is Severity.OK and too_old:
        severity = Severity.WARN
    if severity is Severity.OK:
        return Finding("snapshot_retention", severity,
                       f"{stats.snapshots} snapshots, oldest {stats.oldest_snapshot_age_hours:.1f} h",
                       "nothing to expire", metrics)
    return Finding("snapshot_retention", severity,
                   f"{stats.snapshots} snapshots (max {p.max_count}), oldest {stats.oldest_snapshot_age_hours:.1f} h "
                   f"(max {p.max_age_hours:g} h)",
                   f"run expire_snapshots keeping at least {p.min_keep}", metrics)


def manifest_finding(stats: TableStats, policy: Policy) -> Finding:
    p = policy.manifests
    metrics = {"manifests": stats.manifests, "max_manifests": p.max_count,
               "files_per_manifest": round(stats.data_files / stats.manifests, 2) if stats.manifests else 0.0}
    severity = _grade(stats.manifests, p.max_count)
    if severity is Severity.OK:
        return Finding("manifest_fragmentation", severity, f"{stats.manifests} manifests", "nothing to rewrite", metrics)
    return Finding("manifest_fragmentation", severity, f"{stats.manifests} manifests (max {p.max_count})",
                   "run rewrite_manifests", metrics)


def orphan_finding(orphan_count: int, orphan_bytes: int, policy: Policy) -> Finding:
    p = policy.orphans
    metrics = {"orphan_files": orphan_count, "orphan_bytes": orphan_bytes, "max_orphans": p.max_count}
    if orphan_count <= p.max_count:
        return Finding("orphan_files", Severity.OK,
                       f"{orphan_count} unreferenced files older than {p.older_than_hours:g} h", "nothing to remove",
                       metrics)
    severity = Severity.ERROR if orphan_count >= max(1, p.max_count) * ERROR_FACTOR else Severity.WARN
    return Finding("orphan_files", severity,
                   f"{orphan_count} unreferenced files ({orphan_bytes} B) older than {p.older_than_hours:g} h",
                   "run remove_orphan_files (after expire_snapshots, never concurrently with it)", metrics)


def metadata_findings(stats: TableStats, policy: Policy) -> list[Finding]:
    """The findings computable from metadata alone (orphans need a storage listing)."""
    return [small_files_finding(stats, policy), snapshot_finding(stats, policy), manifest_finding(stats, policy)]
