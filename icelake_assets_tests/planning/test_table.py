"""The maintenance sensor's decision rules as a table: metadata, policy and mode in, the outcome, the
ops that would act and the reason out (planning/table.py: decide_table, then plan_table with what the
sensor remembers). No lake, no Spark, no Dagster: each
row runs in microseconds; the sensor's real ticks are tested in orchestration/sensors/test_maintenance.py."""

from dataclasses import dataclass, replace

import pytest

from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.planning.history import History, LastOutcome, Runs
from icelake_assets.planning.relaunch import OUTCOME_SNAPSHOT_TAG, OUTCOME_TAG, POLICY_HASH_TAG, policy_hash
from icelake_assets.planning.table import OUTCOMES, Outcome, decide_table, plan_table
from icelake_assets.settings import Policy
from icelake_assets_tests.planning.test_findings import history, stats

KIB, MIB = 1024, 1024 * 1024


@dataclass(frozen=True)
class Orphan:
    path: str
    size: int


def small_files(files: int = 25, size: int = KIB, **values) -> TableStats:
    """One partition of ``files`` small files: a compaction candidate over 20 files."""
    part = PartitionStats("p=1", data_files=files, data_bytes=files * size, records=files, small_files=files)
    return stats(
        data_files=files,
        data_bytes=files * size,
        small_files=files,
        partitions={"p=1": part},
        compaction_candidates=["p=1"] if files > 20 else [],
        **values,
    )


QUIET = Policy().model_copy(
    update={"guards": Policy().guards.model_copy(update={"quiet_period_minutes": 15})}
)
CAPPED = Policy().model_copy(update={"guards": Policy().guards.model_copy(update={"max_rewrite_bytes": MIB})})
ORPHANS = [Orphan(f"data/o{i}.parquet", 100) for i in range(3)]


def row(case: str, *values):
    return pytest.param(*values, id=case)


@pytest.mark.parametrize(
    ("table", "policy", "mode", "orphans", "outcome", "acting", "reason"),
    [
        row(
            "healthy",
            small_files(4),
            Policy(),
            "enforce",
            None,
            Outcome.SKIPPED,
            (),
            "no partition has > 20 files",
        ),
        row(
            "small files",
            small_files(),
            Policy(),
            "enforce",
            None,
            Outcome.LAUNCHED,
            ("rewrite_data_files",),
            "",
        ),
        row(
            "proposed",
            small_files(),
            Policy(),
            "propose",
            None,
            Outcome.PROPOSED,
            ("rewrite_data_files",),
            "",
        ),
        row(
            "observed",
            small_files(),
            Policy(),
            "observe",
            None,
            Outcome.OBSERVED,
            ("rewrite_data_files",),
            "",
        ),
        row(
            "writer active",
            small_files(recent_writer_commits=3, last_writer_commit_age_minutes=2.0),
            QUIET,
            "enforce",
            None,
            Outcome.DEFERRED,
            ("rewrite_data_files",),
            "quiet period of 15 min",
        ),
        row(
            "over the cost cap",
            small_files(size=100 * KIB),
            CAPPED,
            "enforce",
            None,
            Outcome.HELD,
            ("rewrite_data_files",),
            "",
        ),
        row(
            "orphans",
            small_files(4),
            Policy(),
            "enforce",
            ORPHANS,
            Outcome.LAUNCHED,
            ("remove_orphan_files",),
            "",
        ),
        row(
            "old snapshots",
            replace(history(300, 30.0), data_files=4),
            Policy(),
            "enforce",
            None,
            Outcome.LAUNCHED,
            ("expire_snapshots",),
            "",
        ),
        row("fresh snapshots", history(300, 1.0), Policy(), "enforce", None, Outcome.SKIPPED, (), ""),
    ],
)
def test_the_sensors_decision(table, policy, mode, orphans, outcome, acting, reason):
    decided = decide_table(table, policy, mode, orphans)
    assert decided.outcome is outcome, decided.verdict
    assert decided.acting == acting, [(d.op, d.reason) for d in decided.decisions]
    assert reason in decided.verdict.reason
    assert decided.outcome in OUTCOMES and decided.outcome == outcome.value  # the word the audit shows
    assert decided.awaiting_approval == (outcome in (Outcome.HELD, Outcome.PROPOSED))


def test_without_a_listing_of_storage_the_orphan_op_is_not_decided():
    assert "remove_orphan_files" not in [
        d.op for d in decide_table(small_files(), Policy(), "enforce").decisions
    ]


NOW = 1_800_000_000.0
INEFFECTIVE = {
    OUTCOME_TAG: "ineffective",
    OUTCOME_SNAPSHOT_TAG: "1",  # the table's current snapshot (test_findings.stats)
    POLICY_HASH_TAG: policy_hash(Policy()),
}


def last(tags: dict[str, str], hours_ago: float):
    return lambda: LastOutcome(tags, NOW - hours_ago * 3600)


