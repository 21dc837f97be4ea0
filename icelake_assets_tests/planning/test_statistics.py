"""The statistics finding and the compute_statistics decision: one plan, one threshold each."""

import pytest

from icelake_assets.health.findings import Severity
from icelake_assets.health.statistics import StatisticsFacts
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.history import History, LastOutcome
from icelake_assets.planning.outcome import Outcome
from icelake_assets.planning.relaunch import OUTCOME_SNAPSHOT_TAG, POLICY_HASH_TAG, policy_hash
from icelake_assets.planning.statistics import (
    decide_statistics,
    evaluate,
    plan_statistics,
    refused_tag,
    selected_columns,
    statistics_finding,
    statistics_refusal,
)
from icelake_assets.planning.table import decide_table, plan_table
from icelake_assets.settings import Policy

COLUMNS = ((1, "id"), (2, "ts"), (3, "user_id"), (4, "page"))
POLICY = Policy()
NOW = 1_800_000_000.0


def table(rows: int = 20_000, **facts) -> TableStats:
    defaults = {"current_rows": rows, "columns": COLUMNS, "key_columns": ("ts",), "partitioned": True}
    return TableStats(
        table="ns.t",
        metadata_location="m.json",
        current_snapshot_id=9,
        target_file_size_bytes=128 * 1_048_576,
        records=rows,
        statistics=StatisticsFacts(**{**defaults, **facts}),
    )


def sketched(rows_at: int, behind: int = 0, ids=(1, 2, 3, 4), **facts) -> dict:
    return dict(
        snapshot_id=7,
        path="s.stats",
        ndv={i: 10 * i for i in ids},
        rows_at=rows_at,
        commits_behind=behind,
        **facts,
    )


def policy(**statistics) -> Policy:
    return Policy.model_validate({"statistics": statistics})


def test_a_table_without_statistics_warns_and_the_op_acts_on_the_same_numbers():
    s = table()
    finding, decision = evaluate(s, POLICY).finding, evaluate(s, POLICY).decision
    assert finding.severity is Severity.WARN and "no statistics for the current snapshot" in finding.summary
    assert finding.recommendation == "run compute_table_stats on 4 columns and compute_partition_stats"
    assert finding.metrics["columns_selected"] == 4 and finding.metrics["columns_with_ndv"] == 0
    assert [r["ndv"] for r in finding.rows] == ["none"] * 4
    assert decision is not None and decision.act and decision.op == "compute_statistics"


def test_a_small_table_needs_no_statistics():
    s = table(rows=9_999)
    assert statistics_finding(s, POLICY).passed
    assert "not needed (9999 rows < 10000)" in statistics_finding(s, POLICY).summary
    assert not decide_statistics(s, POLICY).act
    assert decide_statistics(s, policy(min_rows=0)).act


@pytest.mark.parametrize(
    ("rows_at", "behind", "severity"),
    [
        (20_000, 0, Severity.OK),  # the current snapshot's own
        (18_200, 3, Severity.OK),  # an ancestor's, rows within 10 %
        (18_000, 3, Severity.WARN),  # 11.1 % more rows since
        (2_000, 9, Severity.WARN),  # far more, still a WARN: statistics are a hint
    ],
)
def test_statistics_go_stale_when_the_rows_move_past_the_ratio(rows_at, behind, severity):
    s = table(**sketched(rows_at, behind))
    finding = statistics_finding(s, POLICY)
    assert finding.severity is severity
    assert decide_statistics(s, POLICY).act is (severity is not Severity.OK)
    if severity is Severity.WARN:
        assert f"computed {behind} commits ago on {rows_at} rows, now 20000" in finding.summary


def test_a_selected_column_without_a_sketch_fails_and_listed_unknown_columns_are_named():
    s = table(**sketched(20_000, ids=(1, 2, 3)))
    finding = statistics_finding(s, POLICY)
    assert not finding.passed and "1 selected columns without an NDV sketch (page)" in finding.summary
    listed = policy(columns=["id", "nope"])
    assert selected_columns(s, listed) == (("id",), "listed", ("nope",))
    assert statistics_finding(s, listed).passed  # only id is selected, and sketched
    assert "listed columns the table lacks: nope" in statistics_finding(s, listed).summary


