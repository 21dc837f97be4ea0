"""Small files: the finding and the rewrite decision come from one rewrite plan, so they agree."""

import pytest

from icelake_assets.health.findings import Severity
from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning import rewrite
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
