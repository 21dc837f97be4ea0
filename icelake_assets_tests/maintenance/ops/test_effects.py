"""Effect verification and the relaunch hold, on statistics alone (with Spark:
orchestration/test_loop.py)."""

from dataclasses import replace

from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.maintenance.ops.chain import judge_effects
from icelake_assets.maintenance.results.effect import run_outcome
from icelake_assets.maintenance.results.models import (
    DanglingDeletes,
    ExpireResult,
    ManifestResult,
    RewriteResult,
)
from icelake_assets.planning.relaunch import (
    OUTCOME_SNAPSHOT_TAG,
    OUTCOME_TAG,
    POLICY_HASH_TAG,
    policy_hash,
    relaunch_hold,
)
from icelake_assets.settings import Policy

POLICY = Policy.model_validate({"small_files": {"max_files_per_partition": 1}, "manifests": {"max_count": 2}})


def _after(candidates: list[str], manifests: int = 1) -> TableStats:
    parts = {p: PartitionStats(p, data_files=2, small_files=2) for p in ("a", "b")}
    return TableStats(
        table="ns.t",
        metadata_location="",
        current_snapshot_id=2,
        target_file_size_bytes=1000,
        partitions=parts,
        compaction_candidates=candidates,
        manifests=manifests,
        snapshots=3,
    )


def _rewrite(committed: int = 1) -> RewriteResult:
    return RewriteResult(
        acted=True,
        reason="r",
        partitions_rewritten=("a", "b"),
        partitions_failed=(),
        snapshots_committed=committed,
        data_files_before=4,
        data_files_after=2,
    )


def test_a_rewrite_is_effective_partial_or_ineffective_by_its_partitions():
    assert [e.effect for e in judge_effects([_rewrite()], _after([]), POLICY)] == ["effective"]
    partial = judge_effects([_rewrite()], _after(["a"]), POLICY)[0]
    assert partial.effect == "partial" and partial.still_failing == ("a",) and "1 of 2" in partial.reason
    assert judge_effects([_rewrite()], _after(["a", "b"]), POLICY)[0].effect == "ineffective"
    nothing = judge_effects([_rewrite(committed=0)], _after([]), POLICY)[0]
    assert nothing.effect == "ineffective" and "committed nothing" in nothing.reason


def test_ops_that_did_not_act_have_no_effect_and_the_worst_effect_wins():
    manifests = ManifestResult(acted=True, reason="r", manifests_before=12, manifests_after=10)
    skipped = ExpireResult(acted=False, reason="r")
    effects = judge_effects([skipped, _rewrite(), manifests], _after([], manifests=10), POLICY)
    assert [(e.op, e.effect) for e in effects] == [
        ("rewrite_data_files", "effective"),
        ("rewrite_manifests", "ineffective"),
    ]
    assert "manifest_fragmentation still fails" in effects[1].reason
    assert run_outcome(effects) == "ineffective" and run_outcome([]) is None


def test_an_ineffective_plan_is_held_until_the_table_the_policy_or_the_backoff_changes():
    last = {OUTCOME_TAG: "ineffective", OUTCOME_SNAPSHOT_TAG: "7", POLICY_HASH_TAG: policy_hash(POLICY)}
    assert "ineffective" in relaunch_hold(last, 7, POLICY, age_hours=1.0)
    assert relaunch_hold(last, 8, POLICY, age_hours=1.0) is None  # a commit since
    other = Policy.model_validate({**POLICY.model_dump(), "manifests": {"max_count": 3}})
    assert relaunch_hold(last, 7, other, age_hours=1.0) is None  # the policy changed
    backoff = POLICY.loop.relaunch_backoff_hours
    assert relaunch_hold(last, 7, POLICY, age_hours=backoff) is None  # the backoff passed
    assert relaunch_hold({**last, OUTCOME_TAG: "effective"}, 7, POLICY, age_hours=1.0) is None
    assert relaunch_hold(None, 7, POLICY, age_hours=None) is None


def test_a_delete_applying_rewrite_that_left_delete_files_is_partial_not_effective():
    """Before: compacted partitions made the rewrite 'effective' while delete_files kept failing."""
    clean = _after([])
    parts = {**clean.partitions, "a": replace(clean.partitions["a"], delete_files=3, position_delete_files=3)}
    after = replace(clean, partitions=parts, position_delete_files=3)
    rewrite = replace(
        _rewrite(), options={"delete-file-threshold": "1"}, dangling=DanglingDeletes(commits=1, error="boom")
    )
    left = judge_effects([rewrite], after, POLICY)[0]
    assert left.effect == "partial" and left.check == "delete_files" and left.still_failing == ("a",)
    assert "still hold 3 delete files" in left.reason and "boom" in left.reason
    assert judge_effects([rewrite], clean, POLICY)[0].effect == "effective"


