"""The loop's state from a real Dagster instance: each table's unfinished maintenance run and how long
it has been in flight, the table's typical run, the runs waiting and in progress; runs that are not
the lake's maintenance do not count, and a table whose run ended leaves the gauges."""

from datetime import UTC, datetime

import pytest
from dagster import (
    AssetKey,
    DagsterEvent,
    DagsterEventType,
    DagsterRunStatus,
    Definitions,
    asset,
    instance_for_test,
    job,
    op,
)
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from prometheus_client.parser import text_string_to_metric_families

from icelake_assets.audit.metric_families import LOOP_FAMILIES
from icelake_assets.audit.metrics import MetricsWriter
from icelake_assets.audit.writer import write_loop_metrics
from icelake_assets.orchestration.runs.model import TABLE_TAG
from icelake_assets.orchestration.sensors.loop_metrics import loop_snapshot

KEYS = {n: AssetKey(["lake", "ns", n]) for n in ("a", "b", "c", "d")}
NAMES = {k: f"lake.ns.{n}" for n, k in KEYS.items()}
POOLS = {k: f"icelake/pool_{i}" for i, k in enumerate(KEYS.values())}
USERS = AssetKey(["users_own"])  # a user's asset in an embedded project: not the loop's


def _asset(key: AssetKey):
    @asset(key=key)
    def _table() -> None: ...

    return _table


@op
def _noop() -> None: ...


@job
def icelake_maintenance__tagged() -> None:  # a maintenance job without assets: its tag names the table
    _noop()


ASSET_JOB = Definitions(
    assets=[_asset(k) for k in [*KEYS.values(), USERS]]
).resolve_implicit_global_asset_job_def()


def _run(instance, status, *keys, tags=None, job_def=ASSET_JOB):
    location = InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name=__name__), location_name="t")
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), job_def.name)
    return instance.create_run_for_job(
        job_def, asset_selection=set(keys) or None, tags=tags or {}, status=status, remote_job_origin=origin
    ).run_id


def _event(instance, run_id, kind: DagsterEventType, at: float) -> None:
    """What the run worker reports, at the time given (the record's start or end time)."""
    event = DagsterEvent(kind.value, job_name=instance.get_run_by_id(run_id).job_name)
    instance.handle_run_event(run_id, event, datetime.fromtimestamp(at, tz=UTC))


def _finished(instance, keys, start: float, seconds: float, kind=DagsterEventType.RUN_SUCCESS) -> None:
    run_id = _run(instance, DagsterRunStatus.NOT_STARTED, *keys)
    _event(instance, run_id, DagsterEventType.RUN_START, start)
    _event(instance, run_id, kind, start + seconds)


