"""The chaos soak's ``pause`` fault (bench/soak/faults.py; issue 50, item 9): ``SIGSTOP`` of a
maintenance run's worker (the PID its lease names, checked to be in the daemon's process group, as the
``run_worker`` fault finds it; a run in its rewrite preferred), held HOLD_SECONDS, then ``SIGCONT``.

HOLD_SECONDS is past the worker's self-fence (SELF_FENCE_SECONDS, planning/stale_runs.py: a worker
whose lease was not renewed that long commits nothing more) and past the point where a sensor that
cannot ask about the worker's PID (another host, a PID namespace of its own) judges the lease lost
(LEASE_TTL_SECONDS) and relaunches the table at its next tick. On the soak's host the sensor sees the
paused worker alive and waits; the shared Spark driver stops the JVM of a holder that stopped renewing
while committing (maintenance/spark/resident_driver.py). A frozen VM looks the same.

A thread per pause sends the ``SIGCONT`` (to the same process: its start time is checked, a PID
reused after a later fault killed it is never signalled), then follows the run to its end and reads
which snapshots it committed (``icelake.run-id``) and when, before later maintenance can expire them.
The final check (:func:`pause_outcomes`): no commit of a paused run later than its pause plus
SELF_FENCE_SECONDS plus PAUSE_COMMIT_GRACE_SECONDS (an Iceberg metadata swap already sent when the
resident stopped the JVM), as read at the run's end and at the end of the soak.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psutil
from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from bench.soak.checks import Outcome
from bench.soak.lake import SENSOR_INTERVAL
from bench.soak.stack import read_proc
from bench.soak.terminate import REWRITE_STEP, current_step, run_commits, settle
from icelake_assets.orchestration.runs.leases import read_leases
from icelake_assets.orchestration.runs.model import TABLE_TAG
from icelake_assets.orchestration.sensors.maintenance import MAINTENANCE_SENSOR
from icelake_assets.planning.stale_runs import LEASE_TTL_SECONDS, SELF_FENCE_SECONDS

# Past the self-fence (60 s) and a lease judged lost elsewhere (90 s) plus two sensor ticks: 120 s.
HOLD_SECONDS = LEASE_TTL_SECONDS + 2 * SENSOR_INTERVAL
PAUSE_COMMIT_GRACE_SECONDS = 2.0  # a metadata swap in flight when the resident stopped the JVM
REWRITE_WAIT_SECONDS = 60.0  # how long the fault waits for a run in its rewrite before taking any run
FOLLOW_SECONDS = 900.0  # after the SIGCONT, how long the run is followed to its end
READ_RETRY_SECONDS = 300.0  # its commits are read again this long after its end (a store restarting)


@dataclass
class Pause:
    """One run worker the soak paused, and what became of its run."""

    run_id: str
    table: str  # catalog.namespace.table
    step: str  # the step in progress at the pause
    pid: int
    soak_at: float  # seconds after the soak's start
    at: float  # epoch seconds, just before the SIGSTOP
    started: float  # the worker's start time (psutil): the SIGCONT goes to this process only
    resumed: float | None = None  # epoch s of the SIGCONT (None: not sent)
    resume_note: str = ""  # why no SIGCONT was sent (the worker was killed meanwhile)
    status_after: str | None = None
    ended: float | None = None
    commits: tuple[tuple[int, float], ...] = ()  # (snapshot id, epoch s), read at its end
    read_error: str | None = None
    settled: bool = False

    @property
    def deadline(self) -> float:
        """No commit of its run after this (epoch s)."""
        return self.at + SELF_FENCE_SECONDS + PAUSE_COMMIT_GRACE_SECONDS


def late_commits(pause: Pause, commits: dict[int, float]) -> tuple[tuple[int, float], ...]:
    """(snapshot id, seconds after the pause) of the commits past its deadline."""
    return tuple((sid, at - pause.at) for sid, at in sorted(commits.items()) if at > pause.deadline)


def _same_process(pid: int, started: float) -> bool:
    try:
        return abs(psutil.Process(pid).create_time() - started) < 0.01
    except psutil.Error:
        return False


class Pauser:
    """Pauses run workers of the daemon's process group (``daemon_pgid()``: its current group)."""

    def __init__(
        self,
        instance: DagsterInstance,
        daemon_pgid: Callable[[], int],
        load_table: Callable[[str], object],
        clock: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self.instance, self.daemon_pgid, self.load_table = instance, daemon_pgid, load_table
        self.clock, self.rng = clock, rng
        self.pauses: list[Pause] = []
        self._threads: list[threading.Thread] = []
        self._done = threading.Event()
        self._lock = threading.Lock()

    def _candidates(self) -> list[tuple[int, str, str, str]]:
        """(PID, run id, table, step) of the sensor's runs in progress whose worker is ours."""
        runs = self.instance.get_runs(
            RunsFilter(statuses=[DagsterRunStatus.STARTED], tags={"dagster/sensor_name": MAINTENANCE_SENSOR})
        )
        leases = read_leases(self.instance, [r.run_id for r in runs])
        group = self.daemon_pgid()
        out = []
        for run in runs:
            lease = leases.get(run.run_id)
            proc = read_proc(lease.pid) if lease and not lease.released else None
            # A live process of the daemon's group: never a reused PID elsewhere.
            if proc is not None and proc.pgid == group:
                step = current_step(self.instance, run.run_id)
                out.append((proc.pid, run.run_id, run.tags.get(TABLE_TAG, "?"), step))
        return out

    def inject(self, seconds: float) -> Pause | None:
        """Waits up to ``seconds`` for a run (in its rewrite, preferably, for REWRITE_WAIT_SECONDS), a
        few seconds into it, then SIGSTOP; None when there was none."""
        deadline = time.monotonic() + seconds
        prefer_until = time.monotonic() + min(seconds, REWRITE_WAIT_SECONDS)
        chosen = None
        while chosen is None and time.monotonic() < deadline:
            try:
                found = self._candidates()
            except Exception:  # the instance's PostgreSQL restarting: look again
                found = []
            rewriting = [c for c in found if c[3].endswith(REWRITE_STEP)]
            if rewriting or (found and time.monotonic() >= prefer_until):
                chosen = self.rng.choice(rewriting or found)
            else:
                time.sleep(1)
        if chosen is None:
            return None
        time.sleep(self.rng.uniform(0, 5))  # somewhere inside the step
        pid, run_id, table, step = chosen
        proc = read_proc(pid)
        if proc is None or proc.pgid != self.daemon_pgid():
            return None
        try:
            started = psutil.Process(pid).create_time()
            at = time.time()
            os.kill(pid, signal.SIGSTOP)
        except (psutil.Error, ProcessLookupError):
            return None
        pause = Pause(run_id, table, step, pid, self.clock(), at, started)
        with self._lock:
            self.pauses.append(pause)
        thread = threading.Thread(target=self._hold, args=(pause,), name=f"soak-pause-{pid}", daemon=True)
        self._threads.append(thread)
        thread.start()
        return pause

    def _resume(self, pause: Pause) -> None:
        if pause.resumed is not None or pause.resume_note:
            return
        if not _same_process(pause.pid, pause.started):
            pause.resume_note = "the worker was gone (killed by a later fault)"
            return
        try:
            os.kill(pause.pid, signal.SIGCONT)
            pause.resumed = time.time()
        except ProcessLookupError:
            pause.resume_note = "the worker was gone"

    def _hold(self, pause: Pause) -> None:
        # Its own instance: storage connections are not shared across threads.
        reader = DagsterInstance.from_config(self.instance.root_directory)
        self._done.wait(max(0.0, pause.at + HOLD_SECONDS - time.time()))
        self._resume(pause)
        end = time.monotonic() + FOLLOW_SECONDS
        while not pause.settled and not self._done.is_set() and time.monotonic() < end:
            self._settle(reader, pause, READ_RETRY_SECONDS)
            self._done.wait(2)

    def _settle(self, reader: DagsterInstance, pause: Pause, give_up_after: float) -> None:
        settle(reader, pause, self.load_table, give_up_after)

    def stop(self) -> None:
        """Every paused worker resumed (the soak never leaves one stopped), the followers' last pass."""
        self._done.set()
        with self._lock:
            pauses = list(self.pauses)
        for pause in pauses:
            self._resume(pause)
        for thread in self._threads:
            thread.join(30)
        reader = DagsterInstance.from_config(self.instance.root_directory)
        for pause in pauses:
            if not pause.settled:
                self._settle(reader, pause, give_up_after=0)


@dataclass(frozen=True)
class PauseResult:
    pause: Pause
    status: str  # its run's, at the end of the soak
    commits: int
    late: tuple[tuple[int, float], ...]  # (snapshot id, seconds after the pause) past the deadline

    @property
    def ok(self) -> bool:
        return not self.late

    def describe(self) -> str:
        p = self.pause
        resumed = f"SIGCONT +{p.resumed - p.at:.0f} s" if p.resumed else f"no SIGCONT ({p.resume_note})"
        late = ", ".join(f"{s} at +{d:.1f} s" for s, d in self.late) or "none"
        return (
            f"run {p.run_id[:8]} of {p.table} (PID {p.pid}) paused in {p.step}, {resumed}: {self.status}; "
            f"{self.commits} commits, after +{SELF_FENCE_SECONDS + PAUSE_COMMIT_GRACE_SECONDS:.0f} s: {late}"
            + (f"; read at its end failed: {p.read_error}" if p.read_error else "")
        )


def check_pauses(instance: DagsterInstance, pauses: Sequence[Pause], load_table) -> list[PauseResult]:
    out = []
    for p in pauses:
        run = instance.get_run_by_id(p.run_id)
        try:
            now = run_commits(load_table(p.table), p.run_id)
        except Exception:
            now = ()
        commits = dict(p.commits) | dict(now)
        out.append(PauseResult(p, run.status.value if run else "?", len(commits), late_commits(p, commits)))
    return out


def pause_outcomes(results: Sequence[PauseResult]) -> tuple[Outcome, ...]:
    return (
        Outcome(
            f"pause: no commit of the {len(results)} runs whose worker was paused (SIGSTOP "
            f"{HOLD_SECONDS:.0f} s) after the pause + {SELF_FENCE_SECONDS:.0f} s "
            f"(+ {PAUSE_COMMIT_GRACE_SECONDS:.0f} s in flight)",
            all(r.ok for r in results),
            tuple(r.describe() for r in results if not r.ok),
        ),
    )
