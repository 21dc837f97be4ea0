"""Which snapshots ``expire_snapshots`` would remove, from table metadata alone.

A mirror of Iceberg's own rule (``RemoveSnapshots`` in iceberg-core 1.10), so the check, the sensor
and the op agree on what expiry will do before Spark is asked to do it:

* every branch and tag keeps the snapshot it points to (a ref past its own ``max-ref-age-ms`` is
  dropped by Iceberg; ``main`` never is);
* along each branch's ancestry, a snapshot stays while fewer than ``min_keep`` are kept or it is not
  older than the cutoff (a branch's own ``max-snapshot-age-ms`` / ``min-snapshots-to-keep`` win);
* a snapshot on no branch's ancestry stays when it is not older than the cutoff.

The cutoff is where policy comes in (``cutoff_age_hours``): over ``max_count`` snapshots, anything
older than ``min_age_hours`` may go; otherwise only what is older than ``max_age_hours``. So a
snapshot goes only if older than the age limit AND beyond the newest ``min_keep`` AND unreferenced.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from pyiceberg.table import Table

from icelake_assets.settings import Policy

# Iceberg's history.expire.max-ref-age-ms: refs (but main) older than this are dropped by expiry.
MAX_REF_AGE_PROPERTY = "history.expire.max-ref-age-ms"
_FOREVER_MS = 2**63 - 1


@dataclass(frozen=True)
class SnapshotPoint:
    snapshot_id: int
    parent_id: int | None
    timestamp_ms: int


@dataclass(frozen=True)
class RefPoint:
    name: str
    is_branch: bool
    snapshot_id: int
    max_ref_age_ms: int | None = None
    max_snapshot_age_ms: int | None = None
    min_snapshots_to_keep: int | None = None


@dataclass(frozen=True)
class ExpiryForecast:
    """What expiry with this cutoff would do: the ids it removes and why the others stay."""

    cutoff_age_hours: float
    expire: frozenset[int]
    kept_by_ref: int  # a branch or tag points at it
    kept_newest: int  # among the newest min_keep of a branch
    kept_young: int  # not older than the cutoff

    @property
    def count(self) -> int:
        return len(self.expire)


def kept_reason(fc: ExpiryForecast, min_keep: int) -> str:
    """Why the snapshots that stay do, e.g. '5 newest kept, 290 younger than 24 h, 1 held by a ref'."""
    parts = [f"{fc.kept_newest} of the newest {min_keep} kept"]
    if fc.kept_young:
        parts.append(f"{fc.kept_young} younger than {fc.cutoff_age_hours:g} h")
    if fc.kept_by_ref:
        parts.append(f"{fc.kept_by_ref} referenced by a branch or tag")
    return ", ".join(parts)


def snapshot_points(table: Table) -> tuple[tuple[SnapshotPoint, ...], tuple[RefPoint, ...], int | None]:
    """The table's snapshots, refs and ``history.expire.max-ref-age-ms`` (None: never)."""
    md = table.metadata
    snaps = tuple(SnapshotPoint(s.snapshot_id, s.parent_snapshot_id, s.timestamp_ms) for s in md.snapshots)
    refs = tuple(
        RefPoint(
            name,
            str(getattr(r.snapshot_ref_type, "value", r.snapshot_ref_type)) == "branch",
            r.snapshot_id,
            r.max_ref_age_ms,
            r.max_snapshot_age_ms,
            r.min_snapshots_to_keep,
        )
        for name, r in md.refs.items()
    )
    raw = md.properties.get(MAX_REF_AGE_PROPERTY)
    return snaps, refs, int(raw) if raw is not None else None


def cutoff_age_hours(snapshots: int, policy: Policy) -> float:
    """Snapshots older than this many hours may go: ``min_age_hours`` over the count threshold,
    else ``max_age_hours`` (never less than ``min_age_hours``)."""
    p = policy.snapshots
    if snapshots > p.max_count:
        return p.min_age_hours
    return max(p.max_age_hours, p.min_age_hours)