def _gauges(text: str) -> dict[str, dict[str, float]]:
    """Loop gauges by name, each series by its table (or "" for the lake-wide ones)."""
    out: dict[str, dict[str, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if fam.name in LOOP_FAMILIES:
                out.setdefault(fam.name, {})[s.labels.get("table", "")] = s.value
    return out


def test_runs_in_flight_their_typical_duration_and_the_queue(make_lake, monkeypatch):
    settings = make_lake(extra={"metrics": {"textfile_dir": "prom"}})
    with instance_for_test() as instance:
        t0 = datetime.now(UTC).timestamp()
        # a: six successful runs of its own (the oldest 5000 s, outside the last five), one run of a
        # and b together (many tables: not a's typical) and a failed run of b (not a success).
        for seconds in (5000, 100, 200, 300, 400, 500):
            _finished(instance, [KEYS["a"]], t0 - 90_000, seconds)
        _finished(instance, [KEYS["a"], KEYS["b"]], t0 - 50_000, 40_000)
        _finished(instance, [KEYS["b"]], t0 - 20_000, 60, DagsterEventType.RUN_FAILURE)
        _finished(instance, [KEYS["d"]], t0 - 20_000, 60)  # d: nothing in flight
        # a: started 30 min before t0 and never ended (its worker died); a UI run of a waits behind it.
        stuck = _run(instance, DagsterRunStatus.NOT_STARTED, KEYS["a"])
        _event(instance, stuck, DagsterEventType.RUN_START, t0 - 1800)
        _run(instance, DagsterRunStatus.QUEUED, KEYS["a"])
        waiting_b = _run(instance, DagsterRunStatus.QUEUED, KEYS["b"])
        # c: a maintenance job's run, named by its tag; its worker has not started it yet.
        starting_c = _run(
            instance,
            DagsterRunStatus.STARTING,
            tags={TABLE_TAG: "lake.ns.c"},
            job_def=icelake_maintenance__tagged,
        )
        # A user's own runs: neither in the queue's counts nor a table.
        _run(instance, DagsterRunStatus.QUEUED, USERS)
        _run(instance, DagsterRunStatus.STARTED, USERS)

        queries = []
        real = instance.get_run_records
        monkeypatch.setattr(instance, "get_run_records", lambda *a, **kw: queries.append(1) or real(*a, **kw))
        now = t0 + 3600
        snap = loop_snapshot(instance, POOLS, NAMES, now)
        assert len(queries) == 2  # the runs not finished, the last successful ones

        by_table = {t.table: t for t in snap.tables}
        assert sorted(by_table) == ["lake.ns.a", "lake.ns.b", "lake.ns.c"]
        a, b, c = by_table["lake.ns.a"], by_table["lake.ns.b"], by_table["lake.ns.c"]
        # a: its STARTED run, since its start (not the UI run queued behind it, which waited less).
        assert (a.run_id, a.run_status, a.seconds) == (stuck, "STARTED", pytest.approx(5400, abs=1))
        assert a.typical_seconds == 300  # median of 100..500: the 5000 s run and the a+b run are out
        # b and c: since they were created (b waits; c has no start time yet); neither has a typical.
        assert (b.run_id, b.run_status, b.seconds, b.typical_seconds) == (
            waiting_b,
            "QUEUED",
            pytest.approx(3600, abs=30),
            None,
        )
        assert (c.run_id, c.run_status, c.seconds, c.typical_seconds) == (
            starting_c,
            "STARTING",
            pytest.approx(3600, abs=30),
            None,
        )
        assert (snap.runs_queued, snap.runs_in_progress) == (2, 2)
        assert snap.oldest_queued_seconds == pytest.approx(3600, abs=30)

        assert write_loop_metrics(settings, snap) is None
        metrics = MetricsWriter.from_settings(settings)
        gauges = _gauges(metrics.render())
        assert gauges["icelake_table_run_in_flight_seconds"].keys() == {"a", "b", "c"}
        assert gauges["icelake_table_run_typical_seconds"] == {"a": 300.0}
        assert gauges["icelake_runs_queued"] == {"": 2.0} and gauges["icelake_runs_in_progress"] == {"": 2.0}

        # Recovery failed a's stuck run; b's run started and c's ended: a leaves the gauges.
        _event(instance, stuck, DagsterEventType.RUN_FAILURE, now)
        for run_id in [r.run_id for r in instance.get_runs() if r.status == DagsterRunStatus.QUEUED]:
            if run_id != waiting_b:
                _event(instance, run_id, DagsterEventType.RUN_CANCELED, now)
        _event(instance, waiting_b, DagsterEventType.RUN_START, now)
        _event(instance, starting_c, DagsterEventType.RUN_SUCCESS, now + 10)
        later = loop_snapshot(instance, POOLS, NAMES, now + 60)
        assert [(t.table, t.run_status, t.seconds) for t in later.tables] == [("lake.ns.b", "STARTED", 60.0)]
        assert (later.runs_queued, later.oldest_queued_seconds, later.runs_in_progress) == (0, 0.0, 1)
        assert write_loop_metrics(settings, later) is None
        gauges = _gauges(metrics.flush().read_text())
        assert gauges["icelake_table_run_in_flight_seconds"] == {"b": 60.0}
        assert "icelake_table_run_typical_seconds" not in gauges  # a's typical went with a

        # Nothing in flight: one query (no history read).
        _event(instance, waiting_b, DagsterEventType.RUN_SUCCESS, now + 120)
        queries.clear()
        assert loop_snapshot(instance, POOLS, NAMES, now + 180).tables == ()
        assert len(queries) == 1
