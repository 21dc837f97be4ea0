"""Each check's severity boundaries: OK at its threshold, WARN just over it, ERROR at 4x the threshold."""

import pytest

from icelake_assets.health.findings import CHECKS, ERROR_FACTOR, Severity
from icelake_assets.health.retention import RefPoint, SnapshotPoint
from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning import manifests as manifest_files, orphans as orphan_files
from icelake_assets.planning.deletes import delete_files_finding
from icelake_assets.planning.health import metadata_findings
from icelake_assets.planning.layout import layout_drift_finding
from icelake_assets.planning.manifests import manifest_finding
from icelake_assets.planning.orphans import orphan_finding
from icelake_assets.planning.rewrite import small_files_finding
from icelake_assets.planning.snapshots import snapshot_finding
from icelake_assets.settings import Policy

POLICY = Policy()
OK, WARN, ERROR = Severity.OK, Severity.WARN, Severity.ERROR


def stats(**values) -> TableStats:
    return TableStats(
        table="ns.t",
        metadata_location="m.json",
        current_snapshot_id=1,
        target_file_size_bytes=128 * 1_048_576,
        **values,
    )


def _candidate(files: int) -> TableStats:
    """One partition of ``files`` 1 KB files: a compaction candidate once over max_files_per_partition."""
    part = PartitionStats("p=1", data_files=files, data_bytes=files * 1024, records=files, small_files=files)
    limit = POLICY.small_files.max_files_per_partition
    return stats(
        data_files=files,
        data_bytes=files * 1024,
        small_files=files,
        partitions={"p=1": part},
        compaction_candidates=["p=1"] if files > limit else [],
    )


@pytest.mark.parametrize("files, expected", [(20, OK), (21, WARN), (79, WARN), (80, ERROR), (500, ERROR)])
def test_small_files_boundaries(files, expected):
    finding = small_files_finding(_candidate(files), POLICY)
    assert finding.severity is expected
    assert finding.rows[0]["partition"] == "p=1" and finding.metrics["small_files"] == files


def history(count: int, age_hours: float, now: float = 1_800_000_000.0) -> TableStats:
    """``count`` snapshots on main, one after the other, the oldest ``age_hours`` old (the rest 1 ms apart)."""
    oldest = int(now * 1000 - age_hours * 3_600_000)
    points = tuple(SnapshotPoint(i + 1, i or None, oldest + i) for i in range(count))
    refs = (RefPoint("main", True, count),) if count else ()
    return stats(
        snapshots=count,
        oldest_snapshot_age_hours=age_hours,
        snapshot_points=points,
        snapshot_refs=refs,
        evaluated_at=now,
    )


@pytest.mark.parametrize(
    "count, age, expected",
    [
        (100, 30.0, OK),
        (101, 30.0, WARN),
        (399, 30.0, WARN),
        (400, 30.0, ERROR),
        (6, 120.0, OK),
        (6, 120.5, WARN),
        (5, 500.0, OK),  # at min_keep nothing may be expired, however old
        (101, 23.9, OK),
        (400, 1.0, OK),  # over the count but younger than min_age_hours (24): expiry keeps them
    ],
)
def test_snapshot_retention_boundaries(count, age, expected):
    assert snapshot_finding(history(count, age), POLICY).severity is expected


def test_snapshot_retention_says_why_nothing_may_expire_and_what_would():
    young = snapshot_finding(history(300, 1.0), POLICY)
    assert "none may expire yet: 5 of the newest 5 kept, 295 younger than 24 h" in young.summary
    assert young.metrics["expirable_snapshots"] == 0
    old = snapshot_finding(history(300, 30.0), POLICY)  # all but the newest 5 are 30 h old
    assert (
        old.metrics["expirable_snapshots"] == 295 and "295 snapshots older than 24 h go" in old.recommendation
    )


@pytest.mark.parametrize("manifests, expected", [(50, OK), (51, WARN), (199, WARN), (200, ERROR)])
def test_manifest_fragmentation_boundaries(manifests, expected):
    assert manifest_finding(stats(manifests=manifests), POLICY).severity is expected


