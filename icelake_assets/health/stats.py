"""Table and partition statistics from Iceberg metadata alone (pyiceberg, no Spark).

Three sources, cheapest first:

* the table metadata (already loaded): snapshots, their ages and operations, writer activity, the
  time since the last maintenance commit, the default partition spec and sort order;
* the manifest list of the current snapshot: manifests, their sizes and entry counts;
* the manifests themselves, summarized once per path by :class:`ManifestCache` (manifests are
  immutable), so re-evaluating a table reads only manifests it has not seen, and an unchanged table
  (same current manifest list) reads nothing and reuses its last aggregate.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyiceberg.table import Table

from icelake_assets.health.cache import FileRow, ManifestCache
from icelake_assets.health.data_retention import retention_facts
from icelake_assets.health.manifests import UNPARTITIONED, ManifestMeta, ManifestSummary, bound_decoder
from icelake_assets.health.restore_points import restore_point_facts
from icelake_assets.health.retention import snapshot_points
from icelake_assets.health.statistics import statistics_facts
from icelake_assets.health.table_stats import DEFAULT_MANIFEST_TARGET, MiB, PartitionStats, TableStats
from icelake_assets.settings import MAX_TARGET_FILE_BYTES, Policy

__all__ = [
    "UNPARTITIONED",
    "FileRow",
    "ManifestCache",
    "PartitionStats",
    "TableStats",
    "compute_table_stats",
    "target_file_size",
    "MAINTENANCE_OPERATION",
]

# Iceberg's snapshot operation of rewrites (rewrite_data_files, rewrite_manifests, rewrite of
# position deletes): the only commits maintenance makes. expire_snapshots and remove_orphan_files
# commit no snapshot, so they are not visible here.
MAINTENANCE_OPERATION = "replace"
# Amoro: a file under target / 8 is a "fragment" (self-optimizing.fragment-ratio).
FRAGMENT_RATIO = 8
# A manifest under 3/4 of the manifest target size counts as small.
SMALL_MANIFEST_RATIO = 0.75
# File-size distribution buckets (upper bounds), plotted as one metric per bucket.
SIZE_BUCKETS: tuple[tuple[str, float], ...] = (
    ("lt_1mb", 1 * MiB),
    ("1_8mb", 8 * MiB),
    ("8_32mb", 32 * MiB),
    ("32_64mb", 64 * MiB),
    ("64_128mb", 128 * MiB),
    ("128_256mb", 256 * MiB),
    ("256_512mb", 512 * MiB),
    ("ge_512mb", float("inf")),
)


def target_file_size(table: Table, policy: Policy) -> int:
    """The table's write.target-file-size-bytes up to the policy model's bound, else the policy's target
    (a table property cannot make every file "small" and have the whole table rewritten into one)."""
    prop = table.properties.get("write.target-file-size-bytes", "")
    within = prop.isdigit() and 0 < int(prop) <= MAX_TARGET_FILE_BYTES
    return int(prop) if within else policy.small_files.target_file_size_bytes


def _manifest_target(table: Table) -> int:
    prop = table.properties.get("commit.manifest.target-size-bytes")
    return int(prop) if prop else DEFAULT_MANIFEST_TARGET


def sort_key(table: Table) -> tuple[int | None, str | None]:
    """The source field id and name of the table's first sort column, when file bounds on it can show
    whether files are in order: an order-preserving transform (not bucket) of an orderable type."""
    order = table.sort_order()
    if order.is_unsorted or not order.fields:
        return None, None
    first = order.fields[0]
    schema = table.schema()
    if not first.transform.preserves_order or bound_decoder(schema, first.source_id) is None:
        return None, None
    return first.source_id, schema.find_column_name(first.source_id)


# -- snapshots and activity (table metadata only) ------------------------------------------------


def _snapshot_facts(table: Table, stats: TableStats, now: float, window_minutes: float) -> None:
    snapshots = table.metadata.snapshots
    stats.snapshots = len(snapshots)
    stats.snapshot_points, stats.snapshot_refs, stats.max_ref_age_ms = snapshot_points(table)
    stats.activity_window_minutes = window_minutes
    if not snapshots:
        return
    now_ms = now * 1000
    stamps = [s.timestamp_ms for s in snapshots]
    stats.oldest_snapshot_age_hours = max(0.0, (now_ms - min(stamps)) / 3_600_000)
    stats.newest_snapshot_age_hours = max(0.0, (now_ms - max(stamps)) / 3_600_000)
    stats.snapshots_last_24h = sum(1 for t in stamps if now_ms - t <= 86_400_000)
    last_writer = last_maintenance = None
    window_ms = window_minutes * 60_000
    for snap in snapshots:
        op = snap.summary.operation.value if snap.summary is not None else None
        if op == MAINTENANCE_OPERATION:
            last_maintenance = max(last_maintenance or 0, snap.timestamp_ms)
        else:
            last_writer = max(last_writer or 0, snap.timestamp_ms)
            if now_ms - snap.timestamp_ms <= window_ms:
                stats.recent_writer_commits += 1
    if last_writer is not None:
        stats.last_writer_commit_age_minutes = max(0.0, (now_ms - last_writer) / 60_000)
    if last_maintenance is not None:
        stats.last_maintenance_age_minutes = max(0.0, (now_ms - last_maintenance) / 60_000)


# -- manifests (aggregated, memoized per manifest list) ------------------------------------------


@dataclass(frozen=True)
class _Content:
    """Everything computed from the manifests of one snapshot under one set of knobs."""

    values: dict[str, Any]
    partitions: dict[str, PartitionStats]


def _overlapping(lower: Sequence[Any], upper: Sequence[Any]) -> np.ndarray:
    """Per file: does its [lower, upper] range overlap another file's (strictly)?

    A file without bounds (metrics disabled for the column) cannot be placed: it is not counted."""
    n = len(lower)
    flags = np.zeros(n, dtype=bool)
    known = [i for i in range(n) if lower[i] is not None and upper[i] is not None]
    if len(known) < 2:
        return flags
    kinds = {type(lower[i]) for i in known} | {type(upper[i]) for i in known}
    dtype = (
        np.float64 if kinds <= {int, float} and float in kinds else (np.int64 if kinds <= {int} else object)
    )
    lo = np.array([lower[i] for i in known], dtype=dtype)
    hi = np.array([upper[i] for i in known], dtype=dtype)
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    running_max = np.maximum.accumulate(hi)
    hit = np.zeros(len(known), dtype=bool)
    hit[1:] |= lo[1:] < running_max[:-1]  # starts before an earlier file ends
    hit[:-1] |= hi[:-1] > lo[1:]  # ends after the next file starts
    idx = np.asarray(known)[order]
    flags[idx[hit]] = True
    return flags


def _position_targets(
    summary: ManifestSummary, remap: np.ndarray, targets: dict[int, set[str] | None]
) -> None:
    """Adds the data files ``summary``'s position deletes point into to their partitions' sets (None
    once one of a partition's delete files may point into several)."""
    for i in np.flatnonzero(summary.content == 1).tolist():
        g = int(remap[summary.part[i]])
        ref = summary.referenced[i] if i < len(summary.referenced) else None
        known = targets.setdefault(g, set())
        if ref is None:
            targets[g] = None
        elif known is not None:
            known.add(ref)


def _aggregate(
    table: Table,
    metas: Sequence[ManifestMeta],
    summaries: Sequence[ManifestSummary],
    policy: Policy,
    target: int,
    sort_column: str | None,
) -> _Content:
    sf = policy.small_files
    small_limit = target * sf.small_file_ratio
    fragment_limit = target / FRAGMENT_RATIO
    default_spec = table.metadata.default_spec_id
    manifest_small = _manifest_target(table) * SMALL_MANIFEST_RATIO

    index: dict[str, int] = {}
    first_seen: list[tuple[int, tuple[Any, ...]]] = []
    parts, contents, sizes, records, old_spec = [], [], [], [], []
    lowers: list[Any] = []
    uppers: list[Any] = []
    # Per partition: the data files its position deletes point into (unknown: None).
    targets: dict[int, set[str] | None] = {}
    for summary in summaries:
        remap = np.empty(len(summary.labels), dtype=np.int64)
        for local, label in enumerate(summary.labels):
            g = index.get(label)
            if g is None:
                g = index[label] = len(index)
                first_seen.append((summary.spec_id, summary.values[local]))
            remap[local] = g
        parts.append(remap[summary.part] if len(summary) else np.empty(0, dtype=np.int64))
        _position_targets(summary, remap, targets)
        contents.append(summary.content)
        sizes.append(summary.size)
        records.append(summary.records)
        old_spec.append(np.full(len(summary), summary.spec_id != default_spec))
        if sort_column is not None:
            lowers.extend(summary.lower or [None] * len(summary))
            uppers.extend(summary.upper or [None] * len(summary))

    n_parts = len(index)
    empty_i = np.empty(0, dtype=np.int64)
    part = np.concatenate(parts) if parts else empty_i
    content = np.concatenate(contents) if contents else empty_i
    size = np.concatenate(sizes) if sizes else empty_i
    recs = np.concatenate(records) if records else empty_i
    old = np.concatenate(old_spec) if old_spec else np.empty(0, dtype=bool)

    data = content == 0
    pos = content == 1
    eq = content == 2
    dsize = size[data]
    small = data & (size < small_limit)
    fragment = data & (size <= fragment_limit)
    old_data = data & old
    unsorted = np.zeros(len(size), dtype=bool)
    if sort_column is not None and data.any():
        data_idx = np.flatnonzero(data)
        by_part: dict[int, list[int]] = {}
        for i in data_idx.tolist():
            by_part.setdefault(int(part[i]), []).append(i)
        for members in by_part.values():
            if len(members) > 1:
                flags = _overlapping([lowers[i] for i in members], [uppers[i] for i in members])
                unsorted[np.asarray(members)[flags]] = True

    def per_part(mask: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        w = None if weights is None else weights[mask]
        return np.bincount(part[mask], weights=w, minlength=n_parts).astype(np.int64)

    p_files, p_bytes, p_recs = per_part(data), per_part(data, size), per_part(data, recs)
    p_small, p_frag, p_old, p_unsorted = (
        per_part(small),
        per_part(fragment),
        per_part(old_data),
        per_part(unsorted),
    )
    p_pos, p_eq = per_part(pos), per_part(eq)
    p_del_recs, p_del_bytes = per_part(pos | eq, recs), per_part(pos | eq, size)
    partitions = {}
    for label, g in index.items():
        spec_id, values = first_seen[g]
        partitions[label] = PartitionStats(
            partition=label,
            data_files=int(p_files[g]),
            data_bytes=int(p_bytes[g]),
            records=int(p_recs[g]),
            small_files=int(p_small[g]),
            delete_files=int(p_pos[g] + p_eq[g]),
            position_delete_files=int(p_pos[g]),
            equality_delete_files=int(p_eq[g]),
            delete_records=int(p_del_recs[g]),
            delete_bytes=int(p_del_bytes[g]),
            fragment_files=int(p_frag[g]),
            old_spec_files=int(p_old[g]),
            unsorted_files=int(p_unsorted[g]),
            deleted_data_files=-1 if (t := targets.get(g, set())) is None else len(t),
            spec_id=spec_id,
            values=tuple(values),
        )

    bucket_edges = np.array([edge for _, edge in SIZE_BUCKETS[:-1]])
    bucket_counts = np.bincount(
        np.searchsorted(bucket_edges, dsize, side="right"), minlength=len(SIZE_BUCKETS)
    )
    pct = np.percentile(dsize, [10, 50, 90]).astype(np.int64) if len(dsize) else np.zeros(3, dtype=np.int64)
    entries = [m.files for m in metas]
    totals: dict[str, Any] = dict(
        data_files=int(data.sum()),
        data_bytes=int(dsize.sum()),
        records=int(recs[data].sum()),
        small_files=int(small.sum()),
        small_file_bytes=int(size[small].sum()),
        small_file_limit_bytes=int(small_limit),
        fragment_files=int(fragment.sum()),
        file_size_min=int(dsize.min()) if len(dsize) else 0,
        file_size_max=int(dsize.max()) if len(dsize) else 0,
        file_size_p10=int(pct[0]),
        file_size_p50=int(pct[1]),
        file_size_p90=int(pct[2]),
        size_histogram={
            name: int(c) for (name, _), c in zip(SIZE_BUCKETS, bucket_counts.tolist(), strict=False)
        },
        position_delete_files=int(pos.sum()),
        equality_delete_files=int(eq.sum()),
        delete_bytes=int(size[pos | eq].sum()),
        position_delete_records=int(recs[pos].sum()),
        equality_delete_records=int(recs[eq].sum()),
        manifests=len(metas),
        data_manifests=sum(1 for m in metas if m.content == 0),
        delete_manifests=sum(1 for m in metas if m.content != 0),
        small_manifests=sum(1 for m in metas if m.length < manifest_small),
        manifest_bytes=sum(m.length for m in metas),
        max_entries_per_manifest=max(entries, default=0),
        old_spec_files=int(old_data.sum()),
        unsorted_files=int(unsorted.sum()),
        drift_files=int((old_data | unsorted).sum()),
        compaction_candidates=sorted(
            p.partition
            for p in partitions.values()
            if p.data_files > sf.max_files_per_partition and p.avg_file_bytes < sf.max_avg_file_bytes
        ),
    )
    return _Content(totals, partitions)


def compute_table_stats(
    table: Table, policy: Policy, cache: ManifestCache | None = None, now: float | None = None
) -> TableStats:
    """Statistics of the table's current snapshot, its snapshot history and its manifests."""
    cache = cache if cache is not None else ManifestCache()
    now = time.time() if now is None else now
    md = table.metadata
    snap = table.current_snapshot()
    target = target_file_size(table, policy)
    sort_field, sort_column = sort_key(table)
    stats = TableStats(
        table=".".join(table.name()),
        metadata_location=table.metadata_location,
        current_snapshot_id=snap.snapshot_id if snap else None,
        target_file_size_bytes=target,
        evaluated_at=now,
        default_spec_id=md.default_spec_id,
        sort_order_id=md.default_sort_order_id,
        sort_column=sort_column,
        manifest_target_bytes=_manifest_target(table),
        statistics=statistics_facts(table),  # table metadata only: outside the manifests' cache
        format_version=md.format_version,
        delete_granularity=table.properties.get("write.delete.granularity", "file").lower(),
    )
    _snapshot_facts(table, stats, now, policy.activity.window_minutes)
    stats.restore_points = restore_point_facts(
        table, stats.snapshot_refs, stats.snapshot_points, policy.restore_points.prefix, now
    )
    stats.data_retention = retention_facts(table, policy.retention, cache, now)
    if snap is None:
        return stats
    sf = policy.small_files
    # Everything _aggregate reads; the manifest list path stands for the (immutable) manifests.
    key = (
        snap.manifest_list,
        target,
        sf.small_file_ratio,
        sf.max_files_per_partition,
        sf.max_avg_file_bytes,
        md.default_spec_id,
        sort_field,
        _manifest_target(table),
        tuple(sorted((i, str(s)) for i, s in table.specs().items())),
        str(table.schema()),
    )
    content = cache.aggregate(key)
    if content is None:
        reads_before = cache.reads
        metas = cache.manifest_list(table, snap)
        summaries = cache.summaries(table, metas, sort_field)
        content = _aggregate(table, metas, summaries, policy, target, sort_column)
        stats.manifests_read = cache.reads - reads_before
        cache.remember_aggregate(key, content)
    for name, value in content.values.items():  # copies: the cached aggregate is shared
        setattr(stats, name, value.copy() if isinstance(value, (list, dict)) else value)
    stats.partitions = dict(content.partitions)
    return stats
