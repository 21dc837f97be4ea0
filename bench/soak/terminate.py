"""The chaos soak's ``terminate`` fault (bench/soak/faults.py): a maintenance run in progress, ideally
inside a partial-progress rewrite (its ``rewrite_data_files`` step has already committed a file group:
a ``replace`` snapshot of its own since the step started, as on the retention table,
bench/soak/retention.py), else in its rewrite, else in any step, terminated as the UI's Terminate
does it: ``instance.run_launcher.terminate(run_id)`` on the daemon's instance, whose run launcher
(Dagster's DefaultRunLauncher) marks the run CANCELING and asks the code server that launched it
(the run's ``dagster/grpc_info`` tag: the daemon's code server) to interrupt the worker. The
Terminate's time is recorded just before the call. A follower thread reads, as soon as the run
ended, which snapshots it committed (snapshot property ``icelake.run-id``) and when, before later
maintenance can expire them; the final checks (bench/soak/run_checks.py) want the run CANCELED with no
step retried (no STEP_UP_FOR_RETRY) and none of its commits later than the Terminate plus
TERMINATE_COMMIT_GRACE_SECONDS (issue 50: 2 s).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter
from dagster._core.storage.tags import GRPC_INFO_TAG

from icelake_assets.orchestration.runs.leases import read_lease
from icelake_assets.orchestration.runs.model import TABLE_TAG
from icelake_assets.orchestration.sensors.maintenance import MAINTENANCE_SENSOR
from icelake_assets.types import SNAPSHOT_RUN_ID

REWRITE_STEP = "rewrite_data_files"
REWRITE_WAIT_SECONDS = 90.0  # how long the fault waits for a run in its rewrite before taking any run
TERMINATE_COMMIT_GRACE_SECONDS = 2.0  # a commit already in flight at the Terminate may land this late
READ_RETRY_SECONDS = 300.0  # the follower retries reading the table (the store may be restarting)
_STEP_EVENTS = {
    DagsterEventType.STEP_START,
    DagsterEventType.STEP_SUCCESS,
    DagsterEventType.STEP_FAILURE,
    DagsterEventType.STEP_SKIPPED,
}


@dataclass
class Termination:
    """One run the soak terminated, and what became of it."""

    run_id: str
    table: str  # catalog.namespace.table
    step: str  # the step in progress at the Terminate ("-": none seen yet)
    soak_at: float  # seconds after the soak's start
    at: float  # epoch seconds, just before the Terminate
    status_before: str
    answer: str  # the run launcher's answer (True: the code server accepted it), or its error
    worker: int | None  # the run worker's PID (its lease)
    partial: int = 0  # its rewrite's commits (file groups) before the Terminate: inside partial progress
    code_server: str = "-"  # where the launcher sent the Terminate (the run's dagster/grpc_info tag)
    status_after: str | None = None  # once it ended (the follower)
    ended: float | None = None  # its end time (epoch s)
    commits: tuple[tuple[int, float], ...] = ()  # (snapshot id, epoch s) of its commits, read at its end
    read_error: str | None = None  # why its commits could not be read at its end
    settled: bool = False  # ended, and its commits read (or given up on)

    @property
    def in_rewrite(self) -> bool:
        return self.step.endswith(REWRITE_STEP)


def current_step(instance: DagsterInstance, run_id: str) -> str:
    """The step a run is in: the last one started and not ended ("-": none)."""
    records = instance.get_records_for_run(run_id, of_type=_STEP_EVENTS).records
    started: list[str] = []
    ended: set[str] = set()
    for record in records:
        event = record.event_log_entry.dagster_event
        key = record.event_log_entry.step_key
        if event is None or key is None:
            continue
        if event.event_type == DagsterEventType.STEP_START:
            started.append(key)
            ended.discard(key)  # a retried step starts again
        else:
            ended.add(key)
    return next((k for k in reversed(started) if k not in ended), "-")


def rewrite_started_at(instance: DagsterInstance, run_id: str) -> float | None:
    """When the run's (last) rewrite step started (epoch s), None: not started."""
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.STEP_START).records
    starts = [
        r.event_log_entry.timestamp
        for r in records
        if (r.event_log_entry.step_key or "").endswith(REWRITE_STEP)
    ]
    return max(starts) if starts else None


def rewrite_commits(table, run_id: str, since: float) -> int:
    """The run's ``replace`` commits on ``table`` at or after ``since`` (epoch s): its rewrite's file
    groups committed so far (partial progress)."""
    out = 0
    for snap in table.metadata.snapshots:
        summary = snap.summary
        if summary is None or summary.get(SNAPSHOT_RUN_ID) != run_id:
            continue
        if summary.operation.value == "replace" and snap.timestamp_ms / 1000 >= since - 1:
            out += 1
    return out


def code_server(run) -> str:
    """The code server the run launcher reaches for this run (its ``dagster/grpc_info`` tag)."""
    info = run.tags.get(GRPC_INFO_TAG) if run is not None else None
    return info or "none: the launcher cannot reach a code server"


class Followed(Protocol):
    """A run a fault reached (Termination, pause.Pause), followed to its end."""

    run_id: str
    table: str
    status_after: str | None
    ended: float | None
    commits: tuple[tuple[int, float], ...]
    read_error: str | None
    settled: bool


