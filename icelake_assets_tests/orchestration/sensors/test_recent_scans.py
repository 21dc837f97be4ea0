"""A waiting table's orphan scan, reused by the sensor while its metadata file is unchanged
(orchestration/sensors/recent_scans.py)."""

from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.orphans import OrphanScan
from icelake_assets.orchestration.sensors.recent_scans import MAX_REUSE_SECONDS, recent_scan, remember_scan

REF = TableRef("demo", ("ns",), "reused")
FILE = "file:///lake/ns/reused/metadata/00003-a.metadata.json"


def test_a_scan_serves_its_metadata_file_within_the_window_only():
    scan = OrphanScan(table=str(REF), location="file:///lake/ns/reused")
    remember_scan(REF, FILE, 72.0, 1000.0, scan)
    assert recent_scan(REF, FILE, 72.0, 1000.0 + 59, 60) is scan
    assert recent_scan(REF, FILE, 72.0, 1000.0 + 60, 60) is None  # older than asked
    assert recent_scan(REF, FILE.replace("00003-a", "00004-b"), 72.0, 1001.0, 60) is None  # a commit
    assert recent_scan(REF, FILE, 24.0, 1001.0, 60) is None  # another orphan age threshold
    # However long the scan interval, a reused scan is at most an hour old: the next regular scan is
    # counted from the evaluation that used it.
    assert recent_scan(REF, FILE, 72.0, 1000.0 + MAX_REUSE_SECONDS, 24 * 3600) is None


def test_a_scan_larger_than_the_cache_is_not_kept():
    from icelake_assets.orchestration.sensors import recent_scans

    huge = OrphanScan(
        table=str(REF), location="x", referenced=frozenset(str(i) for i in range(recent_scans.MAX_PATHS))
    )
    remember_scan(REF, FILE + ".huge", 72.0, 1000.0, huge)
    assert recent_scan(REF, FILE + ".huge", 72.0, 1000.0, 60) is None
