"""The manifest cache: what each manifest holds, read once and kept by path.

Iceberg never changes a manifest (or a manifest list) once written, so a summary cached under the
manifest's path never goes stale; re-evaluating a table reads only the manifests it has not seen.
Two levels, both bounded:

* memory (per process): an LRU of at most ``max_manifests`` summaries and ``max_memory_bytes``;
* disk (optional, shared by processes: Dagster runs each check in its own process): one SQLite file
  of at most ``max_disk_bytes``, least recently used entries pruned first. A disk cache that cannot
  be opened or written is dropped with a warning: health never fails because of its cache.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pyiceberg.manifest import ManifestFile
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from icelake_assets.health.manifest_avro import read_manifest_list
from icelake_assets.health.manifests import ManifestMeta, ManifestSummary, read_manifest

log = logging.getLogger(__name__)

MiB = 1024 * 1024
CACHE_ENV_VAR = "ICELAKE_HEALTH_CACHE"  # a file path, or "off" for memory only
# Remote object stores answer in tens of ms per request: overlap those reads. Locally, reads are
# CPU-bound under the GIL and threads measured no faster (BENCHMARKS.md, Health), so one thread.
REMOTE_READ_THREADS = 8
MAX_AGGREGATES = 512  # tables whose last aggregate is kept in memory


def default_cache_path() -> Path | None:
    """``$ICELAKE_HEALTH_CACHE``, else ``$XDG_CACHE_HOME`` (or ``~/.cache``)/icelake_assets/health.sqlite."""
    configured = os.environ.get(CACHE_ENV_VAR)
    if configured:
        return None if configured.lower() in ("off", "none", "0", "false") else Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "icelake_assets" / "health.sqlite"


@dataclass(frozen=True)
class FileRow:
    """One live file of a manifest, reduced to what health needs (the per-file view of a summary)."""

    partition: str
    size: int
    records: int
    content: int  # 0 data, 1 position deletes, 2 equality deletes
    spec_id: int


class DiskCache:
    """Summaries and manifest lists in one SQLite file, bounded in bytes (LRU by last use)."""

    def __init__(self, path: str | os.PathLike[str], max_bytes: int = 256 * MiB) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # One connection per thread, kept open: a connection per call cost a connect, an fsync per
        # commit and a WAL checkpoint at every close (half of a cold 1,000-table sensor tick).
        self._local = threading.local()
        self._estimate: int | None = None  # bytes stored, summed for real only near the bound
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, blob BLOB NOT NULL,"
                " bytes INTEGER NOT NULL, used REAL NOT NULL)"
            )
            db.execute("CREATE INDEX IF NOT EXISTS entries_used ON entries (used)")

    def _connect(self) -> sqlite3.Connection:
        db = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            db.execute("PRAGMA synchronous=NORMAL")  # a cache: losing the last commits on power loss is fine
            self._local.db = db
        return db

    def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        with self._connect() as db:
            for start in range(0, len(keys), 500):  # SQLite caps the number of bound parameters
                chunk = list(keys[start : start + 500])
                marks = ",".join("?" * len(chunk))
                found.update(
                    db.execute(f"SELECT key, blob FROM entries WHERE key IN ({marks})", chunk).fetchall()
                )
                if found:
                    db.execute(f"UPDATE entries SET used = ? WHERE key IN ({marks})", [time.time(), *chunk])
        return found

    def put_many(self, items: dict[str, bytes]) -> None:
        if not items:
            return
        now = time.time()
        with self._connect() as db:
            db.execute("BEGIN IMMEDIATE")
            db.executemany(
                "INSERT OR REPLACE INTO entries (key, blob, bytes, used) VALUES (?, ?, ?, ?)",
                [(k, v, len(v), now) for k, v in items.items()],
            )
            added = sum(len(v) for v in items.values())
            if self._estimate is None or self._estimate + added > self.max_bytes:
                self._estimate = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM entries").fetchone()[0]
                if self._estimate > self.max_bytes:
                    self._prune(db, self._estimate)
                    self._estimate = db.execute("SELECT COALESCE(SUM(bytes), 0) FROM entries").fetchone()[0]
            else:
                self._estimate += added  # replaced keys overcount: the bound is checked early, never late
            db.execute("COMMIT")

    def _prune(self, db: sqlite3.Connection, total: int) -> None:
        """Drop least recently used entries until the file holds at most 80 % of its bound."""
        goal = total - int(self.max_bytes * 0.8)
        doomed, freed = [], 0
        for key, size in db.execute("SELECT key, bytes FROM entries ORDER BY used"):
            if freed >= goal:
                break
            doomed.append((key,))
            freed += size
        db.executemany("DELETE FROM entries WHERE key = ?", doomed)

    def total_bytes(self) -> int:
        with self._connect() as db:
            return db.execute("SELECT COALESCE(SUM(bytes), 0) FROM entries").fetchone()[0]


def _summary_key(meta: ManifestMeta, bounds_field: int | None) -> str:
    # The length guards against a path reused by a different file (never happens with Iceberg writers).
    # Delete manifests' summaries also name the data files position deletes point into (``|r``).
    kind = "|r" if meta.content != 0 else ""
    return f"m|{meta.path}|{meta.length}|{'' if bounds_field is None else bounds_field}{kind}"


def _list_key(path: str) -> str:
    return f"l|{path}"


def _encode_list(metas: Sequence[ManifestMeta]) -> bytes:
    return json.dumps(
        [[m.path, m.length, m.spec_id, m.content, m.added_snapshot_id, m.files] for m in metas]
    ).encode()


def _decode_list(blob: bytes) -> tuple[ManifestMeta, ...]:
    return tuple(ManifestMeta(*row) for row in json.loads(blob))


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Decoding allocates hundreds of thousands of short-lived, acyclic records, and each few thousand
    allocations Python's cyclic GC walks the whole heap: pausing it cut a 100,000-entry read from
    1.34 s to 1.10 s (BENCHMARKS.md, Health). Reference counting still frees everything."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _is_local(path: str) -> bool:
    return urlsplit(path).scheme in ("", "file")


class ManifestCache:
    """Summaries of manifests by path, in memory and (optionally) on disk.

    ``reads`` counts manifests actually read from storage; tests and benchmarks watch it."""

    def __init__(
        self,
        max_manifests: int = 100_000,
        path: str | os.PathLike[str] | None = None,
        max_disk_bytes: int = 256 * MiB,
        max_memory_bytes: int = 512 * MiB,
        read_threads: int | None = None,
    ) -> None:
        self.max_manifests = max_manifests
        self.max_memory_bytes = max_memory_bytes
        self.read_threads = read_threads
        self._summaries: OrderedDict[str, ManifestSummary] = OrderedDict()
        self._memory_bytes = 0
        self._lists: OrderedDict[str, tuple[ManifestMeta, ...]] = OrderedDict()
        # Aggregates of whole snapshots (keyed by manifest list + knobs): an unchanged table reads nothing.
        self._aggregates: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.RLock()
        self.reads = 0  # manifests read from storage
        self.list_reads = 0  # manifest lists read from storage
        self.disk_hits = 0
        self.disk: DiskCache | None = None
        if path is not None:
            try:
                self.disk = DiskCache(path, max_disk_bytes)
            except (OSError, sqlite3.Error) as err:
                log.warning("health cache %s unusable, keeping manifests in memory only: %s", path, err)

    # -- aggregates of unchanged snapshots --------------------------------------------------------
    def aggregate(self, key: Hashable) -> Any | None:
        with self._lock:
            hit = self._aggregates.get(key)
            if hit is not None:
                self._aggregates.move_to_end(key)
            return hit

    def remember_aggregate(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._aggregates[key] = value
            while len(self._aggregates) > MAX_AGGREGATES:
                self._aggregates.popitem(last=False)

    # -- manifest lists -------------------------------------------------------------------------
    def manifest_list(self, table: Table, snapshot: Snapshot) -> tuple[ManifestMeta, ...]:
        """The manifests of a snapshot (a manifest list is immutable too)."""
        path = snapshot.manifest_list
        with self._lock:
            hit = self._lists.get(path)
            if hit is not None:
                self._lists.move_to_end(path)
                return hit
        metas = None
        if self.disk is not None:
            blob = self._disk_get([_list_key(path)]).get(_list_key(path))
            metas = _decode_list(blob) if blob is not None else None
        if metas is None:
            metas = tuple(ManifestMeta.of(m) for m in read_manifest_list(table.io, path))
            self.list_reads += 1
            self._disk_put({_list_key(path): _encode_list(metas)})
        with self._lock:
            self._lists[path] = metas
            while len(self._lists) > max(16, self.max_manifests // 10):
                self._lists.popitem(last=False)
        return metas

    # -- manifest summaries ---------------------------------------------------------------------
    def summaries(
        self, table: Table, metas: Sequence[ManifestMeta], bounds_field: int | None = None
    ) -> list[ManifestSummary]:
        """The summary of every manifest: memory, then disk, then storage (only what is missing)."""
        keys = [_summary_key(m, bounds_field) for m in metas]
        found: dict[str, ManifestSummary] = {}
        with self._lock:
            for key in keys:
                hit = self._summaries.get(key)
                if hit is not None:
                    self._summaries.move_to_end(key)
                    found[key] = hit
        missing = [(k, m) for k, m in zip(keys, metas, strict=False) if k not in found]
        if missing and self.disk is not None:
            blobs = self._disk_get([k for k, _ in missing])
            for key, blob in blobs.items():
                found[key] = ManifestSummary.from_bytes(blob)
            self.disk_hits += len(blobs)
            self._remember({k: found[k] for k in blobs})
            missing = [(k, m) for k, m in missing if k not in found]
        if missing:
            fresh = self._read(table, [m for _, m in missing], bounds_field)
            new = {k: s for (k, _), s in zip(missing, fresh, strict=False)}
            found.update(new)
            self._remember(new)
            self._disk_put({k: s.to_bytes() for k, s in new.items()})
        return [found[k] for k in keys]

    def _read(
        self, table: Table, metas: Sequence[ManifestMeta], bounds_field: int | None
    ) -> list[ManifestSummary]:
        specs, schema = table.specs(), table.schema()

        def one(meta: ManifestMeta) -> ManifestSummary:
            return read_manifest(table.io, meta, specs.get(meta.spec_id), schema, bounds_field)

        threads = self.read_threads
        if threads is None:
            threads = 1 if all(_is_local(m.path) for m in metas) else REMOTE_READ_THREADS
        with _cyclic_gc_paused():
            if threads > 1 and len(metas) > 1:
                with ThreadPoolExecutor(
                    min(threads, len(metas)), thread_name_prefix="icelake-manifests"
                ) as pool:
                    out = list(pool.map(one, metas))
            else:
                out = [one(m) for m in metas]
        with self._lock:
            self.reads += len(out)
        return out

    def _remember(self, items: dict[str, ManifestSummary]) -> None:
        with self._lock:
            for key, summary in items.items():
                if key in self._summaries:
                    continue
                self._summaries[key] = summary
                self._memory_bytes += summary.nbytes
            while self._summaries and (
                len(self._summaries) > self.max_manifests or self._memory_bytes > self.max_memory_bytes
            ):
                _, old = self._summaries.popitem(last=False)  # least recently used first
                self._memory_bytes -= old.nbytes

    def _disk_get(self, keys: Sequence[str]) -> dict[str, bytes]:
        if self.disk is None:
            return {}
        try:
            return self.disk.get_many(keys)
        except sqlite3.Error as err:
            self._drop_disk(err)
            return {}

    def _disk_put(self, items: dict[str, bytes]) -> None:
        if self.disk is None or not items:
            return
        try:
            self.disk.put_many(items)
        except sqlite3.Error as err:
            self._drop_disk(err)

    def _drop_disk(self, err: Exception) -> None:
        log.warning(
            "health cache %s failed, keeping manifests in memory only: %s", self.disk and self.disk.path, err
        )
        self.disk = None

    def __len__(self) -> int:
        return len(self._summaries)

    # -- the per-file view (kept for callers of the first version) ------------------------------
    def rows(self, table: Table, manifest: ManifestFile) -> tuple[FileRow, ...]:
        summary = self.summaries(table, [ManifestMeta.of(manifest)])[0]
        return tuple(
            FileRow(summary.labels[p], int(s), int(r), int(c), summary.spec_id)
            for p, s, r, c in zip(
                summary.part.tolist(),
                summary.size.tolist(),
                summary.records.tolist(),
                summary.content.tolist(),
                strict=False,
            )
        )
