"""The cheaper delete compaction: where only position deletes are due and the data files are not
small, rewrite_position_delete_files instead of rewriting data; equality deletes keep the data rewrite."""

from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning.deletes import delete_files_finding, position_delete_compaction
from icelake_assets.planning.guards import evaluate_guards
from icelake_assets.planning.rewrite import decide_rewrite, plan_rewrite
from icelake_assets.planning.table import decide_table
from icelake_assets.settings import Policy

MiB = 1_048_576
POLICY = Policy.model_validate({"guards": {"quiet_period_minutes": 0}})


def part(
    label: str, data_files: int = 12, position: int = 3, equality: int = 0, small: int = 0, targets: int = 1
) -> PartitionStats:
    """``targets``: the data files its position deletes point into (-1: unknown)."""
    return PartitionStats(
        label,
        data_files=data_files,
        data_bytes=data_files * 200 * MiB,
        records=data_files * 1_000_000,
        small_files=small,
        delete_files=position + equality,
        position_delete_files=position,
        equality_delete_files=equality,
        delete_records=(position + equality) * 10,
        delete_bytes=(position + equality) * 4096,
        deleted_data_files=targets if position else 0,
    )


def table(
    *parts: PartitionStats, candidates: tuple[str, ...] = (), version: int = 2, granularity: str = "file"
) -> TableStats:
    def total(name: str) -> int:
        return sum(getattr(p, name) for p in parts)

    return TableStats(
        table="ns.t",
        metadata_location="m.json",
        current_snapshot_id=1,
        target_file_size_bytes=128 * MiB,
        data_files=total("data_files"),
        data_bytes=total("data_bytes"),
        records=total("records"),
        small_files=total("small_files"),
        position_delete_files=total("position_delete_files"),
        equality_delete_files=total("equality_delete_files"),
        position_delete_records=sum(p.position_delete_files * 10 for p in parts),
        equality_delete_records=sum(p.equality_delete_files * 10 for p in parts),
        delete_bytes=total("delete_bytes"),
        partitions={p.partition: p for p in parts},
        compaction_candidates=list(candidates),
        format_version=version,
        delete_granularity=granularity,
    )


def test_a_few_position_deletes_over_large_files_are_compacted_without_rewriting_data():
    s = table(part("d=1"), part("d=2"))  # 6 delete files for 24 data files of 200 MB: ratio 0.25 > 0.2
    assert not delete_files_finding(s, POLICY).passed
    compaction = position_delete_compaction(s, POLICY)
    assert compaction.partitions == ("d=1", "d=2") and compaction.delete_files_after == 2
    assert (compaction.delete_bytes, compaction.data_bytes) == (6 * 4096, 24 * 200 * MiB)
    rp = plan_rewrite(s, POLICY)
    assert rp.partitions == () and rp.position_partitions == ("d=1", "d=2")
    assert "delete-file-threshold" not in rp.options  # no data file is rewritten
    d = decide_rewrite(s, POLICY)
    assert d.act and "compacted by rewrite_position_delete_files (24576 bytes of delete files" in d.reason
    assert (d.signals["position_delete_bytes"], d.signals["data_bytes_not_rewritten"]) == (
        24576,
        24 * 200 * MiB,
    )
    assert (
        "rewrite_position_delete_files on the 2 partitions" in delete_files_finding(s, POLICY).recommendation
    )
    # The cost guard prices the delete files, not the 4.7 GB of data: under a 1 MiB cap it launches.
    decided = decide_table(s, Policy.model_validate({"guards": {"max_rewrite_bytes": MiB}}), "enforce")
    assert decided.verdict.action == "launch" and decided.verdict.details["estimated_rewrite_bytes"] == 24576
    verdict = evaluate_guards(s, [d], 0, MiB, partitions=rp.partitions, position_delete_bytes=24576)
    assert verdict.action == "launch" and verdict.details["estimated_position_delete_bytes"] == 24576


def test_equality_deletes_keep_the_data_rewrite_beside_a_position_only_partition():
    s = table(part("d=1"), part("d=2", position=1, equality=4), part("d=3", data_files=24, position=3))
    rp = plan_rewrite(s, POLICY)
    assert rp.position_partitions == ("d=1", "d=3") and rp.partitions == ("d=2",)
    assert rp.options["delete-file-threshold"] == "1"
    assert (
        "rewrite_data_files with delete-file-threshold=1 on the others"
        in delete_files_finding(s, POLICY).recommendation
    )


def test_the_data_rewrite_stays_where_it_pays_or_compaction_cannot_heal():
    rows = PartitionStats("d=1", data_files=12, records=100, position_delete_files=3, delete_files=3)
    many_rows = table(rows)  # 30 of 100 rows deleted: the record ratio is crossed
    assert "applying them by rewriting the data pays" in position_delete_compaction(many_rows, POLICY).reason
    small = table(part("d=1", small=12), part("d=2"), candidates=("d=1",))
    assert position_delete_compaction(small, POLICY).partitions == ("d=2",)  # d=1's files are small
    few_data = table(part("d=1", data_files=3), part("d=2", data_files=3))  # 2 left for 6 data files
    assert (
        "would leave 2 delete files for 6 data files" in position_delete_compaction(few_data, POLICY).reason
    )
    assert plan_rewrite(few_data, POLICY).partitions == ("d=1", "d=2")
    v3 = table(part("d=1"), part("d=2"), version=3)
    assert "deletion vector" in position_delete_compaction(v3, POLICY).reason
    one_file = table(part("d=1", data_files=30, position=1), part("d=2", data_files=4, position=1))
    assert position_delete_compaction(one_file, POLICY).partitions == ()  # nothing to merge


def test_what_the_compaction_leaves_follows_the_delete_granularity():
    """Spark writes file-scoped position deletes by default: rewritten, they stay one file per data file
    they point into (read from their file_path bounds); partition-scoped ones merge into one."""
    spread = table(part("d=1", position=3, targets=3), part("d=2", position=3, targets=3))
    assert position_delete_compaction(spread, POLICY).partitions == ()  # 3 files for 3 data files each
    merged = table(
        part("d=1", position=3, targets=3), part("d=2", position=3, targets=3), granularity="partition"
    )
    assert position_delete_compaction(merged, POLICY).delete_files_after == 2
    unknown = table(part("d=1", position=30, targets=-1), part("d=2", data_files=100, position=0))
    compaction = position_delete_compaction(unknown, POLICY)  # at most one per data file: 12 of d=1's 30
    assert compaction.partitions == ("d=1",) and "merged into 12" in compaction.reason
