"""The post-run decisions without Dagster or a lake: the baseline, row checks, rollback advice, each
op's effect and how the run ends (with Spark: orchestration/test_maintenance_run.py)."""

from dataclasses import replace
from types import SimpleNamespace

from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.maintenance.results.effect import OpEffect
from icelake_assets.maintenance.results.models import (
    ExpireResult,
    OrphanResult,
    OrphanScanSummary,
    RewriteResult,
)
from icelake_assets.maintenance.verify import post_run
from icelake_assets.maintenance.verify.cross_engine import CrossEngineError
from icelake_assets.maintenance.verify.validation import RollbackOutcome, ValidationResult
from icelake_assets.planning.relaunch import OUTCOME_TAG
from icelake_assets.settings import Policy

REF = TableRef("c", ("ns",), "t")
POLICY = Policy.model_validate({"small_files": {"max_files_per_partition": 1}})
EXPIRE = ExpireResult(acted=True, reason="old", snapshot_before=1, snapshots_before=9, snapshots_after=3)
REWRITE = RewriteResult(
    acted=True,
    reason="small",
    snapshot_before=2,
    snapshots_committed=1,
    partitions_rewritten=("a",),
    partitions_failed=("b",),
    partition_keys_failed=("2026-01-02",),
)
ORPHANS = OrphanResult(
    acted=True,
    reason="orphans",
    scan=OrphanScanSummary(listed_files=9, orphans_found=3, skipped_reasons={"nested": 2}),
    orphans_removed=3,
    bytes_found=300,
)


def _after(candidates: list[str]) -> TableStats:
    parts = {p: PartitionStats(p, data_files=2, small_files=2) for p in ("a", "b")}
    return TableStats(
        table="ns.t",
        metadata_location="",
        current_snapshot_id=5,
        target_file_size_bytes=1000,
        partitions=parts,
        compaction_candidates=candidates,
        manifests=1,
        snapshots=3,
    )


def _rows(ok: bool = True) -> ValidationResult:
    return ValidationResult(2, 5, 10, 10 if ok else 9, 10, 0, 1)


def test_the_baseline_is_where_the_first_rewrite_started():
    assert post_run.baseline([EXPIRE, REWRITE], 7) == post_run.Baseline(2, True)
    assert post_run.baseline([EXPIRE], 7) == post_run.Baseline(7, False)
    assert post_run.duration_s([EXPIRE, REWRITE]) == 0.0


def test_rows_that_differ_or_engines_that_disagree_fail_validation(monkeypatch):
    said: list[str] = []
    cross = SimpleNamespace(ok=False, describe=lambda: "spark: 10 rows, duckdb: 9 rows")
    monkeypatch.setattr(post_run, "validate_row_counts", lambda *a, **k: _rows())
    monkeypatch.setattr(post_run, "cross_engine_check", lambda *a: cross)
    start = post_run.Baseline(2, True)
    checked = post_run.check_rows(lambda: None, REF, None, start, True, said.append)
    assert checked.mismatch == "c.ns.t: engines disagree after maintenance: spark: 10 rows, duckdb: 9 rows"
    assert checked.cross_engine == cross.describe() and said == [
        f"c.ns.t cross-engine read: {cross.describe()}"
    ]
    assert post_run.check_rows(lambda: None, REF, None, start, False, said.append).mismatch is None

    monkeypatch.setattr(post_run, "validate_row_counts", lambda *a, **k: _rows(ok=False))
    assert post_run.check_rows(lambda: None, REF, None, start, True, said.append).mismatch

    def unreadable(*a):
        raise CrossEngineError("duckdb cannot read")

    monkeypatch.setattr(post_run, "validate_row_counts", lambda *a, **k: _rows())
    monkeypatch.setattr(post_run, "cross_engine_check", unreadable)
    failed = post_run.check_rows(lambda: None, REF, None, start, True, said.append)
    assert (
        failed.mismatch == "duckdb cannot read" and failed.result is not None and failed.cross_engine is None
    )


def test_only_a_run_that_rewrote_is_rolled_back_and_the_advice_says_what_happened():
    assert post_run.roll_back(None, post_run.Baseline(7, False)) is None
    done = RollbackOutcome(True, "only our commits since")
    refused = RollbackOutcome(False, "a writer committed since")
    assert post_run.failed_outcome(done) == "rolled_back" and post_run.failed_outcome(refused) == "failed"
    assert post_run.failed_outcome(None) == "failed"
    assert post_run.recovery_advice(REF, done, 2) == "Rolled back automatically: only our commits since."
    advice = post_run.recovery_advice(REF, None, 2)
    assert advice.startswith("Not rolled back (nothing of ours to undo)")
    assert "CALL c.system.rollback_to_snapshot('ns.t', 2)" in advice


def test_the_report_judges_each_op_and_the_failed_partitions():
    report = post_run.judge([EXPIRE, ORPHANS, REWRITE], _after(["b"]), POLICY)
    assert [(e.op, e.effect) for e in report.effects] == [
        ("expire_snapshots", "effective"),
        ("remove_orphan_files", "effective"),
        ("rewrite_data_files", "partial"),
    ]
    assert report.outcome == "partial" and report.orphans_removed and not report.ineffective
    assert report.failure is REWRITE and report.failed_partitions == ("2026-01-02",)
    assert report.validation_decision == "partial" and report.run_outcome == "partial"
    assert report.validation_reason() == "rows match; 1 partitions not compacted"
    assert report.scanned_orphans is not None and report.scanned_orphans.passed
    assert report.audit_effects(None) == {"outcome": "partial", "ops": [e.to_dict() for e in report.effects]}
    tags = report.outcome_tags(REF, 5, POLICY)
    assert tags[OUTCOME_TAG] == "partial" and tags["icelake/outcome_snapshot"] == "5"


