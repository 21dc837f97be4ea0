"""Health per partition on real pyiceberg tables (SQLite catalog): the partitions that fail are
exactly the degraded ones, with their own numbers, under the Dagster keys the product gives them, and
graded by the table-level findings' rules (the table's finding is the worst of its partitions')."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat, ManifestContent, ManifestWriterV2
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform, IdentityTransform

from icelake_assets.health.findings import Severity, worst
from icelake_assets.health.stats import ManifestCache, PartitionStats, TableStats, compute_table_stats
from icelake_assets.orchestration.tables.partitions import partition_key
from icelake_assets.partitions.layout import LayoutField, PartitionLayout, partition_layout
from icelake_assets.partitions.values import partition_values
from icelake_assets.planning.health import metadata_findings
from icelake_assets.planning.partition_health import partition_health
from icelake_assets.settings import Policy
from icelake_assets_tests.health.conftest import batch

POLICY = Policy()
DEGRADED = (2, 5, 7)  # of days 0..9: each gets 22 more small files (23 in all, max 20)


def _report(table: Table, top: int = 10):
    stats = compute_table_stats(table, POLICY, ManifestCache())
    return stats, partition_health(stats, POLICY, partition_layout(table, with_earliest=False), top)


def test_exactly_the_days_with_many_small_files_fail_small_files_with_their_numbers(new_table):
    table = new_table()
    table.append(batch(range(1000), [i % 10 for i in range(1000)]))  # one file per day
    for n in range(22):  # one file in each degraded day per append
        ids = range(10_000 + n * 30, 10_000 + n * 30 + 30)
        table.append(batch(ids, [DEGRADED[i % 3] for i in range(30)]))
    stats, report = _report(table)

    assert report.partitioned and len(report.partitions) == 10
    assert report.failing_keys("small_files") == ["2024-03-03", "2024-03-06", "2024-03-08"]
    assert report.failing_keys() == report.failing_keys("small_files")  # no deletes, no drift
    summary = report.summary("small_files")
    assert summary.failing == 3 and [o.key for o in summary.worst] == [
        "2024-03-03",
        "2024-03-06",
        "2024-03-08",
    ]
    assert {o.severity for o in summary.worst} == {Severity.WARN} and summary.worst[0].over == 1.15
    assert report.summary("delete_files").failing == report.summary("layout_drift").failing == 0
    for p in report.unhealthy:
        (finding,) = p.failing
        m = finding.metrics
        assert finding.check == "small_files" and finding.severity is Severity.WARN  # 23 > 20, < 4 x 20
        assert m["data_files"] == 23 and m["small_files"] == 23 and m["max_files_per_partition"] == 20
        iceberg = stats.partitions[p.labels[0]]
        assert m["avg_file_bytes"] == int(iceberg.data_bytes / 23) and m["records"] == 100 + 220
    healthy = next(p for p in report.partitions if p.key == "2024-03-01")
    assert healthy.healthy and healthy.finding("small_files").metrics["data_files"] == 1
    # The keys are the ones Dagster's partitions use (orchestration/tables/partitions.py).
    layout = partition_layout(table, with_earliest=False)
    dagster_keys = {
        partition_key(layout, v)
        for p in stats.partitions.values()
        for v in partition_values(layout, p.partition)
    }
    assert {p.key for p in report.partitions} == dagster_keys
    # The table's own finding is the worst of its partitions'.
    table_finding = next(f for f in metadata_findings(stats, POLICY) if f.check == "small_files")
    assert table_finding.severity is worst(*(p.finding("small_files").severity for p in report.partitions))
    assert table_finding.metrics["candidate_partitions"] == 3
    # top: the worst N.
    assert len(partition_health(stats, POLICY, layout, top=1).summary("small_files").worst) == 1


def add_position_deletes(table: Table, day: str, deletes: int) -> None:
    """``deletes`` position delete files (one row each) on the data file of partition ``ts_day=day``,
    committed in a delete manifest, as a merge-on-read writer leaves them (pyiceberg writes none)."""
    task = next(t for t in table.scan().plan_files() if f"ts_day={day}" in t.file.file_path)
    target = task.file
    files = []
    for i in range(deletes):
        path = f"{table.location()}/data/ts_day={day}/{uuid.uuid4()}-deletes.parquet"
        rows = pa.table({"file_path": [target.file_path], "pos": pa.array([i], pa.int64())})
        with table.io.new_output(path).create() as out:
            pq.write_table(rows, out)
        files.append(
            DataFile.from_args(
                content=DataFileContent.POSITION_DELETES,
                file_path=path,
                file_format=FileFormat.PARQUET,
                partition=target.partition,
                record_count=1,
                file_size_in_bytes=len(table.io.new_input(path).open().read()),
                spec_id=target.spec_id,
            )
        )

    class DeleteManifestWriter(ManifestWriterV2):
        def content(self) -> ManifestContent:
            return ManifestContent.DELETES

    with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
        new_writer = append.new_manifest_writer

        def delete_writer(spec):
            writer = new_writer(spec)
            writer.__class__ = DeleteManifestWriter
            return writer

        append.new_manifest_writer = delete_writer  # type: ignore[method-assign]
        for f in files:
            append.append_data_file(f)


def test_a_partition_with_position_deletes_fails_delete_files_with_its_numbers(new_table):
    table = new_table()
    table.append(batch(range(400), [i % 4 for i in range(400)]))
    add_position_deletes(table, "2024-03-02", 2)
    stats, report = _report(table)

    assert stats.position_delete_files == 2  # health reads them as position deletes
    assert report.failing_keys() == report.failing_keys("delete_files") == ["2024-03-02"]
    (p,) = report.unhealthy
    m = p.finding("delete_files").metrics
    assert (m["delete_files"], m["position_delete_files"], m["equality_delete_files"]) == (2, 2, 0)
    assert (m["delete_records"], m["data_files"], m["records"]) == (2, 1, 100)
    assert m["delete_file_ratio"] == 2.0 and m["over_threshold"] == 10.0  # 2 per data file, max 0.2
    assert p.finding("delete_files").severity is Severity.ERROR  # >= 4 x its max, as the table's rule
    assert report.summary("delete_files").failing == 1
    others = [x for x in report.partitions if x.key != "2024-03-02"]
    assert len(others) == 3 and all(x.finding("delete_files").metrics["delete_files"] == 0 for x in others)


def test_an_unpartitioned_table_has_no_partition_findings(new_table):
    table = new_table(spec=PartitionSpec())
    for n in range(25):
        table.append(batch(range(n * 10, n * 10 + 10), 0))
    stats, report = _report(table)

    assert stats.small_files == 25  # the table itself is degraded ...
    assert not report.partitioned and report.partitions == () and report.unhealthy == ()
    assert [(c.check, c.failing, c.worst) for c in report.checks] == [
        ("small_files", 0, ()),
        ("delete_files", 0, ()),
        ("layout_drift", 0, ()),
    ]
    assert partition_health(stats, POLICY, None).partitions == ()


def test_two_dimensions_are_keyed_as_dagster_multi_partition_keys(new_table):
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"),
        PartitionField(source_id=3, field_id=1001, transform=IdentityTransform(), name="vendor"),
    )
    table = new_table(spec=spec)
    table.append(pa.concat_tables([batch(range(10), 0, "a|b"), batch(range(10, 20), 1, "c")]))
    stats, report = _report(table)

    layout = partition_layout(table, with_earliest=False)
    expected = {
        str(partition_key(layout, v))
        for p in stats.partitions.values()
        for v in partition_values(layout, p.partition)
    }
    assert {p.key for p in report.partitions} == expected == {"2024-03-01|~s:a%7Cb", "2024-03-02|c"}


def test_drift_is_graded_on_the_partitions_own_ratio_and_a_keyless_partition_has_no_key():
    # Stats of a day-partitioned table whose spec 0 was unpartitioned: drift in one day only, and
    # files of spec 0 that no Dagster key stands for.
    day = LayoutField("ts_day", 2, ("ts",), "timestamp", "day")
    layout = PartitionLayout("ns.t", 1, (day,), {0: (), 1: (day,)}, (0, 1))
    big = 10 * 200 << 20
    parts = [
        PartitionStats("ts_day=2024-03-01", data_files=10, data_bytes=big, records=10, spec_id=1),
        PartitionStats(
            "ts_day=2024-03-02", data_files=10, data_bytes=big, records=10, unsorted_files=3, spec_id=1
        ),
    ]
    keyless = PartitionStats("<unpartitioned>", data_files=5, data_bytes=5 << 20, records=5, spec_id=0)
    stats = TableStats(
        "ns.t",
        "m.json",
        1,
        128 << 20,
        data_files=25,
        records=25,
        partitions={p.partition: p for p in (*parts, keyless)},
    )
    report = partition_health(stats, POLICY, layout)
    assert [p.key for p in report.partitions] == ["2024-03-01", "2024-03-02", None]
    drift = report.summary("layout_drift")
    assert drift.failing == 1 and drift.worst[0].key == "2024-03-02"
    assert drift.worst[0].severity is Severity.WARN and drift.worst[0].over == 3.0  # 0.3 of max 0.1
    assert report.partitions[2].labels == ("<unpartitioned>",) and report.partitions[2].healthy
