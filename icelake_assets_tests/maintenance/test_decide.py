"""The maintenance sensor's decision rules as a table: metadata, policy and mode in, the outcome, the
ops that would act and the reason out (maintenance/decide.py). No lake, no Spark, no Dagster: each
row runs in microseconds; the sensor's real ticks are tested in orchestration/test_sensors.py."""

from dataclasses import dataclass, replace

import pytest

from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.maintenance.decide import OUTCOMES, Outcome, decide_table
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
