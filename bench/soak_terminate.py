"""The chaos soak's ``terminate`` fault (bench/soak_faults.py): a maintenance run in progress, ideally in
its ``rewrite_data_files`` step, terminated through the API as the UI's Terminate does it
(``instance.run_launcher.terminate(run_id)``: the run goes CANCELING, its code server interrupts the
worker). A follower thread reads, as soon as the run ended, which snapshots it committed (snapshot
property ``icelake.run-id``) and when, before later maintenance can expire them; the final checks
(bench/soak_run_checks.py) want the run CANCELED and none of its commits later than the Terminate
plus TERMINATE_COMMIT_GRACE_SECONDS.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

from icelake_assets.orchestration.runs.leases import read_lease
from icelake_assets.orchestration.runs.model import TABLE_TAG
from icelake_assets.orchestration.sensors.maintenance import MAINTENANCE_SENSOR
from icelake_assets.types import SNAPSHOT_RUN_ID

REWRITE_STEP = "rewrite_data_files"
REWRITE_WAIT_SECONDS = 90.0  # how long the fault waits for a run in its rewrite before taking any run
TERMINATE_COMMIT_GRACE_SECONDS = 10.0  # a commit already in flight at the Terminate may land this late
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

    def inject(self, seconds: float) -> Termination | None:
        """Waits up to ``seconds`` (at most REWRITE_WAIT_SECONDS) for a run in its rewrite, polling every
        half second, else takes a run in progress in any step; None when there was none."""
        deadline = time.monotonic() + min(seconds, REWRITE_WAIT_SECONDS)
        fallback = None
        chosen = None
        while chosen is None:
            try:
                found = self._candidates()
            except Exception:  # PostgreSQL restarting: poll again
                found = []
            chosen = next((c for c in found if c[2].endswith(REWRITE_STEP)), None)
            fallback = found[0] if found else fallback
            if time.monotonic() >= deadline:
                break
            if chosen is None:
                time.sleep(0.5)
        chosen = chosen or fallback
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
        try:
            if t.status_after is None:
                record = self._reader.get_run_record_by_id(t.run_id)
                if record is None or not record.dagster_run.is_finished:
                    return
                t.ended = record.end_time or time.time()
                t.status_after = record.dagster_run.status.value
            t.commits = run_commits(self.load_table(t.table), t.run_id)
            t.read_error, t.settled = None, True
        except Exception as err:  # PostgreSQL or the catalog restarting: the next pass tries again
            t.read_error = f"{type(err).__name__}: {str(err)[:160]}"
            if t.ended is not None and time.time() - t.ended > give_up_after:
                t.settled = True

    def stop(self) -> None:
        """The follower's last pass (runs that ended meanwhile), then it stops."""
        self._done.set()
        if self._thread.is_alive():
            self._thread.join(30)
        for t in self._pending():
            self._settle(t, give_up_after=0)
