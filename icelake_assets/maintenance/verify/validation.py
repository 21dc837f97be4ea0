"""Validation after maintenance: the live rows before and after must match.

Live rows are what a reader sees: data rows minus the rows that position deletes, equality deletes
or deletion vectors remove. The snapshot summary's ``total-records`` counts data rows only, so it is
the live count only when the snapshot has no delete files; a snapshot with delete files is counted
by Spark (which applies the deletes). An equality delete may match any number of rows, so no
summary arithmetic can stand in for that count.

With ``live(s)`` the live rows at snapshot ``s``, the commits since the before-snapshot are taken in
runs of the same kind (writer commits, or rewrites: ``replace``):

* the writers' net rows = the sum over writer runs of ``live(last) - live(parent of first)``;
* every run of rewrites must leave ``live`` unchanged;
* every commit of the run's row expiry (expire_data) must change ``live`` by exactly the rows its
  own summary says it removed (deleted-records - added-records + added-position-deletes);
* expected rows after = ``live(before) + writers' net rows - expired rows`` = ``live(after)`` when
  nothing else was lost.

Summary counts of the before- and after-snapshots are confirmed by real Spark counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.ancestry import ancestors, reaches
from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.spark import fencing
from icelake_assets.maintenance.spark.procedures import count_rows
from icelake_assets.types import IcelakeError

# Summary totals that say a snapshot carries delete files (v3 deletion vectors count as position deletes).
_DELETE_TOTALS = ("total-delete-files", "total-position-deletes", "total-equality-deletes")
REWRITE_OPERATION = "replace"


class ValidationFailed(IcelakeError, RuntimeError):
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
    # Runs of rewrite commits that changed the live rows: [first snapshot, last snapshot, rows changed].
    rewrite_changes: list[list[int]] = field(default_factory=list)
    # Snapshots counted by Spark because they carry delete files (their summary counts deleted rows).
    spark_counted_snapshots: int = 0
    # A snapshot with delete files and no Spark at hand (no rewrite ran): its data rows were reported.
    estimated: bool = False
    expired_rows: int = 0  # rows the run's row expiry removed by its commits' summaries
    # Expiry commits whose live-row change differs from their summary: [snapshot, change, expected].
    expiry_changes: list[list[int]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.rows_after == self.rows_expected and not self.rewrite_changes and not self.expiry_changes

    def mismatch(self, ref: TableRef | str) -> str:
        """Why validation failed, for the run's failure and the audit record ('' when ok)."""
        if self.rewrite_changes:
            first, last, delta = self.rewrite_changes[0]
            span = str(first) if first == last else f"{first}..{last}"
            return (
                f"{ref}: the rewrite commit(s) {span} changed the live rows by {delta:+d} "
                f"({self.rows_before} before, {self.rows_after} after, {self.rows_expected} expected)"
            )
        if self.expiry_changes:
            snap, delta, expected = self.expiry_changes[0]
            return (
                f"{ref}: the row expiry commit {snap} changed the live rows by {delta:+d}, its summary "
                f"says {expected:+d}"
            )
        if self.rows_after != self.rows_expected:
            expired = f" - {self.expired_rows} expired" if self.expired_rows else ""
            return (
                f"{ref}: row count after maintenance is {self.rows_after}, expected {self.rows_expected} "
                f"({self.rows_before} before + {self.writer_rows_since} from writers{expired})"
            )
        return ""


def _snapshot(table: Table, snapshot_id: int):
    snap = table.snapshot_by_id(snapshot_id)
    if snap is None or snap.summary is None:
        raise ValidationFailed(f"snapshot {snapshot_id} of {'.'.join(table.name())} is gone: cannot validate")
    return snap


def summary_records(table: Table, snapshot_id: int | None) -> int:
    """Data rows at the snapshot by its summary (deleted rows included)."""
    if snapshot_id is None:
        return 0
    return int(_snapshot(table, snapshot_id).summary.get("total-records", 0))


def has_delete_files(table: Table, snapshot_id: int | None) -> bool:
    """Whether the snapshot's rows are not all live: it carries delete files, or its summary lacks
    the totals that would say so (then it cannot be trusted either)."""
    if snapshot_id is None:
        return False
    summary = _snapshot(table, snapshot_id).summary
    if summary.get("total-records") is None or summary.get("total-delete-files") is None:
        return True
    return any(int(summary.get(key) or 0) > 0 for key in _DELETE_TOTALS)


class LiveRows:
    """Live rows per snapshot: the summary when it has no delete files (free), else a Spark count
    (cached per snapshot). Without Spark (no rewrite of ours ran, nothing to compare) a snapshot with
    delete files reports its data rows: no summary arithmetic gives live rows (an equality delete
    matches any number of rows, and delete files left dangling by a rewrite match none)."""

    def __init__(self, table: Table, ref: TableRef, spark_fn: Callable[[], SparkSession] | None):
        self.table, self.ref, self.spark_fn = table, ref, spark_fn
        self.counted: dict[int, int] = {}  # by Spark
        self.estimated = False

    def __call__(self, snapshot_id: int | None) -> int:
        if snapshot_id is None:
            return 0
        if not has_delete_files(self.table, snapshot_id):
            return summary_records(self.table, snapshot_id)
        if self.spark_fn is None:
            self.estimated = True
            return summary_records(self.table, snapshot_id)
        if snapshot_id not in self.counted:
            self.counted[snapshot_id] = count_rows(self.spark_fn(), self.ref, snapshot_id)
        return self.counted[snapshot_id]


def _is_rewrite(snap) -> bool:
    return snap.summary is not None and snap.summary.operation.value == REWRITE_OPERATION


