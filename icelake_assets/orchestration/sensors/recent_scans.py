"""The orphan scans of the sensor's process, reused while a table's metadata file is unchanged.

A table that keeps waiting (queued behind the run cap, deferred) keeps its orphan scan due, so that
every evaluation sees its orphans again (tick_stages.settle). Listing its storage and reading every
manifest of every snapshot again each tick cost a 200-table lake most of each tick's time while
nothing had changed: a scan of the same metadata file within the orphan-scan interval is reused
instead, at most MAX_REUSE_SECONDS old: the tick records the evaluation's time as the table's last
scan, so the next regular scan may come that much later than the interval says. The cache is bounded
by the paths it holds; a scan larger than the bound is not kept. Removal itself never reads it: the
run lists the table again (maintenance/ops)."""

from __future__ import annotations

import threading

from cachetools import LRUCache

from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.orphans import OrphanScan

MAX_PATHS = 200_000  # referenced and orphan paths kept over every cached scan (tens of MB)
MAX_REUSE_SECONDS = 3600.0  # a waiting table's storage is listed again at least hourly


def _paths(entry: tuple[float, OrphanScan]) -> int:
    scan = entry[1]
    return 1 + len(scan.referenced) + len(scan.orphans)


_SCANS: LRUCache[tuple[str, str, float], tuple[float, OrphanScan]] = LRUCache(MAX_PATHS, getsizeof=_paths)
_LOCK = threading.Lock()


def recent_scan(
    ref: TableRef, metadata_location: str, older_than_hours: float, now: float, within_seconds: float
) -> OrphanScan | None:
    """The scan of this metadata file made less than ``within_seconds`` (and MAX_REUSE_SECONDS)
    before ``now``, if kept."""
    with _LOCK:
        entry = _SCANS.get((str(ref), metadata_location, older_than_hours))
    if entry is None or now - entry[0] >= min(within_seconds, MAX_REUSE_SECONDS):
        return None
    return entry[1]


def remember_scan(
    ref: TableRef, metadata_location: str, older_than_hours: float, now: float, scan: OrphanScan
) -> None:
    with _LOCK:
        try:
            _SCANS[(str(ref), metadata_location, older_than_hours)] = (now, scan)
        except ValueError:  # larger than the whole cache: listed again when due
            pass
