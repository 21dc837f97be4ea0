"""A table restored to a restore point (a tag): main set back to the tag's snapshot, with the guard of
a rollback (validation.py ``rollback_if_safe``): commits by writers after the tag's snapshot would be
lost, so the restore is refused naming them, unless forced. A writer's commit is one whose summary
names no run of this product (spark/commit_tags.py); maintenance commits are not data, except a
retention expiry's (``expire_data``): restoring to a snapshot before it brings back the rows it removed
on purpose, so it refuses too, naming each expiry (snapshot id, time, cut-off, rows removed).

pyiceberg commits the new main with the requirement that main still points where it was checked: a
writer committing in between fails the restore instead of being dropped silently."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.refs import SnapshotRefType
from pyiceberg.table.snapshots import Snapshot

from icelake_assets.catalog.ancestry import ancestors
from icelake_assets.maintenance.results.expire_data import rows_removed
from icelake_assets.maintenance.spark import fencing
from icelake_assets.maintenance.spark.commit_tags import run_of
from icelake_assets.planning.op_plans import EXPIRE_DATA
from icelake_assets.types import SNAPSHOT_OP, SNAPSHOT_RETENTION_CUTOFF, IcelakeError


class UnknownRestorePoint(IcelakeError, ValueError):
    """The table has no tag of that name."""


class RestoreRefused(IcelakeError, RuntimeError):
    """The restore would drop writers' commits (without force), or a writer committed meanwhile."""


@dataclass(frozen=True)
class Commit:
    snapshot_id: int
    operation: str
    timestamp_ms: int
    run_id: str | None  # the maintenance run that made it; None: a writer's
    op: str | None = None  # the product's op that made it (icelake.op)
    rows_removed: int = 0  # a retention expiry's, by its summary
    cutoff: str | None = None  # a retention expiry's cut-off (ISO, UTC)

    @property
    def by_writer(self) -> bool:
        return self.run_id is None

    @property
    def is_expiry(self) -> bool:
        """A retention expiry's commit (``expire_data``): undoing it brings its rows back."""
        return self.op == EXPIRE_DATA

    def describe(self) -> str:
        return f"{self.snapshot_id} ({self.operation}, {self._at()})"

    def describe_expiry(self) -> str:
        return (
            f"expire_data snapshot {self.snapshot_id} at {self._at()} "
            f"(cut-off {self.cutoff or 'unknown'}, {self.rows_removed} rows removed)"
        )

    def _at(self) -> str:
        return datetime.fromtimestamp(self.timestamp_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "snapshot_id": self.snapshot_id,
            "operation": self.operation,
            "timestamp_ms": self.timestamp_ms,
            "run_id": self.run_id,
        }
        if self.is_expiry:
            out.update(op=self.op, rows_removed=self.rows_removed, cutoff=self.cutoff)
        return out


