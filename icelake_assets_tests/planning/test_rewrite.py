"""Small files: the finding and the rewrite decision come from one rewrite plan, so they agree."""

import pytest

from icelake_assets.health.findings import Severity
from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning import layout, rewrite
from icelake_assets.planning.guards import estimated_rewrite_bytes
from icelake_assets.settings import Policy
from icelake_assets_tests.planning.test_findings import stats

MIB = 1024 * 1024
POLICY = Policy()  # max_files_per_partition 20, max_avg_file_bytes 128 MiB, small files < 96 MiB


def one_partition(files: int, small: int, size: int) -> TableStats:
    """One partition, a compaction candidate past 20 files (all average under 128 MiB), of which
    ``small`` files are small."""
    part = PartitionStats("p=1", data_files=files, data_bytes=files * size, records=files, small_files=small)
    return stats(
        data_files=files,
        data_bytes=files * size,
        small_files=small,
        partitions={"p=1": part},
        compaction_candidates=["p=1"] if files > POLICY.small_files.max_files_per_partition else [],
    )


def test_a_candidate_iceberg_would_skip_no_longer_fails_the_finding():
    """25 files of 100 MiB, one under the small-file limit: a compaction candidate by the average
    (under 128 MiB), but Iceberg's rewrite takes only its small files, and one file is never rewritten
    alone. Before, the finding failed (WARN: "1 partitions hold 25 files") while the decision skipped
    it, so the sensor never launched and the check never healed. Now both say: nothing to compact."""
    table = one_partition(25, small=1, size=100 * MIB)
    evaluation = rewrite.evaluate(table, POLICY)
    assert evaluation.decision is not None and not evaluation.decision.act
    assert evaluation.finding.severity is Severity.OK
    assert "fewer than 2 small files" in evaluation.finding.summary
    assert evaluation.finding.metrics["candidate_partitions"] == 0
    assert evaluation.finding.metrics["skipped_candidate_partitions"] == 1


@pytest.mark.parametrize(
    ("files", "small", "size", "fails"),
    [
        (20, 20, 1024, False),  # not a candidate: at the limit
        (21, 21, 1024, True),
        (25, 1, 100 * MIB, False),  # a candidate Iceberg skips
        (25, 2, 100 * MIB, True),  # two small files make a group
        (80, 80, 1024, True),
    ],
)
def test_the_finding_fails_exactly_when_the_rewrite_acts(files, small, size, fails):
    evaluation = rewrite.evaluate(one_partition(files, small, size), POLICY)
    assert evaluation.decision is not None
    assert (not evaluation.finding.passed) is fails
    assert evaluation.decision.act is fails


def drifted(old_files: int, new_files: int) -> TableStats:
    """A table partitioned after it was written: ``old_files`` files of the unpartitioned spec 0 (one
    compacted file each of 100 MiB), and three identity partitions of spec 1 holding ``new_files``
    compacted files in all (none a compaction candidate)."""
    old = PartitionStats(
        "<unpartitioned>", data_files=old_files, data_bytes=old_files * 100 * MIB, old_spec_files=old_files
    )
    parts = {"<unpartitioned>": old}
    for i in range(3):
        n = new_files // 3 + (i < new_files % 3)
        parts[f"cat={i}"] = PartitionStats(
            f"cat={i}", data_files=n, data_bytes=n * 100 * MIB, spec_id=1, values=(str(i),)
        )
    return stats(
        data_files=old_files + new_files,
        data_bytes=(old_files + new_files) * 100 * MIB,
        old_spec_files=old_files,
        drift_files=old_files,
        default_spec_id=1,
        partitions=parts,
    )


def test_drift_past_the_max_makes_the_rewrite_take_the_old_spec_files():
    """Issue 39: 1 of 4 files under an older spec (ratio 0.25, max 0.1) failed layout_drift while the
    rewrite said "no partition has > 20 files": nothing acted and the table stayed Critical. Now the
    rewrite acts on the old spec's partition alone, with rewrite-all, priced at its bytes."""
    table = drifted(1, 3)
    finding = layout.layout_drift_finding(table, POLICY)
    decision = rewrite.decide_rewrite(table, POLICY)
    planned = rewrite.plan_rewrite(table, POLICY)
    assert not finding.passed
    assert decision.act
    assert decision.reason.startswith("1 of 4 files drift (ratio 0.25, max 0.1): 1 written under a spec")
    assert planned.partitions == planned.drift_partitions == ("<unpartitioned>",)
    assert planned.options["rewrite-all"] == "true" and planned.rewrite_all
    assert planned.input_bytes == decision.signals["drift_bytes"] == 100 * MIB
    assert estimated_rewrite_bytes(table, planned.partitions) == 100 * MIB
    assert not planned.drift.sort


def test_drift_within_the_max_does_not_make_the_rewrite_act():
    table = drifted(1, 9)  # ratio 0.1: at the max
    assert layout.layout_drift_finding(table, POLICY).passed
    decision = rewrite.decide_rewrite(table, POLICY)
    planned = rewrite.plan_rewrite(table, POLICY)
    assert not decision.act and decision.signals["drift_partitions"] == 0
    assert planned.partitions == planned.drift_partitions == ()
    assert "rewrite-all" not in planned.options


def test_files_out_of_sort_order_are_rewritten_by_the_table_order():
    part = PartitionStats("p=1", data_files=4, data_bytes=4 * MIB, unsorted_files=2)
    table = stats(
        data_files=4,
        data_bytes=4 * MIB,
        unsorted_files=2,
        drift_files=2,
        sort_column="id",
        partitions={"p=1": part},
    )
    planned = rewrite.plan_rewrite(table, POLICY)
    assert planned.partitions == ("p=1",) and planned.drift.sort and planned.rewrite_all
    assert "2 out of sort order on id" in rewrite.decide_rewrite(table, POLICY).reason
