"""Which partitions to report again, on real pyiceberg tables (SQLite catalog): an append into one day
changes that day's digest only; nothing written changes none; a threshold changes every one (their
reports show it); a key whose files are gone is reported once more, as empty and passing."""

from __future__ import annotations

from pyiceberg.table import Table

from icelake_assets.health.stats import ManifestCache, compute_table_stats
from icelake_assets.partitions.layout import partition_layout
from icelake_assets.planning.partition_changes import (
    PartitionChanges,
    changed_partitions,
    empty_partition,
    partition_digest,
    report_digests,
)
from icelake_assets.planning.partition_health import PARTITION_CHECKS, partition_health
from icelake_assets.settings import Policy
from icelake_assets_tests.health.conftest import batch

POLICY = Policy()
DAYS = ["2024-03-01", "2024-03-02", "2024-03-03", "2024-03-04"]


def _digests(table: Table, policy: Policy = POLICY) -> dict[str, str]:
    table.refresh()
    stats = compute_table_stats(table, policy, ManifestCache())
    return report_digests(partition_health(stats, policy, partition_layout(table, with_earliest=False)))


def test_an_append_into_one_day_changes_that_days_digest_only(new_table):
    table = new_table()
    table.append(batch(range(400), [i % 4 for i in range(400)]))
    first = _digests(table)
    assert sorted(first) == DAYS and len(set(first.values())) == 4  # each day its own numbers
    assert all(len(d) == 12 and int(d, 16) >= 0 for d in first.values())

    # Never reported: every key; read again with nothing written: none.
    assert changed_partitions(first, {}) == PartitionChanges(tuple(DAYS), ())
    again = _digests(table)
    assert again == first and not changed_partitions(again, first)

    table.append(batch(range(1000, 1010), 2))  # one more file in 2024-03-03
    after = _digests(table)
    changes = changed_partitions(after, first)
    assert changes.changed == ("2024-03-03",) and changes.vanished == () and changes.keys == ("2024-03-03",)


def test_a_threshold_change_reports_every_partition_again(new_table):
    table = new_table()
    table.append(batch(range(200), [i % 2 for i in range(200)]))
    stricter = Policy.model_validate({"delete_files": {"max_file_ratio": 0.05}})
    before, after = _digests(table), _digests(table, stricter)
    assert changed_partitions(after, before).changed == ("2024-03-01", "2024-03-02")


def test_a_key_without_files_now_is_reported_once_as_empty_and_passing(new_table):
    table = new_table()
    table.append(batch(range(200), [i % 2 for i in range(200)]))
    reported = _digests(table)
    table.delete("ts >= '2024-03-02T00:00:00'")  # drops the second day's only file
    now = _digests(table)
    assert sorted(now) == ["2024-03-01"]
    assert changed_partitions(now, reported) == PartitionChanges((), ("2024-03-02",))

    empty = empty_partition("2024-03-02", POLICY, 1 << 20)
    assert empty.key == "2024-03-02" and empty.labels == () and empty.healthy
    assert [f.check for f in empty.findings] == list(PARTITION_CHECKS)
    assert empty.finding("small_files").metrics["data_files"] == 0
    assert partition_digest(empty) != reported["2024-03-02"]
