"""A snapshot's ancestry: the one walk up the parents that the audit, the ops, validation and the
statistics facts share. Through a map by id (pyiceberg's ``ancestors_of`` looks each parent up with a
scan of every snapshot, quadratic on a table of thousands) and guarded against a cycle; it ends where
the metadata no longer holds a parent (expiry cuts the chain)."""

from __future__ import annotations

from collections.abc import Iterator

from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot


def ancestors(
    table: Table, start: Snapshot | int | None = None, until: int | None = None
) -> Iterator[Snapshot]:
    """``start`` (default: the current snapshot), its parent, and so on, newest first; stops before
    the snapshot ``until`` (not yielded) or where the chain ends."""
    by_id = {s.snapshot_id: s for s in table.metadata.snapshots}
    snap = by_id.get(start) if isinstance(start, int) else (start or table.current_snapshot())
    seen: set[int] = set()
    while snap is not None and snap.snapshot_id != until and snap.snapshot_id not in seen:
        seen.add(snap.snapshot_id)
        yield snap
        parent = snap.parent_snapshot_id
        snap = by_id.get(parent) if parent is not None else None


def reaches(table: Table, until: int | None) -> bool:
    """Whether ``until`` is the current snapshot or one of its ancestors (None: trivially)."""
    return until is None or any(s.snapshot_id == until for s in ancestors(table))
