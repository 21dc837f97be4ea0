"""The op descriptors (maintenance/ops/chain.py): one per op, in chain order, each naming its
decision, work, result, effect check and run inputs; docs/loop.md shows the same chain."""

from pathlib import Path

import pytest

from icelake_assets.health.findings import CHECKS
from icelake_assets.maintenance.ops import expire_data, restore_points, rewrite, runner, statistics
from icelake_assets.maintenance.ops.chain import (
    MAINTENANCE_OPS,
    REWRITING_OPS,
    chain_markdown,
    judge_effects,
    op_named,
)
from icelake_assets.maintenance.results.codec import RESULT_CLASSES
from icelake_assets.maintenance.results.models import ExpireResult, RewriteResult
from icelake_assets.planning.op_plans import OP_PLANS, healers

DOCS = Path(__file__).resolve().parents[3] / "docs" / "loop.md"


def test_the_descriptors_in_chain_order():
    listed = [(o.name, o.alias, o.result.__name__, o.work, o.inputs, o.rewrites) for o in MAINTENANCE_OPS]
    assert listed == [
        (
            "manage_restore_points",
            "restore",
            "RestorePointResult",
            restore_points.manage_restore_points,
            ("run_id",),
            False,
        ),
        ("expire_data", "expire_data", "ExpireDataResult", expire_data.expire_data, ("approval",), False),
        ("expire_snapshots", "expire", "ExpireResult", runner.expire_snapshots, (), False),
        (
            "remove_orphan_files",
            "orphans",
            "OrphanResult",
            runner.remove_orphan_files,
            ("orphan_scan", "orphan_candidates"),
            False,
        ),
        (
            "rewrite_data_files",
            "rewrite",
            "RewriteResult",
            rewrite.rewrite_data_files,
            ("partition_scope",),
            True,
        ),
        (
            "rewrite_manifests",
            "manifests",
            "ManifestResult",
            runner.rewrite_manifests,
            ("data_commits",),
            True,
        ),
        (
            "compute_statistics",
            "statistics",
            "StatisticsResult",
            statistics.compute_statistics,
            ("rewritten_snapshots",),
            False,
        ),
    ]
    assert [o.plan for o in MAINTENANCE_OPS] == list(OP_PLANS)
    assert REWRITING_OPS == ("rewrite_data_files", "rewrite_manifests")
    # Each result class names its op, and the codec knows every one.
    assert all(o.result.op == o.name and RESULT_CLASSES[o.name] is o.result for o in MAINTENANCE_OPS)


def test_every_check_is_healed_by_an_op_of_the_chain():
    for check in CHECKS:
        assert healers(check), check
        assert all(check in op_named(name).heals for name in healers(check))


def test_a_result_is_judged_by_its_own_ops_check_and_no_other():
    expired = ExpireResult(acted=False, reason="below")
    assert judge_effects([expired], None, None) == []  # type: ignore[arg-type]  # nothing acted: nothing judged
    with pytest.raises(ValueError, match="not rewrite_data_files"):
        op_named("rewrite_data_files").own(expired)
    assert op_named("rewrite_data_files").find([expired, RewriteResult(acted=False, reason="x")]) is not None
    with pytest.raises(KeyError, match="unknown maintenance op 'vacuum'"):
        op_named("vacuum")


def test_docs_loop_shows_the_chain_as_declared():
    text = DOCS.read_text()
    start = text.index("<!-- chain:start")
    shown = text[text.index("\n", start) + 1 : text.index("<!-- chain:end -->")].rstrip("\n")
    assert shown == chain_markdown(), "docs/loop.md's chain table: regenerate it from chain_markdown()"