class RetentionFacts(Protocol):
    """What a forecast reads from a table's statistics (health/stats.py TableStats has it all)."""

    @property
    def snapshots(self) -> int: ...
    @property
    def snapshot_points(self) -> tuple[SnapshotPoint, ...]: ...
    @property
    def snapshot_refs(self) -> tuple[RefPoint, ...]: ...
    @property
    def max_ref_age_ms(self) -> int | None: ...
    @property
    def evaluated_at(self) -> float: ...


def expiry_forecast(stats: RetentionFacts, policy: Policy) -> ExpiryForecast:
    """What expire_snapshots would remove now under ``policy`` (now = when the stats were taken)."""
    return forecast(
        stats.snapshot_points,
        stats.snapshot_refs,
        cutoff_age_hours(stats.snapshots, policy),
        policy.snapshots.min_keep,
        stats.evaluated_at * 1000,
        stats.max_ref_age_ms,
    )


def forecast(
    snaps: Iterable[SnapshotPoint],
    refs: Iterable[RefPoint],
    cutoff_hours: float,
    min_keep: int,
    now_ms: float,
    default_max_ref_age_ms: int | None = None,
) -> ExpiryForecast:
    """Iceberg's expire_snapshots(older_than = now - cutoff_hours, retain_last = min_keep)."""
    by_id = {s.snapshot_id: s for s in snaps}
    older_than = now_ms - cutoff_hours * 3_600_000
    default_ref_age = _FOREVER_MS if default_max_ref_age_ms is None else default_max_ref_age_ms
    kept_refs: list[RefPoint] = []
    for ref in refs:
        head = by_id.get(ref.snapshot_id)
        if ref.name == "main":
            kept_refs.append(ref)
        elif head is not None:
            max_age = ref.max_ref_age_ms if ref.max_ref_age_ms is not None else default_ref_age
            if now_ms - head.timestamp_ms <= max_age:
                kept_refs.append(ref)
    by_ref = {r.snapshot_id for r in kept_refs}
    newest: set[int] = set()
    young: set[int] = set()
    on_branches: set[int] = set()
    for ref in (r for r in kept_refs if r.is_branch):
        own_age = ref.max_snapshot_age_ms
        branch_older_than = now_ms - own_age if own_age is not None else older_than
        keep = ref.min_snapshots_to_keep if ref.min_snapshots_to_keep is not None else min_keep
        retained = 0
        walking = True
        for snap in _ancestors(ref.snapshot_id, by_id):
            on_branches.add(snap.snapshot_id)
            if not walking:
                continue
            if retained < keep:
                newest.add(snap.snapshot_id)
            elif snap.timestamp_ms >= branch_older_than:
                young.add(snap.snapshot_id)
            else:
                walking = False  # Iceberg stops at the first ancestor it may expire
                continue
            retained += 1
    for snap in by_id.values():
        unreferenced = snap.snapshot_id not in on_branches and snap.snapshot_id not in by_ref
        if unreferenced and snap.timestamp_ms >= older_than:
            young.add(snap.snapshot_id)
    kept = by_ref | newest | young
    # Reported: main's head is simply the newest snapshot; other refs' heads are held by their ref.
    held = {r.snapshot_id for r in kept_refs if r.name != "main"} & set(by_id)
    return ExpiryForecast(
        cutoff_age_hours=cutoff_hours,
        expire=frozenset(set(by_id) - kept),
        kept_by_ref=len(held),
        kept_newest=len(newest - held),
        kept_young=len(young - held - newest),
    )


def _ancestors(snapshot_id: int, by_id: dict[int, SnapshotPoint]):
    seen: set[int] = set()
    current = by_id.get(snapshot_id)
    while current is not None and current.snapshot_id not in seen:
        seen.add(current.snapshot_id)
        yield current
        current = by_id.get(current.parent_id) if current.parent_id is not None else None
