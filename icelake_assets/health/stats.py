"""Table and partition statistics from Iceberg metadata alone (pyiceberg, no Spark).

Manifests are immutable, so what each one holds is read once and kept by path
(:class:`ManifestCache`); re-evaluating a table only reads the manifests it has not seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Iterable

from pyiceberg.manifest import DataFileContent, ManifestContent, ManifestFile
from pyiceberg.table import Table

from icelake_assets.settings import Policy

UNPARTITIONED = "<unpartitioned>"


@dataclass(frozen=True)
class FileRow:
    """One live file of a manifest, reduced to what health needs."""

    partition: str
    size: int
    records: int
    content: int  # 0 data, 1 position deletes, 2 equality deletes
    spec_id: int


class ManifestCache:
    """Live file rows per manifest path. Manifests never change once written, so entries never go stale."""

    def __init__(self, max_manifests: int = 100_000) -> None:
        self._rows: dict[str, tuple[FileRow, ...]] = {}
        self.max_manifests = max_manifests
        self.reads = 0  # manifests actually read from storage (tests and benchmarks watch it)

    def rows(self, table: Table, manifest: ManifestFile) -> tuple[FileRow, ...]:
        hit = self._rows.get(manifest.manifest_path)
        if hit is not None:
            return hit
        rows = tuple(_read_manifest(table, manifest))
        self.reads += 1
        if len(self._rows) >= self.max_manifests:
            self._rows.pop(next(iter(self._rows)))  # oldest first: dicts keep insertion order
        self._rows[manifest.manifest_path] = rows
        return rows


def _partition_label(table: Table, spec_id: int, partition) -> str:
    spec = table.specs().get(spec_id)
    if spec is None or spec.is_unpartitioned():
        return UNPARTITIONED
    return spec.partition_to_path(partition, table.schema())


def _read_manifest(table: Table, manifest: ManifestFile) -> Iterable[FileRow]:
    for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True):
        df = entry.data_file
        content = df.content.value if isinstance(df.content, DataFileContent) else int(df.content)
        yield FileRow(
            partition=_partition_label(table, manifest.partition_spec_id, df.partition),
            size=df.file_size_in_bytes,
            records=df.record_count,
            content=content,
            spec_id=manifest.partition_spec_id,
        )


@dataclass
class PartitionStats:
    partition: str
    data_files: int = 0
    data_bytes: int = 0
    records: int = 0
    small_files: int = 0
    delete_files: int = 0

    @property
    def avg_file_bytes(self) -> float:
        return self.data_bytes / self.data_files if self.data_files else 0.0


@dataclass
class TableStats:
    table: str
    metadata_location: str
    current_snapshot_id: int | None
    target_file_size_bytes: int
    data_files: int = 0
    data_bytes: int = 0
    records: int = 0
    small_files: int = 0
    position_delete_files: int = 0
    equality_delete_files: int = 0
    delete_bytes: int = 0
    manifests: int = 0
    snapshots: int = 0
    oldest_snapshot_age_hours: float = 0.0
    partitions: dict[str, PartitionStats] = field(default_factory=dict)
    # Partitions matching the policy's compaction diagnostic (many files, small on average).
    compaction_candidates: list[str] = field(default_factory=list)
    evaluated_at: float = 0.0

    @property
    def candidate_files(self) -> int:
        return sum(self.partitions[p].data_files for p in self.compaction_candidates)

    @property
    def candidate_bytes(self) -> int:
        return sum(self.partitions[p].data_bytes for p in self.compaction_candidates)

    def worst_partitions(self, limit: int = 10) -> list[PartitionStats]:
        return sorted(self.partitions.values(), key=lambda p: (-p.small_files, -p.data_files, p.partition))[:limit]


def target_file_size(table: Table, policy: Policy) -> int:
    prop = table.properties.get("write.target-file-size-bytes")
    return int(prop) if prop else policy.small_files.target_file_size_bytes


def compute_table_stats(
    table: Table, policy: Policy, cache: ManifestCache | None = None, now: float | None = None
) -> TableStats:
    """Statistics of the table's current snapshot, its snapshot history and its manifests."""
    cache = cache or ManifestCache()
    now = time.time() if now is None else now
    md = table.metadata
    snap = table.current_snapshot()
    target = target_file_size(table, policy)
    small_limit = target * policy.small_files.small_file_ratio
    stats = TableStats(
        table=".".join(table.name()),
        metadata_location=table.metadata_location,
        current_snapshot_id=snap.snapshot_id if snap else None,
        target_file_size_bytes=target,
        snapshots=len(md.snapshots),
        evaluated_at=now,
    )
    if md.snapshots:
        oldest_ms = min(s.timestamp_ms for s in md.snapshots)
        stats.oldest_snapshot_age_hours = max(0.0, (now * 1000 - oldest_ms) / 3_600_000)
    if snap is None:
        return stats
    manifests = snap.manifests(table.io)
    stats.manifests = len(manifests)
    for manifest in manifests:
        for row in cache.rows(table, manifest):
            part = stats.partitions.setdefault(row.partition, PartitionStats(row.partition))
            if row.content == 0 and manifest.content == ManifestContent.DATA:
                stats.data_files += 1
                stats.data_bytes += row.size
                stats.records += row.records
                part.data_files += 1
                part.data_bytes += row.size
                part.records += row.records
                if row.size < small_limit:
                    stats.small_files += 1
                    part.small_files += 1
            else:
                part.delete_files += 1
                stats.delete_bytes += row.size
                if row.content == DataFileContent.POSITION_DELETES.value:
                    stats.position_delete_files += 1
                else:
                    stats.equality_delete_files += 1
    sf = policy.small_files
    stats.compaction_candidates = sorted(
        p.partition
        for p in stats.partitions.values()
        if p.data_files > sf.max_files_per_partition and p.avg_file_bytes < sf.max_avg_file_bytes
    )
    return stats
