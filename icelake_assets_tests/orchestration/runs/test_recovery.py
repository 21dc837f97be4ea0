"""Stale-run recovery with a real Dagster instance and a real run worker (`dagster api execute_run`,
the process Dagster's launchers start): a run whose worker was killed with nobody left to notice (its
code server died too, as when a host dies) is failed by the maintenance sensor on its next tick, with
the reason, an audit record and the table's normal backoff, then relaunched."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dagster import DagsterInstance, DagsterRunStatus, job

from bench.scale.run_worker import prepare_run
from icelake_assets import definitions
from icelake_assets.audit.store import AuditLog
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.project import MAINTENANCE_JOB, build_definitions
from icelake_assets.orchestration.runs import model as run_model, recovery as run_recovery
from icelake_assets.orchestration.runs.leases import RunLease, read_lease
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG
from icelake_assets_tests.conftest import sensor_tick
from icelake_assets_tests.orchestration.sensors.test_maintenance import _lake

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.integration


def _outcomes(tick):
    return {e.asset_key.path[-1]: e.metadata["sensor/outcome"].value for e in tick.asset_events}


def _maintenance_run(make_lake, monkeypatch):
    """A lake of one degraded table, its definitions, and a function creating a run of its maintenance
    as the code server does (STARTING, the run worker's command line returned with its id)."""
    settings, ref, _ = _lake(make_lake)
    monkeypatch.setenv("ICELAKE_CONFIG", settings.source)
    monkeypatch.setattr(definitions, "_BUILT", {})
    key = list(table_asset_key(ref).path)
    return settings, ref, build_definitions(settings), lambda i: prepare_run(MODULE, MAINTENANCE_JOB, key, i)


MODULE = "icelake_assets.definitions"


def _start_and_kill_worker(instance, create_run, tmp_path) -> tuple[str, int]:
    """A real run worker started for a new run, then killed with its process group once it holds its
    lease (as a host dies, or the OOM killer strikes): (the run id, the worker's PID)."""
    run_id, command = create_run(instance)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ICELAKE_SPARK_STATE_DIR": str(tmp_path / "spark")}
    worker = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while read_lease(instance, run_id) is None or instance.get_run_by_id(run_id).status != (
            DagsterRunStatus.STARTED
        ):
            assert worker.poll() is None, "the run worker ended before it took its lease"
            assert time.monotonic() < deadline, "the run worker took no lease within 120 s"
            time.sleep(0.1)
        lease = read_lease(instance, run_id)
        assert lease is not None and lease.pid == worker.pid and not lease.released
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # the worker and whatever it started
        worker.wait()
    return run_id, worker.pid


def _retried_soon(defs, settings, instance, tick, ref, monkeypatch) -> None:
    """The table is launched again once the short wait after an interruption is over, while a table
    failure's backoff (an hour here) would still hold it (on the old code it did)."""
    monkeypatch.setattr(run_model, "FAILED_RUN_BACKOFF_SECONDS", 3600.0)
    monkeypatch.setattr(run_model, "OUTAGE_RETRY_SECONDS", 0.0)
    again = sensor_tick(defs, settings, instance, cursor=tick.cursor)
    assert [r.tags[TABLE_TAG] for r in again.run_requests] == [str(ref)]
    assert int(again.run_requests[0].tags["dagster/max_runtime"]) >= 3600


def test_a_run_whose_worker_died_with_its_code_server_is_failed_by_the_next_tick_and_relaunched(
    make_lake, tmp_path, monkeypatch
):
    settings, ref, defs, create_run = _maintenance_run(make_lake, monkeypatch)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run_id, pid = _start_and_kill_worker(instance, create_run, tmp_path)
        # Nobody is left to fail it: the run stays STARTED, holding its table's pool and a run slot.
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.STARTED

        tick = sensor_tick(defs, settings, instance)
        run = instance.get_run_by_id(run_id)
        assert run.status == DagsterRunStatus.FAILURE, "the sensor left the dead run in progress"
        assert run.tags[run_recovery.STALE_TAG] == run_model.WORKER_LOST
        assert _outcomes(tick) == {"t": "backoff"} and tick.run_requests == []
        [recovered] = [
            r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "recovery"
        ]
        assert recovered.decision == "run_failed" and recovered.run_id == run_id
        assert f"PID {pid}" in recovered.reason and "is gone" in recovered.reason
        _retried_soon(defs, settings, instance, tick, ref, monkeypatch)


def test_a_run_dagster_failed_after_its_worker_was_killed_is_retried_soon(make_lake, tmp_path, monkeypatch):
    """The worker killed while its code server lives: Dagster's run monitoring fails the run, naming no
    cause of the product's. Its unreleased lease tells the sensor the worker was lost (the chaos soak:
    each such kill put the table in a failure backoff, doubling, 20 minutes after two)."""
    settings, ref, defs, create_run = _maintenance_run(make_lake, monkeypatch)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run_id, pid = _start_and_kill_worker(instance, create_run, tmp_path)
        instance.report_run_failed(instance.get_run_by_id(run_id))  # as Dagster's run monitoring does

        tick = sensor_tick(defs, settings, instance)
        run = instance.get_run_by_id(run_id)
        assert run.tags[run_model.FAILURE_KIND_TAG] == run_model.WORKER_LOST
        assert f"PID {pid}" in run.tags[run_model.FAILURE_CAUSE_TAG]
        records = [
            r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "recovery"
        ]
        assert [(r.decision, r.run_id) for r in records] == [("worker_lost", run_id)]
        _retried_soon(defs, settings, instance, tick, ref, monkeypatch)
        sensor_tick(defs, settings, instance, cursor=tick.cursor)  # tagged once, recorded once
        records = [
            r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "recovery"
        ]
        assert len(records) == 1


def test_a_worker_that_ends_releases_its_lease_so_its_failed_run_is_not_taken_for_a_lost_one(tmp_path):
    """A worker that exits (its run failed by an error of the table) says so: the run keeps its
    failure, and its table the failure backoff."""
    script = (
        "import sys\n"
        "from dagster import DagsterInstance\n"
        "from icelake_assets.orchestration.runs.leases import RunLease\n"
        "instance = DagsterInstance.from_config(sys.argv[1])\n"
        "RunLease(instance, sys.argv[2], renew_seconds=3600).start()\n"
        "raise SystemExit(1)  # as a run worker whose run failed\n"
    )

    @job
    def noop():
        pass

    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = instance.create_run_for_job(noop, status=DagsterRunStatus.STARTED)
        code = subprocess.run(
            [sys.executable, "-c", script, str(tmp_path), run.run_id], cwd=ROOT, timeout=120
        ).returncode
        assert code == 1
        lease = read_lease(instance, run.run_id)
        assert lease is not None and lease.released


def test_a_run_stuck_starting_without_a_worker_is_failed_after_the_grace(make_lake, tmp_path, monkeypatch):
    settings, ref, defs, create_run = _maintenance_run(make_lake, monkeypatch)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run_id, _ = create_run(instance)
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.STARTING
        sensor_tick(defs, settings, instance)  # within the grace: left alone
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.STARTING
        monkeypatch.setattr(run_recovery.stale_runs, "NO_LEASE_GRACE_SECONDS", 0.0)
        sensor_tick(defs, settings, instance)
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE


def test_a_live_worker_renews_its_lease_until_its_run_ends(tmp_path):
    @job
    def noop():
        pass

    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = instance.create_run_for_job(noop, status=DagsterRunStatus.STARTED)
        lease = RunLease(instance, run.run_id, renew_seconds=0.05).start()
        first = read_lease(instance, run.run_id)
        time.sleep(0.3)
        renewed = read_lease(instance, run.run_id)
        assert first and renewed and not renewed.released and first.pid == os.getpid()
        assert renewed.renewed_at > first.renewed_at and first.ticks is not None and renewed.beat > first.beat
        instance.report_run_failed(run)
        time.sleep(0.3)  # the lease ends with its run, by itself
        ended = read_lease(instance, run.run_id)
        assert ended and ended.released
        lease.release()


def test_the_commits_of_a_failed_run_that_no_record_spans_are_reconciled_once_by_its_run_id(
    make_lake, spark_for, tmp_path
):
    """A run killed mid-rewrite made two commits (partial progress) and recorded one of them: the next
    tick writes the other to the audit as reconciled, with its rows checked against its parent's."""
    from icelake_assets.audit.records import AuditRecord
    from icelake_assets.maintenance.spark import commit_tags, procedures
    from icelake_assets_tests.orchestration.runs.test_model import _queue

    settings, ref, table = _lake(make_lake, files=12)
    defs = build_definitions(settings)
    rows = table.scan().to_arrow().num_rows
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = _queue(instance, defs, ref, {TABLE_TAG: str(ref)})
        spark = spark_for(settings).newSession()  # the killed run's own session
        commit_tags.tag_session(spark, run.run_id, "rewrite_data_files", 1)
        first_from = table.refresh().current_snapshot().snapshot_id
        procedures.rewrite_data_files(spark, ref, options={"min-input-files": "2"}, where="id < 60")
        first = table.refresh().current_snapshot().snapshot_id
        procedures.rewrite_data_files(spark, ref, options={"min-input-files": "2"})
        second = table.refresh().current_snapshot().snapshot_id
        # Its first commit was recorded by an op that returned; then the run was killed.
        AuditLog.from_settings(settings).append(
            AuditRecord(
                str(ref),
                "op",
                "acted",
                "sensor",
                op="rewrite_data_files",
                run_id=run.run_id,
                snapshot_before=first_from,
                snapshot_after=first,
            )
        )
        instance.report_run_failed(instance.get_run_by_id(run.run_id))

        tick = sensor_tick(defs, settings, instance)
        sensor_tick(defs, settings, instance, cursor=tick.cursor)  # settled once: no second record
        reconciled = [
            r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "recovery"
        ]
        assert [(r.decision, r.run_id, r.snapshot_before, r.snapshot_after) for r in reconciled] == [
            ("reconciled", run.run_id, first, second)
        ]
        [record] = reconciled
        assert record.op == "rewrite_data_files" and record.results["rows_kept"] is True
        assert record.results["rows_before"] == record.results["rows_after"] == rows
        assert "never recorded it (it ended failure)" in record.reason


def test_an_outage_is_retried_soon_and_is_not_counted_as_the_tables_failure():
    from icelake_assets.orchestration.runs.model import (
        INTERRUPTION_MAX_WAIT_SECONDS,
        OUTAGE_RETRY_SECONDS,
        WORKER_LOST,
        TableRuns,
    )

    after_outage = TableRuns(
        last_finished=1000.0, failures_in_a_row=2, interruptions_in_a_row=1, last_failure_cause="x"
    )
    assert after_outage.retry_at(600.0) == 1000.0 + OUTAGE_RETRY_SECONDS
    assert (
        TableRuns(last_finished=1000.0, interruptions_in_a_row=3).retry_at(600.0)
        == 1000.0 + 4 * OUTAGE_RETRY_SECONDS
    )
    assert (
        TableRuns(last_finished=1000.0, interruptions_in_a_row=9).retry_at(600.0)
        == 1000.0 + INTERRUPTION_MAX_WAIT_SECONDS
    )  # at most five minutes
    assert "unreachable" in (after_outage.failure_reason() or "")
    assert TableRuns(last_finished=1000.0, failures_in_a_row=2).retry_at(600.0) == 2200.0
    # A lost worker: as soon, doubling in a row up to five minutes, as a crash loop backs off (the
    # chaos soak: doubling on, a table interrupted five times in a row waited 16 minutes).
    lost = TableRuns(
        last_finished=1000.0, failures_in_a_row=2, interruptions_in_a_row=1, last_failure_kind=WORKER_LOST
    )
    assert lost.retry_at(600.0) == 1000.0 + OUTAGE_RETRY_SECONDS
    assert "worker was lost" in (lost.failure_reason() or "")
    lost.interruptions_in_a_row = 3
    assert lost.retry_at(600.0) == 1000.0 + 4 * OUTAGE_RETRY_SECONDS
    lost.interruptions_in_a_row = 5
    assert lost.retry_at(600.0) == 1000.0 + INTERRUPTION_MAX_WAIT_SECONDS
    assert lost.retry_at(120.0) == 1000.0 + 120.0  # a table's own backoff, when shorter


def test_a_run_failed_by_a_catalog_outage_is_retried_after_a_short_wait(make_lake, tmp_path, monkeypatch):
    from icelake_assets.orchestration.runs.model import failure_tags
    from icelake_assets_tests.orchestration.runs.test_model import _queue

    settings, ref, _ = _lake(make_lake)
    defs = build_definitions(settings)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = _queue(instance, defs, ref, {TABLE_TAG: str(ref)})
        instance.add_run_tags(run.run_id, failure_tags(str(ref), "outage", "catalog 'lake' unreachable"))
        instance.report_run_failed(instance.get_run_by_id(run.run_id))
        monkeypatch.setattr(run_model, "FAILED_RUN_BACKOFF_SECONDS", 3600.0)  # a table failure would wait
        tick = sensor_tick(defs, settings, instance)
        [observation] = tick.asset_events
        reason = observation.metadata["sensor/reason"].value
        assert observation.metadata["sensor/outcome"].value == "backoff"
        assert "interrupted (not the table's failure)" in reason and "unreachable" in reason
        monkeypatch.setattr(run_model, "OUTAGE_RETRY_SECONDS", 0.0)
        again = sensor_tick(defs, settings, instance, cursor=tick.cursor)
        assert [r.tags[TABLE_TAG] for r in again.run_requests] == [str(ref)]


def test_a_pid_reused_by_another_process_is_not_taken_for_the_worker():
    from icelake_assets.orchestration.runs.leases import worker_alive
    from icelake_assets.planning.stale_runs import Lease
    from icelake_assets.processes import start_ticks

    me = os.getpid()
    ticks = start_ticks(me)
    assert ticks is not None
    assert worker_alive(Lease("h", me, 0.0, ticks=ticks))
    assert not worker_alive(Lease("h", me, 0.0, ticks=ticks + 1))  # same PID, another process
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert not worker_alive(Lease("h", dead.pid, 0.0))


def test_a_run_holding_a_lease_is_the_products_whatever_its_job(tmp_path):
    """The overview asset's run (Dagster's __ASSET_JOB, no table, no job of the product's) killed with
    the daemon's process group stayed STARTED for good, holding a run slot (the chaos soak): it holds
    a lease, so it is the product's, and is failed when its worker is gone."""
    import socket

    from icelake_assets.orchestration.runs.leases import lease_key
    from icelake_assets.planning.stale_runs import Lease
    from icelake_assets.processes import host_identity

    @job
    def __ASSET_JOB():  # noqa: N802 - named as Dagster names its asset jobs
        pass

    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        leased = instance.create_run_for_job(__ASSET_JOB, status=DagsterRunStatus.STARTED)
        other = instance.create_run_for_job(__ASSET_JOB, status=DagsterRunStatus.STARTED)
        dead = subprocess.Popen(["true"])
        dead.wait()
        lease = Lease(socket.gethostname(), dead.pid, time.time(), identity=host_identity())
        instance.run_storage.set_cursor_values({lease_key(leased.run_id): lease.dumps()})
        failed = run_recovery.fail_stale_runs(instance, lambda run: None)
        assert [f.run_id for f in failed] == [leased.run_id]
        assert instance.get_run_by_id(leased.run_id).status == DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(other.run_id).status == DagsterRunStatus.STARTED  # not ours
