"""Restore points as the metadata shows them: the tags named ``<prefix>...``, their ages, which of them
this product made, and the storage they hold: data files referenced by a tagged snapshot and no longer
by the current one (what snapshot expiry would otherwise have let go), from the manifests alone
(pyiceberg, no Spark).

A tag's age: a periodic tag's (``daily-YYYY-MM-DD``, ``weekly-YYYY-Www``) from the day its name
carries; any other tag's from its snapshot's time (planning/restore_points.py decides with it).

Which tags are this product's: the prefix is shared with operators (``icelake-before-migration``), so
the name proves nothing. ``manage_restore_points`` records each tag it makes in a table property
``icelake-restore-point.<tag>`` = the tagged snapshot id, set in the same metadata commit as the tag
(a crash leaves both or neither). A tag is the product's only when its record names the snapshot it
points to; only those are ever removed. Tags made before the records existed (legacy) have none: an
operator may name a tag ``icelake-daily-...`` too, so they are kept, counted as restore points, and
left to the operator to drop. The record's key lies outside ``icelake.`` (policy keys,
policies/properties.py)."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime

from pyiceberg.manifest import ManifestContent
from pyiceberg.table import Table

from icelake_assets.health.retention import RefPoint, SnapshotPoint

_DAY_MS = 86_400_000
_DAILY = re.compile(r"daily-(\d{4})-(\d{2})-(\d{2})$")
_WEEKLY = re.compile(r"weekly-(\d{4})-W(\d{2})$")
_MEMO_MAX = 256
RECORD_PREFIX = "icelake-restore-point."


def record_key(tag: str) -> str:
    """The table property recording that this product made ``tag``."""
    return RECORD_PREFIX + tag


def made_tags(properties: Mapping[str, str], refs: Iterable[RefPoint]) -> frozenset[str]:
    """The tags this product made: those whose record names the snapshot they point to (an operator
    who drops our tag and makes one of the same name elsewhere owns the new one)."""
    return frozenset(
        r.name for r in refs if not r.is_branch and properties.get(record_key(r.name)) == str(r.snapshot_id)
    )


def stale_records(properties: Mapping[str, str], made: Collection[str]) -> tuple[str, ...]:
    """Records naming no tag of ours any more (an operator dropped or moved it): the keys to remove."""
    return tuple(k for k in properties if k.startswith(RECORD_PREFIX) and k[len(RECORD_PREFIX) :] not in made)


@dataclass(frozen=True)
class RestorePoint:
    """A tag named with the prefix: its name, the snapshot it keeps, its age in days, and whether this
    product made it (recorded; only those are removed)."""

    name: str
    snapshot_id: int
    age_days: float
    ours: bool = False


@dataclass(frozen=True)
class RestorePointFacts:
    """The table's restore points: how many, the oldest, and the data files (and bytes) only they hold;
    ``made``: the tags this product made (any name), which alone it may remove."""

    tags: int = 0
    oldest: str | None = None
    oldest_age_days: float = 0.0
    held_files: int = 0
    held_bytes: int = 0
    made: frozenset[str] = frozenset()

    def metrics(self) -> dict[str, int | float]:
        return {
            "restore_points": self.tags,
            "restore_points_oldest_days": round(self.oldest_age_days, 2),
            "restore_points_held_files": self.held_files,
            "restore_points_held_bytes": self.held_bytes,
        }


def named_day(suffix: str) -> date | None:
    """The day a periodic tag's name carries (its ISO week's Monday), None for any other name."""
    try:
        if m := _DAILY.match(suffix):
            return date(int(m[1]), int(m[2]), int(m[3]))
        if m := _WEEKLY.match(suffix):
            return date.fromisocalendar(int(m[1]), int(m[2]), 1)
    except ValueError:
        return None  # a name that only looks like a date: aged by its snapshot
    return None


def restore_points(
    refs: Iterable[RefPoint],
    snapshots: Iterable[SnapshotPoint],
    prefix: str,
    now_s: float,
    made: Collection[str] = (),
) -> tuple[RestorePoint, ...]:
    """The tags named ``prefix``..., oldest first; those in ``made`` (:func:`made_tags`) are ours."""
    times = {p.snapshot_id: p.timestamp_ms for p in snapshots}
    now_ms = now_s * 1000
    out = []
    for ref in refs:
        if ref.is_branch or not ref.name.startswith(prefix):
            continue
        day = named_day(ref.name[len(prefix) :])
        if day is not None:
            since_ms = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000
        else:
            since_ms = times.get(ref.snapshot_id, now_ms)
        age = max(0.0, (now_ms - since_ms) / _DAY_MS)
        out.append(RestorePoint(ref.name, ref.snapshot_id, age, ref.name in made))
    return tuple(sorted(out, key=lambda t: (-t.age_days, t.name)))


# Manifests are immutable: what a set of manifest lists holds beyond the current one never changes.
_held_memo: dict[tuple[str, frozenset[str]], tuple[int, int]] = {}


def held_by_tags(table: Table, snapshot_ids: Iterable[int]) -> tuple[int, int]:
    """Data files (count, bytes) live in the tagged snapshots ``snapshot_ids`` and not in the current
    snapshot. Reads only the manifests the tagged snapshots do not share with the current one, and
    then the current snapshot's manifests to know which files it still has."""
    io = table.io
    current = table.current_snapshot()
    tagged = [s for i in set(snapshot_ids) if (s := table.snapshot_by_id(i)) is not None]
    key = (current.manifest_list if current else "", frozenset(s.manifest_list for s in tagged))
    if key in _held_memo:
        return _held_memo[key]
    current_manifests = [m for m in current.manifests(io)] if current else []
    shared = {m.manifest_path for m in current_manifests}
    extra = {
        m.manifest_path: m
        for s in tagged
        for m in s.manifests(io)
        if m.content == ManifestContent.DATA and m.manifest_path not in shared
    }
    held: dict[str, int] = {}
    if extra:
        live = {
            e.data_file.file_path
            for m in current_manifests
            if m.content == ManifestContent.DATA
            for e in m.fetch_manifest_entry(io, discard_deleted=True)
        }
        for m in extra.values():
            for e in m.fetch_manifest_entry(io, discard_deleted=True):
                if e.data_file.file_path not in live:
                    held[e.data_file.file_path] = e.data_file.file_size_in_bytes
    if len(_held_memo) >= _MEMO_MAX:
        _held_memo.clear()
    _held_memo[key] = result = (len(held), sum(held.values()))
    return result


def restore_point_facts(
    table: Table, refs: Iterable[RefPoint], snapshots: Iterable[SnapshotPoint], prefix: str, now_s: float
) -> RestorePointFacts:
    refs = tuple(refs)
    made = made_tags(table.properties, refs)
    tags = restore_points(refs, snapshots, prefix, now_s, made)
    if not tags:
        return RestorePointFacts(made=made)
    files, size = held_by_tags(table, (t.snapshot_id for t in tags))
    return RestorePointFacts(len(tags), tags[0].name, tags[0].age_days, files, size, made)
