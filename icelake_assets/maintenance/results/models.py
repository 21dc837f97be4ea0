"""What each maintenance op did, typed: one frozen result class per op of maintenance/ops/runner.py.

Readers (post-run decisions, effects, Dagster metadata) read attributes. The audit and the retry
observations need the op's result as plain JSON: ``details()`` / ``to_dict()``, with exactly the keys
the audit trail has always recorded (maintenance/results/serialize.py reads them back).

Fields an op sets only when it acted keep the meaning of an absent key: a default a reader takes for
"not there" (None, empty), so a result folded from several attempts (maintenance/ops/attempts.py) reads
as the former dicts did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from icelake_assets.maintenance.results.base import (
    Details,
    OpResult,
    ProcedureRow,
    Scalar,
    count_of,
)
from icelake_assets.maintenance.results.deletes import DanglingDeletes, PositionDeletes

EXPIRE = "expire_snapshots"
ORPHANS = "remove_orphan_files"
REWRITE = "rewrite_data_files"
MANIFESTS = "rewrite_manifests"
STATISTICS = "compute_statistics"
# The ops that commit new data files: validation's row-count baseline is where the first one started.
REWRITING_OPS = (REWRITE, MANIFESTS)


@dataclass(frozen=True, kw_only=True)
class ExpireResult(OpResult):
    op: ClassVar[str] = EXPIRE
    procedure: ProcedureRow = field(default_factory=dict)  # deleted_*_count
    snapshots_before: int | None = None
    snapshots_after: int | None = None
    snapshots_expired: int | None = None
    snapshots_forecast: int | None = None
    older_than: str | None = None
    retain_last: int | None = None
    forecast_mismatches: int | None = None
    expired_not_forecast: tuple[int, ...] = ()
    forecast_not_expired: tuple[int, ...] = ()
    forecast_mismatch: str | None = None  # what the forecast and Iceberg disagree on, if they do

    @property
    def deleted_manifest_lists_count(self) -> int | None:
        return count_of(self.procedure, "deleted_manifest_lists_count")

    def _details(self) -> Details:
        if not self.acted:
            return {}
        return {
            **self.procedure,
            "snapshots_before": self.snapshots_before,
            "snapshots_after": self.snapshots_after,
            "snapshots_expired": self.snapshots_expired,
            "snapshots_forecast": self.snapshots_forecast,
            "older_than": self.older_than,
            "retain_last": self.retain_last,
            "forecast_mismatches": self.forecast_mismatches,
            "expired_not_forecast": list(self.expired_not_forecast),
            "forecast_not_expired": list(self.forecast_not_expired),
            "forecast_mismatch": self.forecast_mismatch,
        }


@dataclass(frozen=True)
class OrphanScanSummary:
    """What the orphan op's storage listing found (health/orphans.py's OrphanScan, in numbers)."""

    listed_files: int = 0
    orphans_found: int = 0
    hidden_files: int = 0
    skipped_other_tables: int = 0
    skipped_reasons: Mapping[str, int] = field(default_factory=dict)  # reason -> files left alone
    skipped_sample: tuple[str, ...] = ()
    refused: str | None = None  # why this table is never cleaned
    deferred: str | None = None  # why it is not cleaned now

    def to_dict(self) -> Details:
        out: Details = {
            "listed_files": self.listed_files,
            "orphans_found": self.orphans_found,
            "hidden_files": self.hidden_files,
            "skipped_other_tables": self.skipped_other_tables,
        }
        if self.skipped_reasons:
            out["skipped_reasons"] = dict(self.skipped_reasons)
            out["skipped_sample"] = list(self.skipped_sample)
        if self.refused:
            out["refused"] = self.refused
        if self.deferred:
            out["deferred"] = self.deferred
        return out


@dataclass(frozen=True, kw_only=True)
class OrphanResult(OpResult):
    op: ClassVar[str] = ORPHANS
    scan: OrphanScanSummary = field(default_factory=OrphanScanSummary)
    # Set when it acted:
    orphans_removed: int = 0
    bytes_found: int = 0
    removed_sample: tuple[str, ...] = ()
    referenced_files_verified: int | None = None
    delete_errors: tuple[str, ...] = ()

    def _details(self) -> Details:
        out = self.scan.to_dict()
        if self.acted:
            out.update(
                orphans_removed=self.orphans_removed,
                bytes_found=self.bytes_found,
                removed_sample=list(self.removed_sample),
                referenced_files_verified=self.referenced_files_verified,
            )
            if self.delete_errors:
                out["delete_errors"] = list(self.delete_errors)
        return out


PartitionValueList = tuple[tuple[str | None, ...], ...]


@dataclass(frozen=True, kw_only=True)
class RewriteResult(OpResult):
    """The data-file rewrite. ``partitions_failed``: attempted partitions that kept all their small
    files (measured from metadata; Iceberg only counts groups whose rewrite failed)."""

    op: ClassVar[str] = REWRITE
    procedure: ProcedureRow = field(default_factory=dict)  # rewritten_data_files_count, ...
    dangling: DanglingDeletes | None = None  # only after a rewrite that applied deletes and committed
    # Position deletes compacted by rewrite_position_delete_files instead of a data rewrite.
    position_deletes: PositionDeletes | None = None
    data_files_before: int | None = None
    data_files_after: int | None = None
    small_files_before: int | None = None
    small_files_after: int | None = None
    candidate_partitions: tuple[str, ...] = ()
    where: str | None = None
    options: Mapping[str, str] = field(default_factory=dict)
    partial_progress_fallback: bool = False
    estimated_rewrite_bytes: int | None = None
    snapshots_committed: int | None = None
    delete_files_before: int | None = None
    delete_files_after: int | None = None
    partitions_rewritten: tuple[str, ...] = ()
    partitions_failed: tuple[str, ...] = ()
    iceberg_failed_data_files_count: int | None = None
    failed_data_files_count: int | None = None  # the larger of Iceberg's count and ours
    # With a partition scope: the run's partition values (for the caller's Dagster keys) ...
    failed_partition_values: PartitionValueList | None = None
    rewritten_partition_values: PartitionValueList | None = None
    error: str | None = None  # a Spark/Iceberg failure, recorded rather than raised
    error_kind: str | None = None
    # ... and the Dagster partition keys orchestration derived from them.
    partition_keys_failed: tuple[str, ...] | None = None
    partition_keys_rewritten: tuple[str, ...] | None = None

    @property
    def rewritten_data_files_count(self) -> int | None:
        return count_of(self.procedure, "rewritten_data_files_count")

    @property
    def added_data_files_count(self) -> int | None:
        return count_of(self.procedure, "added_data_files_count")

    @property
    def rewritten_bytes_count(self) -> int | None:
        return count_of(self.procedure, "rewritten_bytes_count")

    @property
    def failed(self) -> bool:
        """Some partitions did not compact, or Spark failed (a failed position-delete compaction is
        its effect's, maintenance/verify/effect.py: no partition of the data rewrite is left behind)."""
        return bool(self.partitions_failed or self.error)

    def failed_names(self) -> tuple[str, ...]:
        """The failed partitions by Dagster key in a partitioned run, else by Iceberg label."""
        keys = self.partition_keys_failed
        return keys if keys is not None else self.partitions_failed

    def rewritten_names(self) -> tuple[str, ...]:
        keys = self.partition_keys_rewritten
        return keys if keys is not None else self.partitions_rewritten

    def _details(self) -> Details:
        if not self.acted:
            return {}
        out: Details = dict(self.procedure)
        if self.dangling is not None:
            out.update(self.dangling.to_dict())
        if self.position_deletes is not None:
            out["position_deletes"] = self.position_deletes.to_dict()
        out.update(
            data_files_before=self.data_files_before,
            data_files_after=self.data_files_after,
            small_files_before=self.small_files_before,
            small_files_after=self.small_files_after,
            candidate_partitions=list(self.candidate_partitions),
            where=self.where,
            options=dict(self.options),
            partial_progress_fallback=self.partial_progress_fallback,
            estimated_rewrite_bytes=self.estimated_rewrite_bytes,
            snapshots_committed=self.snapshots_committed,
            delete_files_before=self.delete_files_before,
            delete_files_after=self.delete_files_after,
            partitions_rewritten=list(self.partitions_rewritten),
            partitions_failed=list(self.partitions_failed),
            iceberg_failed_data_files_count=self.iceberg_failed_data_files_count,
            failed_data_files_count=self.failed_data_files_count,
        )
        if self.failed_partition_values is not None:
            out["failed_partition_values"] = [list(v) for v in self.failed_partition_values]
        if self.rewritten_partition_values is not None:
            out["rewritten_partition_values"] = [list(v) for v in self.rewritten_partition_values]
        if self.error is not None:
            out["error"], out["error_kind"] = self.error, self.error_kind
        if self.partition_keys_failed is not None:
            out["partition_keys_failed"] = list(self.partition_keys_failed)
        if self.partition_keys_rewritten is not None:
            out["partition_keys_rewritten"] = list(self.partition_keys_rewritten)
        return out


@dataclass(frozen=True, kw_only=True)
class ManifestResult(OpResult):
    op: ClassVar[str] = MANIFESTS
    procedure: ProcedureRow = field(default_factory=dict)  # rewritten_manifests_count, added_...
    procedure_attempts: int = 1  # tries of the procedure (a writer's commit conflicts with it)
    manifests_before: int | None = None
    manifests_after: int | None = None

    @property
    def rewritten_manifests_count(self) -> int | None:
        return count_of(self.procedure, "rewritten_manifests_count")

    @property
    def added_manifests_count(self) -> int | None:
        return count_of(self.procedure, "added_manifests_count")

    def _details(self) -> Details:
        if not self.acted:
            return {}
        return {
            **self.procedure,
            "attempts": self.procedure_attempts,
            "manifests_before": self.manifests_before,
            "manifests_after": self.manifests_after,
        }


@dataclass(frozen=True, kw_only=True)
class StatisticsResult(OpResult):
    """compute_statistics: the Puffin file of NDV sketches registered for the current snapshot (no
    snapshot is committed), as pyiceberg found it afterwards, and the partition statistics file."""

    op: ClassVar[str] = STATISTICS
    columns: tuple[str, ...] = ()  # the columns sketched
    statistics_file: str | None = None
    statistics_snapshot_id: int | None = None
    statistics_bytes: int | None = None
    ndv: Mapping[str, int] = field(default_factory=dict)  # column -> NDV estimate, as Iceberg wrote it
    ndv_read_back: int | None = None  # NDV blobs pyiceberg read from the file itself
    registered: bool | None = None  # pyiceberg's metadata names the file for the snapshot
    partition_statistics_file: str | None = None
    partition_statistics_snapshot_id: int | None = None
    error: str | None = None  # a Spark/Iceberg failure, recorded rather than raised
    error_kind: str | None = None

    def _details(self) -> Details:
        if not self.acted:
            return {}
        out: Details = {
            "columns": list(self.columns),
            "statistics_file": self.statistics_file,
            "statistics_snapshot_id": self.statistics_snapshot_id,
            "statistics_bytes": self.statistics_bytes,
            "ndv": dict(self.ndv),
            "ndv_read_back": self.ndv_read_back,
            "registered": self.registered,
            "partition_statistics_file": self.partition_statistics_file,
            "partition_statistics_snapshot_id": self.partition_statistics_snapshot_id,
        }
        if self.error is not None:
            out["error"], out["error_kind"] = self.error, self.error_kind
        return out


AnyOpResult = ExpireResult | OrphanResult | RewriteResult | ManifestResult | StatisticsResult


__all__ = [
    "EXPIRE",
    "MANIFESTS",
    "ORPHANS",
    "REWRITE",
    "REWRITING_OPS",
    "STATISTICS",
    "AnyOpResult",
    "DanglingDeletes",
    "ExpireResult",
    "ManifestResult",
    "OpResult",
    "OrphanResult",
    "OrphanScanSummary",
    "PositionDeletes",
    "ProcedureRow",
    "PartitionValueList",
    "RewriteResult",
    "Scalar",
    "StatisticsResult",
]
