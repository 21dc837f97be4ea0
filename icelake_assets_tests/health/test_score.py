"""The 0-100 score (Amoro's weights 40 / 40 / 20) and the Healthy / Warning / Critical status."""

import pytest

from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.score import HealthStatus, health_score, health_status, status_of, verdict
from icelake_assets.health.stats import TableStats
from icelake_assets.settings import Policy

POLICY = Policy()  # target 128 MiB, small under 96 MiB, duplicate ratio 0.1, max 20 files per partition
MiB = 1_048_576
TARGET = 128 * MiB


def stats(files: int, avg_bytes: float, records: int = 1000, eq: int = 0, pos: int = 0) -> TableStats:
    return TableStats(
        table="t",
        metadata_location="m",
        current_snapshot_id=1,
        target_file_size_bytes=TARGET,
        data_files=files,
        data_bytes=int(files * avg_bytes),
        records=records,
        equality_delete_records=eq,
        position_delete_records=pos,
    )


def test_a_table_at_target_size_without_deletes_scores_100():
    assert health_score(stats(100, TARGET), POLICY).score == 100


def test_small_files_cost_up_to_40_points():
    s = health_score(stats(100, 24 * MiB), POLICY)  # avg 24 MiB = 1/4 of the 96 MiB minimum
    assert s.penalties["small_files"] == pytest.approx(0.75)
    assert s.table_factor == 1.0 and s.score == 70  # ceil(100 - 40 * 0.75)


def test_equality_deletes_cost_up_to_40_points_and_position_deletes_20():
    eq = health_score(stats(100, TARGET, records=1000, eq=50), POLICY)  # 5 % of rows, half the 10 % ratio
    assert eq.penalties["equality_deletes"] == pytest.approx(0.5) and eq.score == 80
    pos = health_score(stats(100, TARGET, records=1000, pos=100), POLICY)  # 10 %, half of 2 x 10 %
    assert pos.penalties["position_deletes"] == pytest.approx(0.5) and pos.score == 90
    worst = health_score(stats(100, 0, records=1000, eq=1000, pos=1000), POLICY)
    assert worst.score == 0


def test_tables_of_few_files_are_barely_penalized():
    assert health_score(stats(1, 1024), POLICY).score == 100  # one file: nothing to compact
    # 6 files (at most 20: Amoro's size factor applies): 6/12 files x (6 KB / 128 MiB) ~ 0
    assert health_score(stats(6, 1024), POLICY).score == 100
    # 6 files holding half a target: factor 0.5 x 0.5, penalty 1 - (128/12)/96 = 8/9: ceil(100 - 0.25 x 40 x 8/9)
    assert health_score(stats(6, TARGET / 12), POLICY).score == 92
    # 21 files of 1 KB: more than max_files_per_partition, so the bytes no longer excuse them
    assert health_score(stats(21, 1024), POLICY).score == 61


def _finding(severity: Severity) -> Finding:
    return Finding("x", severity, "s", "r")


def test_status_is_the_worst_severity():
    assert health_status([]) is HealthStatus.HEALTHY
    assert health_status([_finding(Severity.OK)] * 3) is HealthStatus.HEALTHY
    assert health_status([_finding(Severity.OK), _finding(Severity.WARN)]) is HealthStatus.WARNING
    assert health_status([_finding(Severity.WARN), _finding(Severity.ERROR)]) is HealthStatus.CRITICAL


# -- the verdict: one rule for status and score (issue 22) ------------------------------------------


def _named(check: str, severity: Severity) -> Finding:
    return Finding(check, severity, "s", "r")


def test_a_layout_penalty_counts_only_while_its_finding_fails():
    # 21 files of 1 KB: Amoro's raw score is 61, but a passing small_files check leaves nothing to fix.
    many_small = stats(21, 1024)
    score, status = verdict(many_small, POLICY, [_named("small_files", Severity.OK)])
    assert score.raw == 61 and score.score == 100 and status is HealthStatus.HEALTHY
    score, status = verdict(many_small, POLICY, [_named("small_files", Severity.WARN)])
    assert score.score == 61 and status is HealthStatus.WARNING


@pytest.mark.parametrize(
    ("severity", "most", "status"),
    [(Severity.WARN, 79, HealthStatus.WARNING), (Severity.ERROR, 49, HealthStatus.CRITICAL)],
)
def test_a_failing_check_caps_the_score_so_status_and_score_agree(severity, most, status):
    # a perfect layout with orphans (no layout penalty): Critical never shows with 100
    score, got = verdict(stats(100, TARGET), POLICY, [_named("orphan_files", severity)])
    assert score.score == most and got is status


def test_the_status_is_the_scores_band_everywhere():
    for files, avg in ((100, TARGET), (100, 24 * MiB), (100, 0), (21, 1024)):
        for severity in (Severity.OK, Severity.WARN, Severity.ERROR):
            score, status = verdict(stats(files, avg), POLICY, [_named("small_files", severity)])
            assert status is status_of(score.score)
            assert (status is HealthStatus.HEALTHY) == (score.score >= 80)


def test_a_check_not_evaluated_yet_makes_a_passing_table_unknown_never_healthy():
    score, status = verdict(
        stats(100, TARGET), POLICY, [_named("small_files", Severity.OK)], ("orphan_files",)
    )
    assert status is HealthStatus.UNKNOWN and score.score == 100
    # a failing check is known whatever is missing
    _, status = verdict(
        stats(100, TARGET), POLICY, [_named("small_files", Severity.ERROR)], ("orphan_files",)
    )
    assert status is HealthStatus.CRITICAL
