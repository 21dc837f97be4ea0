"""Orphan removal in two phases, as S3 Tables does it: a run records the orphans its listing finds as
candidates; a later run deletes only the candidates recorded at least ``orphans.recovery_window_hours``
earlier that its own listing still finds unreferenced (by the table and every known table) and unchanged
(same size and modification time). A late commit that registers a file, or a rollback that makes it
live again, has the window to do so. Pure: the store of candidates is audit/orphan_candidates.py, an
append-only log of events this module folds into the live candidates.

With a window of 0 every orphan the listing finds is removable at once (one pass, no store)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from icelake_assets.health.orphans import OrphanFile, OrphanScan
from icelake_assets.health.storage import file_key
from icelake_assets.types import IcelakeError

EventKind = Literal["seen", "deleted", "dropped"]


@dataclass(frozen=True)
class CandidateEvent:
    """One event of a candidate's version (path, size, mtime): ``seen`` starts its window, ``deleted``
    and ``dropped`` (with why) end it."""

    path: str
    size: int
    mtime_ns: int | None
    event: EventKind
    reason: str = ""
    recorded_at: float = 0.0  # epoch s, set by the store


@dataclass(frozen=True)
class Candidate:
    """A recorded orphan candidate: the version first seen at ``first_seen`` (epoch s)."""

    path: str
    size: int
    mtime_ns: int | None
    first_seen: float

    def same_file(self, orphan: OrphanFile) -> bool:
        return self.size == orphan.size and self.mtime_ns == orphan.mtime_ns


@dataclass(frozen=True)
class PendingOrphan:
    """An orphan in its window: ``first_seen`` None when this listing found it first (the run records
    it); removable after ``removable_after`` (epoch s) if still unreferenced and unchanged."""

    path: str
    size: int
    mtime_ns: int | None
    first_seen: float | None
    removable_after: float


@dataclass(frozen=True)
class PendingSummary:
    """The pending orphans in numbers (what findings, decisions and results need): ``unmarked`` of
    them not recorded yet; the first becomes removable at ``first_removable_at`` (epoch s)."""

    window_hours: float
    files: int = 0
    bytes: int = 0
    unmarked: int = 0
    first_removable_at: float | None = None


@dataclass(frozen=True)
class OrphanPhases:
    """A listing's orphans split by the recorded candidates (see the module docstring)."""

    window_hours: float
    removable: tuple[OrphanFile, ...] = ()
    pending: tuple[PendingOrphan, ...] = ()
    dropped: tuple[CandidateEvent, ...] = ()  # recorded candidates never to delete, each with why

    @property
    def unmarked(self) -> tuple[PendingOrphan, ...]:
        return tuple(p for p in self.pending if p.first_seen is None)

    @property
    def pending_bytes(self) -> int:
        return sum(p.size for p in self.pending)

    @property
    def first_removable_at(self) -> float | None:
        return min((p.removable_after for p in self.pending), default=None)

    def summary(self) -> PendingSummary:
        return PendingSummary(
            self.window_hours,
            len(self.pending),
            self.pending_bytes,
            len(self.unmarked),
            self.first_removable_at,
        )

    def first_phase_events(self) -> list[CandidateEvent]:
        """What a run records before it deletes anything: the new candidates and the dropped ones."""
        seen = [CandidateEvent(p.path, p.size, p.mtime_ns, "seen") for p in self.unmarked]
        return [*self.dropped, *seen]


class CandidateStore(Protocol):
    """Where runs record candidates (audit/orphan_candidates.py): ``table`` is ``catalog.ns.table``."""

    def candidates(self, table: str) -> list[Candidate]: ...

    def record(
        self, table: str, events: Sequence[CandidateEvent], now: float, run_id: str | None = None
    ) -> int: ...


def live_candidates(events: Iterable[CandidateEvent]) -> list[Candidate]:
    """Fold a table's events, oldest first, into its live candidates: a version's first ``seen`` after
    its last ``deleted``/``dropped``. At one instant an end wins over a start (the safer reading)."""
    live: dict[tuple[str, int, int | None], float] = {}
    for e in sorted(events, key=lambda e: (e.recorded_at, e.event != "seen")):
        key = (e.path, e.size, e.mtime_ns)
        if e.event == "seen":
            live.setdefault(key, e.recorded_at)
        else:
            live.pop(key, None)
    latest: dict[str, Candidate] = {}
    for (path, size, mtime_ns), seen in live.items():
        if path not in latest or seen > latest[path].first_seen:  # two versions: the newer, later window
            latest[path] = Candidate(path, size, mtime_ns, seen)
    return sorted(latest.values(), key=lambda c: c.path)


def split_phases(
    scan: OrphanScan, candidates: Sequence[Candidate], window_hours: float, now: float
) -> OrphanPhases:
    """Which of the scan's orphans are removable now, which wait (recorded or not), and which recorded
    candidates are dropped: changed since recorded, referenced again, or no longer listed as orphans."""
    window_s = window_hours * 3600
    if window_s <= 0:
        return OrphanPhases(window_hours, removable=tuple(scan.orphans))
    recorded = {file_key(c.path).path: c for c in candidates}
    removable: list[OrphanFile] = []
    pending: list[PendingOrphan] = []
    dropped: list[CandidateEvent] = []
    found: set[str] = set()
    for o in scan.orphans:
        key = file_key(o.path).path
        found.add(key)
        c = recorded.get(key)
        if c is not None and not c.same_file(o):
            dropped.append(_drop(c, f"changed since recorded (size {c.size} → {o.size}, mtime)"))
            c = None
        if c is None:
            pending.append(PendingOrphan(o.path, o.size, o.mtime_ns, None, now + window_s))
        elif now - c.first_seen >= window_s:
            removable.append(o)
        else:
            pending.append(PendingOrphan(o.path, o.size, o.mtime_ns, c.first_seen, c.first_seen + window_s))
    for key, c in recorded.items():
        if key in found:
            continue
        why = (
            "referenced by the table's metadata again (a late commit or a rollback)"
            if key in scan.referenced
            else "no longer listed as an orphan (gone, changed recently, hidden or another table's)"
        )
        dropped.append(_drop(c, why))
    return OrphanPhases(window_hours, tuple(removable), tuple(pending), tuple(dropped))


def _drop(c: Candidate, reason: str) -> CandidateEvent:
    return CandidateEvent(c.path, c.size, c.mtime_ns, "dropped", reason)


class CandidateStoreMissingError(IcelakeError, RuntimeError):
    """A recovery window is set but no candidate store was given."""


def phases_of(
    scan: OrphanScan, store: CandidateStore | None, table: str, window_hours: float, now: float
) -> OrphanPhases | None:
    """The scan's phases for ``table`` (``catalog.ns.table``); None without a window (one pass) or for
    a table not cleaned (refused or deferred: its candidates are left as they are)."""
    if window_hours <= 0 or scan.refused or scan.deferred:
        return None
    if store is None:
        raise CandidateStoreMissingError(
            f"{table}: orphans.recovery_window_hours is {window_hours:g} but no orphan candidate store was "
            "given: set the window to 0 for one-pass removal, or pass the store"
        )
    return split_phases(scan, store.candidates(table), window_hours, now)


def removable_orphans(scan: OrphanScan, phases: OrphanPhases | None) -> list[OrphanFile]:
    """What removal may delete now: past the window when there is one, else the scan's removable."""
    return list(phases.removable) if phases is not None else scan.removable
