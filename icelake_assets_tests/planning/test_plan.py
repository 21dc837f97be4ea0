"""Expiry decides on what it would actually remove: nothing younger than snapshots.min_age_hours,
nothing among the newest min_keep, nothing a branch or tag points to.

The rewrite plan agrees with Iceberg 1.10's planner (BinPackRewriteFilePlanner): every partition
it names is one Iceberg rewrites under the options it passes; none it would skip is named."""

from datetime import UTC, datetime, timedelta

from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning.manifests import decide_manifests
from icelake_assets.planning.rewrite import decide_rewrite, plan_rewrite, small_file_limit
from icelake_assets.planning.snapshots import decide_expire, expire_cutoff
from icelake_assets.settings import Policy
from icelake_assets_tests.planning.test_findings import history

POLICY = Policy()  # max_count 100, max_age_hours 120, min_keep 5, min_age_hours 24


def test_300_fresh_snapshots_are_over_the_count_but_none_may_go():
    stats = history(300, 1.0)  # the demo: 300 snapshots written within the last hour
    decision = decide_expire(stats, POLICY)
    assert not decision.act
    assert (
        "300 snapshots > 100, but none may go yet: 5 of the newest 5 kept, 295 younger than 24 h"
        in decision.reason
    )
    assert decision.signals["expirable_snapshots"] == 0
    now = datetime.fromtimestamp(stats.evaluated_at, UTC)
    assert expire_cutoff(stats, POLICY) == now - timedelta(hours=24)  # not `now`: the minimum age holds


def test_over_the_count_only_what_is_older_than_the_minimum_age_goes():
    stats = history(300, 30.0)  # the oldest 295 are 30 h old (1 ms apart), so all but the newest 5 may go
    decision = decide_expire(stats, POLICY)
    assert decision.act and decision.signals["expirable_snapshots"] == 295
    assert "295 older than 24 h beyond the newest 5 will go" in decision.reason


def test_under_the_count_the_age_limit_decides():
    assert not decide_expire(history(50, 119.0), POLICY).act
    old = decide_expire(history(50, 121.0), POLICY)
    assert (
        old.act and old.signals["expirable_snapshots"] == 45 and old.signals["expire_older_than_hours"] == 120
    )


KB = 1024


def _stats(parts: dict[str, tuple[int, int]], target: int = 128 * 1024 * KB, **kw) -> TableStats:
    """parts: label -> (data files, small files); every file is 3 KB."""
    partitions = {
        label: PartitionStats(label, data_files=n, data_bytes=3 * KB * n, small_files=s, **kw)
        for label, (n, s) in parts.items()
    }
    return TableStats(
        table="ns.t",
        metadata_location="",
        current_snapshot_id=1,
        target_file_size_bytes=target,
        partitions=partitions,
        data_files=sum(p.data_files for p in partitions.values()),
        compaction_candidates=sorted(partitions),
    )


def _policy(**small_files) -> Policy:
    return Policy.model_validate({"small_files": {"max_files_per_partition": 1, **small_files}})


def test_min_input_files_follows_the_smallest_candidate_so_two_small_files_are_rewritten():
    # Issue 11: 2 small files in each of 6 partitions; Iceberg's default min-input-files (5) skipped all.
    stats = _stats({f"r={i}": (2, 2) for i in range(6)})
    rp = plan_rewrite(stats, _policy())
    assert rp.partitions == tuple(f"r={i}" for i in range(6)) and rp.excluded == {}
    assert rp.options["min-input-files"] == "2"
    assert rp.options["partial-progress.enabled"] == "false"  # 6 groups: one commit
    assert decide_rewrite(stats, _policy()).act


def test_the_policy_minimum_stays_when_every_candidate_has_more_small_files():
    rp = plan_rewrite(_stats({"a": (30, 30), "b": (12, 12)}), _policy())
    assert rp.options["min-input-files"] == "5"


def test_a_partition_iceberg_would_skip_is_not_named():
    # 3 files, only 1 small: Iceberg never rewrites a group of one file.
    stats = _stats({"a": (3, 1), "b": (4, 4)})
    rp = plan_rewrite(stats, _policy())
    assert rp.partitions == ("b",) and "a" in rp.excluded and "at least 2" in rp.excluded["a"]
    only_a = _stats({"a": (3, 1)})
    decision = decide_rewrite(only_a, _policy())
    assert not decision.act and "Iceberg would skip" in decision.reason


def test_small_file_limit_selects_exactly_healths_small_files():
    # health: size < target x ratio (float); Iceberg: length < min-file-size-bytes (long)
    stats = _stats({"a": (2, 2)}, target=1000)
    assert small_file_limit(stats, _policy(small_file_ratio=0.7505)) == 751  # sizes 0..750 are small in both
    assert small_file_limit(stats, _policy(small_file_ratio=1.0)) == 999  # Iceberg wants it under the target
    assert plan_rewrite(stats, _policy()).options["min-file-size-bytes"] == "750"


def test_partial_progress_only_past_the_group_or_byte_threshold():
    many = _stats({f"d={i}": (30, 30) for i in range(12)})
    assert plan_rewrite(many, _policy()).options["partial-progress.enabled"] == "true"  # 12 groups > 10
    fewer = _policy(partial_progress_min_groups=12)
    assert plan_rewrite(many, fewer).options["partial-progress.enabled"] == "false"
    big = _policy(partial_progress_min_groups=100, partial_progress_min_bytes=KB)
    assert plan_rewrite(many, big).options["partial-progress.enabled"] == "true"
    off = _policy(partial_progress_enabled=False)
    assert plan_rewrite(many, off).options["partial-progress.enabled"] == "false"


def test_manifests_are_consolidated_after_partial_progress_commits():
    stats = TableStats(
        table="ns.t", metadata_location="", current_snapshot_id=1, target_file_size_bytes=1, manifests=5
    )
    assert not decide_manifests(stats, Policy()).act
    assert not decide_manifests(stats, Policy(), rewrite_commits=1).act
    decision = decide_manifests(stats, Policy(), rewrite_commits=4)
    assert decision.act and "partial progress" in decision.reason
