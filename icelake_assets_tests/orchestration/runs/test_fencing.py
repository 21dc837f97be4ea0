"""One maintainer per table, where users run the product (issue 38): a healthy run on the
multiprocess executor or in a PID namespace of its own is never failed by a recovery ticking every
0.2 s; a run falsely judged dead, or terminated as the UI does it, commits nothing after the verdict
(a real Dagster instance, real step processes and run workers, a real pyiceberg SQLite table)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from dagster import (
    DagsterEventType,
    DagsterInstance,
    DagsterRunStatus,
    build_sensor_context,
    execute_job,
    job,
    reconstructable,
)
from dagster._core.events import EngineEventData

from icelake_assets.orchestration.runs import housekeeping, model as run_model, recovery
from icelake_assets.orchestration.runs.leases import RunLease, lease_key, read_lease
from icelake_assets.orchestration.sensors.recovery import build_recovery_sensor
from icelake_assets.planning.stale_runs import WATCH_SECONDS, Lease
from icelake_assets.processes import host_identity
from icelake_assets_tests.orchestration.runs import fencing_jobs

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.integration


class _Recovery:
    """The recovery, ticking every 0.2 s in a thread (as an eager sensor would), keeping its verdicts."""

    def __init__(self, instance: DagsterInstance) -> None:
        self.instance, self.verdicts, self.errors = instance, [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.verdicts += recovery.fail_stale_runs(self.instance, lambda run: ())
                ended = recovery.ended_runs(self.instance, lambda run: ("fencing.app.ticks",))
                self.verdicts += recovery.mark_lost_workers(self.instance, ended)
            except Exception as err:  # noqa: BLE001 - kept for the assertion
                self.errors.append(err)

    def __enter__(self) -> _Recovery:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def test_a_healthy_run_on_the_multiprocess_executor_is_never_failed(tmp_path):
    """Each step in a process of its own: the first step's process ends (on the old code its lease
    named that PID, and the run was failed as 'worker gone' while the second step ran)."""
    with DagsterInstance.local_temp(str(tmp_path)) as instance, _Recovery(instance) as rec:
        with execute_job(reconstructable(fencing_jobs.two_steps), instance=instance) as result:
            assert result.success
            run = instance.get_run_by_id(result.run_id)
    assert not rec.errors and not rec.verdicts
    assert recovery.STALE_TAG not in run.tags and run.status == DagsterRunStatus.SUCCESS
    # A run the product did not launch (Materialize, a backfill) gets the max_runtime backstop too.
    assert int(run.tags["dagster/max_runtime"]) > 0
    lease = read_lease(instance, run.run_id)
    # It names the run worker (this process, the executor's parent), not the step processes.
    assert lease is not None and lease.pid == os.getpid() and lease.holder != os.getpid() and lease.released


def _worker(tmp_path: Path, job_name: str, *prefix: str) -> subprocess.Popen:
    """A run worker (in-process executor) of ``job_name`` against the test's instance."""
    script = (
        "import sys\n"
        "from dagster import DagsterInstance, execute_job, reconstructable\n"
        "from icelake_assets_tests.orchestration.runs import fencing_jobs\n"
        "with DagsterInstance.from_config(sys.argv[1]) as instance:\n"
        f"    execute_job(reconstructable(fencing_jobs.{job_name}), instance=instance,\n"
        "        run_config={'execution': {'config': {'in_process': {}}}})\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), fencing_jobs.WAREHOUSE_ENV: str(tmp_path / "lake")}
    return subprocess.Popen([*prefix, sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, env=env)


def _started_run(instance: DagsterInstance, worker: subprocess.Popen) -> str:
    deadline = time.monotonic() + 120
    while True:
        runs = instance.get_runs()
        if runs and read_lease(instance, runs[0].run_id) is not None:
            return runs[0].run_id
        assert worker.poll() is None, "the worker ended before it took its lease"
        assert time.monotonic() < deadline
        time.sleep(0.1)


@pytest.mark.skipif(shutil.which("unshare") is None or os.geteuid() != 0, reason="unshare needs root")
def test_a_healthy_run_in_its_own_pid_namespace_is_never_failed(tmp_path):
    """A container with host networking: the host's name, PIDs of its own (on the old code the worker,
    PID 1 there, was 'gone' here one second in)."""
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        worker = _worker(tmp_path, "two_steps", "unshare", "--pid", "--fork", "--mount-proc")
        with _Recovery(instance) as rec:
            run_id = _started_run(instance, worker)
            assert worker.wait(timeout=120) == 0
        run = instance.get_run_by_id(run_id)
        lease = read_lease(instance, run_id)
    assert not rec.errors and not rec.verdicts and run.status == DagsterRunStatus.SUCCESS
    assert lease is not None and lease.identity != host_identity()


def _commits_after(folder: Path, moment: float) -> list[int]:
    table = fencing_jobs.catalog(str(folder)).load_table(fencing_jobs.TABLE)
    return [s.snapshot_id for s in table.snapshots() if s.timestamp_ms / 1000 > moment]


def _committing_run(
    tmp_path: Path, instance: DagsterInstance, job_name: str = "committing"
) -> tuple[subprocess.Popen, str]:
    fencing_jobs.create_table(str(tmp_path / "lake"))
    worker = _worker(tmp_path, job_name)
    run_id = _started_run(instance, worker)
    deadline = time.monotonic() + 60
    while len(fencing_jobs.catalog(str(tmp_path / "lake")).load_table(fencing_jobs.TABLE).snapshots()) < 3:
        assert time.monotonic() < deadline and worker.poll() is None
        time.sleep(0.1)
    return worker, run_id


# A commit whose check passed just before the worker saw the verdict may still land: one append.
_IN_FLIGHT_SECONDS = WATCH_SECONDS + 1.0


def test_a_run_falsely_judged_dead_commits_nothing_after_the_verdict(tmp_path):
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        worker, run_id = _committing_run(tmp_path, instance)
        failed = recovery.fail_stale_runs(
            instance, lambda run: ("fencing.app.ticks",), alive=lambda lease: False
        )
        verdict = time.time()
        assert [f.run_id for f in failed] == [run_id]
        worker.wait(timeout=60)
        assert time.time() - verdict < 30  # it stopped, not ran out its minute
        assert _commits_after(tmp_path / "lake", verdict + _IN_FLIGHT_SECONDS) == []
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.FAILURE


def test_a_run_terminated_as_the_ui_does_it_ends_canceled_with_no_commit_after(tmp_path):
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        worker, run_id = _committing_run(tmp_path, instance)
        instance.run_launcher.terminate(run_id)  # the UI's Terminate (here no code server to signal)
        asked = time.time()
        worker.wait(timeout=60)
        assert time.time() - asked < 30
        assert _commits_after(tmp_path / "lake", asked + _IN_FLIGHT_SECONDS) == []
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.CANCELED


def test_a_terminate_signalled_as_the_code_server_does_is_never_retried(tmp_path):
    """What the UI's Terminate does (issue 50), emulated without a daemon or code server: the run is
    marked CANCELING (run_launcher.terminate) and the run worker gets the SIGINT the code server's
    cancel_execution sends it (dagster's send_interrupt). Dagster turns an interrupt of an op with a
    retry policy into a retry: the step went up for retry and the run stayed CANCELING for its delay.
    Now the step fails without a retry, the run ends CANCELED within seconds, no commit after. The path
    through dagster-daemon and a real code server is the chaos soak's (bench/soak/terminate.py)."""
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        worker, run_id = _committing_run(tmp_path, instance, "retried_committing")
        instance.report_run_canceling(instance.get_run_by_id(run_id))  # what run_launcher.terminate does
        worker.send_signal(signal.SIGINT)  # what the code server's cancel_execution does
        asked = time.time()
        worker.wait(timeout=60)
        assert time.time() - asked < 30
        assert _commits_after(tmp_path / "lake", asked + _IN_FLIGHT_SECONDS) == []
        events = {r.event_log_entry.dagster_event_type for r in instance.get_records_for_run(run_id).records}
        assert DagsterEventType.STEP_UP_FOR_RETRY not in events
        assert instance.get_run_by_id(run_id).status == DagsterRunStatus.CANCELED


@job
def __ASSET_JOB():  # noqa: N802 - named as Dagster names its asset jobs
    pass


def _dead_pid() -> int:
    dead = subprocess.Popen(["true"])
    dead.wait()
    return dead.pid


def test_a_dead_run_is_failed_by_the_recovery_sensor_alone(tmp_path):
    """No maintenance sensor, no settings, no table: the recovery sensor fails the dead run."""
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = instance.create_run_for_job(__ASSET_JOB, status=DagsterRunStatus.STARTED)
        lease = Lease("vm", _dead_pid(), time.time(), False, host_identity(), None, 1, None)
        instance.run_storage.set_cursor_values({lease_key(run.run_id): lease.dumps()})
        sensor = build_recovery_sensor()
        result = sensor.evaluate_tick(build_sensor_context(instance=instance))
        assert "1 stale run(s) failed" in (result.skip_message or "")
        failed = instance.get_run_by_id(run.run_id)
        assert failed.status == DagsterRunStatus.FAILURE
        assert failed.tags[recovery.STALE_TAG] == run_model.WORKER_LOST


def test_a_worker_killed_at_launch_is_an_interruption_not_a_failure(tmp_path):
    from dagster._utils.error import SerializableErrorInfo

    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = instance.create_run_for_job(
            __ASSET_JOB, status=DagsterRunStatus.STARTING, tags={"icelake/table": "c.n.t"}
        )
        error = SerializableErrorInfo(
            "dagster._core.errors.DagsterLaunchFailedError: Error in GRPC server: GRPC server: Subprocess "
            f"for {run.run_id} terminated unexpectedly with exit code -9",
            [],
            "DagsterLaunchFailedError",
        )
        instance.report_engine_event(
            "Caught an unrecoverable error while dequeuing the run.", run, EngineEventData.engine_error(error)
        )
        instance.report_run_failed(run)
        ended = recovery.ended_runs(instance, lambda r: ("c.n.t",))
        lost = recovery.mark_lost_workers(instance, ended)
        assert [r.run_id for r in lost] == [run.run_id] and "exit code -9" in lost[0].reason
        tagged = instance.get_run_by_id(run.run_id)
        assert tagged.tags[run_model.FAILURE_KIND_TAG] == run_model.WORKER_LOST
        # Read once: the next tick does not read its events again.
        assert recovery.mark_lost_workers(instance, recovery.ended_runs(instance, lambda r: ("c.n.t",))) == []


def test_the_keys_of_settled_runs_are_swept(tmp_path):
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        done = instance.create_run_for_job(__ASSET_JOB, status=DagsterRunStatus.STARTED)
        live = instance.create_run_for_job(__ASSET_JOB, status=DagsterRunStatus.STARTED)
        for run in (done, live):
            RunLease(instance, run.run_id, renew_seconds=3600).start().release()
        recovery.fail_stale_runs(instance, lambda run: ())  # records what it saw (live leases)
        instance.run_storage.set_cursor_values({recovery.RECONCILED_KEY_PREFIX + done.run_id: "0"})
        instance.report_run_failed(instance.get_run_by_id(done.run_id))
        assert housekeeping.sweep_run_keys(instance) == 0  # within the window: kept
        later = time.time() + housekeeping.KEEP_SECONDS + 60
        assert housekeeping.sweep_run_keys(instance, now=later) >= 2
        assert read_lease(instance, done.run_id) is None and read_lease(instance, live.run_id) is not None
        values = instance.run_storage.get_cursor_values({recovery.RECONCILED_KEY_PREFIX + done.run_id})
        assert values == {}


def test_a_step_retried_after_a_terminate_is_fenced_before_it_acts(tmp_path):
    """The soak: a rewrite step retried after the Terminate lost its fence (its resource set-up re-armed
    it) and ran its rewrite again, twice, before the run ended CANCELED."""
    from icelake_assets.maintenance.spark import fencing

    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = instance.create_run_for_job(__ASSET_JOB, status=DagsterRunStatus.STARTED)
        instance.report_run_canceling(run)
        fencing.arm(run.run_id)
        seen: list[tuple[str, bool]] = []

        def fence(reason: str, canceled: bool) -> None:
            seen.append((reason, canceled))
            fencing.fence(run.run_id, reason, canceled)

        RunLease(instance, run.run_id, renew_seconds=3600, on_fenced=fence).start().release()
        assert seen and seen[0][1], "fenced when the lease was taken, not a watch period later"
        fencing.arm(run.run_id)  # the retried step's resource set-up
        assert fencing.fenced() is not None and fencing.was_canceled()
        fencing.arm("the next run")
        assert fencing.fenced() is None
