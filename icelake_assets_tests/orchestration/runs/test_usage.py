"""The maintenance run time per table in the fair-share window (orchestration/runs/usage.py), and the
lag per table the loop's gauges export (orchestration/sensors/loop_metrics.table_lags)."""

from datetime import UTC, datetime

import pytest
from dagster import DagsterEventType, DagsterRunStatus, instance_for_test

from icelake_assets.audit.loop_state import TableLag
from icelake_assets.orchestration.runs.usage import run_seconds
from icelake_assets.orchestration.sensors.loop_metrics import table_lags
from icelake_assets.planning.history import Seen
from icelake_assets.planning.outcome import Outcome
from icelake_assets_tests.orchestration.sensors.test_loop_metrics import (
    KEYS,
    NAMES,
    POOLS,
    USERS,
    _event,
    _finished,
    _run,
)

HOUR = 3600.0


def test_run_time_in_the_window_clipped_split_and_running_so_far(monkeypatch):
    with instance_for_test() as instance:
        t0 = datetime.now(UTC).timestamp()
        _finished(instance, [KEYS["a"]], t0 - 2 * HOUR, 1800)  # in the window: 30 min
        _finished(instance, [KEYS["a"]], t0 - 30 * HOUR, 3 * HOUR)  # ended before the window: nothing
        _finished(instance, [KEYS["b"]], t0 - 25 * HOUR, 2 * HOUR)  # the last hour of it counts
        _finished(instance, [KEYS["b"], KEYS["c"]], t0 - HOUR, 600, DagsterEventType.RUN_FAILURE)  # split
        running = _run(instance, DagsterRunStatus.NOT_STARTED, KEYS["d"])
        _event(instance, running, DagsterEventType.RUN_START, t0 - 900)  # in progress: 15 min so far
        _run(instance, DagsterRunStatus.QUEUED, KEYS["c"])  # never started: no run time
        user = _run(instance, DagsterRunStatus.NOT_STARTED, USERS)  # not the loop's
        _event(instance, user, DagsterEventType.RUN_START, t0 - HOUR)

        queries = []
        real = instance.get_run_records
        monkeypatch.setattr(
            instance, "get_run_records", lambda *a, **kw: queries.append(kw) or real(*a, **kw)
        )
        used = run_seconds(instance, POOLS, NAMES, t0, 24 * HOUR)
        assert len(queries) == 2 and all(q.get("limit") for q in queries)  # two bounded queries
        assert used == {
            "lake.ns.a": pytest.approx(1800, abs=1),
            "lake.ns.b": pytest.approx(HOUR + 300, abs=1),
            "lake.ns.c": pytest.approx(300, abs=1),
            "lake.ns.d": pytest.approx(900, abs=1),
        }


def test_the_lag_of_every_table_waiting_longest_first():
    now = 1_800_000_000.0
    seen = {
        "lake.ns.a": Seen("m1", Outcome.QUEUED_BY_PRIORITY, None, now - 600),
        "lake.ns.b": Seen("m2", Outcome.HELD, None, now - 7200),
        "lake.ns.c": Seen("m3", Outcome.LAUNCHED, None, None),  # launched: no longer waiting
        "lake.ns.d": Seen("m4", Outcome.SKIPPED, None, None),
    }
    assert table_lags(seen, now) == (
        TableLag("lake.ns.b", "held", 7200.0),
        TableLag("lake.ns.a", "queued_by_priority", 600.0),
    )
