"""What a table's statistics say (health/stats.py computes them from Iceberg metadata alone): the
typed results every check, the sensor's plan and a run's before/after read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icelake_assets.health.data_retention import RetentionFacts
from icelake_assets.health.restore_points import RestorePointFacts
from icelake_assets.health.retention import RefPoint, SnapshotPoint
from icelake_assets.health.statistics import StatisticsFacts

MiB = 1024 * 1024
# Iceberg's default commit.manifest.target-size-bytes; a manifest under 3/4 of it counts as small.
DEFAULT_MANIFEST_TARGET = 8 * MiB


@dataclass(frozen=True)
class PartitionStats:
    partition: str
    data_files: int = 0
    data_bytes: int = 0
    records: int = 0
    small_files: int = 0
    delete_files: int = 0
    position_delete_files: int = 0
    equality_delete_files: int = 0
    delete_records: int = 0
    delete_bytes: int = 0
    fragment_files: int = 0
    old_spec_files: int = 0
    unsorted_files: int = 0
    spec_id: int = 0
    # Distinct data files its position deletes point into (-1: unknown, a delete file may point into
    # several): what a file-scoped rewrite of the position deletes leaves, one delete file each.
    deleted_data_files: int = -1
    values: tuple[Any, ...] = ()  # raw partition values (JSON-safe), for per-partition maintenance filters

    @property
    def avg_file_bytes(self) -> float:
        return self.data_bytes / self.data_files if self.data_files else 0.0

    @property
    def drift_files(self) -> int:
        return max(self.old_spec_files, self.unsorted_files)


@dataclass
class TableStats:
    table: str
    metadata_location: str
    current_snapshot_id: int | None
    target_file_size_bytes: int
    # data files of the current snapshot
    data_files: int = 0
    data_bytes: int = 0
    records: int = 0
    small_files: int = 0  # under small_file_ratio x target
    small_file_bytes: int = 0
    small_file_limit_bytes: int = 0
    fragment_files: int = 0  # under target / 8 (Amoro's fragments)
    file_size_min: int = 0
    file_size_p10: int = 0
    file_size_p50: int = 0
    file_size_p90: int = 0
    file_size_max: int = 0
    size_histogram: dict[str, int] = field(default_factory=dict)
    # delete files of the current snapshot
    position_delete_files: int = 0
    equality_delete_files: int = 0
    delete_bytes: int = 0
    position_delete_records: int = 0
    equality_delete_records: int = 0
    # manifests of the current snapshot
    manifests: int = 0
    data_manifests: int = 0
    delete_manifests: int = 0
    small_manifests: int = 0
    manifest_bytes: int = 0
    manifest_target_bytes: int = DEFAULT_MANIFEST_TARGET
    max_entries_per_manifest: int = 0
    # snapshots (all of the table's, every branch)
    snapshots: int = 0
    oldest_snapshot_age_hours: float = 0.0
    newest_snapshot_age_hours: float = 0.0
    snapshots_last_24h: int = 0
    # what expiry needs to know which snapshots it may remove (health/retention.py)
    snapshot_points: tuple[SnapshotPoint, ...] = ()
    snapshot_refs: tuple[RefPoint, ...] = ()
    max_ref_age_ms: int | None = None  # history.expire.max-ref-age-ms
    # this product's restore-point tags and the files only they hold (health/restore_points.py)
    restore_points: RestorePointFacts = field(default_factory=RestorePointFacts)
    # activity: writer commits are every operation but maintenance's 'replace'
    activity_window_minutes: float = 0.0
    recent_writer_commits: int = 0
    last_writer_commit_age_minutes: float | None = None
    last_maintenance_age_minutes: float | None = None
    # layout drift
    default_spec_id: int = 0
    old_spec_files: int = 0  # data files written under an older partition spec
    sort_order_id: int = 0
    sort_column: str | None = None  # first sort column whose bounds are compared (None: unsorted table)
    unsorted_files: int = 0  # data files overlapping another file of their partition on sort_column
    drift_files: int = 0  # data files in either case
    partitions: dict[str, PartitionStats] = field(default_factory=dict)
    # column statistics (Puffin files) the metadata references for the current snapshot
    statistics: StatisticsFacts = field(default_factory=StatisticsFacts)
    format_version: int = 2
    # write.delete.granularity (Spark's default: file): how rewritten position deletes are split.
    delete_granularity: str = "file"
    # Partitions matching the policy's compaction diagnostic (many files, small on average).
    compaction_candidates: list[str] = field(default_factory=list)
    # Rows past the retention cut-off (health/data_retention.py); None: retention is off.
    data_retention: RetentionFacts | None = None
    evaluated_at: float = 0.0
    manifests_read: int = 0  # manifests read from storage by this evaluation (0 when cached)

    @property
    def candidate_files(self) -> int:
        return sum(self.partitions[p].data_files for p in self.compaction_candidates)

    @property
    def candidate_bytes(self) -> int:
        return sum(self.partitions[p].data_bytes for p in self.compaction_candidates)

    @property
    def delete_files(self) -> int:
        return self.position_delete_files + self.equality_delete_files

    @property
    def delete_records(self) -> int:
        return self.position_delete_records + self.equality_delete_records

    def summary(self) -> dict[str, int]:
        """The table's headline measures: a run's before/after and the sensor's observation."""
        return {
            "data_files": self.data_files,
            "small_files": self.small_files,
            "snapshots": self.snapshots,
            "manifests": self.manifests,
            "records": self.records,
            "data_bytes": self.data_bytes,
            "delete_files": self.delete_files,
        }

    @property
    def delete_file_ratio(self) -> float:
        """Delete files per data file."""
        return self.delete_files / self.data_files if self.data_files else float(self.delete_files > 0)

    @property
    def delete_record_ratio(self) -> float:
        """Deleted rows (position + equality delete records) per data row."""
        return self.delete_records / self.records if self.records else float(self.delete_records > 0)

    @property
    def drift_ratio(self) -> float:
        return self.drift_files / self.data_files if self.data_files else 0.0

    @property
    def avg_file_bytes(self) -> float:
        return self.data_bytes / self.data_files if self.data_files else 0.0

    @property
    def entries_per_manifest(self) -> float:
        return (self.data_files + self.delete_files) / self.manifests if self.manifests else 0.0

    def worst_partitions(self, limit: int = 10) -> list[PartitionStats]:
        return sorted(self.partitions.values(), key=lambda p: (-p.small_files, -p.data_files, p.partition))[
            :limit
        ]
