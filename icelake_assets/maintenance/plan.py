"""Which maintenance ops act, and why: each op's own signal, read from metadata, against its threshold.

The same functions feed the asset checks, the sensors and the ops, so the three always agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from icelake_assets.health.stats import TableStats
from icelake_assets.settings import Policy

OPS = ("expire_snapshots", "remove_orphan_files", "rewrite_data_files", "rewrite_manifests")


@dataclass(frozen=True)
class Decision:
    op: str
    act: bool
    reason: str
    signals: dict[str, float | int] = field(default_factory=dict)


def decide_expire(stats: TableStats, policy: Policy) -> Decision:
    p = policy.snapshots
    signals = {"snapshots": stats.snapshots, "oldest_snapshot_age_hours": round(stats.oldest_snapshot_age_hours, 2),
               "max_snapshots": p.max_count, "max_snapshot_age_hours": p.max_age_hours, "min_keep": p.min_keep}
    if stats.snapshots <= p.min_keep:
        return Decision("expire_snapshots", False, f"{stats.snapshots} snapshots, not above the minimum of {p.min_keep} to keep", signals)
    if stats.snapshots > p.max_count:
        return Decision("expire_snapshots", True, f"{stats.snapshots} snapshots > {p.max_count}", signals)
    if stats.oldest_snapshot_age_hours > p.max_age_hours:
        return Decision("expire_snapshots", True,
                        f"oldest snapshot {stats.oldest_snapshot_age_hours:.1f} h old > {p.max_age_hours:g} h", signals)
    return Decision("expire_snapshots", False,
                    f"{stats.snapshots} snapshots ≤ {p.max_count} and none older than {p.max_age_hours:g} h", signals)


def expire_cutoff(stats: TableStats, policy: Policy, now: datetime | None = None) -> datetime:
    """Snapshots older than this go (``retain_last`` still keeps the newest ``min_keep``).

    Over the count threshold, every snapshot but the newest ``min_keep`` may go; otherwise only
    those past the age limit."""
    now = now or datetime.now(timezone.utc)
    if stats.snapshots > policy.snapshots.max_count:
        return now
    return now - timedelta(hours=policy.snapshots.max_age_hours)


def decide_orphans(orphan_count: int, orphan_bytes: int, policy: Policy) -> Decision:
    p = policy.orphans
    signals = {"orphan_files": orphan_count, "orphan_bytes": orphan_bytes, "max_orphans": p.max_count,
               "orphan_older_than_hours": p.older_than_hours}
    if orphan_count > p.max_count:
        return Decision("remove_orphan_files", True,
                        f"{orphan_count} orphan files older than {p.older_than_hours:g} h > {p.max_count}", signals)
    return Decision("remove_orphan_files", False,
                    f"{orphan_count} orphan files older than {p.older_than_hours:g} h ≤ {p.max_count}", signals)


def decide_rewrite(stats: TableStats, policy: Policy) -> Decision:
    p = policy.small_files
    signals = {"data_files": stats.data_files, "small_files": stats.small_files,
               "candidate_partitions": len(stats.compaction_candidates), "candidate_files": stats.candidate_files,
               "candidate_bytes": stats.candidate_bytes, "max_files_per_partition": p.max_files_per_partition,
               "max_avg_file_bytes": p.max_avg_file_bytes}
    if stats.compaction_candidates:
        return Decision("rewrite_data_files", True,
                        f"{len(stats.compaction_candidates)} partitions with > {p.max_files_per_partition} files "
                        f"averaging < {p.max_avg_file_bytes} bytes ({stats.candidate_files} files)", signals)
    return Decision("rewrite_data_files", False,
                    f"no partition has > {p.max_files_per_partition} files averaging < {p.max_avg_file_bytes} bytes",
                    signals)


def decide_manifests(stats: TableStats, policy: Policy) -> Decision:
    p = policy.manifests
    signals = {"manifests": stats.manifests, "max_manifests": p.max_count}
    if stats.manifests > p.max_count:
        return Decision("rewrite_manifests", True, f"{stats.manifests} manifests > {p.max_count}", signals)
    return Decision("rewrite_manifests", False, f"{stats.manifests} manifests ≤ {p.max_count}", signals)


def rewrite_options(stats: TableStats, policy: Policy) -> dict[str, str]:
    """Options of rewrite_data_files: the table's target size and the policy's minimum group size."""
    return {
        "target-file-size-bytes": str(stats.target_file_size_bytes),
        "min-input-files": str(policy.small_files.min_input_files),
        "partial-progress.enabled": "true",
        # Groups rewrite one at a time so their commits never race each other: with a SQLite
        # catalog (one writer) racing commits fail and partial progress silently drops them.
        "max-concurrent-file-group-rewrites": "1",
    }
