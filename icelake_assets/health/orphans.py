"""Orphan files: files under the table location that no snapshot or metadata file references.

Listing storage is expensive, so callers run this less often than the other checks. It never deletes:
it decides the exact set of files that removal may delete (maintenance/ops/runner.py deletes that list
and nothing else). The rules, Iceberg's own where Iceberg has one:

- a listed file is compared with the referenced ones as Iceberg compares them (``s3a``/``s3n`` are
  ``s3``; ``file:/x``, ``file:///x`` and ``/x`` are one file; duplicate slashes do not count); the
  same path under another scheme or authority is an error, never an orphan;
- hidden files and folders (a name starting with ``.`` or ``_``, e.g. ``.crc``, ``_SUCCESS``) are
  not orphans, unless the folder is a partition whose field name starts with ``_`` / ``.``;
- nothing under another known table's location, ``write.data.path`` or ``write.metadata.path``;
- a table whose files may be shared is never cleaned (``refused``): ``gc.enabled=false``, a location
  equal to or containing another table's, another table writing over its location, a location outside
  where its catalog puts tables (``register_table``), referenced files outside its own folders
  (Iceberg's ``snapshot`` procedure).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pyiceberg.catalog import Catalog
from pyiceberg.table import Table

from icelake_assets.catalog.known_tables import default_locations
from icelake_assets.health.manifest_avro import read_manifest_list
from icelake_assets.health.manifests import live_file_paths
from icelake_assets.health.neighbours import IndexedTables, Neighbours
from icelake_assets.health.storage import (
    EQUAL_SCHEMES as EQUAL_SCHEMES,
    FileKey,
    OrphanScanError as OrphanScanError,
    file_key as file_key,
    filesystem_for,
    list_files as list_files,
    listed_location,
    normalized_path,
)
from icelake_assets.types import (
    WRITE_PATH_PROPERTIES as WRITE_PATH_PROPERTIES,
    IcelakeError,
    KnownTable as KnownTable,
    KnownTables as KnownTables,
    TableRef,
    UnlistedTable,
)

# How many of the files a scan skips (hidden, another table's) it keeps as examples to show.
_SKIPPED_SAMPLE = 20


class PathMismatchError(OrphanScanError):
    """A listed file has a referenced twin under another scheme or authority (Iceberg's prefix mismatch)."""


class ReferencedFilesMissingError(IcelakeError, RuntimeError):
    """A file the table's metadata references does not exist."""


@dataclass(frozen=True)
class OrphanFile:
    path: str
    size: int
    age_hours: float
    mtime_ns: int | None = None  # as listed: a recorded candidate must be unchanged to be deleted


@dataclass
class OrphanScan:
    """What a storage listing found under one table's location."""

    table: str
    location: str
    orphans: list[OrphanFile] = field(default_factory=list)
    hidden_files: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason -> files left alone
    skipped_sample: list[tuple[str, str]] = field(default_factory=list)  # (path, reason)
    refused: str | None = None  # why this table is never cleaned
    # why it is not cleaned now: a table that may share its location could not be listed
    deferred: str | None = None
    listed_files: int = 0
    # The referenced files' normalized paths: why a recorded candidate is no longer an orphan.
    referenced: frozenset[str] = field(default_factory=frozenset, repr=False)

    @property
    def removable(self) -> list[OrphanFile]:
        """The files removal may delete: none when the table is refused or deferred."""
        return [] if self.refused or self.deferred else self.orphans

    def summary(self) -> dict[str, object]:
        out: dict[str, object] = {
            "listed_files": self.listed_files,
            "orphans_found": len(self.orphans),
            "hidden_files": self.hidden_files,
            "skipped_other_tables": sum(self.skipped.values()),
        }
        if self.skipped:
            out["skipped_reasons"] = dict(self.skipped)
            out["skipped_sample"] = [f"{p} ({r})" for p, r in self.skipped_sample]
        if self.refused:
            out["refused"] = self.refused
        if self.deferred:
            out["deferred"] = self.deferred
        return out


# -- what the metadata references -------------------------------------------------------------------


def referenced_locations(table: Table) -> set[str]:
    """Every file reachable from the table's metadata, as written there: metadata.json log, manifest
    lists, manifests, data and delete files of every snapshot, statistics files."""
    md = table.metadata
    refs = {table.metadata_location}
    refs.update(entry.metadata_file for entry in md.metadata_log)
    refs.update(s.statistics_path for s in getattr(md, "statistics", []) or [])
    refs.update(s.statistics_path for s in getattr(md, "partition_statistics", []) or [])
    seen_manifests: set[str] = set()
    for snapshot in md.snapshots:
        refs.add(snapshot.manifest_list)
        for manifest in read_manifest_list(table.io, snapshot.manifest_list):
            if manifest.manifest_path in seen_manifests:
                continue
            seen_manifests.add(manifest.manifest_path)
            refs.add(manifest.manifest_path)
            refs.update(live_file_paths(table.io, manifest.manifest_path))
    return refs


def referenced_files(table: Table) -> set[str]:
    """:func:`referenced_locations`, normalized for comparison."""
    return {normalized_path(r) for r in referenced_locations(table)}


def _hidden(relative: str, partition_prefixes: Sequence[str]) -> bool:
    """Iceberg's PartitionAwareHiddenPathFilter over every component below the table location."""
    return any(
        part[:1] in ("_", ".") and not part.startswith(tuple(partition_prefixes))
        for part in relative.split("/")
        if part
    )


def _partition_prefixes(table: Table) -> list[str]:
    names = {f.name for spec in table.metadata.partition_specs for f in spec.fields}
    return [f"{n}=" for n in names if n[:1] in ("_", ".")]


# -- which tables must never be cleaned, which paths belong to others -------------------------------


def _gc_disabled(table: Table) -> bool:
    return str(table.properties.get("gc.enabled", "true")).strip().lower() == "false"


def _own_prefixes(table: Table) -> list[FileKey]:
    props = table.properties
    return [file_key(table.metadata.location)] + [
        file_key(props[k]) for k in WRITE_PATH_PROPERTIES if props.get(k)
    ]


def _refusal(
    table: Table,
    name: str,
    others: Sequence[KnownTable],
    default_locations: Sequence[str],
    referenced: Iterable[FileKey],
) -> str | None:
    location = file_key(table.metadata.location)
    if _gc_disabled(table):
        return "gc.enabled=false: its files may be shared with another table (Iceberg's snapshot procedure)"
    for other in others:
        theirs = file_key(other.location)
        if theirs.path == location.path and theirs.same_place(location):
            return f"its location is also the location of {other.name} (register_table on shared files)"
        if theirs.under(location):
            return f"its location contains {other.name}'s location {other.location}"
        for prop, path in other.write_paths.items():
            if location.under(file_key(path)):
                return f"{other.name}'s {prop} {path} contains its location"
    if default_locations and not any(location.under(file_key(d)) for d in default_locations):
        return (
            f"its location {table.metadata.location} is not where its catalog puts {name} "
            f"({', '.join(default_locations)}): registered on files another table may own"
        )
    own = _own_prefixes(table)
    outside = [k for k in referenced if not any(k.under(p) for p in own)]
    if outside:
        return (
            f"{len(outside)} referenced files lie outside its location and write paths "
            f"(e.g. {outside[0]}): files shared with another table (Iceberg's snapshot procedure, "
            "add_files)"
        )
    return None


def _overlapping(table: Table, unlisted: Sequence[UnlistedTable]) -> str | None:
    """Why the table must not be cleaned while ``unlisted`` tables are unknown: one of them may live
    inside its location, around it, or write into it (no hint: it could be anywhere)."""
    own = _own_prefixes(table)
    for other in unlisted:
        hints = [file_key(h) for h in other.hints]
        if not hints or any(h.under(p) or p.under(h) for h in hints for p in own):
            where = f"may live at {', '.join(other.hints)}" if other.hints else "could live anywhere"
            return (
                f"skipped, the listing of other tables is incomplete: {other.name} ({other.cause}) "
                f"{where}, which may overlap this table's location"
            )
    return None


def _foreign_prefixes(location: FileKey, others: Sequence[KnownTable]) -> list[tuple[FileKey, str]]:
    """Prefixes inside ``location`` that belong to another table, each with the reason to skip it."""
    out = []
    for other in others:
        claims = {"location": other.location, **other.write_paths}
        for prop, path in claims.items():
            key = file_key(path)
            if key.under(location):
                out.append((key, f"under {other.name}'s {prop}"))
    return out


def scan_orphans(
    table: Table,
    name: str,
    older_than_hours: float,
    others: Sequence[KnownTable] | Neighbours = (),
    default_locations: Sequence[str] = (),
    now: float | None = None,
    unlisted: Sequence[UnlistedTable] = (),
) -> OrphanScan:
    """List the table's location with its own FileIO and decide which files are orphans.

    ``others``: every other known table (a table named ``name`` among them is ignored), or their index
    (health/neighbours.py: a listing's, built once for all the tables scanned against it);
    ``unlisted``: tables that could not be read (the table is not cleaned if it may overlap one);
    ``default_locations``: where the table's catalog would put it (empty: unknown, not checked).
    Raises :class:`PathMismatchError` when a listed file matches a referenced one only by path."""
    now = time.time() if now is None else now
    location = file_key(table.metadata.location)
    # Only tables near its location can matter to the rules below (health/neighbours.py).
    index = others if isinstance(others, Neighbours) else Neighbours(others)
    others = [o for o in index.near(location) if o.name != name]
    refs: dict[str, list[FileKey]] = {}
    for loc in referenced_locations(table):
        key = file_key(loc)
        refs.setdefault(key.path, []).append(key)
    scan = OrphanScan(table=name, location=table.metadata.location)
    scan.refused = _refusal(table, name, others, default_locations, (k for ks in refs.values() for k in ks))
    scan.deferred = _overlapping(table, [u for u in unlisted if u.name != name])
    foreign = _foreign_prefixes(location, others)
    hidden_prefixes = _partition_prefixes(table)
    _, _, prefix = filesystem_for(table.io, table.metadata.location)
    mismatches: list[str] = []
    for info in list_files(table.metadata.location, table.io):
        scan.listed_files += 1
        listed = listed_location(prefix, info.path)
        key = file_key(listed if prefix else "file://" + listed)  # a local file is a file: URI to Iceberg
        if not key.under(location):
            raise OrphanScanError(
                f"{name}: listing {table.metadata.location} returned {listed}, which is "
                "not under it: nothing is deleted"
            )
        twins = refs.get(key.path)
        if twins is not None:
            if not any(key.same_place(t) for t in twins):
                mismatches.append(f"{listed} vs {twins[0]}")
            continue
        relative = key.path[len(location.path) :]
        if _hidden(relative, hidden_prefixes) or info.base_name == "version-hint.text":
            scan.hidden_files += 1
            continue
        reason = next((r for p, r in foreign if key.under(p)), None)
        if reason is not None:
            scan.skipped[reason] += 1
            if len(scan.skipped_sample) < _SKIPPED_SAMPLE:
                scan.skipped_sample.append((listed, reason))
            continue
        age = (now - info.mtime.timestamp()) / 3600 if info.mtime else 0.0
        if age >= older_than_hours:
            scan.orphans.append(
                OrphanFile(path=listed, size=info.size or 0, age_hours=age, mtime_ns=info.mtime_ns)
            )
    if mismatches:
        raise PathMismatchError(
            f"{name}: {len(mismatches)} listed files match referenced files by path but not by scheme or "
            f"authority (e.g. {mismatches[0]}); nothing is deleted: fix the table's locations or its "
            "catalog's file IO settings"
        )
    scan.orphans.sort(key=lambda o: o.path)
    scan.referenced = frozenset(refs)
    return scan


def find_orphans(
    table: Table,
    older_than_hours: float,
    now: float | None = None,
    others: Sequence[KnownTable] = (),
    name: str = "",
) -> list[OrphanFile]:
    """Files under the table location referenced by nothing, not hidden, not another table's, and older
    than ``older_than_hours`` (see :func:`scan_orphans`)."""
    return scan_orphans(table, name or ".".join(table.name()), older_than_hours, others, now=now).orphans


def missing_referenced_files(table: Table) -> tuple[int, list[str]]:
    """Every file the table's metadata references (all snapshots, statistics, metadata log) that does
    not exist: (how many are referenced, the missing, sorted). One listing of the location, plus a
    lookup for files outside it."""
    table.refresh()
    referenced = referenced_locations(table)
    _, _, prefix = filesystem_for(table.io, table.metadata.location)
    present = {
        file_key(listed_location(prefix, info.path)).path
        for info in list_files(table.metadata.location, table.io)
    }
    missing = sorted(
        loc
        for loc in referenced
        if file_key(loc).path not in present and not table.io.new_input(loc).exists()
    )
    return len(referenced), missing


def verify_referenced_files(table: Table) -> int:
    """After a removal: every file the table's metadata references still exists.

    Returns the number of files checked; raises :class:`ReferencedFilesMissingError` naming the missing."""
    checked, missing = missing_referenced_files(table)
    if missing:
        raise ReferencedFilesMissingError(
            f"{'.'.join(table.name())}: {len(missing)} files referenced by the table's metadata do not exist "
            f"after orphan removal: {', '.join(missing[:10])}{' …' if len(missing) > 10 else ''}. The table "
            "may be unreadable: restore these files from a backup or roll back to a snapshot that does not "
            "reference them"
        )
    return checked


def scan_table_orphans(
    catalog: Catalog, ref: TableRef, table: Table, older_than_hours: float, known: KnownTables
) -> OrphanScan:
    """:func:`scan_orphans` of a catalog's table among the ``known`` tables of the lake (their files
    are never this table's orphans; one that could not be read defers the clean-up where it may
    overlap), with the places its catalog would put it. The index of the listing's locations is the
    listing's own (:class:`IndexedTables`): built once for every table scanned against one listing."""
    return scan_orphans(
        table,
        str(ref),
        older_than_hours,
        IndexedTables.of(known).neighbours,
        default_locations(catalog, ref),
        unlisted=known.unlisted,
    )
