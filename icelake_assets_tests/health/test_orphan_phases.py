"""The two phases' pure part: the store's events folded into live candidates, and a listing split into
removable, pending and dropped by them (no storage: a scan built by hand)."""

from __future__ import annotations

from icelake_assets.health.orphan_phases import (
    Candidate,
    CandidateEvent,
    live_candidates,
    split_phases,
)
from icelake_assets.health.orphans import OrphanFile, OrphanScan

H = 3600.0


def _scan(*orphans: OrphanFile, referenced: frozenset[str] = frozenset()) -> OrphanScan:
    return OrphanScan("c.a.t", "/w/t", orphans=list(orphans), referenced=referenced)


def test_a_version_lives_from_its_first_seen_until_it_is_deleted_or_dropped():
    events = [
        CandidateEvent("/w/t/data/a", 10, 1, "seen", recorded_at=100.0),
        CandidateEvent("/w/t/data/a", 10, 1, "seen", recorded_at=200.0),  # seen again: the window stands
        CandidateEvent("/w/t/data/b", 10, 1, "seen", recorded_at=100.0),
        CandidateEvent("/w/t/data/b", 10, 1, "deleted", recorded_at=300.0),
        CandidateEvent("/w/t/data/c", 10, 1, "seen", recorded_at=100.0),
        CandidateEvent("/w/t/data/c", 10, 1, "dropped", "changed", recorded_at=300.0),
        CandidateEvent("/w/t/data/c", 20, 2, "seen", recorded_at=300.0),  # the new version, a new window
        CandidateEvent("/w/t/data/d", 10, 1, "seen", recorded_at=400.0),
        CandidateEvent("/w/t/data/d", 10, 1, "dropped", "referenced", recorded_at=400.0),  # end wins a tie
    ]
    assert live_candidates(reversed(events)) == [
        Candidate("/w/t/data/a", 10, 1, 100.0),
        Candidate("/w/t/data/c", 20, 2, 300.0),
    ]


def test_a_listing_splits_into_removable_pending_new_and_dropped():
    old, young, changed, new = (OrphanFile(f"/w/t/data/{n}", 10, 100.0, 1) for n in "oycn")
    recorded = [
        Candidate(old.path, 10, 1, 0.0),
        Candidate(young.path, 10, 1, 20 * H),
        Candidate(changed.path, 10, 7, 0.0),  # another mtime when recorded
        Candidate("/w/t/data/live", 10, 1, 0.0),  # referenced again since
        Candidate("/w/t/data/gone", 10, 1, 0.0),  # deleted by someone else
    ]
    phases = split_phases(
        _scan(old, young, changed, new, referenced=frozenset({"/w/t/data/live"})), recorded, 24, 30 * H
    )
    assert phases.removable == (old,)
    assert {p.path: (p.first_seen, p.removable_after) for p in phases.pending} == {
        young.path: (20 * H, 44 * H),
        changed.path: (None, 54 * H),
        new.path: (None, 54 * H),
    }
    assert phases.summary().unmarked == 2 and phases.first_removable_at == 44 * H
    why = {e.path: e.reason for e in phases.dropped}
    assert why[changed.path].startswith("changed since recorded")
    assert why["/w/t/data/live"].startswith("referenced by the table's metadata again")
    assert why["/w/t/data/gone"].startswith("no longer listed as an orphan")
    assert [e.event for e in phases.first_phase_events()] == ["dropped"] * 3 + ["seen"] * 2


def test_no_window_is_one_pass():
    o = OrphanFile("/w/t/data/o", 10, 100.0, 1)
    phases = split_phases(_scan(o), [], 0, 0.0)
    assert phases.removable == (o,) and not phases.pending and not phases.dropped