def test_statistics_are_effective_only_on_the_current_snapshot_and_a_failure_is_ineffective():
    from icelake_assets.health.statistics import StatisticsFacts
    from icelake_assets.maintenance.results.models import StatisticsResult

    def after(**facts) -> TableStats:
        return replace(
            _after([]),
            records=20_000,
            statistics=StatisticsFacts(current_rows=20_000, columns=((1, "id"),), **facts),
        )

    done = StatisticsResult(acted=True, reason="r", ndv={"id": 19_990})
    current = after(snapshot_id=2, ndv={1: 19_990}, rows_at=20_000, commits_behind=0)
    [effect] = judge_effects([done], current, POLICY)
    assert effect.effect == "effective" and effect.check == "statistics" and "snapshot 2" in effect.reason
    ancestor = after(snapshot_id=1, ndv={1: 19_990}, rows_at=20_000, commits_behind=1)
    assert judge_effects([done], ancestor, POLICY)[0].effect == "ineffective"
    failed = replace(done, ndv={}, error="UnsupportedOperationException: type")
    [effect] = judge_effects([failed], after(), POLICY)
    assert effect.effect == "ineffective" and "UnsupportedOperationException" in effect.reason


def test_a_position_delete_compaction_is_judged_on_the_delete_files_check():
    from icelake_assets.maintenance.results.models import PositionDeletes

    def after(delete_files: int) -> TableStats:
        return replace(_after([]), data_files=24, records=600, position_delete_files=delete_files)

    compacted = PositionDeletes(partitions=("a", "b"), delete_files_before=8, delete_files_after=2, commits=1)
    only = RewriteResult(acted=True, reason="r", snapshots_committed=0, position_deletes=compacted)
    [effect] = judge_effects([only], after(2), POLICY)
    assert (
        effect.effect == "effective"
        and "8 → 2 delete files in 2 partitions, data files untouched" in effect.reason
    )
    [effect] = judge_effects([only], after(6), POLICY)  # 6 of 24 still fail the 0.2 file ratio
    assert effect.effect == "partial" and "delete_files" == effect.check
    failed = replace(only, position_deletes=replace(compacted, commits=0, error="ValidationException: x"))
    [effect] = judge_effects([failed], after(8), POLICY)
    assert effect.effect == "ineffective" and "ValidationException" in effect.reason
    # With a data rewrite beside it, the op's effect is the worse of the two, both reasons told.
    both = replace(_rewrite(), position_deletes=compacted)
    [effect] = judge_effects([both], replace(after(6), compaction_candidates=["a"]), POLICY)
    assert effect.effect == "partial" and "position deletes compacted" in effect.reason


def _retention_failing() -> TableStats:
    """40 snapshots (max 15, none too young to go): the snapshot_retention finding fails."""
    from icelake_assets.health.retention import SnapshotPoint

    points = tuple(SnapshotPoint(i, i - 1 if i > 1 else None, 1_000 * i) for i in range(1, 41))
    return replace(
        _after([]),
        current_snapshot_id=40,
        snapshots=40,
        snapshot_points=points,
        oldest_snapshot_age_hours=1.0,
        evaluated_at=3_600.0,
    )


def test_an_op_whose_finding_fails_again_under_writers_commits_is_overtaken_not_held():
    """The soak's heal phase: expiry left 15 snapshots, writers committed 25 more during the run and
    then stopped. Judged ineffective, the table was held for 24 h with nothing of the run's to blame."""
    policy = Policy.model_validate({"snapshots": {"max_count": 15, "min_keep": 3, "min_age_hours": 0}})
    expire = ExpireResult(acted=True, reason="r", snapshots_before=236, snapshots_after=15, snapshot_after=15)
    alone = judge_effects([expire], _retention_failing(), policy)[0]
    assert alone.effect == "ineffective"  # nobody else committed: the op itself left it failing
    moved = judge_effects([expire], _retention_failing(), policy, {"expire_snapshots": 25})[0]
    assert moved.effect == "overtaken" and "25 commit(s) by others" in moved.reason
    assert run_outcome([moved]) == "overtaken" and run_outcome([moved, alone]) == "ineffective"
    last = {OUTCOME_TAG: "overtaken", OUTCOME_SNAPSHOT_TAG: "40", POLICY_HASH_TAG: policy_hash(policy)}
    assert relaunch_hold(last, 40, policy, age_hours=0.1) is None
    # A rewrite whose partitions writers filled again is overtaken too; one that committed nothing is not.
    rewrite = judge_effects([_rewrite()], _after(["a", "b"]), POLICY, {"rewrite_data_files": 4})[0]
    assert rewrite.effect == "overtaken" and rewrite.still_failing == ("a", "b")
    nothing = judge_effects([_rewrite(committed=0)], _after([]), POLICY, {"rewrite_data_files": 4})[0]
    assert nothing.effect == "ineffective"