def test_keys_are_the_sort_and_partition_sources_or_every_column_without_them():
    assert selected_columns(table(), policy(columns="keys"))[0] == ("ts",)
    assert selected_columns(table(key_columns=()), policy(columns="keys"))[0] == (
        "id",
        "ts",
        "user_id",
        "page",
    )
    assert plan_statistics(table(**sketched(20_000, ids=(2,))), policy(columns="keys")).problems == ()


def test_after_a_rewrite_statistics_follow_the_new_current_snapshot():
    """Rows unchanged (the finding passes) but the statistics are an ancestor's: Spark would not use them."""
    s = table(**sketched(20_000, behind=1))
    assert statistics_finding(s, POLICY).passed and not decide_statistics(s, POLICY).act
    d = decide_statistics(s, POLICY, rewrite_commits=1)
    assert d.act and "statistics follow the current snapshot" in d.reason
    assert not decide_statistics(table(**sketched(20_000)), POLICY, rewrite_commits=1).act


def test_a_disabled_op_never_acts_and_the_table_plan_previews_the_columns():
    off = Policy.model_validate({"operations": {"enabled": ["expire_snapshots"]}})
    assert not decide_statistics(table(), off).act
    decided = decide_table(table(), POLICY, "enforce")
    assert decided.acting == ("compute_statistics",)
    assert decided.statistics is not None and decided.statistics.columns == ("id", "ts", "user_id", "page")


def test_a_store_that_refused_the_statistics_file_is_a_stated_reason_not_a_warning_every_tick():
    """The last run's statistics file was refused (403): while the refusal holds the op waits, the table
    is skipped with the store's answer as its reason and the finding states it (OK) instead of warning;
    a new policy or the backoff lets the product try again. A new snapshot does not: the store refuses
    the file, whatever the rows."""
    cause = "AmazonS3Exception: Forbidden (Service: Amazon S3; Status Code: 403) (in UncheckedIOException)"
    tags = {POLICY_HASH_TAG: policy_hash(POLICY), OUTCOME_SNAPSHOT_TAG: "3", **refused_tag(cause)}
    s = table()  # 20 000 rows, no statistics: the finding fails and the op alone would launch
    assert decide_table(s, POLICY, "enforce").acting == ("compute_statistics",)

    refused = statistics_refusal(tags, POLICY, age_hours=2.0)
    assert refused is not None and refused.cause == cause and refused.hours_left == 22.0
    finding = evaluate(s, POLICY, refused).finding
    assert finding.severity is Severity.OK and finding.metrics["statistics_refused"] == 1
    assert f"the store refused the statistics file: {cause}" in finding.summary
    assert "will not retry until the policy changes or in 22.0 h" in finding.summary
    decision = decide_statistics(s, POLICY, refused=refused)
    assert not decision.act and decision.reason == refused.reason

    def plan(last_tags, hours_ago, pol=POLICY):
        return plan_table(
            s,
            pol,
            History(last_outcome=lambda: LastOutcome(last_tags, NOW - hours_ago * 3600)),
            NOW,
            mode="enforce",
        )

    held = plan(tags, 2.0)
    assert held.outcome is Outcome.SKIPPED and held.record == "skipped"
    assert "the store refused the statistics file: AmazonS3Exception: Forbidden" in held.reason
    assert not any(d.act for d in held.decisions)
    # The backoff passed, the policy changed, or the last run recorded no refusal: computed again.
    assert plan(tags, 25.0).outcome is Outcome.LAUNCHED
    assert plan(tags, 2.0, policy(min_rows=5_000)).outcome is Outcome.LAUNCHED
    assert plan({POLICY_HASH_TAG: policy_hash(POLICY)}, 2.0).outcome is Outcome.LAUNCHED
    # Statistics that would only follow a rewrite (an ancestor's) wait while refused too.
    rewritten = table(**sketched(20_000, behind=1))
    assert not decide_statistics(rewritten, POLICY, rewrite_commits=1, refused=refused).act
