"""Modes: what a sensor tick does per mode and scope; disabled operations never act."""

import pytest

from icelake_assets.catalog.connection import TableRef
from icelake_assets.planning.manifests import decide_manifests
from icelake_assets.planning.op_plans import OP_PLANS
from icelake_assets.planning.orphans import decide_orphans
from icelake_assets.planning.rewrite import decide_rewrite, rewrite_options
from icelake_assets.planning.snapshots import decide_expire
from icelake_assets.planning.statistics import decide_statistics
from icelake_assets.policies import (
    decide_action,
    policy_for,
)
from icelake_assets.settings import (
    OPERATIONS,
)
from icelake_assets_tests.policies.conftest import TRIPS, settings


@pytest.mark.parametrize(
    "mode, wants, action",
    [
        ("observe", True, "nothing"),
        ("observe", False, "nothing"),
        ("propose", True, "record"),
        ("propose", False, "nothing"),
        ("enforce", True, "launch"),
        ("enforce", False, "nothing"),
    ],
)
def test_each_mode_decides_what_a_sensor_tick_does(mode, wants, action):
    assert decide_action(mode, wants) == action


def test_decide_action_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="unknown mode 'run': expected 'observe', 'propose' or 'enforce'"):
        decide_action("run", True)  # type: ignore[arg-type]


def test_modes_per_scope_drive_decide_action():
    s = settings(
        {"policies": {"catalogs": {"c1": {"mode": "observe"}}, "namespaces": {"taxi": {"mode": "enforce"}}}}
    )
    assert decide_action(policy_for(s, TableRef.parse("c1.events.clicks")).mode, True) == "nothing"
    assert decide_action(policy_for(s, TRIPS).mode, True) == "launch"
    assert (
        decide_action(policy_for(s, TableRef.parse("c2.events.clicks")).mode, True) == "record"
    )  # unconfigured: propose


def test_disabled_operations_never_act_and_rewrite_options_follow_the_policy():
    from icelake_assets.health.stats import TableStats

    s = settings(
        {
            "thresholds": {
                "manifests": {"max_count": 1},
                "operations": {"enabled": ["expire_snapshots"]},
                "small_files": {"partial_progress_enabled": False, "partial_progress_max_commits": 3},
            }
        }
    )
    policy = policy_for(s, TRIPS)
    stats = TableStats(
        table=str(TRIPS),
        metadata_location="",
        current_snapshot_id=None,
        target_file_size_bytes=1024,
        manifests=5,
    )
    # operations.enabled names exactly the ops plan decides on, in run order (the chain's).
    assert tuple(p.name for p in OP_PLANS) == OPERATIONS
    ops = [
        decide_expire(stats, policy).op,
        decide_orphans(0, 0, policy).op,
        decide_rewrite(stats, policy).op,
        decide_manifests(stats, policy).op,
        decide_statistics(stats, policy).op,
    ]
    assert ops == [o for o in OPERATIONS if o in ops]
    decision = decide_manifests(stats, policy)
    assert not decision.act and "disabled by policy (operations.enabled: expire_snapshots)" in decision.reason
    assert decide_manifests(
        stats, policy_for(settings({"thresholds": {"manifests": {"max_count": 1}}}), TRIPS)
    ).act
    opts = rewrite_options(stats, policy)
    assert opts["partial-progress.enabled"] == "false" and opts["partial-progress.max-commits"] == "3"
    assert opts["max-concurrent-file-group-rewrites"] == "1"
