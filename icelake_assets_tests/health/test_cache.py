"""The manifest cache: only new manifests are read, an unchanged table reads nothing, the disk level
is shared across caches (processes) and every level stays within its bound."""

import logging
from dataclasses import asdict
from datetime import UTC, datetime

from icelake_assets.health.cache import DiskCache, FileRow, ManifestCache
from icelake_assets.health.manifests import ManifestMeta
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.settings import Policy
from icelake_assets_tests.health.conftest import batch

POLICY = Policy()


def _same(a, b) -> None:
    """Two evaluations agree on everything but the time they ran and what they read."""
    skip = {
        "evaluated_at",
        "manifests_read",
        "oldest_snapshot_age_hours",
        "newest_snapshot_age_hours",
        "last_writer_commit_age_minutes",
        "last_maintenance_age_minutes",
    }
    left = {k: v for k, v in asdict(a).items() if k not in skip}
    right = {k: v for k, v in asdict(b).items() if k not in skip}
    assert left == right


def _fill(table, commits: int, start: int = 0) -> None:
    for c in range(commits):
        table.append(batch(range(start + c * 10, start + c * 10 + 10), [i % 3 for i in range(10)]))


def test_unchanged_tables_read_nothing_and_new_commits_read_only_new_manifests(new_table):
    table = new_table()
    _fill(table, 4)
    cache = ManifestCache()
    cold = compute_table_stats(table, POLICY, cache)
    assert cold.manifests == 4 and cold.manifests_read == 4 and cache.reads == 4 and cache.list_reads == 1

    again = compute_table_stats(table, POLICY, cache)
    assert (
        again.manifests_read == 0 and cache.reads == 4 and cache.list_reads == 1
    )  # not even the manifest list
    _same(cold, again)

    _fill(table, 1, start=1000)  # one commit: one new manifest, four kept
    after = compute_table_stats(table, POLICY, cache)
    assert after.manifests_read == 1 and cache.reads == 5 and after.data_files == cold.data_files + 3
    _same(after, compute_table_stats(table, POLICY, ManifestCache()))


def test_expiry_changes_snapshots_but_reads_no_manifest(new_table):
    table = new_table()
    _fill(table, 3)
    cache = ManifestCache()
    before = compute_table_stats(table, POLICY, cache)
    current = table.current_snapshot().snapshot_id
    table.maintenance.expire_snapshots().by_ids(
        [s.snapshot_id for s in table.metadata.snapshots if s.snapshot_id != current]
    ).commit()
    after = compute_table_stats(table, POLICY, cache)
    assert table.metadata_location != before.metadata_location
    assert (before.snapshots, after.snapshots) == (3, 1)  # read fresh from the metadata, not from the cache
    assert after.manifests_read == 0 and after.data_files == before.data_files


def test_a_rewrite_of_all_files_reads_the_new_manifests(new_table):
    """pyiceberg's overwrite replaces every file: like a compaction, the current manifests are all new."""
    table = new_table()
    _fill(table, 3)
    cache = ManifestCache()
    compute_table_stats(table, POLICY, cache)
    table.overwrite(batch(range(30), [i % 3 for i in range(30)]))
    after = compute_table_stats(table, POLICY, cache)
    assert after.manifests_read == after.manifests >= 1  # nothing of the old snapshot is current
    assert (after.data_files, after.records) == (3, 30)
    _same(after, compute_table_stats(table, POLICY, ManifestCache()))


def test_policy_changes_recompute_from_cached_manifests(new_table):
    table = new_table()
    _fill(table, 2)
    cache = ManifestCache()
    first = compute_table_stats(table, POLICY, cache)
    strict = POLICY.model_copy(
        update={"small_files": POLICY.small_files.model_copy(update={"max_files_per_partition": 1})}
    )
    second = compute_table_stats(table, strict, cache)
    assert (
        second.manifests_read == 0
        and not first.compaction_candidates
        and len(second.compaction_candidates) == 3
    )


def test_the_disk_level_serves_a_new_process_and_stays_bounded(new_table, tmp_path):
    table = new_table()
    _fill(table, 5)
    path = tmp_path / "health.sqlite"
    first = ManifestCache(path=path)
    stats = compute_table_stats(table, POLICY, first)
    assert first.reads == 5

    second = ManifestCache(path=path)  # what a new Dagster run process starts with
    again = compute_table_stats(table, POLICY, second)
    assert second.reads == 0 and second.list_reads == 0 and second.disk_hits == 5
    _same(stats, again)

    disk = DiskCache(tmp_path / "bounded.sqlite", max_bytes=4_000)
    for i in range(50):
        disk.put_many({f"k{i}": b"x" * 400})
    assert disk.total_bytes() <= 4_000
    assert disk.get_many(["k49"]) and not disk.get_many(["k0"])  # least recently used went first


def test_an_unusable_disk_cache_falls_back_to_memory(new_table, tmp_path, caplog):
    table = new_table()
    _fill(table, 1)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        cache = ManifestCache(path=blocker / "health.sqlite")
    assert cache.disk is None and "memory only" in caplog.text
    assert compute_table_stats(table, POLICY, cache).data_files == 3


def test_memory_is_bounded_and_the_per_file_view_is_kept(new_table):
    table = new_table()
    _fill(table, 4)
    cache = ManifestCache(max_manifests=2)
    compute_table_stats(table, POLICY, cache)
    assert len(cache) == 2

    manifest = table.current_snapshot().manifests(table.io)[0]
    rows = cache.rows(table, manifest)
    assert len(rows) == 3 and all(isinstance(r, FileRow) and r.content == 0 and r.records > 0 for r in rows)
    assert ManifestMeta.of(manifest).files == 3


def test_now_defaults_to_the_clock(new_table):
    table = new_table()
    _fill(table, 1)
    stats = compute_table_stats(table, POLICY)
    assert abs(stats.evaluated_at - datetime.now(UTC).timestamp()) < 60
