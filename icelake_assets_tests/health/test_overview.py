"""The lake-wide overview: expected benefit by construction, ranking, and what the UI shows."""

import json

from icelake_assets.cli import main
from icelake_assets.health.overview import (
    lake_overview,
    partition_benefits,
    priority_key,
    table_benefit,
)
from icelake_assets.health.score import HealthStatus
from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning.health import evaluate
from icelake_assets.settings import Policy
from icelake_assets_tests.operate.test_partition_health import degraded_lake

POLICY = Policy()
KB = 1024


def table(name: str, parts: list[PartitionStats], **values) -> TableStats:
    return TableStats(
        table=name,
        metadata_location="m",
        current_snapshot_id=1,
        target_file_size_bytes=128 * 1_048_576,
        partitions={p.partition: p for p in parts},
        data_files=sum(p.data_files for p in parts),
        data_bytes=sum(p.data_bytes for p in parts),
        records=sum(p.records for p in parts),
        small_files=sum(p.small_files for p in parts),
        position_delete_files=sum(p.position_delete_files for p in parts),
        position_delete_records=sum(p.delete_records for p in parts),
        **values,
    )


def small(partition: str, files: int, **extra) -> PartitionStats:
    return PartitionStats(
        partition, data_files=files, data_bytes=files * KB, records=files * 10, small_files=files, **extra
    )


A = table(
    "a",
    [
        small("p=1", 30),
        small("p=2", 3, delete_files=2, position_delete_files=2, delete_records=4, delete_bytes=2 * KB),
    ],
    manifests=3,
    manifest_bytes=30 * KB,
    snapshots=3,
    compaction_candidates=["p=1"],
)
B = table("b", [small("p=1", 10)], manifests=200, manifest_bytes=2000 * KB, snapshots=3)
C = table("c", [small("p=1", 1)], manifests=1, manifest_bytes=KB, snapshots=1)


def test_partition_benefit_counts_file_opens_saved():
    benefits = {b.partition: b for b in partition_benefits(A, POLICY)}
    assert benefits["p=1"].files_saved == 29 and benefits["p=1"].expected_files == 1
    # 3 small files are fewer than min_input_files (5): not compacted, but its 2 delete files are applied
    assert benefits["p=2"].files_saved == 2 and benefits["p=2"].expected_files == 3
    assert "delete files" in benefits["p=2"].why
    assert partition_benefits(C, POLICY) == []


def test_tables_and_partitions_rank_by_expected_benefit():
    overview = lake_overview([evaluate(s, POLICY) for s in (C, A, B)])
    assert [t.table for t in overview.tables] == ["b", "a", "c"]
    b, a, c = overview.tables
    assert (b.files_saved, b.manifests_saved, b.benefit) == (9, 199, 208)  # 200 manifests of 10 KB fit in one
    assert (a.files_saved, a.manifests_saved, a.benefit) == (31, 0, 31)
    assert c.benefit == 0 and c.status is HealthStatus.HEALTHY and c.why == "healthy"
    assert a.status is HealthStatus.WARNING and a.actions[0].startswith("small_files: run rewrite_data_files")
    assert b.status is HealthStatus.CRITICAL and any("rewrite_manifests" in x for x in b.actions)
    assert [(p.table, p.partition) for p in overview.partitions] == [("a", "p=1"), ("b", "p=1"), ("a", "p=2")]
    metrics = overview.metrics()
    assert (
        metrics["tables"],
        metrics["tables_critical"],
        metrics["tables_warning"],
        metrics["tables_healthy"],
    ) == (3, 1, 1, 1)
    assert metrics["files_saved"] == 40 and metrics["manifests_saved"] == 199


def test_the_sensor_ranks_by_benefit_then_by_the_age_of_the_finding():
    """The overview's ranking with ages, as the sensor orders launches under the global run cap."""
    a, b, a2 = (table_benefit(evaluate(s, POLICY, name=n)) for s, n in ((A, "a"), (B, "b"), (A, "a2")))
    found = {"a": 200.0, "b": 300.0, "a2": 100.0}  # a2 found first, a later, b last
    ranked = sorted((a, b, a2), key=lambda t: priority_key(t, found[t.table]))
    assert [t.table for t in ranked] == ["b", "a2", "a"]  # benefit first, then the older finding
    assert sorted((a, a2), key=priority_key) == [a, a2]  # no ages (the overview): the name decides


def test_markdown_names_every_table_and_the_reason():
    text = lake_overview([evaluate(s, POLICY, name=f"cat.ns.{s.table}") for s in (A, B, C)]).markdown()
    assert "## What to fix first" in text and "## Partitions with the largest benefit" in text
    for name in ("cat.ns.a", "cat.ns.b", "cat.ns.c"):
        assert f"`{name}`" in text
    assert "manifest_fragmentation ERROR" in text


def test_the_overview_counts_unhealthy_partitions_per_partitioned_table():
    healths = [evaluate(s, POLICY, name=n) for s, n in ((A, "cat.ns.a"), (B, "cat.ns.b"))]
    overview = lake_overview(healths, unhealthy_partitions={"cat.ns.a": 3})
    counts = {t.table: t.unhealthy_partitions for t in overview.tables}
    assert counts == {"cat.ns.a": 3, "cat.ns.b": None}  # b: unpartitioned (not counted)
    assert overview.metrics()["unhealthy_partitions"] == 3
    text = overview.markdown()
    assert "| unhealthy partitions |" in text
    assert "| `cat.ns.a` | Warning |" in text and "| 3 | 31 |" in text  # its count, then files saved
    assert "| -1 |" not in text and "| - | 9 |" in text  # b: a dash, then its files saved


def test_icelake_health_overview_counts_a_real_tables_unhealthy_partitions(tmp_path_factory, capsys):
    """Days 2024-03-02 and 2024-03-05 of ``ns.days`` fail small_files; ``ns.flat`` is unpartitioned."""
    settings, days, flat = degraded_lake(tmp_path_factory)
    assert main(["--config", settings.source, "health", "--overview", "--json"]) == 0
    overview = {t["table"]: t for t in json.loads(capsys.readouterr().out)["overview"]}
    assert overview[days]["unhealthy_partitions"] == 2 and overview[flat]["unhealthy_partitions"] is None
    assert main(["--config", settings.source, "health", "--overview"]) == 0
    out = capsys.readouterr().out
    ranking = out.split("what to fix first", 1)[1].split("partitions with the largest benefit", 1)[0]
    rows = {line.split()[1]: line.split() for line in ranking.splitlines() if days in line or flat in line}
    header = next(line for line in ranking.splitlines() if "unhealthy partitions" in line)
    assert header.split()[:5] == ["#", "table", "status", "unhealthy", "partitions"]
    assert rows[days][3] == "2" and rows[flat][3] == "-"
