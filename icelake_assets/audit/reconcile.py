"""Commits of a run that never recorded them: found by the run id they carry, checked, and written to
the audit as ``recovery/reconciled`` records, so the audit covers every maintenance commit.

A run records its commits when its ops return and at validation (snapshots before and after each
op). A run killed in the middle of an op made commits no record spans; every maintenance commit
names its run in its snapshot summary (maintenance/spark/commit_tags.py), so the next sensor tick finds
them here, checks each one's live rows against its parent's, and records it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icelake_assets.audit.records import AuditRecord
from icelake_assets.catalog.ancestry import ancestors
from icelake_assets.types import (
    SNAPSHOT_ATTEMPT as ATTEMPT_PROPERTY,
    SNAPSHOT_OP as OP_PROPERTY,
    SNAPSHOT_RUN_ID as RUN_ID_PROPERTY,
    TableRef,
)


@dataclass(frozen=True)
class RowCheck:
    """A commit's live rows against its parent's (a maintenance commit must keep every row)."""

    rows_before: int | None
    rows_after: int

    @property
    def kept(self) -> bool | None:
        return None if self.rows_before is None else self.rows_before == self.rows_after


def commits_of_run(table: Table, run_id: str) -> list[Snapshot]:
    """The table's snapshots that name ``run_id``, oldest first (expired ones are gone: nothing to
    account for)."""
    return sorted(
        (
            s
            for s in table.metadata.snapshots
            if s.summary is not None and s.summary.get(RUN_ID_PROPERTY) == run_id
        ),
        key=lambda s: s.sequence_number or 0,
    )


def _chain(table: Table, after: int, before: int | None) -> set[int]:
    """Snapshot ids from ``after`` back to (not including) ``before``, along the parents."""
    return {s.snapshot_id for s in ancestors(table, after, until=before)}


def audited_snapshots(table: Table, records: Iterable[AuditRecord]) -> set[int]:
    """The snapshots the run's own records span (each op's before → after)."""
    covered: set[int] = set()
    for r in records:
        if r.snapshot_after is not None and r.snapshot_after != r.snapshot_before:
            covered |= _chain(table, r.snapshot_after, r.snapshot_before)
    return covered


def _rows(table: Table, snapshot_id: int | None) -> int | None:
    if snapshot_id is None or table.snapshot_by_id(snapshot_id) is None:
        return None
    return int(table.scan(snapshot_id=snapshot_id).count())


def reconcile(
    ref: TableRef, table: Table, run_id: str, records: Sequence[AuditRecord], why: str
) -> list[AuditRecord]:
    """One ``recovery/reconciled`` record per commit of ``run_id`` that its ``records`` do not span:
    its op and attempt, parent and snapshot, and its rows against its parent's. ``why``: what became
    of the run (the records' reason)."""
    covered = audited_snapshots(table, [r for r in records if r.run_id == run_id])
    out = []
    for snap in commits_of_run(table, run_id):
        if snap.snapshot_id in covered:
            continue
        summary = snap.summary
        assert summary is not None
        check = RowCheck(_rows(table, snap.parent_snapshot_id), _rows(table, snap.snapshot_id) or 0)
        kept = {True: "every row kept", False: "ROWS CHANGED", None: "parent expired, rows not checked"}
        op = summary.get(OP_PROPERTY)
        out.append(
            AuditRecord(
                table_name=str(ref),
                kind="recovery",
                decision="reconciled",
                trigger="sensor",
                op=op if op and op.isidentifier() else None,
                run_id=run_id,
                reason=(
                    f"commit {snap.snapshot_id} ({summary.operation.value}) of run {run_id}, which never "
                    f"recorded it ({why}): {kept[check.kept]} ({check.rows_before} -> {check.rows_after})"
                ),
                snapshot_before=snap.parent_snapshot_id,
                snapshot_after=snap.snapshot_id,
                results={
                    "rows_before": check.rows_before,
                    "rows_after": check.rows_after,
                    "rows_kept": check.kept,
                    "attempt": summary.get(ATTEMPT_PROPERTY),
                    "committed_at_ms": snap.timestamp_ms,
                    "summary": {k: v for k, v in summary.additional_properties.items()},
                },
            )
        )
    return out
