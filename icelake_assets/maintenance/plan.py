"""Which maintenance ops act, and why: each op's own signal, read from metadata, against its threshold.

The same functions feed the asset checks, the sensors and the ops, so the three always agree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from icelake_assets.health.retention import cutoff_age_hours, expiry_forecast, kept_reason
from icelake_assets.health.stats import TableStats
from icelake_assets.settings import Policy

# Iceberg's max-file-group-size-bytes default (100 GB): a partition larger than this is several groups.
MAX_FILE_GROUP_BYTES = 100 * 1024**3


@dataclass(frozen=True)
class Decision:
    op: str
    act: bool
    reason: str
    signals: dict[str, Any] = field(default_factory=dict)  # numbers (counts, ratios, bytes)


def _disabled(op: str, policy: Policy) -> Decision | None:
    """An op left out of policy.operations.enabled never acts, whatever its signal."""
    if op in policy.operations.enabled:
        return None
    return Decision(
        op,
        False,
        f"disabled by policy (operations.enabled: {', '.join(policy.operations.enabled) or 'none'})",
    )


def decide_expire(stats: TableStats, policy: Policy) -> Decision:
    """Acts past the count or age threshold, and only when some snapshot would actually go: older
    than the cutoff (``min_age_hours`` over the count, else ``max_age_hours``), beyond the newest
    ``min_keep`` and referenced by no branch or tag (health/retention.py mirrors Iceberg's rule)."""
    if off := _disabled("expire_snapshots", policy):
        return off
    p = policy.snapshots
    signals = {
        "snapshots": stats.snapshots,
        "oldest_snapshot_age_hours": round(stats.oldest_snapshot_age_hours, 2),
        "max_snapshots": p.max_count,
        "max_snapshot_age_hours": p.max_age_hours,
        "min_keep": p.min_keep,
        "min_snapshot_age_hours": p.min_age_hours,
    }
    if stats.snapshots <= p.min_keep:
        return Decision(
            "expire_snapshots",
            False,
            f"{stats.snapshots} snapshots, not above the minimum of {p.min_keep} to keep",
            signals,
        )
    if stats.snapshots > p.max_count:
        why = f"{stats.snapshots} snapshots > {p.max_count}"
    elif stats.oldest_snapshot_age_hours > p.max_age_hours:
        why = f"oldest snapshot {stats.oldest_snapshot_age_hours:.1f} h old > {p.max_age_hours:g} h"
    else:
        return Decision(
            "expire_snapshots",
            False,
            f"{stats.snapshots} snapshots ≤ {p.max_count} and none older than {p.max_age_hours:g} h",
            signals,
        )
    fc = expiry_forecast(stats, policy)
    signals.update(
        expirable_snapshots=fc.count,
        kept_by_ref=fc.kept_by_ref,
        kept_newest=fc.kept_newest,
        kept_young=fc.kept_young,
        expire_older_than_hours=fc.cutoff_age_hours,
    )
    if not fc.count:
        return Decision(
            "expire_snapshots", False, f"{why}, but none may go yet: {kept_reason(fc, p.min_keep)}", signals
        )
    return Decision(
        "expire_snapshots",
        True,
        f"{why}: {fc.count} older than {fc.cutoff_age_hours:g} h beyond the newest {p.min_keep} "
        f"will go ({kept_reason(fc, p.min_keep)})",
        signals,
    )


def expire_cutoff(stats: TableStats, policy: Policy, now: datetime | None = None) -> datetime:
    """Snapshots older than this may go (``retain_last`` still keeps the newest ``min_keep``, and
    Iceberg keeps what branches and tags point to). ``now`` defaults to when the stats were taken,
    so the cutoff is the one :func:`decide_expire` forecast."""
    now = now or datetime.fromtimestamp(stats.evaluated_at, UTC)
    return now - timedelta(hours=cutoff_age_hours(stats.snapshots, policy))


def decide_orphans(orphan_count: int, orphan_bytes: int, policy: Policy) -> Decision:
    if off := _disabled("remove_orphan_files", policy):
        return off
    p = policy.orphans
    signals = {
        "orphan_files": orphan_count,
        "orphan_bytes": orphan_bytes,
        "max_orphans": p.max_count,
        "orphan_older_than_hours": p.older_than_hours,
    }
    if orphan_count > p.max_count:
        return Decision(
            "remove_orphan_files",
            True,
            f"{orphan_count} orphan files older than {p.older_than_hours:g} h > {p.max_count}",
            signals,
        )
    return Decision(
        "remove_orphan_files",
        False,
        f"{orphan_count} orphan files older than {p.older_than_hours:g} h ≤ {p.max_count}",
        signals,
    )


def deletes_crossed(stats: TableStats, policy: Policy) -> bool:
    """Merge-on-read tables: delete files past their ratio make every read merge them, so compact."""
    p = policy.delete_files
    return stats.delete_files > 0 and (
        stats.delete_file_ratio > p.max_file_ratio or stats.delete_record_ratio > p.max_record_ratio
    )


def rewrite_candidates(stats: TableStats, policy: Policy) -> list[str]:
    """Partitions a rewrite should take: the small-file candidates, plus, when the delete ratio is
    crossed, every partition holding delete files (the rewrite applies and drops them)."""
    chosen = set(stats.compaction_candidates)
    if deletes_crossed(stats, policy):
        chosen.update(p.partition for p in stats.partitions.values() if p.delete_files and p.data_files)
    return sorted(chosen)


def small_file_limit(stats: TableStats, policy: Policy) -> int:
    """Iceberg's ``min-file-size-bytes`` that selects exactly health's small files.

    Health counts ``size < target x ratio`` (a float); Iceberg selects ``length < min`` (a long): for
    integer sizes the two agree at ``ceil(target x ratio)``. Iceberg wants it below the target."""
    target = stats.target_file_size_bytes
    return max(1, min(math.ceil(target * policy.small_files.small_file_ratio), target - 1))


@dataclass(frozen=True)
class RewritePlan:
    """What ``rewrite_data_files`` will do with ``options``, predicted with Iceberg 1.10's planner rules
    (BinPackRewriteFilePlanner): per partition it takes the files under ``min-file-size-bytes`` (and,
    with ``delete-file-threshold``, files with deletes) and rewrites a group of them when it holds more
    than one file and at least ``min-input-files`` (or more than a target's bytes), or any file with
    deletes. ``partitions`` are the chosen partitions Iceberg rewrites under these options;
    ``excluded`` the chosen ones it would skip (never named), with the reason."""

    partitions: tuple[str, ...]
    excluded: dict[str, str]
    options: dict[str, str]
    groups: int
    input_bytes: int  # data bytes of the named partitions (an upper bound of what is rewritten)


def rewritable(p, min_input: int, with_deletes: bool) -> bool:
    if with_deletes and p.delete_files and p.data_files:
        return True  # delete-file-threshold=1: any data file with a delete is rewritten
    return p.small_files > 1 and p.small_files >= min_input


def plan_rewrite(stats: TableStats, policy: Policy, candidates: Sequence[str] | None = None) -> RewritePlan:
    """``candidates``: the partitions to consider (default: the table's, see rewrite_candidates).

    ``min-input-files`` is the policy's, lowered to the smallest small-file count among the chosen
    partitions (at least 2: one file rewritten alone saves nothing), so every partition the health
    check flags is one Iceberg rewrites; a chosen partition with fewer than 2 small files and no
    deletes to apply is excluded. The rewrite is run with a ``where`` naming the partitions (runner),
    so Iceberg takes nothing else. Partial progress (one commit per group batch) only past
    ``partial_progress_min_groups`` groups or ``partial_progress_min_bytes``: a small rewrite commits once."""
    sf = policy.small_files
    chosen = list(rewrite_candidates(stats, policy) if candidates is None else candidates)
    with_deletes = deletes_crossed(stats, policy)
    parts = {c: stats.partitions[c] for c in chosen if c in stats.partitions}
    counts = [p.small_files for p in parts.values() if p.small_files > 1]
    min_input = max(2, min([sf.min_input_files, *counts]))
    named, excluded = [], {}
    for label, p in parts.items():
        if rewritable(p, min_input, with_deletes):
            named.append(label)
        else:
            excluded[label] = (
                f"{p.small_files} small file(s) under {small_file_limit(stats, policy)} "
                "bytes: Iceberg rewrites a group of at least 2"
            )
    for label in chosen:
        if label not in parts:
            excluded[label] = "not in the table's current snapshot"
    # One group per partition, more when a partition exceeds Iceberg's max group size (100 GB default).
    groups = sum(max(1, math.ceil(parts[n].data_bytes / MAX_FILE_GROUP_BYTES)) for n in named)
    input_bytes = sum(parts[n].data_bytes for n in named)
    partial = sf.partial_progress_enabled and (
        groups > sf.partial_progress_min_groups or input_bytes > sf.partial_progress_min_bytes
    )
    options = {
        "target-file-size-bytes": str(stats.target_file_size_bytes),
        "min-input-files": str(min_input),
        "min-file-size-bytes": str(small_file_limit(stats, policy)),
        "partial-progress.enabled": str(partial).lower(),
        "partial-progress.max-commits": str(sf.partial_progress_max_commits),
        # Default 1: groups rewrite one at a time so their commits never race each other; with a
        # SQLite catalog (one writer) racing commits fail and partial progress silently drops them,
        # so resolve_policy refuses more than 1 there.
        "max-concurrent-file-group-rewrites": str(sf.max_concurrent_file_group_rewrites),
        # Merge-on-read: a data file with any delete file is rewritten (deletes applied, then dropped).
        # ... and the delete files no live row is left for go in the same run: Iceberg removes them
        # per partition (equality deletes too); runner.rewrite_data_files cleans up what it leaves.
        **({"delete-file-threshold": "1", "remove-dangling-deletes": "true"} if with_deletes else {}),
    }
    return RewritePlan(tuple(sorted(named)), excluded, options, groups, input_bytes)


def decide_rewrite(
    stats: TableStats, policy: Policy, candidates: Sequence[str] | None = None, scope: str | None = None
) -> Decision:
    """``candidates``/``scope``: a partitioned run considers only the candidates among its partitions
    (``scope`` describes them); None considers the whole table. Only partitions Iceberg will rewrite
    under the plan's options are named (see plan_rewrite)."""
    if off := _disabled("rewrite_data_files", policy):
        return off
    p = policy.small_files
    rp = plan_rewrite(stats, policy, candidates)
    chosen = list(rp.partitions)
    files = sum(stats.partitions[c].data_files for c in chosen)
    deletes = sum(stats.partitions[c].delete_files for c in chosen)
    signals = {
        "data_files": stats.data_files,
        "small_files": stats.small_files,
        "candidate_partitions": len(chosen),
        "candidate_files": files,
        "candidate_bytes": rp.input_bytes,
        "excluded_partitions": len(rp.excluded),
        "planned_groups": rp.groups,
        "min_input_files": int(rp.options["min-input-files"]),
        "max_files_per_partition": p.max_files_per_partition,
        "max_avg_file_bytes": p.max_avg_file_bytes,
    }
    where = f" among the run's {scope}" if scope else ""
    if candidates is not None:
        signals["table_candidate_partitions"] = len(stats.compaction_candidates)
    signals["delete_files_in_scope"] = deletes
    skipped = ""
    if rp.excluded:
        first = next(iter(rp.excluded.items()))
        skipped = f"; {len(rp.excluded)} flagged partitions Iceberg would skip (e.g. {first[0]}: {first[1]})"
    if chosen:
        why = (
            (
                f"{len(chosen)} partitions{where} with > {p.max_files_per_partition} files "
                f"averaging < {p.max_avg_file_bytes} bytes or past the delete-file ratio ({files} files"
                f"{f', {deletes} delete files' if deletes else ''})"
            )
            if deletes
            else (
                f"{len(chosen)} partitions{where} with > {p.max_files_per_partition} files "
                f"averaging < {p.max_avg_file_bytes} bytes ({files} files)"
            )
        )
        return Decision("rewrite_data_files", True, why + skipped, signals)
    return Decision(
        "rewrite_data_files",
        False,
        f"no partition{where} has > {p.max_files_per_partition} files averaging < "
        f"{p.max_avg_file_bytes} bytes that Iceberg would rewrite{skipped}",
        signals,
    )


def decide_manifests(stats: TableStats, policy: Policy, rewrite_commits: int = 0) -> Decision:
    """``rewrite_commits``: snapshots this run's rewrite_data_files committed. Past one (partial
    progress), each commit added its own manifests: they are consolidated in the same run, so a run
    leaves at most one manifest rewrite on top of its rewrite commits."""
    if off := _disabled("rewrite_manifests", policy):
        return off
    p = policy.manifests
    signals = {"manifests": stats.manifests, "max_manifests": p.max_count, "rewrite_commits": rewrite_commits}
    if stats.manifests > p.max_count:
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


def rewrite_options(stats: TableStats, policy: Policy) -> dict[str, str]:
    """Options of rewrite_data_files for the table's candidates (see plan_rewrite)."""
    return plan_rewrite(stats, policy).options
