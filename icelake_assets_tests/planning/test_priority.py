"""The launch order of a tick: benefit first, then the finding's age; past the free slots, queued."""

import pytest

from icelake_assets.health.overview import TableBenefit
from icelake_assets.health.score import HealthStatus
from icelake_assets.planning.priority import MAX_PRIORITY, age_text, rank_launches

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
    assert rank.why == f"priority 1 of 1: {2 * MAX_PRIORITY} file opens saved per scan, finding 2.0 h old"


@pytest.mark.parametrize(("seconds", "text"), [(30, "30 s"), (119, "119 s"), (120, "2 min"), (7200, "2.0 h")])
def test_age_text(seconds, text):
    assert age_text(seconds) == text
