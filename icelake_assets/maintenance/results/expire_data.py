"""What the row expiry (expire_data) did: the cut-off and predicate it deleted by, what the decision
predicted from metadata and what Iceberg's snapshot summaries say went (maintenance/ops/expire_data.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from icelake_assets.maintenance.results.base import Details, OpResult
from icelake_assets.planning.op_plans import EXPIRE_DATA
from icelake_assets.text import human_bytes

# Iceberg snapshot summary keys a delete commit reports (SnapshotSummary).
DELETED_RECORDS = "deleted-records"
ADDED_RECORDS = "added-records"
DELETED_FILES = "deleted-data-files"
ADDED_FILES = "added-data-files"
REMOVED_BYTES = "removed-files-size"
ADDED_BYTES = "added-files-size"
POSITION_DELETES = "added-position-deletes"
REMOVED_POSITION_DELETES = "removed-position-deletes"
EQUALITY_DELETES = "added-equality-deletes"


def summary_int(summary: Mapping[str, str], key: str) -> int:
    value = summary.get(key)
    return int(value) if value is not None and str(value).lstrip("-").isdigit() else 0


def rows_removed(summary: Mapping[str, str]) -> int:
    """The live rows a delete commit removes by its own summary: the rows of the files it removed less
    those it wrote back (copy-on-write), plus the rows its position deletes mark (merge-on-read) less
    those of the delete files it replaced: a deletion vector (v3) or a file-scoped delete file (v2)
    merges the old one's positions into the new one, which counts them again."""
    return (
        summary_int(summary, DELETED_RECORDS)
        - summary_int(summary, ADDED_RECORDS)
        + summary_int(summary, POSITION_DELETES)
        - summary_int(summary, REMOVED_POSITION_DELETES)
    )


@dataclass(frozen=True)
class ExpiryCommit:
    """One snapshot the expiry committed, with its summary's counts."""

    snapshot_id: int
    operation: str
    rows_removed: int
    deleted_files: int
    added_files: int
    removed_bytes: int
    added_bytes: int
    position_deletes: int

    @classmethod
    def of(cls, snapshot_id: int, operation: str, summary: Mapping[str, str]) -> ExpiryCommit:
        return cls(
            snapshot_id,
            operation,
            rows_removed(summary),
            summary_int(summary, DELETED_FILES),
            summary_int(summary, ADDED_FILES),
            summary_int(summary, REMOVED_BYTES),
            summary_int(summary, ADDED_BYTES),
            summary_int(summary, POSITION_DELETES) + summary_int(summary, EQUALITY_DELETES),
        )

    def to_dict(self) -> Details:
        return {
            "snapshot_id": self.snapshot_id,
            "operation": self.operation,
            "rows_removed": self.rows_removed,
            "deleted_data_files": self.deleted_files,
            "added_data_files": self.added_files,
            "removed_files_size": self.removed_bytes,
            "added_files_size": self.added_bytes,
            "added_delete_records": self.position_deletes,
        }


@dataclass(frozen=True, kw_only=True)
class ExpireDataResult(OpResult):
    op: ClassVar[str] = EXPIRE_DATA
    column: str | None = None
    cutoff: str | None = None  # ISO 8601, UTC
    predicate: str | None = None  # the Spark SQL condition the rows were deleted by
    write_mode: str | None = None  # write.delete.mode: copy-on-write or merge-on-read
    # What the decision predicted from metadata (rows of straddling files counted whole).
    predicted_rows: int | None = None
    predicted_files: int | None = None
    predicted_bytes: int | None = None
    predicted_metadata_only: bool | None = None
    commits: tuple[ExpiryCommit, ...] = ()
    first_expiry: bool = False
    # Rows matching the predicate, counted by Spark before the delete and after it.
    matched_before: int | None = None
    matched_after: int | None = None

    @property
    def rows_removed(self) -> int:
        return sum(c.rows_removed for c in self.commits)

    @property
    def files_removed(self) -> int:
        return sum(c.deleted_files for c in self.commits)

    @property
    def files_added(self) -> int:
        return sum(c.added_files for c in self.commits)

    @property
    def bytes_removed(self) -> int:
        return sum(c.removed_bytes for c in self.commits)

    @property
    def metadata_only(self) -> bool:
        """Files were dropped whole: no data or delete file written."""
        return bool(self.commits) and not any(c.added_files or c.position_deletes for c in self.commits)

    def expiry_commits(self) -> dict[int, int]:
        return {c.snapshot_id: c.rows_removed for c in self.commits}

    def expiry_mismatch(self) -> str | None:
        """Rows past the cut-off remain, or the commits removed other rows than those past it."""
        if not self.acted or self.matched_before is None:
            return None
        if self.matched_after:
            return f"{self.matched_after} rows older than {self.cutoff} remain after expire_data"
        if self.matched_before != self.rows_removed:
            return (
                f"expire_data removed {self.rows_removed} rows by its commits' summaries, but "
                f"{self.matched_before} were older than {self.cutoff}: rows newer than the cut-off went"
            )
        return None

    def metrics(self) -> dict[str, int | None]:
        return {
            "expire_data/rows_removed": self.rows_removed if self.acted else None,
            "expire_data/files_removed": self.files_removed if self.acted else None,
            "expire_data/files_added": self.files_added if self.acted else None,
            "expire_data/bytes_removed": self.bytes_removed if self.acted else None,
            "expire_data/rows_predicted": self.predicted_rows,
        }

    def did(self) -> str:
        how = (
            "metadata-only, no file rewritten" if self.metadata_only else f"{self.files_added} files written"
        )
        return (
            f"{self.rows_removed} rows older than {self.cutoff} deleted: {self.files_removed} data files "
            f"({human_bytes(self.bytes_removed)}) removed, {how}"
        )

    def _details(self) -> Details:
        if not self.acted:
            return {}
        return {
            "column": self.column,
            "cutoff": self.cutoff,
            "predicate": self.predicate,
            "write_mode": self.write_mode,
            "predicted_rows": self.predicted_rows,
            "predicted_files": self.predicted_files,
            "predicted_bytes": self.predicted_bytes,
            "predicted_metadata_only": self.predicted_metadata_only,
            "rows_removed": self.rows_removed,
            "files_removed": self.files_removed,
            "files_added": self.files_added,
            "bytes_removed": self.bytes_removed,
            "metadata_only": self.metadata_only,
            "first_expiry": self.first_expiry,
            "commits": [c.to_dict() for c in self.commits],
            "matched_before": self.matched_before,
            "matched_after": self.matched_after,
        }
