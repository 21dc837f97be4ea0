"""The data-file rewrite's result (one of the op results of maintenance/results/models.py): what it
rewrote, per partition, what it did about delete files, and how its attempts add up."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import ClassVar

from icelake_assets.maintenance.results.base import Details, MetadataItem, OpResult, ProcedureRow, count_of
from icelake_assets.maintenance.results.deletes import DanglingDeletes, PositionDeletes
from icelake_assets.planning.op_plans import REWRITE
from icelake_assets.text import human_bytes

# Procedure counts an attempt adds to the ones before it.
_SUMMED_PROCEDURE = ("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count")

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
    # Layout drift past its max (planning/layout.py): the partitions rewritten whole for it, and the
    # table's drift files before and after (the effect check counts their drop).
    drift_partitions: tuple[str, ...] = ()
    drift_files_before: int | None = None
    drift_files_after: int | None = None

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
        its effect's, maintenance/results/effect.py: no partition of the data rewrite is left behind)."""
        return bool(self.partitions_failed or self.error)

    def failed_names(self) -> tuple[str, ...]:
        """The failed partitions by Dagster key in a partitioned run, else by Iceberg label."""
        keys = self.partition_keys_failed
        return keys if keys is not None else self.partitions_failed

    def rewritten_names(self) -> tuple[str, ...]:
        keys = self.partition_keys_rewritten
        return keys if keys is not None else self.partitions_rewritten

    def metrics(self) -> dict[str, int | None]:
        pd = self.position_deletes
        return {
            "files/rewritten": self.rewritten_data_files_count,
            "files/added": self.added_data_files_count,
            "files/failed": self.failed_data_files_count,
            "bytes/rewritten": self.rewritten_bytes_count,
            "deletes/compacted": count_of(pd.procedure, "rewritten_delete_files_count")
            if pd is not None
            else None,
        }

    def did(self) -> str:
        position = self.position_deletes.did() if self.position_deletes is not None else None
        if position is not None and not self.partitions_rewritten:
            return position
        failed = self.failed_names()
        attempts = self.merged_attempts or 0
        return (
            f"{self.rewritten_data_files_count or 0} → {self.added_data_files_count or 0} data files "
            f"({human_bytes(self.rewritten_bytes_count or 0)} rewritten)"
            + (f", {len(failed)} partitions not compacted" if failed else "")
            + (f" in {attempts} attempts" if attempts > 1 else "")
            + (f"; {position}" if position is not None else "")
        )

    def metadata_items(self) -> tuple[MetadataItem, ...]:
        """Dagster keys in partitioned runs, Iceberg partition labels in whole-table runs."""
        if not self.acted:
            return ()
        items: list[MetadataItem] = []
        for kind, names in (("rewritten", self.rewritten_names()), ("failed", self.failed_names())):
            items.append(MetadataItem(f"partitions/{kind}", "int", len(names)))
            items.append(MetadataItem(f"partitions/{kind}_keys", "json", list(names)))
        return tuple(items)

    def data_commits(self) -> int:
        """Commits of its data rewrite (partial progress commits per group of files)."""
        return (self.snapshots_committed or 0) if self.acted else 0

    def snapshots_rewritten(self) -> int:
        position = self.position_deletes.commits if self.position_deletes is not None else 0
        return self.data_commits() + (position if self.acted else 0)

    def folded(self, attempts: Sequence[RewriteResult]) -> RewriteResult:
        """Counts add up over the attempts, ``*_before`` is the first's, failures are the last's."""
        procedure = dict(self.procedure)
        for key in _SUMMED_PROCEDURE:
            counts = [c for a in attempts if (c := count_of(a.procedure, key)) is not None]
            if counts:
                procedure[key] = sum(counts)
        committed = [a.snapshots_committed for a in attempts if a.snapshots_committed is not None]
        dangling = [a.dangling for a in attempts if a.dangling is not None]
        merged = replace(
            self,
            procedure=procedure,
            snapshots_committed=sum(committed) if committed else self.snapshots_committed,
            dangling=(
                replace(self.dangling or DanglingDeletes(), commits=sum(d.commits for d in dangling))
                if dangling
                else self.dangling
            ),
        )
        first = attempts[0] if attempts else None
        if first is not None and first.acted:
            merged = replace(
                merged,
                data_files_before=first.data_files_before,
                small_files_before=first.small_files_before,
                delete_files_before=first.delete_files_before,
            )
        rewritten = {p for a in attempts for p in a.partitions_rewritten}
        if rewritten or self.acted:
            merged = replace(
                merged, partitions_rewritten=tuple(sorted(rewritten - set(self.partitions_failed)))
            )
        return merged

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
        if self.drift_partitions:
            out["drift_partitions"] = list(self.drift_partitions)
            out["drift_files_before"] = self.drift_files_before
            out["drift_files_after"] = self.drift_files_after
        return out
