"""Every finding has its op: each check names the ops that heal it, and a failing finding either
drives one of those ops' decisions or says why none will act (issue 39)."""

from datetime import UTC, datetime

import pytest

from icelake_assets.health.data_retention import LastExpiry, RetentionFacts
from icelake_assets.health.findings import CHECKS, Finding
from icelake_assets.health.statistics import StatisticsFacts
from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning.health import metadata_findings
from icelake_assets.planning.op_plans import OP_PLANS, DecisionInputs, healers, op_plan
from icelake_assets.planning.orphans import orphan_finding
from icelake_assets.settings import Policy
from icelake_assets_tests.planning.test_findings import _candidate, history, stats

POLICY = Policy()


class _File:
    size = 10


def failing(check: str) -> TableStats:
    """A table whose ``check`` fails (each builder as the check's own boundary tests build it)."""
    if check == "small_files":
        return _candidate(30)
    if check == "snapshot_retention":
        return history(300, 30.0)
    if check == "manifest_fragmentation":
        return stats(manifests=120)
    if check == "delete_files":
        part = PartitionStats("p=1", data_files=10, data_bytes=10 * 1024, records=1000, delete_files=8)
        return stats(
            data_files=10,
            records=1000,
            position_delete_files=8,
            position_delete_records=300,
            partitions={"p=1": part},
        )
    if check == "layout_drift":
        part = PartitionStats("p=1", data_files=4, data_bytes=4 << 20, records=400, old_spec_files=2)
        return stats(
            data_files=4, old_spec_files=2, drift_files=2, default_spec_id=1, partitions={"p=1": part}
        )
    if check == "statistics":
        facts = StatisticsFacts(current_rows=50_000, columns=((1, "id"),), key_columns=("id",))
        return stats(records=50_000, data_files=1, statistics=facts)
    if check == "data_retention":
        facts = RetentionFacts(
            "ts", 7.0, "now", kind="timestamp", cutoff="2024-01-01T00:00:00+00:00", cutoff_key=0,
            expired_files=2, expired_rows=100, expired_bytes=2048, data_files=4,
            last=LastExpiry(1, datetime(2024, 1, 1, tzinfo=UTC)),
        )  # fmt: skip
        return stats(data_files=4, records=200, data_retention=facts)
    raise AssertionError(check)


def finding_of(check: str, policy: Policy) -> tuple[Finding, DecisionInputs]:
    if check == "orphan_files":
        files = [_File() for _ in range(policy.orphans.max_count + 3)]
        inputs = DecisionInputs(stats(), policy, orphans=files)
        return orphan_finding(len(files), 10 * len(files), policy), inputs
    s = failing(check)
    [finding] = [f for f in metadata_findings(s, policy) if f.check == check]
    return finding, DecisionInputs(s, policy)


def test_the_chain_of_op_plans_and_what_each_heals():
    assert [p.name for p in OP_PLANS] == [
        "manage_restore_points",
        "expire_data",
        "expire_snapshots",
        "remove_orphan_files",
        "rewrite_data_files",
        "rewrite_manifests",
        "compute_statistics",
    ]
    assert {c: healers(c) for c in CHECKS} == {
        "small_files": ("rewrite_data_files",),
        "snapshot_retention": ("expire_snapshots",),
        "manifest_fragmentation": ("rewrite_manifests",),
        "delete_files": ("rewrite_data_files",),
        "layout_drift": ("rewrite_data_files",),
        "statistics": ("compute_statistics",),
        "orphan_files": ("remove_orphan_files",),
        "data_retention": ("expire_data",),
    }


@pytest.mark.parametrize("check", CHECKS)
def test_every_failing_check_drives_the_op_that_heals_it(check):
    finding, inputs = finding_of(check, POLICY)
    assert not finding.passed, finding.summary
    decisions = [op_plan(name).decide(inputs) for name in healers(check)]
    assert any(d is not None and d.act for d in decisions), (check, [d.reason for d in decisions if d])
    assert "no op will act" not in finding.recommendation


@pytest.mark.parametrize("check", [c for c in CHECKS if c != "orphan_files"])
def test_a_failing_check_whose_ops_are_disabled_says_why_nothing_acts(check):
    """Configuration only the table's owner can change: the finding names it instead of failing on."""
    ops = [name for name in (p.name for p in OP_PLANS) if name not in healers(check)]
    policy = Policy.model_validate({"operations": {"enabled": ops}})
    finding, inputs = finding_of(check, policy)
    assert not finding.passed
    assert "no op will act" in finding.recommendation and "disabled by policy" in finding.recommendation
    assert not any(d.act for name in healers(check) if (d := op_plan(name).decide(inputs)) is not None)