def settle(reader, run: Followed, load_table: Callable[[str], object], give_up_after: float) -> None:
    """Once ``run`` ended: its status, end and commits (its table read again); until then nothing. A
    read that fails (PostgreSQL or the catalog restarting) is tried again at the next pass, given up
    ``give_up_after`` seconds after the run's end."""
    try:
        if run.status_after is None:
            record = reader.get_run_record_by_id(run.run_id)
            if record is None or not record.dagster_run.is_finished:
                return
            run.ended = record.end_time or time.time()
            run.status_after = record.dagster_run.status.value
        run.commits = run_commits(load_table(run.table), run.run_id)
        run.read_error, run.settled = None, True
    except Exception as err:
        run.read_error = f"{type(err).__name__}: {str(err)[:160]}"
        if run.ended is not None and time.time() - run.ended > give_up_after:
            run.settled = True


def run_commits(table, run_id: str) -> tuple[tuple[int, float], ...]:
    """The snapshots of ``table`` (a pyiceberg Table) committed by run ``run_id``, with their times."""
    out = []
    for snap in table.metadata.snapshots:
        summary = snap.summary
        if summary is not None and summary.get(SNAPSHOT_RUN_ID) == run_id:
            out.append((snap.snapshot_id, snap.timestamp_ms / 1000))
    return tuple(out)


class Terminator:
    """Terminates maintenance runs through the instance's run launcher and follows them to their end.
    ``load_table(name)``: the soak table ``name`` (catalog.namespace.table) as pyiceberg loads it now."""

    def __init__(
        self,
        instance: DagsterInstance,
        load_table: Callable[[str], object],
        clock: Callable[[], float],
    ) -> None:
        self.instance, self.load_table, self.clock = instance, load_table, clock
        # The follower thread's own instance (storage connections are not shared across threads).
        self._reader = DagsterInstance.from_config(instance.root_directory)
        self.terminations: list[Termination] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._follow, name="soak-terminations", daemon=True)

    def _candidates(self) -> list[tuple[str, str, str]]:
        """(run id, table, step in progress) of the sensor's runs in progress."""
        runs = self.instance.get_runs(
            RunsFilter(statuses=[DagsterRunStatus.STARTED], tags={"dagster/sensor_name": MAINTENANCE_SENSOR})
        )
        return [(r.run_id, r.tags.get(TABLE_TAG, "?"), current_step(self.instance, r.run_id)) for r in runs]

    def _partial(self, run_id: str, table: str) -> int:
        """The run's rewrite commits so far (0 when they cannot be read now)."""
        try:
            since = rewrite_started_at(self.instance, run_id)
            return 0 if since is None else rewrite_commits(self.load_table(table), run_id, since)
        except Exception:  # the catalog or PostgreSQL restarting
            return 0

    def inject(self, seconds: float) -> Termination | None:
        """Waits up to ``seconds`` (at most REWRITE_WAIT_SECONDS) for a run inside a partial-progress
        rewrite (a file group of it committed), polling every half second; at the deadline takes a
        run in its rewrite seen last, else a run in progress in any step; None when there was none."""
        deadline = time.monotonic() + min(seconds, REWRITE_WAIT_SECONDS)
        fallback = rewriting = chosen = None
        partial = 0
        while chosen is None:
            try:
                found = self._candidates()
            except Exception:  # PostgreSQL restarting: poll again
                found = []
            if found:  # the runs in their rewrite now (a failed poll keeps the last ones seen)
                rewriting = None
            for c in found:
                if c[2].endswith(REWRITE_STEP):
                    rewriting = c
                    partial = self._partial(c[0], c[1])
                    if partial:
                        chosen = c
                        break
            fallback = found[0] if found else fallback
            if time.monotonic() >= deadline:
                break
            if chosen is None:
                time.sleep(0.5)
        if chosen is None:
            chosen, partial = rewriting or fallback, 0
        if chosen is None:
            return None
        run_id, table, step = chosen
        run = self.instance.get_run_by_id(run_id)
        lease = read_lease(self.instance, run_id)
        at, soak_at = time.time(), self.clock()
        try:
            answer = str(self.instance.run_launcher.terminate(run_id))
        except Exception as err:  # the code server may be down (a daemon fault): recorded
            answer = f"{type(err).__name__}: {str(err)[:160]}"
        done = Termination(
            run_id,
            table,
            step,
            soak_at,
            at,
            run.status.value if run else "?",
            answer,
            lease.pid if lease else None,
            partial,
            code_server(run),
        )
        with self._lock:
            self.terminations.append(done)
        if not self._thread.is_alive() and not self._done.is_set():
            self._thread.start()
        return done

    def _pending(self) -> list[Termination]:
        with self._lock:
            return [t for t in self.terminations if not t.settled]

    def _follow(self) -> None:
        while not self._done.wait(1):
            for t in self._pending():
                self._settle(t, give_up_after=READ_RETRY_SECONDS)

    def _settle(self, t: Termination, give_up_after: float) -> None:
        settle(self._reader, t, self.load_table, give_up_after)

    def stop(self) -> None:
        """The follower's last pass (runs that ended meanwhile), then it stops."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(30)
        for t in self._pending():
            self._settle(t, give_up_after=0)