@pytest.mark.parametrize(
    ("table", "mode", "history", "outcome", "record", "reason"),
    [
        row("launched", small_files(), "enforce", History(), Outcome.LAUNCHED, "launched", "25 files"),
        row("observed: not recorded", small_files(), "observe", History(), Outcome.OBSERVED, None, ""),
        row("healthy", small_files(4), "enforce", History(), Outcome.SKIPPED, "skipped", "no partition"),
        row(
            "ineffective last run, same table and policy",
            small_files(),
            "enforce",
            History(last_outcome=last(INEFFECTIVE, 1.0)),
            Outcome.BACKOFF,
            "skipped",
            "left its findings failing (ineffective)",
        ),
        row(
            "ineffective last run, backoff over",
            small_files(),
            "enforce",
            History(last_outcome=last(INEFFECTIVE, 1000.0)),
            Outcome.LAUNCHED,
            "launched",
            "",
        ),
        row(
            "effective last run",
            small_files(),
            "enforce",
            History(last_outcome=last({**INEFFECTIVE, OUTCOME_TAG: "effective"}, 1.0)),
            Outcome.LAUNCHED,
            "launched",
            "",
        ),
        row(
            "a run in flight",
            small_files(),
            "enforce",
            History(runs=Runs(in_flight="run abc")),
            Outcome.IN_FLIGHT,
            "deferred",
            "already queued or running (run abc)",
        ),
        row(
            "failed runs, backoff not over",
            small_files(),
            "enforce",
            History(runs=Runs(failures_in_a_row=2, retry_at=NOW + 60, failure_reason="boom")),
            Outcome.BACKOFF,
            "deferred",
            "the last 2 maintenance run(s) failed; retrying after",
        ),
        row(
            "failed runs, backoff over",
            small_files(),
            "enforce",
            History(runs=Runs(failures_in_a_row=2, retry_at=NOW - 60)),
            Outcome.LAUNCHED,
            "launched",
            "",
        ),
        row(
            "in flight but not launching: the run model does not matter",
            small_files(4),
            "enforce",
            History(runs=Runs(in_flight="run abc")),
            Outcome.SKIPPED,
            "skipped",
            "",
        ),
        row(
            "proposed: no run, so no run guard",
            small_files(),
            "propose",
            History(runs=Runs(in_flight="run abc")),
            Outcome.PROPOSED,
            "proposed",
            "",
        ),
    ],
)
def test_plan_table(table, mode, history, outcome, record, reason):
    plan = plan_table(table, Policy(), history, NOW, mode=mode, name="lake.ns.t")
    assert plan.outcome is outcome, plan.reason
    assert plan.record == record
    assert reason in plan.reason
    assert plan.priority.table == "lake.ns.t"


def test_the_last_outcome_run_is_looked_up_only_for_a_table_that_would_launch():
    asked = []

    def lookup():
        asked.append(1)
        return None

    plan_table(small_files(4), Policy(), History(last_outcome=lookup), NOW, mode="enforce")
    plan_table(small_files(), Policy(), History(last_outcome=lookup), NOW, mode="propose")
    assert asked == []
    plan_table(small_files(), Policy(), History(last_outcome=lookup), NOW, mode="enforce")
    assert asked == [1]


def test_the_last_outcome_run_is_not_looked_up_when_no_run_of_the_table_ended_within_the_backoff():
    """What the sensor reads of the outcome run lapses after the backoff (24 h by default): a table
    none of whose runs ended since (the run model says so) launches without a query of the instance;
    one whose run ended within it is looked up, and held when that run was ineffective."""
    asked = []

    def lookup():
        asked.append(1)
        return last(INEFFECTIVE, 1.0)()

    quiet = History(last_outcome=lookup, quiet_since=NOW - 25 * 3600)
    assert plan_table(small_files(), Policy(), quiet, NOW, mode="enforce").outcome is Outcome.LAUNCHED
    assert asked == []
    recent = History(last_outcome=lookup, quiet_since=NOW - 3600)
    assert plan_table(small_files(), Policy(), recent, NOW, mode="enforce").outcome is Outcome.BACKOFF
    assert asked == [1]
    # A backoff longer than the run model's window: looked up whatever the run model read.
    long = Policy().model_copy(
        update={"loop": Policy().loop.model_copy(update={"relaunch_backoff_hours": 48})}
    )
    plan_table(small_files(), long, quiet, NOW, mode="enforce")
    assert asked == [1, 1]


def test_pending_orphans_and_the_benefit_come_with_the_plan():
    plan = plan_table(small_files(4), Policy(), History(), NOW, mode="enforce", orphans=ORPHANS)
    assert plan.outcome is Outcome.LAUNCHED and plan.orphans_pending
    assert plan_table(small_files(), Policy(), History(), NOW, mode="enforce").priority.benefit > 0
