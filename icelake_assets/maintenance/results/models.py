"""What each maintenance op did, typed: one frozen result class per op (the rewrite's in
results/rewrite.py), each rendering itself (``metrics``, ``did``, ``metadata_items``) and folding its
attempts (``folded``): no reader dispatches on the class.

The audit records ``details()`` / ``to_dict()``, with exactly the keys it has always recorded; the run
state and a retried op's attempts travel through maintenance/results/codec.py, one JSON round trip
derived from the fields.

Fields an op sets only when it acted keep the meaning of an absent key: a default a reader takes for
"not there" (None, empty), so a result folded from several attempts (maintenance/ops/attempts.py) reads
as the former dicts did.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from icelake_assets.maintenance.results.base import (
    Details,
    MetadataItem,
    OpResult,
    ProcedureRow,
    Scalar,
    count_of,
)
from icelake_assets.maintenance.results.deletes import DanglingDeletes, PositionDeletes
from icelake_assets.maintenance.results.rewrite import PartitionValueList, RewriteResult
from icelake_assets.planning.op_plans import EXPIRE, MANIFESTS, ORPHANS, REWRITE, STATISTICS
from icelake_assets.text import human_bytes

# The ops that commit new data files: validation's row-count baseline is where the first one started.


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

    def metrics(self) -> dict[str, int | None]:
        return {
            "snapshots/expired": self.snapshots_expired,
            "snapshots/forecast": self.snapshots_forecast,
            "snapshots/mismatches": self.forecast_mismatches,
            "snapshots/lists_deleted": self.deleted_manifest_lists_count,
        }

    def did(self) -> str:
        return f"{self.snapshots_expired or 0} of {self.snapshots_before or 0} snapshots expired"

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
    # With a recovery window (health/orphan_phases.py): the orphans waiting in it, the new candidates
    # this run recorded and the recorded ones it dropped ("path: why").
    pending_files: int = 0
    pending_bytes: int = 0
    candidates_recorded: int = 0
    candidates_dropped: tuple[str, ...] = ()
    first_removable_at: float | None = None  # epoch s
    recovery_window_hours: float = 0.0
    # Set when it acted:
    orphans_removed: int = 0
    bytes_found: int = 0
    bytes_removed: int = 0
    removed_sample: tuple[str, ...] = ()
    referenced_files_verified: int | None = None
    delete_errors: tuple[str, ...] = ()

    def metrics(self) -> dict[str, int | None]:
        return {
            "orphans/found": self.scan.orphans_found,
            "orphans/removed": self.orphans_removed if self.acted else None,
            "bytes/orphans": self.bytes_found if self.acted else None,
            "bytes/orphans_removed": self.bytes_removed if self.acted else None,
            "orphans/hidden": self.scan.hidden_files,
            "orphans/skipped": self.scan.skipped_other_tables,
            "orphans/pending": self.pending_files,
            "bytes/orphans_pending": self.pending_bytes,
        }

    def did(self) -> str:
        done = f"{self.orphans_removed} orphan files removed ({human_bytes(self.bytes_removed)})"
        if self.pending_files:
            done += (
                f", {self.pending_files} pending their recovery window ({human_bytes(self.pending_bytes)})"
            )
        return done

    def _details(self) -> Details:
        out = self.scan.to_dict()
        if self.pending_files or self.candidates_recorded or self.candidates_dropped:
            out.update(
                pending_files=self.pending_files,
                pending_bytes=self.pending_bytes,
                candidates_recorded=self.candidates_recorded,
                first_removable_at=self.first_removable_at,
                recovery_window_hours=self.recovery_window_hours,
            )
            if self.candidates_dropped:
                out["candidates_dropped"] = list(self.candidates_dropped)
        if self.acted:
            out.update(
                orphans_removed=self.orphans_removed,
                bytes_found=self.bytes_found,
                bytes_removed=self.bytes_removed,
                removed_sample=list(self.removed_sample),
                referenced_files_verified=self.referenced_files_verified,
            )
            if self.delete_errors:
                out["delete_errors"] = list(self.delete_errors)
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

    def metrics(self) -> dict[str, int | None]:
        return {
            "manifests/rewritten": self.rewritten_manifests_count,
            "manifests/added": self.added_manifests_count,
        }

    def did(self) -> str:
        return (
            f"{self.rewritten_manifests_count or 0} → {self.added_manifests_count or 0} manifests rewritten"
        )

    def folded(self, attempts: Sequence[ManifestResult]) -> ManifestResult:
        """The manifest count before is the first attempt's, when it acted."""
        first = attempts[0] if attempts else self
        return replace(self, manifests_before=first.manifests_before) if first.acted else self

    def snapshots_rewritten(self) -> int:
        return 1 if self.acted else 0

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
    # The partition statistics file failed after the table statistics were registered (a store that
    # refuses its name under metadata/): recorded beside them, not the op's failure.
    partition_statistics_error: str | None = None
    partition_statistics_error_kind: str | None = None

    @property
    def refused(self) -> str | None:
        """The store's refusal of the table statistics file (causes.py's ``access_denied``), or None:
        what the sensor remembers so as not to compute them again on every tick."""
        return self.error if self.error_kind == "access_denied" else None

    def metrics(self) -> dict[str, int | None]:
        return {
            "statistics/columns": len(self.ndv) if self.acted else None,
            "statistics/bytes": self.statistics_bytes,
        }

    def did(self) -> str:
        if self.error:
            return f"no statistics ({self.error})"
        parts = " and partition statistics" if self.partition_statistics_file else ""
        return f"NDV sketches of {len(self.ndv)} columns{parts} for snapshot {self.statistics_snapshot_id}"

    def metadata_items(self) -> tuple[MetadataItem, ...]:
        if not self.acted or not self.statistics_file:
            return ()
        items = [MetadataItem("statistics/file", "path", self.statistics_file)]
        items.append(MetadataItem("statistics/ndv", "json", dict(self.ndv)))
        if self.partition_statistics_file:
            items.append(MetadataItem("statistics/partition_file", "path", self.partition_statistics_file))
        return tuple(items)

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
        if self.partition_statistics_error is not None:
            out["partition_statistics_error"] = self.partition_statistics_error
            out["partition_statistics_error_kind"] = self.partition_statistics_error_kind
        return out


AnyOpResult = ExpireResult | OrphanResult | RewriteResult | ManifestResult | StatisticsResult


__all__ = [
    "EXPIRE",
    "MANIFESTS",
    "ORPHANS",
    "REWRITE",
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
