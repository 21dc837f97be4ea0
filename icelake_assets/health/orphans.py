"""Orphan files: files under the table location that no snapshot or metadata file references.

Listing storage is expensive, so callers run this less often than the other checks. It never deletes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from pyarrow import fs as pafs
from pyiceberg.table import Table

from icelake_assets.health.manifests import live_file_paths


@dataclass(frozen=True)
class OrphanFile:
    path: str
    size: int
    age_hours: float


def _normalize(path: str) -> str:
    """Compare locations scheme-independently: file:/x, file:///x and /x are one file."""
    parts = urlsplit(path)
    if parts.scheme in ("", "file"):
        return parts.path
    return f"{parts.netloc}{parts.path}"


def referenced_files(table: Table) -> set[str]:
    """Every file reachable from the table's metadata: metadata.json log, manifest lists,
    manifests, live data and delete files of every snapshot, statistics files."""
    md = table.metadata
    refs = {table.metadata_location}
    refs.update(entry.metadata_file for entry in md.metadata_log)
    refs.update(s.statistics_path for s in getattr(md, "statistics", []) or [])
    refs.update(s.statistics_path for s in getattr(md, "partition_statistics", []) or [])
    seen_manifests: set[str] = set()
    for snapshot in md.snapshots:
        refs.add(snapshot.manifest_list)
        for manifest in snapshot.manifests(table.io):
            if manifest.manifest_path in seen_manifests:
                continue
            seen_manifests.add(manifest.manifest_path)
            refs.add(manifest.manifest_path)
            refs.update(live_file_paths(table.io, manifest.manifest_path))
    return {_normalize(r) for r in refs}


def list_files(location: str) -> list[pafs.FileInfo]:
    filesystem, root = pafs.FileSystem.from_uri(location)
    selector = pafs.FileSelector(root, recursive=True, allow_not_found=True)
    return [info for info in filesystem.get_file_info(selector) if info.type == pafs.FileType.File]


def find_orphans(table: Table, older_than_hours: float, now: float | None = None) -> list[OrphanFile]:
    """Files under the table location referenced by nothing and older than ``older_than_hours``.

    ``version-hint.text`` and other non-table files of Hadoop catalogs are not counted."""
    now = time.time() if now is None else now
    refs = referenced_files(table)
    orphans = []
    for info in list_files(table.metadata.location):
        if _normalize(info.path) in refs or info.base_name == "version-hint.text":
            continue
        age = (now - info.mtime.timestamp()) / 3600 if info.mtime else 0.0
        if age >= older_than_hours:
            orphans.append(OrphanFile(path=info.path, size=info.size or 0, age_hours=age))
    return sorted(orphans, key=lambda o: o.path)
