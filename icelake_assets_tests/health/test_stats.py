"""Each statistic against tables whose truth is known by construction (pyiceberg writes, real SQLite
catalog), cross-checked with storage and with pyiceberg's own full manifest reader."""

from collections import Counter, defaultdict
from datetime import date

import numpy as np
import pyarrow.compute as pc
import pytest
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC
from pyiceberg.transforms import BucketTransform, IdentityTransform

from icelake_assets.health.manifests import ManifestMeta, read_manifest
from icelake_assets.health.stats import MiB, _overlapping, compute_table_stats
from icelake_assets.settings import Policy
from icelake_assets_tests.health.conftest import batch, files_on_disk

POLICY = Policy()


def _day_label(day: int) -> str:
    return f"ts_day={date(2024, 3, 1 + day).isoformat()}"


def _epoch_day(day: int) -> int:
    return (date(2024, 3, 1 + day) - date(1970, 1, 1)).days


def test_files_bytes_records_and_partitions_match_the_construction(new_table):
    table = new_table()
    table.append(batch(range(60), [i % 3 for i in range(60)]))  # 3 files: days 0, 1, 2 (20 rows each)
    table.append(batch(range(60, 90), 0))  # 1 file on day 0 (30 rows)
    stats = compute_table_stats(table, POLICY)

    disk = files_on_disk(table)
    assert (stats.data_files, stats.records, stats.data_bytes) == (4, 90, sum(disk.values()))
    assert stats.snapshots == 2 and stats.manifests == 2 and stats.max_entries_per_manifest == 3
    assert stats.entries_per_manifest == 2.0
    assert stats.small_files == stats.fragment_files == 4  # 128 MB default target, KB files
    assert stats.position_delete_files == stats.equality_delete_files == stats.delete_bytes == 0

    by_dir = defaultdict(lambda: [0, 0])
    for path, size in disk.items():
        label = next(part for part in path.split("/") if part.startswith("ts_day="))
        by_dir[label][0] += 1
        by_dir[label][1] += size
    assert set(stats.partitions) == {_day_label(d) for d in range(3)} == set(by_dir)
    for day, (files, rows) in {0: (2, 50), 1: (1, 20), 2: (1, 20)}.items():
        p = stats.partitions[_day_label(day)]
        assert (p.data_files, p.records, p.small_files) == (files, rows, files)
        assert p.data_bytes == by_dir[_day_label(day)][1]
        assert p.values == (_epoch_day(day),) and p.spec_id == 0
    assert stats.worst_partitions(1)[0].partition == _day_label(0)


def test_small_files_follow_the_table_target_and_the_distribution_is_exact(new_table):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC)
    table.append(batch(range(5), 0))
    table.append(batch(range(5, 40_005), 0))
    small, big = sorted(files_on_disk(table).values())
    target = int((small + big) / 2 / 0.75)  # 75 % of the target falls between the two files
    with table.transaction() as tx:
        tx.set_properties({"write.target-file-size-bytes": str(target)})
    stats = compute_table_stats(table, POLICY)
    assert stats.target_file_size_bytes == target and stats.small_file_limit_bytes == int(target * 0.75)
    assert (stats.small_files, stats.small_file_bytes) == (1, small)
    assert stats.fragment_files == (1 if small <= target / 8 else 0) + (1 if big <= target / 8 else 0)
    assert (stats.file_size_min, stats.file_size_max) == (small, big)
    assert stats.file_size_p50 == int(np.percentile([small, big], 50))
    assert sum(stats.size_histogram.values()) == 2
    assert stats.size_histogram["lt_1mb"] == (small < MiB) + (big < MiB)
    assert list(stats.partitions) == ["<unpartitioned>"]

    policy = POLICY.model_copy(
        update={"small_files": POLICY.small_files.model_copy(update={"small_file_ratio": 1.0})}
    )
    assert compute_table_stats(table, policy).small_files == 1 + (big < target)


def test_snapshot_ages_growth_and_writer_activity_are_read_from_snapshots(new_table):
    table = new_table()
    for i in range(3):
        table.append(batch(range(i * 10, i * 10 + 10), i))
    stamps = sorted(s.timestamp_ms for s in table.metadata.snapshots)
    now = stamps[-1] / 1000 + 30 * 60  # half an hour after the last commit
    stats = compute_table_stats(table, POLICY, now=now)
    assert stats.snapshots == 3 and stats.snapshots_last_24h == 3
    assert stats.oldest_snapshot_age_hours == pytest.approx((now * 1000 - stamps[0]) / 3_600_000)
    assert stats.newest_snapshot_age_hours == pytest.approx(0.5)
    assert stats.recent_writer_commits == 3 and stats.activity_window_minutes == 60
    assert stats.last_writer_commit_age_minutes == pytest.approx(30.0)
    assert stats.last_maintenance_age_minutes is None  # no 'replace' snapshot yet (see test_spark_truth)

    later = stamps[-1] / 1000 + 25 * 3600
    stats = compute_table_stats(table, POLICY, now=later)
    assert stats.snapshots_last_24h == 0 and stats.recent_writer_commits == 0
    narrow = POLICY.model_copy(
        update={"activity": POLICY.activity.model_copy(update={"window_minutes": 29.0})}
    )
    assert compute_table_stats(table, narrow, now=now).recent_writer_commits == 0