def test_an_ineffective_run_passes_or_fails_by_its_policy():
    report = post_run.RunReport(
        (OpEffect("rewrite_manifests", "ineffective", "12 manifests"),), "ineffective", None, None
    )
    assert report.validation_decision == "passed" and report.run_outcome == "succeeded"
    assert report.validation_reason() == "rows match; ineffective: rewrite_manifests"
    assert report.fails_as_ineffective(POLICY) is None
    strict = Policy.model_validate({"loop": {"on_ineffective": "fail"}})
    assert report.fails_as_ineffective(strict) == (
        "maintenance was ineffective (loop.on_ineffective: fail): rewrite_manifests: 12 manifests"
    )
    assert post_run.RunReport((), None, None, None).outcome_tags(REF, 5, POLICY) == {}


def test_every_attempt_of_a_judged_op_carries_its_effect():
    effect = OpEffect("rewrite_data_files", "partial", "1 of 2")
    ops = post_run.with_effects([EXPIRE, REWRITE, REWRITE], [effect])
    assert ops[0] is EXPIRE and all(o.effect == "partial" and o.effect_reason == "1 of 2" for o in ops[1:])


def test_orphans_left_by_the_run_are_its_finding():
    left = OrphanResult(acted=False, reason="young", scan=OrphanScanSummary(orphans_found=2))
    finding = post_run.scanned_orphans([EXPIRE, left], POLICY)
    assert finding is not None and finding.check == "orphan_files"
    assert post_run.scanned_orphans([EXPIRE], POLICY) is None
    assert (
        post_run.scan_benefit(None, [EXPIRE.__class__(acted=False, reason="no")], POLICY, lambda: None, REF)
        is None
    )


def test_commits_by_others_are_the_ones_on_top_of_each_op_that_name_another_run(tmp_path):
    import pyarrow as pa
    from pyiceberg.catalog.sql import SqlCatalog

    from icelake_assets.types import SNAPSHOT_RUN_ID

    catalog = SqlCatalog("c", uri=f"sqlite:///{tmp_path / 'c.db'}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("ns")
    rows = pa.table({"id": pa.array([1], pa.int64())})
    table = catalog.create_table(("ns", "t"), schema=rows.schema)
    table.append(rows)  # a writer
    expired_at = table.current_snapshot().snapshot_id
    table.append(rows, snapshot_properties={SNAPSHOT_RUN_ID: "run-1"})  # this run's own commit
    rewrote_at = table.current_snapshot().snapshot_id
    table.append(rows)  # writers, during the run
    table.append(rows, snapshot_properties={SNAPSHOT_RUN_ID: "run-0"})  # no run of ours now
    expire = ExpireResult(acted=True, reason="r", snapshot_after=expired_at)
    rewrite = replace(REWRITE, snapshot_after=rewrote_at)
    lost = ExpireResult(acted=True, reason="r", snapshot_after=12345)  # not on the branch any more
    skipped = RewriteResult(acted=False, reason="r", snapshot_after=expired_at)
    assert post_run.commits_by_others(table, [expire, rewrite], "run-1") == {
        "expire_snapshots": 2,
        "rewrite_data_files": 2,
    }
    assert post_run.commits_by_others(table, [lost, skipped], "run-1") == {}


def test_a_refused_statistics_file_is_remembered_in_the_run_tags_and_a_refused_partition_file_is_no_failure():
    """The store's 403 on the table statistics file becomes the run tag the sensor reads back
    (planning/statistics.statistics_refusal); a 403 on the partition statistics file alone, after the
    table statistics were registered, leaves the op effective and says so in its reason."""
    from icelake_assets.health.statistics import StatisticsFacts
    from icelake_assets.maintenance.results.models import StatisticsResult
    from icelake_assets.planning.statistics import STATISTICS_REFUSED_TAG

    cause = "AmazonS3Exception: Forbidden (Service: Amazon S3; Status Code: 403) (in UncheckedIOException)"
    columns = ((1, "id"), (2, "day"))
    after = TableStats(
        table="ns.t",
        metadata_location="m.json",
        current_snapshot_id=9,
        target_file_size_bytes=128 * 1_048_576,
        records=20_000,
        statistics=StatisticsFacts(
            current_rows=20_000,
            columns=columns,
            snapshot_id=9,
            path="s.stats",
            ndv={1: 20_000, 2: 2},
            rows_at=20_000,
            commits_behind=0,
        ),
    )
    written = StatisticsResult(
        acted=True,
        reason="no statistics",
        columns=("id", "day"),
        statistics_file="s.stats",
        ndv={"id": 20_000, "day": 2},
        registered=True,
        partition_statistics_error=cause,
        partition_statistics_error_kind="access_denied",
    )
    report = post_run.judge([written], after, Policy())
    [effect] = report.effects
    assert effect.effect == "effective" and f"partition statistics not written: {cause}" in effect.reason
    assert report.statistics_refused is None
    assert STATISTICS_REFUSED_TAG not in report.outcome_tags(REF, 9, Policy())
    assert written.details()["partition_statistics_error_kind"] == "access_denied"

    refused = StatisticsResult(
        acted=True, reason="no statistics", columns=("id", "day"), error=cause, error_kind="access_denied"
    )
    report = post_run.judge([refused], replace(after, statistics=StatisticsFacts(columns=columns)), Policy())
    assert report.statistics_refused == cause and report.outcome == "ineffective"
    assert report.outcome_tags(REF, 9, Policy())[STATISTICS_REFUSED_TAG] == cause
    other = replace(refused, error="ValidationException: bad column", error_kind="error")
    assert post_run.judge([other], after, Policy()).statistics_refused is None