def _commits_since(table: Table, before_id: int | None) -> list:
    """Snapshots on the current branch after ``before_id``, oldest first."""
    if not reaches(table, before_id):
        raise ValidationFailed(
            f"snapshot {before_id} is no longer an ancestor of the current snapshot of "
            f"{'.'.join(table.name())}: the table was rolled back or replaced during maintenance"
        )
    return list(reversed(list(ancestors(table, until=before_id))))


def _kind(snap, expiry: Mapping[int, int]) -> str:
    if snap.snapshot_id in expiry:
        return "expiry"
    return "rewrite" if _is_rewrite(snap) else "writer"


def _runs(commits: list, expiry: Mapping[int, int]) -> list[tuple[str, list]]:
    """Consecutive commits of the same kind (writer, rewrite; each expiry commit alone):
    [(kind, [snapshots...]), ...], oldest first."""
    runs: list[tuple[str, list]] = []
    for snap in commits:
        kind = _kind(snap, expiry)
        if runs and runs[-1][0] == kind and kind != "expiry":
            runs[-1][1].append(snap)
        else:
            runs.append((kind, [snap]))
    return runs


def validate_row_counts(
    spark: SparkSession | Callable[[], SparkSession] | None,
    ref: TableRef,
    table: Table,
    before_snapshot_id: int | None,
    real_counts: bool = True,
    expiry: Mapping[int, int] | None = None,
) -> ValidationResult:
    """``spark``: a session or a function returning one (called only when a count is needed); None
    when no rewrite of ours ran (nothing to compare: summaries only, see :class:`LiveRows`);
    ``expiry``: the run's row expiry commits, each with the rows its summary says it removed."""
    expiry = expiry or {}
    spark_fn: Callable[[], SparkSession] | None
    if spark is None or not isinstance(spark, SparkSession):
        spark_fn = spark
    else:
        spark_fn = lambda: spark  # noqa: E731
    table.refresh()
    live = LiveRows(table, ref, spark_fn)
    rows_before = live(before_snapshot_id)
    writer_rows, rewrites, changes, expired, expiry_changes = 0, 0, [], 0, []
    parent = before_snapshot_id
    for kind, run in _runs(_commits_since(table, before_snapshot_id), expiry):
        last = run[-1].snapshot_id
        delta = live(last) - live(parent)
        if kind == "rewrite":
            rewrites += len(run)
            if delta:  # a rewrite must not change what readers see
                changes.append([run[0].snapshot_id, last, delta])
        elif kind == "expiry":
            expired += expiry[last]
            if delta != -expiry[last]:  # it removed other rows than it committed to
                expiry_changes.append([last, delta, -expiry[last]])
        else:
            writer_rows += delta
        parent = last
    current = table.current_snapshot()
    after_id = current.snapshot_id if current else None
    rows_after = live(after_id)
    if real_counts and spark_fn is not None:
        # Summary counts are confirmed by a scan; Spark counts are the scan already.
        for snap_id, expected in ((before_snapshot_id, rows_before), (after_id, rows_after)):
            if snap_id is not None and snap_id not in live.counted:
                real = count_rows(spark_fn(), ref, snap_id)
                if real != expected:
                    raise ValidationFailed(
                        f"{ref}: snapshot {snap_id} summary says {expected} rows but a scan counts {real}"
                    )
    return ValidationResult(
        before_snapshot_id=before_snapshot_id,
        after_snapshot_id=after_id,
        rows_before=rows_before,
        rows_after=rows_after,
        rows_expected=rows_before + writer_rows - expired,
        writer_rows_since=writer_rows,
        rewrite_snapshots=rewrites,
        rewrite_changes=changes,
        spark_counted_snapshots=len(live.counted),
        estimated=live.estimated,
        expired_rows=expired,
        expiry_changes=expiry_changes,
    )


@dataclass(frozen=True)
class RollbackOutcome:
    rolled_back: bool
    reason: str
    writer_snapshots: tuple[int, ...] = ()


def rollback_if_safe(
    table: Table, before_snapshot_id: int | None, ours: frozenset[int] = frozenset()
) -> RollbackOutcome:
    """Roll the table back to ``before_snapshot_id`` when every commit since is a rewrite of ours (or
    one of ``ours``: the run's row expiry commits).

    A writer commit after it would be lost by a rollback, so then nothing is done. pyiceberg commits
    the rollback with a requirement that main still points where we looked: a writer committing in
    between makes the rollback fail instead of silently dropping the writer's rows."""
    if before_snapshot_id is None:
        return RollbackOutcome(False, "the table had no snapshot before maintenance")
    table.refresh()
    since = _commits_since(table, before_snapshot_id)
    if not since:
        return RollbackOutcome(False, "nothing was committed after the before-snapshot")
    writers = tuple(s.snapshot_id for s in since if not _is_rewrite(s) and s.snapshot_id not in ours)
    if writers:
        return RollbackOutcome(
            False,
            f"writer commits came after it ({', '.join(map(str, writers))}): a rollback "
            "would lose their rows",
            writers,
        )
    if table.format_version >= 3:  # pyiceberg 0.12 cannot write v3 metadata; Spark's procedure has no guard
        return RollbackOutcome(
            False,
            "pyiceberg cannot commit to a format-version 3 table, and Spark's "
            "rollback would not refuse a writer committing meanwhile",
        )
    try:
        fencing.check("rollback")
        table.manage_snapshots().rollback_to_snapshot(before_snapshot_id).commit()
    except CommitFailedException as err:
        return RollbackOutcome(False, f"a writer committed while rolling back ({err})")
    return RollbackOutcome(True, f"rolled back to snapshot {before_snapshot_id}")
