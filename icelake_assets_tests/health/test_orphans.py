"""Orphan detection: everything referenced by any snapshot is kept; planted files are found; nothing is deleted."""

from pathlib import Path

from icelake_assets.demo.lake import plant_orphans
from icelake_assets.health.findings import Severity, orphan_finding
from icelake_assets.health.orphans import _normalize, find_orphans, referenced_files
from icelake_assets.settings import Policy
from icelake_assets_tests.health.conftest import batch, files_on_disk


def test_referenced_files_cover_every_snapshot_and_metadata_file(new_table):
    table = new_table()
    table.append(batch(range(20), [i % 2 for i in range(20)]))
    table.delete("id < 5")  # rewrites files: the old ones stay referenced by the first snapshot
    table.append(batch(range(20, 30), 3))
    refs = referenced_files(table)
    every_snapshot = {_normalize(p) for p in table.inspect.all_files().column("file_path").to_pylist()}
    assert every_snapshot <= refs
    assert {_normalize(p) for p in files_on_disk(table)} <= refs  # no data file of this table is an orphan
    assert _normalize(table.metadata_location) in refs
    assert all(_normalize(s.manifest_list) in refs for s in table.metadata.snapshots)


def test_only_old_unreferenced_files_are_orphans_and_nothing_is_deleted(new_table):
    table = new_table()
    table.append(batch(range(10), 0))
    planted = plant_orphans(table, 3, age_days=5)
    young = plant_orphans(table, 1, age_days=0)
    orphans = find_orphans(table, older_than_hours=72)
    assert sorted(o.path for o in orphans) == sorted(planted)
    assert all(o.age_hours > 72 and o.size > 0 for o in orphans)
    assert all(Path(p).exists() for p in planted + young)
    finding = orphan_finding(len(orphans), sum(o.size for o in orphans), Policy(), [o.path for o in orphans])
    assert finding.severity is Severity.WARN and len(finding.rows) == 3
