"""``icelake orphans TABLE``: the table's orphan candidates as the runs recorded them
(audit/orphan_candidates.py), each with when it was first seen and after when removal may delete it
(``orphans.recovery_window_hours`` later, if still unreferenced and unchanged then), and the totals.
Reads the store only: no storage listing (``icelake plan TABLE --orphans`` lists)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from icelake_assets.audit.orphan_candidates import OrphanCandidates
from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.policies import resolve_policy
from icelake_assets.settings import Settings
from icelake_assets.text import format_table, human_bytes
from icelake_assets.types import TableRef

ORPHANS_SCHEMA = "icelake.orphans/v1"


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat()


@dataclass(frozen=True)
class CandidateRow:
    path: str
    size: int
    first_seen: float  # epoch s
    removable_after: float  # epoch s

    def removable(self, now: float) -> bool:
        return now >= self.removable_after


@dataclass(frozen=True)
class OrphanCandidatesView:
    store: str  # catalog.namespace.table of the candidates
    table: str
    window_hours: float
    now: float
    candidates: tuple[CandidateRow, ...]

    @property
    def pending(self) -> tuple[CandidateRow, ...]:
        return tuple(c for c in self.candidates if not c.removable(self.now))

    def totals(self) -> dict[str, int]:
        pending = self.pending
        return {
            "candidates": len(self.candidates),
            "bytes": sum(c.size for c in self.candidates),
            "pending": len(pending),
            "pending_bytes": sum(c.size for c in pending),
            "removable": len(self.candidates) - len(pending),
            "removable_bytes": sum(c.size for c in self.candidates) - sum(c.size for c in pending),
        }

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape ``icelake.orphans/v1`` (docs/operating.md)."""
        return {
            "schema": ORPHANS_SCHEMA,
            "store": self.store,
            "table": self.table,
            "recovery_window_hours": self.window_hours,
            "now": _iso(self.now),
            "pending": [
                {
                    "path": c.path,
                    "size": c.size,
                    "first_seen": _iso(c.first_seen),
                    "removable_after": _iso(c.removable_after),
                }
                for c in self.pending
            ],
            "totals": self.totals(),
        }


def read_candidates(settings: Settings, ref: TableRef, now: float | None = None) -> OrphanCandidatesView:
    """The live candidates of ``ref``, with its window (its effective policy). Raises TableMissingError /
    CatalogUnavailableError (IcelakeError) naming the table."""
    table = load_table(open_catalog(settings, ref.catalog), ref)
    window = resolve_policy(settings, ref, table.properties).policy.orphans.recovery_window_hours
    store = OrphanCandidates.from_settings(settings)
    rows = tuple(
        CandidateRow(c.path, c.size, c.first_seen, c.first_seen + window * 3600)
        for c in store.candidates(str(ref))
    )
    return OrphanCandidatesView(store.name, str(ref), window, time.time() if now is None else now, rows)


def print_candidates(view: OrphanCandidatesView) -> None:
    def when(epoch_s: float) -> str:
        return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")

    print(f"orphan candidates of {view.table} ({view.store}), recovery window {view.window_hours:g} h")
    rows = [(c.path, human_bytes(c.size), when(c.first_seen), when(c.removable_after)) for c in view.pending]
    if rows:
        print(format_table(("pending file", "size", "first seen (UTC)", "removable after (UTC)"), rows))
    t = view.totals()
    print(
        f"{t['pending']} pending ({human_bytes(t['pending_bytes'])}), {t['removable']} past their window "
        f"({human_bytes(t['removable_bytes'])}): a run deletes those still unreferenced and unchanged"
    )