@pytest.mark.parametrize(
    "delete_files, deleted_rows, expected",
    [
        (20, 100, OK),  # file ratio 0.2 and row ratio 0.1: both at their thresholds
        (21, 0, WARN),
        (79, 0, WARN),
        (80, 0, ERROR),  # by files (100 data files)
        (1, 101, WARN),
        (1, 399, WARN),
        (1, 400, ERROR),  # by rows (1000 rows)
    ],
)
def test_delete_files_boundaries(delete_files, deleted_rows, expected):
    s = stats(
        data_files=100, records=1000, position_delete_files=delete_files, position_delete_records=deleted_rows
    )
    finding = delete_files_finding(s, POLICY)
    assert finding.severity is expected
    assert finding.metrics["delete_file_ratio"] == delete_files / 100
    if expected is not OK:
        assert "rewrite_data_files" in finding.recommendation


def test_equality_deletes_get_their_own_advice():
    s = stats(data_files=10, records=100, equality_delete_files=5, equality_delete_records=30)
    finding = delete_files_finding(s, POLICY)
    assert finding.severity is WARN and "equality" in finding.recommendation  # ratios 0.5 and 0.3


@pytest.mark.parametrize("drift, expected", [(10, OK), (11, WARN), (39, WARN), (40, ERROR)])
def test_layout_drift_boundaries(drift, expected):
    s = stats(data_files=100, old_spec_files=drift, drift_files=drift, default_spec_id=2)
    finding = layout_drift_finding(s, POLICY)
    assert finding.severity is expected
    if expected is not OK:
        assert "spec 2" in finding.recommendation


def test_layout_drift_by_sort_order_recommends_a_sort_rewrite():
    s = stats(data_files=10, unsorted_files=5, drift_files=5, sort_column="id", sort_order_id=1)
    finding = layout_drift_finding(s, POLICY)
    assert finding.severity is ERROR and "sort" in finding.recommendation and "id" in finding.summary


@pytest.mark.parametrize(
    "max_count, orphans, expected",
    [
        (0, 0, OK),
        (0, 1, WARN),
        (0, 3, WARN),
        (0, 4, ERROR),
        (10, 10, OK),
        (10, 11, WARN),
        (10, 39, WARN),
        (10, 40, ERROR),
    ],
)
def test_orphan_boundaries(max_count, orphans, expected):
    policy = POLICY.model_copy(update={"orphans": POLICY.orphans.model_copy(update={"max_count": max_count})})
    finding = orphan_finding(orphans, orphans * 10, policy, [f"/x/{i}" for i in range(orphans)])
    assert finding.severity is expected and len(finding.rows) == min(orphans, 10)


def test_every_metadata_finding_carries_numbers_and_advice():
    findings = metadata_findings(_candidate(30), POLICY)
    assert [f.check for f in findings] == [c for c in CHECKS if c != "orphan_files"]
    for f in findings:
        assert f.summary and f.recommendation
        assert f.metrics and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in f.metrics.values()
        )
    assert ERROR_FACTOR == 4


@pytest.mark.parametrize("orphans", [0, 5, 6, 50])
def test_the_orphan_finding_fails_exactly_when_removal_acts(orphans):
    policy = Policy.model_validate({"orphans": {"max_count": 5}})
    evaluation = orphan_files.evaluate(orphans, orphans * 10, policy)
    assert evaluation.decision is not None
    assert evaluation.decision.act is (not evaluation.finding.passed) is (orphans > 5)


@pytest.mark.parametrize("manifests", [50, 51, 200])
def test_the_manifest_finding_fails_exactly_when_the_rewrite_acts(manifests):
    evaluation = manifest_files.evaluate(stats(manifests=manifests), POLICY)
    assert evaluation.decision is not None
    assert evaluation.decision.act is (not evaluation.finding.passed) is (manifests > 50)