def test_copy_on_write_deletes_drop_the_deleted_entries(new_table):
    """pyiceberg's delete rewrites files: the new manifests carry DELETED entries that must not count."""
    table = new_table()
    table.append(batch(range(40), [i % 2 for i in range(40)]))
    table.delete("id < 10")
    stats = compute_table_stats(table, POLICY)
    files = table.inspect.files()
    assert stats.data_files == files.num_rows
    assert stats.records == pc.sum(files["record_count"]).as_py() == 30
    assert stats.data_bytes == pc.sum(files["file_size_in_bytes"]).as_py()
    assert stats.recent_writer_commits == len(table.metadata.snapshots)  # delete/overwrite are writers too


def test_an_evolved_partition_spec_counts_files_of_the_older_spec(new_table):
    table = new_table()
    table.append(batch(range(20), [0] * 10 + [1] * 10))  # spec 0: 2 files
    with table.update_spec() as update:
        update.add_identity("vendor")
    table.append(batch(range(20, 35), 2, vendor="b"))  # spec 1: 1 file
    stats = compute_table_stats(table, POLICY)
    assert stats.default_spec_id == 1 and stats.data_files == 3
    assert stats.old_spec_files == stats.drift_files == 2
    new = stats.partitions[f"{_day_label(2)}/vendor=b"]
    assert (new.spec_id, new.old_spec_files, new.data_files, new.values) == (1, 0, 1, (_epoch_day(2), "b"))
    assert stats.partitions[_day_label(0)].old_spec_files == 1


def test_files_overlapping_on_the_sort_column_are_out_of_order(new_table):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC)
    with table.update_sort_order() as order:
        order.asc("id", IdentityTransform())
    table.append(batch(range(0, 100), 0))
    table.append(batch(range(100, 200), 0))
    stats = compute_table_stats(table, POLICY)
    assert stats.sort_column == "id" and stats.sort_order_id == 1
    assert stats.unsorted_files == 0  # disjoint ranges: [0, 99] and [100, 199]

    table.append(batch(range(50, 151), 0))  # overlaps both
    table.append(batch([1000], 0))  # a single value beyond all others
    stats = compute_table_stats(table, POLICY)
    assert stats.data_files == 4 and stats.unsorted_files == stats.drift_files == 3


def test_a_sort_order_whose_transform_breaks_order_is_not_compared(new_table):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC)
    with table.update_sort_order() as order:
        order.asc("id", BucketTransform(4))
    table.append(batch(range(10), 0))
    table.append(batch(range(5, 15), 0))
    stats = compute_table_stats(table, POLICY)
    assert stats.sort_column is None and stats.unsorted_files == 0


def test_overlap_rules():
    assert _overlapping([0, 9], [10, 20]).tolist() == [True, True]
    assert _overlapping([0, 10], [10, 20]).tolist() == [False, False]  # touching bounds do not overlap
    assert _overlapping(["a", "c", "b"], ["b", "d", "bb"]).tolist() == [False, False, False]
    assert _overlapping(["a", "b"], ["c", "d"]).tolist() == [True, True]
    assert _overlapping([0, None, 3], [5, None, 9]).tolist() == [True, False, True]  # no bounds: not placed
    assert _overlapping([0.5, 1], [2.5, 3]).tolist() == [True, True]


def test_format_version_1_and_an_empty_table(new_table):
    empty = new_table()
    stats = compute_table_stats(empty, POLICY)
    assert (stats.data_files, stats.snapshots, stats.manifests, stats.current_snapshot_id) == (0, 0, 0, None)
    assert stats.last_writer_commit_age_minutes is None

    v1 = new_table(properties={"format-version": "1"})
    v1.append(batch(range(30), [i % 3 for i in range(30)]))
    stats = compute_table_stats(v1, POLICY)
    assert v1.metadata.format_version == 1
    assert (stats.data_files, stats.records, stats.position_delete_files) == (3, 30, 0)


def test_the_projected_reader_agrees_with_pyicebergs_full_reader(new_table):
    table = new_table()
    table.append(batch(range(30), [i % 3 for i in range(30)]))
    table.delete("id < 5")
    table.append(batch(range(30, 40), 4))
    for manifest in table.current_snapshot().manifests(table.io):
        ours, theirs = projected_and_full_read(table, manifest)
        assert ours == theirs


def projected_and_full_read(table, manifest) -> tuple[Counter, Counter]:
    """(partition, size, records, content) of each live entry of ``manifest``, as our projected reader
    and as pyiceberg's full reader see them."""
    spec, schema = table.specs()[manifest.partition_spec_id], table.schema()
    summary = read_manifest(table.io, ManifestMeta.of(manifest), spec, schema)
    ours = Counter(
        zip(
            (summary.labels[i] for i in summary.part.tolist()),
            summary.size.tolist(),
            summary.records.tolist(),
            summary.content.tolist(),
            strict=False,
        )
    )
    theirs = Counter(
        (
            spec.partition_to_path(e.data_file.partition, schema),
            e.data_file.file_size_in_bytes,
            e.data_file.record_count,
            int(e.data_file.content),
        )
        for e in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
    )
    return ours, theirs


def test_a_target_size_over_the_bound_falls_back_to_the_policy(new_table):
    table = new_table(spec=UNPARTITIONED_PARTITION_SPEC)
    table.append(batch(range(5), 0))
    with table.transaction() as tx:
        tx.set_properties({"write.target-file-size-bytes": str(10**15)})  # every file would be "small"
    target = compute_table_stats(table, POLICY).target_file_size_bytes
    assert target == POLICY.small_files.target_file_size_bytes
