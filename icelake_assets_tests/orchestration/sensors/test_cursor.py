"""The maintenance sensor's cursor: readable on the sensor's page, parsed back exactly (to the
millisecond), and the JSON cursor of earlier versions still read (an upgrade keeps a running sensor's
state instead of crashing it or evaluating every table again)."""

import json
from dataclasses import replace

from icelake_assets.health.overview import TableBenefit
from icelake_assets.health.score import HealthStatus
from icelake_assets.orchestration.sensors.cursor import HEAD, TickCursor
from icelake_assets.planning.history import Seen, finding_since
from icelake_assets.planning.outcome import Outcome
from icelake_assets.planning.priority import rank_launches

T0 = 1_764_000_000.0  # 2025-11-24T16:00:00Z


def _cursor() -> TickCursor:
    return TickCursor(
        offset=2,
        seen={
            "lake.demo.taxi.trips": Seen("00012-3f2a.metadata.json", Outcome.LAUNCHED, T0, None),
            "lake.ns.o'brien": Seen("00004-9b1c.metadata.json", Outcome.DEFERRED, T0 + 0.7, T0 - 300),
            "lake.ns.tab\there": Seen("", Outcome.ERROR, T0),  # an error entry: no since
        },
    )


def test_the_cursor_reads_as_a_head_line_and_one_line_per_table():
    text = _cursor().dumps()
    lines = text.split("\n")
    assert lines[0] == f"{HEAD}\tnext table #3\t3 tables: 1 deferred, 1 error, 1 launched"
    assert lines[1] == (
        "lake.demo.taxi.trips\tlaunched\t00012-3f2a.metadata.json\tscanned 2025-11-24T16:00:00Z\t-"
    )
    assert lines[2].endswith("\tsince 2025-11-24T15:55:00Z")
    assert lines[3].startswith('"lake.ns.tab\\there"\terror\t-\t')  # quoted: it holds a tab
    assert not text.lstrip().startswith("{")  # not the raw JSON the sensor page used to show


def test_the_cursor_parses_back_to_the_millisecond():
    cursor = TickCursor.loads(_cursor().dumps())
    assert cursor.offset == 2
    assert cursor.seen == {
        "lake.demo.taxi.trips": Seen("00012-3f2a.metadata.json", Outcome.LAUNCHED, T0, None),
        "lake.ns.o'brien": Seen("00004-9b1c.metadata.json", Outcome.DEFERRED, T0 + 0.7, T0 - 300),
        "lake.ns.tab\there": Seen("", Outcome.ERROR, T0, None),
    }
    assert TickCursor.loads(cursor.dumps()).seen == cursor.seen
    empty = TickCursor().dumps()
    assert empty == f"{HEAD}\tnext table #1\t0 tables: none seen yet"
    assert TickCursor.loads(empty) == TickCursor()


def test_two_findings_first_seen_within_a_second_keep_their_order_through_the_cursor():
    """Two ticks 0.6 s apart each find a table wanting a run, with equal benefits: once the cursor is
    written and read back, the older finding still goes first (to the second, both read the same
    time and the name decided: CI saw ``aaa`` overtake ``old``)."""
    benefit = TableBenefit("", HealthStatus.WARNING, 80, 50, 0, 0, 0, 1, (), "")
    seen = {
        "lake.ns.old": Seen("m1", Outcome.QUEUED_BY_PRIORITY, T0, T0 + 0.3),
        "lake.ns.aaa": Seen("m2", Outcome.QUEUED_BY_PRIORITY, T0, T0 + 0.9),
    }
    read = TickCursor.loads(TickCursor(0, seen).dumps()).seen
    now = T0 + 5
    found_at = {t: finding_since(read[t], now) for t in read}
    assert found_at == {"lake.ns.old": T0 + 0.3, "lake.ns.aaa": T0 + 0.9}
    ranks = rank_launches([(t, replace(benefit, table=t)) for t in sorted(read)], found_at, None, now)
    assert [r.table for r in ranks] == ["lake.ns.old", "lake.ns.aaa"]


def test_the_json_cursor_of_earlier_versions_is_still_read():
    old = json.dumps(
        {
            "offset": 5,
            "seen": {
                "lake.ns.a": ["00001-a.metadata.json", "skipped", T0, None],
                "lake.ns.b": ["00002-b.metadata.json", "error", T0],
                "lake.ns.c": ["00003-c.metadata.json", "launched"],  # the first version: two fields
            },
        },
        separators=(",", ":"),
    )
    cursor = TickCursor.loads(old)
    assert cursor.offset == 5
    assert cursor.seen["lake.ns.a"] == Seen("00001-a.metadata.json", Outcome.SKIPPED, T0, None)
    assert cursor.seen["lake.ns.b"] == Seen("00002-b.metadata.json", Outcome.ERROR, T0, None)
    assert cursor.seen["lake.ns.c"] == Seen("00003-c.metadata.json", Outcome.LAUNCHED, None, None)
    # The next tick writes the new form, which reads back the same.
    assert TickCursor.loads(cursor.dumps()).seen["lake.ns.a"] == cursor.seen["lake.ns.a"]


def test_a_text_cursor_written_before_the_typed_entries_still_loads():
    """A cursor string as the sensor wrote it when its entries were lists read by position."""
    old = (
        "icelake/v2\tnext table #2\t2 tables: 1 deferred, 1 launched\n"
        "demo.taxi.trips\tlaunched\t00012-3f2a.metadata.json\tscanned 2026-11-24T18:00:00Z\t-\n"
        "demo.sales.orders\tdeferred\t00004-9b1c.metadata.json\tscanned 2026-11-24T18:00:00Z\t"
        "since 2026-11-24T17:55:00Z"
    )
    cursor = TickCursor.loads(old)
    t = 1_795_543_200.0  # 2026-11-24T18:00:00Z
    assert cursor.offset == 1
    assert cursor.seen == {
        "demo.taxi.trips": Seen("00012-3f2a.metadata.json", Outcome.LAUNCHED, t, None),
        "demo.sales.orders": Seen("00004-9b1c.metadata.json", Outcome.DEFERRED, t, t - 300),
    }
    assert cursor.dumps() == old  # and it is written back unchanged


def test_an_unreadable_cursor_costs_one_full_evaluation_not_a_crash():
    for text in ("garbage", f"{HEAD}\tnext table #x", f"{HEAD}\tnext table #1\n\tonly\ttwo", "{not json"):
        assert TickCursor.loads(text) == TickCursor()
