"""Which maintenance ops act, and why: each op's own signal, read from metadata, against its threshold.

The same functions feed the asset checks, the sensors and the ops, so the three always agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Sequence

from icelake_assets.health.retention import cutoff_age_hours, expiry_forecast, kept_reason
from icelake_assets.health.stats import TableStats
from icelake_assets.settings import Policy



@dataclass(frozen=True)
class Decision:
    op: str
    act: bool
    reason: str
    signals: dict[str, float | int] = field(default_factory=dict)


def _disabled(op: str, policy: Policy) -> Decision | None:
    """An op left out of policy.operations.enabled never acts, whatever its signal."""
    if op in policy.operations.enabled:
        return None
    return Decision(op, False, f"disabled by policy (operations.enabled: {', '.join(policy.operations.enabled) or 'none'})")


def decide_expire(stats: TableStats, policy: Policy) -> Decision:
    """Acts past the count or age threshold, and only when some snapshot would actually go: older
    than the cutoff (``min_age_hours`` over the count, else ``max_age_hours``), beyond the newest
    ``min_keep`` and referenced by no branch or tag (health/retention.py mirrors Iceberg's rule)."""
    if off := _disabled("expire_snapshots", policy):
        return off
    p = policy.snapshots
    signals = {"snapshots": stats.snapshots, "oldest_snapshot_age_hours": round(stats.oldest_snapshot_age_hours, 2),
               "max_snapshots": p.max_count, "max_snapshot_age_hours": p.max_age_hours,
               "min_keep": p.min_keep, "min_snapshot_age_hours": p.min_age_hours}
    if stats.snapshots <= p.min_keep:
        return Decision("expire_snapshots", False,
                        f"{stats.snapshots} snapshots, not above the minimum of {p.min_keep} to keep",
                        signals)
    if stats.snapshots > p.max_count:
        why = f"{stats.snapshots} snapshots > {p.max_count}"
    elif stats.oldest_snapshot_age_hours > p.max_age_hours:
        why = f"oldest snapshot {stats.oldest_snapshot_age_hours:.1f} h old > {p.max_age_hours:g} h"
    else:
        return Decision("expire_snapshots", False,
                        f"{stats.snapshots} snapshots ≤ {p.max_count} and none older than "
                        f"{p.max_age_hours:g} h", signals)
    fc = expiry_forecast(stats, policy)
    signals.update(expirable_snapshots=fc.count, kept_by_ref=fc.kept_by_ref, kept_newest=fc.kept_newest,
                   kept_young=fc.kept_young, expire_older_than_hours=fc.cutoff_age_hours)
    if not fc.count:
        return Decision("expire_snapshots", False,
                        f"{why}, but none may go yet: {kept_reason(fc, p.min_keep)}", signals)
    return Decision("expire_snapshots", True,
                    f"{why}: {fc.count} older than {fc.cutoff_age_hours:g} h beyond the newest {p.min_keep} "
                    f"will go ({kept_reason(fc, p.min_keep)})", signals)


def expire_cutoff(stats: TableStats, policy: Policy, now: datetime | None = None) -> datetime:
    """Snapshots older than this may go (``retain_last`` still keeps the newest ``min_keep``, and
    Iceberg keeps what branches and tags point to). ``now`` defaults to when the stats were taken,
    so the cutoff is the one :func:`decide_expire` forecast."""
    now = now or datetime.fromtimestamp(stats.evaluated_at, timezone.utc)
    return now - timedelta(hours=cutoff_age_hours(stats.snapshots, policy))


def decide_orphans(orphan_count: int, orphan_bytes: int, policy: Policy) -> Decision:
    if off := _disabled("remove_orphan_files", policy):
        return off
    p = policy.orphans
    signals = {"orphan_files": orphan_count, "orphan_bytes": orphan_bytes, "max_orphans": p.max_count,
               "orphan_older_than_hours": p.older_than_hours}
    if orphan_count > p.max_count:
        return Decision("remove_orphan_files", True,
                        f"{orphan_count} orphan files older than {p.older_than_hours:g} h > {p.max_count}", signals)
    return Decision("remove_orphan_files", False,
                    f"{orphan_count} orphan files older than {p.older_than_hours:g} h ≤ {p.max_count}", signals)


def deletes_crossed(stats: TableStats, policy: Policy) -> bool:
    """Merge-on-read tables: delete files past their ratio make every read merge them, so compact."""
    p = policy.delete_files
    return stats.delete_files > 0 and (stats.delete_file_ratio > p.max_file_ratio
                                       or stats.delete_record_ratio > p.max_record_ratio)


def rewrite_candidates(stats: TableStats, policy: Policy) -> list[str]:
    """Partitions a rewrite should take: the small-file candidates, plus, when the delete ratio is
    crossed, every partition holding delete files (the rewrite applies and drops them)."""
    chosen = set(stats.compaction_candidates)
    if deletes_crossed(stats, policy):
        chosen.update(p.partition for p in stats.partitions.values() if p.delete_files and p.data_files)
    return sorted(chosen)


def decide_rewrite(stats: TableStats, policy: Policy, candidates: Sequence[str] | None = None,
                   scope: str | None = None) -> Decision:
    """``candidates``/``scope``: a partitioned run considers only the candidates among its partitions
    (``scope`` describes them); None considers the whole table."""
    if off := _disabled("rewrite_data_files", policy):
        return off
    p = policy.small_files
    chosen = list(rewrite_candidates(stats, policy) if candidates is None else candidates)
    files = sum(stats.partitions[c].data_files for c in chosen)
    deletes = sum(stats.partitions[c].delete_files for c in chosen)
    signals = {"data_files": stats.data_files, "small_files": stats.small_files,
               "candidate_partitions": len(chosen), "candidate_files": files,
               "candidate_bytes": sum(stats.partitions[c].data_bytes for c in chosen),
               "max_files_per_partition": p.max_files_per_partition, "max_avg_file_bytes": p.max_avg_file_bytes}
    where = f" among the run's {scope}" if scope else ""
    if candidates is not None:
        signals["table_candidate_partitions"] = len(stats.compaction_candidates)
    signals["delete_files_in_scope"] = deletes
    if chosen:
        why = (f"{len(chosen)} partitions{where} with > {p.max_files_per_partition} files "
               f"averaging < {p.max_avg_file_bytes} bytes or past the delete-file ratio ({files} files"
               f"{f', {deletes} delete files' if deletes else ''})") if deletes else (
               f"{len(chosen)} partitions{where} with > {p.max_files_per_partition} files "
               f"averaging < {p.max_avg_file_bytes} bytes ({files} files)")
        return Decision("rewrite_data_files", True, why, signals)
    return Decision("rewrite_data_files", False,
                    f"no partition{where} has > {p.max_files_per_partition} files averaging < "
                    f"{p.max_avg_file_bytes} bytes", signals)


def decide_manifests(stats: TableStats, policy: Policy) -> Decision:
    if off := _disabled("rewrite_manifests", policy):
        return off
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
        "partial-progress.enabled": str(policy.small_files.partial_progress_enabled).lower(),
        "partial-progress.max-commits": str(policy.small_files.partial_progress_max_commits),
        # Default 1: groups rewrite one at a time so their commits never race each other; with a
        # SQLite catalog (one writer) racing commits fail and partial progress silently drops them,
        # so resolve_policy refuses more than 1 there.
        "max-concurrent-file-group-rewrites": str(policy.small_files.max_concurrent_file_group_rewrites),
        # Merge-on-read: a data file with any delete file is rewritten (deletes applied, then dropped).
        **({"delete-file-threshold": "1"} if deletes_crossed(stats, policy) else {}),
    }