@dataclass(frozen=True)
class RestoreCheck:
    """What restoring ``table`` to ``tag`` would do: main from ``current`` to ``snapshot_id``,
    dropping ``dropped`` (the current snapshot's ancestors the tag's snapshot does not have)."""

    table: str
    tag: str
    snapshot_id: int
    current: int | None
    dropped: tuple[Commit, ...]
    # Expiry removed commits between the tag's snapshot and the oldest one listed: whether a writer
    # made them is unknown, so they count as a writer's (refused without force).
    unlisted: bool = False

    @property
    def writers(self) -> tuple[Commit, ...]:
        return tuple(c for c in self.dropped if c.by_writer)

    @property
    def expiries(self) -> tuple[Commit, ...]:
        """The retention expiries the restore undoes: their rows come back."""
        return tuple(c for c in self.dropped if c.is_expiry)

    @property
    def rows_brought_back(self) -> int:
        return sum(c.rows_removed for c in self.expiries)

    def refusal(self) -> str | None:
        """Why the restore is refused without force, or None."""
        if not self.writers and not self.unlisted and not self.expiries:
            return None
        clauses = [f"drop {dropping}"] if (dropping := self._dropping()) else []
        if self.expiries:
            clauses.append(f"bring back {self.undone()}")
        then = "restore anyway" if self.expiries else "drop them"
        return (
            f"restoring {self.table} to {self.tag} (snapshot {self.snapshot_id}) would "
            f"{' and '.join(clauses)}; give --force to {then}"
        )

    def undone(self) -> str:
        """The rows and the retention expiries the restore undoes, named."""
        named = "; ".join(c.describe_expiry() for c in self.expiries[:10])
        more = f"; and {len(self.expiries) - 10} more" if len(self.expiries) > 10 else ""
        return (
            f"{self.rows_brought_back} rows that {len(self.expiries)} retention expiries removed "
            f"after it: {named}{more}"
        )

    def _dropping(self) -> str:
        parts = []
        if self.writers:
            named = ", ".join(c.describe() for c in self.writers[:10])
            more = f" and {len(self.writers) - 10} more" if len(self.writers) > 10 else ""
            parts.append(f"{len(self.writers)} commits by writers after it: {named}{more}")
        if self.unlisted:
            parts.append(
                "commits after it that snapshot expiry removed from the metadata (by whom is unknown)"
            )
        return " and ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "tag": self.tag,
            "snapshot_id": self.snapshot_id,
            "current_before": self.current,
            "dropped": [c.to_dict() for c in self.dropped],
            "writer_commits_dropped": len(self.writers),
            "unlisted_commits_dropped": self.unlisted,
            "expiries_undone": [c.to_dict() for c in self.expiries],
            "rows_brought_back": self.rows_brought_back,
        }


def restore_check(table: Table, tag: str) -> RestoreCheck:
    """Raises UnknownRestorePoint when ``tag`` is not a tag of the table (naming those it has)."""
    table.refresh()
    name = ".".join(table.name())
    ref = table.metadata.refs.get(tag)
    if ref is None or ref.snapshot_ref_type != SnapshotRefType.TAG:
        tags = sorted(n for n, r in table.metadata.refs.items() if r.snapshot_ref_type == SnapshotRefType.TAG)
        raise UnknownRestorePoint(f"{name} has no tag {tag!r} (its tags: {', '.join(tags) or 'none'})")
    kept = {s.snapshot_id for s in ancestors(table, ref.snapshot_id)}
    walked = [s for s in ancestors(table) if s.snapshot_id not in kept]
    dropped = tuple(_commit(s) for s in reversed(walked))
    # The walk ended at a parent the metadata no longer has, not at the tag's history.
    parent = walked[-1].parent_snapshot_id if walked else None
    unlisted = parent is not None and parent not in kept and table.snapshot_by_id(parent) is None
    current = table.current_snapshot()
    return RestoreCheck(
        name, tag, ref.snapshot_id, current.snapshot_id if current else None, dropped, unlisted
    )


def _commit(s: Snapshot) -> Commit:
    summary = s.summary
    if summary is None:
        return Commit(s.snapshot_id, "unknown", s.timestamp_ms, None)
    op = summary.get(SNAPSHOT_OP) or None
    expiry = op == EXPIRE_DATA
    return Commit(
        s.snapshot_id,
        summary.operation.value,
        s.timestamp_ms,
        run_of(summary),
        op,
        rows_removed(summary) if expiry else 0,
        summary.get(SNAPSHOT_RETENTION_CUTOFF) if expiry else None,
    )


def restore_to_tag(table: Table, tag: str, force: bool = False) -> RestoreCheck:
    """Set main to ``tag``'s snapshot; what it dropped. Raises RestoreRefused (writers' commits or
    retention expiries without ``force``, a writer committing meanwhile, a format-version 3 table);
    RunFencedError when the run restoring is fenced (maintenance/spark/fencing.py)."""
    check = restore_check(table, tag)
    if (why := check.refusal()) and not force:
        raise RestoreRefused(why)
    if check.current == check.snapshot_id:
        return check  # already there: nothing to commit
    if table.format_version >= 3:
        raise RestoreRefused(f"{check.table}: pyiceberg cannot commit to a format-version 3 table")
    fencing.check(f"{check.table} restore to {tag}")
    try:
        table.manage_snapshots().set_current_snapshot(snapshot_id=check.snapshot_id).commit()
    except CommitFailedException as err:
        raise RestoreRefused(f"{check.table}: a writer committed while restoring to {tag} ({err})") from err
    return check
