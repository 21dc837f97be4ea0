"""Validation after maintenance: the rows before and after must match.

Expected rows after = rows at the before-snapshot + the net rows of every commit since then that is
not a rewrite (writers may keep appending while maintenance runs). Rewrites (``replace``) must not
change the row count. The summaries are then confirmed by real counts through Spark.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.procedures import count_rows


class ValidationFailed(RuntimeError):
    """Row counts differ after maintenance; the message carries the snapshot ids to recover."""


@dataclass(frozen=True)
class ValidationResult:
    before_snapshot_id: int | None
    after_snapshot_id: int | None
    rows_before: int
    rows_after: int
    rows_expected: int
    writer_rows_since: int
    rewrite_snapshots: int

    @property
    def ok(self) -> bool:
        return self.rows_after == self.rows_expected


def summary_records(table: Table, snapshot_id: int | None) -> int:
    if snapshot_id is None:
        return 0
    snap = table.snapshot_by_id(snapshot_id)
    if snap is None or snap.summary is None:
        raise ValidationFailed(f"snapshot {snapshot_id} of {'.'.join(table.name())} is gone: cannot validate")
    return int(snap.summary.get("total-records", 0))


def _commits_since(table: Table, before_id: int | None) -> list:
    """Snapshots on the current branch after ``before_id``, oldest first."""
    chain = []
    snap = table.current_snapshot()
    while snap is not None and snap.snapshot_id != before_id:
        chain.append(snap)
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id else None
    if before_id is not None and snap is None:
        raise ValidationFailed(
            f"snapshot {before_id} is no longer an ancestor of the current snapshot of "
            f"{'.'.join(table.name())}: the table was rolled back or replaced during maintenance"
        )
    return list(reversed(chain))


def validate_row_counts(
    spark: SparkSession, ref: TableRef, table: Table, before_snapshot_id: int | None, real_counts: bool = True
) -> ValidationResult:
    table.refresh()
    rows_before = summary_records(table, before_snapshot_id)
    writer_rows, rewrites = 0, 0
    for snap in _commits_since(table, before_snapshot_id):
        delta = summary_records(table, snap.snapshot_id) - summary_records(table, snap.parent_snapshot_id)
        if snap.summary is not None and snap.summary.operation.value == "replace":
            rewrites += 1  # must not change rows: if it did, rows_after != rows_expected
        else:
            writer_rows += delta
    current = table.current_snapshot()
    after_id = current.snapshot_id if current else None
    rows_after = summary_records(table, after_id)
    if real_counts:
        for snap_id, expected in ((before_snapshot_id, rows_before), (after_id, rows_after)):
            if snap_id is not None:
                real = count_rows(spark, ref, snap_id)
                if real != expected:
                    raise ValidationFailed(
                        f"{ref}: snapshot {snap_id} summary says {expected} rows but a scan counts {real}"
                    )
    return ValidationResult(
        before_snapshot_id=before_snapshot_id,
        after_snapshot_id=after_id,
        rows_before=rows_before,
        rows_after=rows_after,
        rows_expected=rows_before + writer_rows,
        writer_rows_since=writer_rows,
        rewrite_snapshots=rewrites,
    )


@dataclass(frozen=True)
class RollbackOutcome:
    rolled_back: bool
    reason: str
    writer_snapshots: tuple[int, ...] = ()


def rollback_if_safe(table: Table, before_snapshot_id: int | None) -> RollbackOutcome:
    """Roll the table back to ``before_snapshot_id`` when every commit since is a rewrite of ours.

    A writer commit after it would be lost by a rollback, so then nothing is done. pyiceberg commits
    the rollback with a requirement that main still points where we looked: a writer committing in
    between makes the rollback fail instead of silently dropping the writer's rows."""
    if before_snapshot_id is None:
        return RollbackOutcome(False, "the table had no snapshot before maintenance")
    table.refresh()
    since = _commits_since(table, before_snapshot_id)
    if not since:
        return RollbackOutcome(False, "nothing was committed after the before-snapshot")
    writers = tuple(s.snapshot_id for s in since if s.summary is None or s.summary.operation.value != "replace")
    if writers:
        return RollbackOutcome(False, f"writer commits came after it ({', '.join(map(str, writers))}): a rollback "
                                      "would lose their rows", writers)
    try:
        table.manage_snapshots().rollback_to_snapshot(before_snapshot_id).commit()
    except CommitFailedException as err:
        return RollbackOutcome(False, f"a writer committed while rolling back ({err})")
    return RollbackOutcome(True, f"rolled back to snapshot {before_snapshot_id}")
