"""The launch order of a tick: tables waited past the bound first (oldest first), then benefit (then
the finding's age) within the fair share of run time, then the tables over their share; past the free
slots, queued."""

import pytest

from icelake_assets.health.overview import TableBenefit
from icelake_assets.health.score import HealthStatus
from icelake_assets.planning.priority import MAX_PRIORITY, Rule, Usage, age_text, rank_launches, share_group

NOW = 1_800_000_000.0


def benefit(table: str, files: int) -> TableBenefit:
    return TableBenefit(table, HealthStatus.WARNING, 80, files, 0, 0, 0, 1, (), "")


@pytest.mark.parametrize(
    ("wanting", "found_at", "free", "order", "queued"),
    [
        pytest.param([("a", 5), ("b", 50)], {"a": NOW, "b": NOW}, None, ["b", "a"], [], id="benefit first"),
        pytest.param(
            [("a", 5), ("b", 5)],
            {"a": NOW, "b": NOW - 600},
            None,
            ["b", "a"],
            [],
            id="then the older finding",
        ),
        pytest.param(
            [("a", 5), ("b", 50), ("c", 20)],
            {"a": NOW, "b": NOW, "c": NOW},
            1,
            ["b", "c", "a"],
            ["c", "a"],
            id="past the free slots: queued",
        ),
        pytest.param(
            [("a", 5), ("b", 50)], {"a": NOW, "b": NOW}, 0, ["b", "a"], ["b", "a"], id="no slot free"
        ),
        pytest.param(
            [("a", None), ("b", 1)], {"a": NOW, "b": NOW}, None, ["b", "a"], [], id="unknown benefit last"
        ),
    ],
)
def test_rank_launches(wanting, found_at, free, order, queued):
    tables = [(t, None if files is None else benefit(t, files)) for t, files in wanting]
    ranks = rank_launches(tables, found_at, free, NOW)
    assert [r.table for r in ranks] == order
    assert [r.table for r in ranks if r.queued] == queued
    assert [r.rank for r in ranks] == list(range(1, len(order) + 1))
    assert all(r.of == len(order) for r in ranks)


def test_a_rank_says_why_and_caps_dagsters_priority():
    [rank] = rank_launches([("a", benefit("a", 2 * MAX_PRIORITY))], {"a": NOW - 7200}, None, NOW)
    assert rank.priority == MAX_PRIORITY
    assert rank.why == (
        f"priority 1 of 1, by benefit: {2 * MAX_PRIORITY} file opens saved per scan, finding 2.0 h old"
    )


@pytest.mark.parametrize(("seconds", "text"), [(30, "30 s"), (119, "119 s"), (120, "2 min"), (7200, "2.0 h")])
def test_age_text(seconds, text):
    assert age_text(seconds) == text


HOUR = 3600.0
BOUND = 4 * HOUR


def _order(wanting, found_at, free=None, usage=None):
    tables = [(t, benefit(t, files)) for t, files in wanting]
    return rank_launches(tables, found_at, free, NOW, BOUND, usage)


def test_a_table_past_its_wait_bound_launches_before_a_more_beneficial_one():
    ranks = _order([("big", 500), ("small", 5)], {"big": NOW, "small": NOW - 5 * HOUR}, free=1)
    assert [(r.table, r.rule, r.queued) for r in ranks] == [
        ("small", Rule.WAITED, False),
        ("big", Rule.BENEFIT, True),
    ]
    assert ranks[
        0
    ].why == "priority 1 of 2, waited 5.0 h, past the bound of 4.0 h: 5 file opens saved per scan, " + (
        "finding 5.0 h old"
    )
    assert ranks[0].waited_seconds == 5 * HOUR


def test_within_the_bound_benefit_decides_and_past_it_the_oldest_goes_first():
    found = {"a": NOW - 3 * HOUR, "b": NOW, "c": NOW - 6 * HOUR, "d": NOW - 5 * HOUR}
    ranks = _order([("a", 5), ("b", 50), ("c", 1), ("d", 100)], found)
    # c and d waited past 4 h: oldest first, whatever their benefit; a and b by benefit.
    assert [r.table for r in ranks] == ["c", "d", "b", "a"]
    assert [r.rule for r in ranks] == [Rule.WAITED, Rule.WAITED, Rule.BENEFIT, Rule.BENEFIT]


def test_ties_are_broken_by_name_whatever_the_order_given():
    found = {"x": NOW - 5 * HOUR, "y": NOW - 5 * HOUR, "p": NOW, "q": NOW}
    wanting = [("y", 3), ("x", 9), ("q", 7), ("p", 7)]
    for given in (wanting, list(reversed(wanting))):
        assert [r.table for r in _order(given, found)] == ["x", "y", "p", "q"]


def test_a_table_over_its_fair_share_waits_behind_one_under_it():
    # big's runs took 3 h of the last 24 h, small's none: the fair share is 1.5 h each.
    usage = Usage.of(["big", "small"], {"big": 3 * HOUR}, "table", 24 * HOUR)
    assert usage.fair_seconds == 1.5 * HOUR and usage.over("big") and not usage.over("small")
    ranks = _order([("big", 500), ("small", 5)], {"big": NOW, "small": NOW}, free=1, usage=usage)
    assert [(r.table, r.rule, r.queued) for r in ranks] == [
        ("small", Rule.BENEFIT, False),
        ("big", Rule.OVER_SHARE, True),
    ]
    assert "over its fair share (ran 3.0 h of the last 24.0 h, fair share 90 min)" in ranks[1].why
    assert "by benefit (ran 0 s of the last 24.0 h, fair share 90 min)" in ranks[0].why
    # Without the window's usage, benefit alone decides (today's order).
    assert [r.table for r in _order([("big", 500), ("small", 5)], {"big": NOW, "small": NOW})] == [
        "big",
        "small",
    ]


def test_the_wait_bound_overrides_the_fair_share():
    usage = Usage.of(["big", "small"], {"big": 3 * HOUR}, "table", 24 * HOUR)
    ranks = _order([("big", 500), ("small", 5)], {"big": NOW - 5 * HOUR, "small": NOW}, usage=usage)
    assert [(r.table, r.rule) for r in ranks] == [("big", Rule.WAITED), ("small", Rule.BENEFIT)]


def test_a_table_in_flight_counts_in_the_fair_share_of_its_namespace():
    # lake.big.a runs (not wanting), lake.big.b and lake.ns.c want a run: namespace big used it all.
    usage = Usage.of(["lake.big.b", "lake.ns.c"], {"lake.big.a": 60.0}, "namespace", HOUR)
    assert (
        share_group("lake.big.b", "namespace") == "lake.big"
        and share_group("lake.big.b", "table") == "lake.big.b"
    )
    assert usage.over("lake.big.b") and not usage.over("lake.ns.c")
    ranks = _order([("lake.big.b", 500), ("lake.ns.c", 5)], {"lake.big.b": NOW, "lake.ns.c": NOW}, 1, usage)
    assert [r.table for r in ranks if not r.queued] == ["lake.ns.c"]
    # By table, b used nothing itself: its benefit puts it first.
    by_table = Usage.of(["lake.big.b", "lake.ns.c"], {"lake.big.a": 60.0}, "table", HOUR)
    assert not by_table.over("lake.big.b")
