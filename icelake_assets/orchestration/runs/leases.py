"""Run leases: every run of the product says, while its worker lives, where that worker is; the
maintenance sensor fails the runs whose worker is gone (runs/recovery.py; planning/stale_runs.py decides).

Why not Dagster's run monitoring alone: it asks the code server that launched a run about its worker.
When the daemon's process group dies with its code server (a host crash), the new code server knows
none of the old workers: their runs stay STARTED forever, holding their pools and the global run
slots, and the lake is never maintained again. A lease lives in the instance itself, so whoever reads
the instance (the sensor, on every tick) can tell a live run from a dead one.

The leases are kept in the instance's key-value store (the run storage's cursor table, the one
Dagster's daemons keep their cursors in): a renewal is one small upsert, never a rewrite of the run.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing.util
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping

import psutil
from dagster import DagsterEventType, DagsterInstance

from icelake_assets.planning.stale_runs import (
    LEASE_RENEW_SECONDS,
    SELF_FENCE_SECONDS,
    WATCH_SECONDS,
    Lease,
)
from icelake_assets.processes import host_identity, same_process, start_ticks

LEASE_KEY_PREFIX = "icelake/run_lease/"
# Tags of a run the recovery failed, or found failed, because its worker was gone (runs/recovery.py).
STALE_TAG = "icelake/stale_run"


def lease_key(run_id: str) -> str:
    return f"{LEASE_KEY_PREFIX}{run_id}"


def read_leases(instance: DagsterInstance, run_ids: Iterable[str]) -> dict[str, Lease]:
    keys = {lease_key(r) for r in run_ids}
    if not keys:
        return {}
    # The run storage's key-value store (DaemonCursorStorage): public methods of the storage, the
    # instance has no wrapper of its own.
    values = instance.run_storage.get_cursor_values(keys)
    return {
        key.removeprefix(LEASE_KEY_PREFIX): lease
        for key, text in values.items()
        if (lease := Lease.loads(text)) is not None
    }


def _write(instance: DagsterInstance, run_id: str, lease: Lease) -> None:
    instance.run_storage.set_cursor_values({lease_key(run_id): lease.dumps()})


# When an observer (the recovery) last saw each lease change, on the observer's own clock: a lease of
# another host is judged by that, never by comparing that host's clock with ours.
SEEN_KEY_PREFIX = "icelake/run_lease_seen/"


def observe_leases(instance: DagsterInstance, leases: Mapping[str, Lease], now: float) -> dict[str, float]:
    """For each run's lease, how long the observer has seen it unchanged (0 on a change or a first
    sight), recording what it saw. One read and at most one write per call."""
    if not leases:
        return {}
    seen = instance.run_storage.get_cursor_values({SEEN_KEY_PREFIX + r for r in leases})
    unchanged: dict[str, float] = {}
    updates: dict[str, str] = {}
    for run_id, lease in leases.items():
        mark = f"{lease.holder}:{lease.beat}:{int(lease.released)}"
        before, _, at = (seen.get(SEEN_KEY_PREFIX + run_id) or "").partition(" ")
        try:
            since = float(at) if before == mark else None
        except ValueError:
            since = None
        if since is None or since > now:
            updates[SEEN_KEY_PREFIX + run_id] = f"{mark} {now}"
            unchanged[run_id] = 0.0
        else:
            unchanged[run_id] = now - since
    if updates:
        instance.run_storage.set_cursor_values(updates)
    return unchanged


def read_lease(instance: DagsterInstance, run_id: str) -> Lease | None:
    return read_leases(instance, [run_id]).get(run_id)


def worker_alive(lease: Lease) -> bool:
    """Whether the run worker a lease of this host identity names still runs: its PID, and its start
    ticks when the lease has them (a PID reused after the worker died is another process)."""
    return same_process(lease.pid, lease.ticks)


class RunLease:
    """The lease of the run this process works for: taken at once, renewed by a daemon thread every
    ``renew_seconds`` until the run is finished (or :meth:`release`). The lease names the run worker
    (the process whose life is the run's: under the multiprocess executor the orchestrating parent,
    not this step process), so it follows the run across its step processes. Best effort: a storage
    error is retried on the next renewal (the lease's TTL is several renewals long).

    The same thread watches the run every ``watch_seconds``: a run failed by someone else (the
    sensor's verdict), or terminated (CANCELING: the UI's Terminate, ``dagster/max_runtime``), is
    fenced through ``on_fenced(reason, canceled)`` (maintenance/spark/fencing.py) before its next commit; so
    is a worker that could not renew its lease for ``SELF_FENCE_SECONDS``: judged by a timer thread of
    its own that makes no storage call (a storage call that hangs cannot delay it), and told after
    every renewal through ``on_renewed`` (fencing checks the deadline again at each commit, so a
    worker paused past it commits nothing when it resumes)."""

    def __init__(
        self,
        instance: DagsterInstance,
        run_id: str,
        renew_seconds: float = LEASE_RENEW_SECONDS,
        watch_seconds: float = WATCH_SECONDS,
        on_fenced: Callable[[str, bool], None] | None = None,
        on_renewed: Callable[[], None] | None = None,
    ) -> None:
        self._instance = instance
        self._run_id = run_id
        self._renew_seconds = renew_seconds
        self._watch_seconds = min(watch_seconds, renew_seconds)
        self._on_fenced = on_fenced
        self._on_renewed = on_renewed
        self._stop = threading.Event()
        self._host = socket.gethostname()
        self._identity = host_identity()
        self._pid = run_worker_pid(instance, run_id)
        self._ticks = start_ticks(self._pid)
        self._beat = 0
        self._renewed = time.monotonic()
        self._fenced = False
        self._thread: threading.Thread | None = None
        self._deadline: threading.Thread | None = None

    def _renew(self, released: bool = False) -> None:
        self._beat += 1
        lease = Lease(
            self._host,
            self._pid,
            time.time(),
            released,
            self._identity,
            self._ticks,
            self._beat,
            os.getpid(),
        )
        try:
            _write(self._instance, self._run_id, lease)
        except Exception:  # the storage is down: the next renewal tries again
            return
        self._renewed = time.monotonic()
        if self._on_renewed is not None and not released:
            with contextlib.suppress(Exception):  # telling must never kill the renewal
                self._on_renewed()

    def start(self) -> RunLease:
        self._renew()
        self._watch()  # a step retried after a Terminate is fenced before it does anything
        # A step process that ends (its run done, failed or not) says so at exit: a lease left
        # unreleased by a run worker that is gone means it was killed (runs/recovery.py,
        # mark_lost_workers). Multiprocessing children leave through os._exit, which skips atexit:
        # multiprocessing's own finalizers run there (and, in a plain process, at exit too).
        atexit.register(self.release)
        multiprocessing.util.Finalize(self, type(self).release, args=(self,), exitpriority=10)
        self._thread = threading.Thread(
            target=self._loop, name=f"icelake-lease-{self._run_id[:8]}", daemon=True
        )
        self._thread.start()
        self._deadline = threading.Thread(
            target=self._deadline_loop, name=f"icelake-lease-deadline-{self._run_id[:8]}", daemon=True
        )
        self._deadline.start()
        return self

    def _deadline_loop(self) -> None:
        """Fence the run once its lease went unrenewed past ``SELF_FENCE_SECONDS``, whatever the
        renewing thread is blocked in (a storage call without an answer)."""
        while not self._stop.wait(min(1.0, self._watch_seconds)):
            silent = time.monotonic() - self._renewed
            if silent > SELF_FENCE_SECONDS:
                self._fence_for(f"its lease could not be renewed for {silent:.0f} s", canceled=False)
                return

    def _loop(self) -> None:
        next_renewal = time.monotonic() + self._renew_seconds
        while not self._stop.wait(self._watch_seconds):
            status = self._watch()
            if status in _FINISHED:  # the run ended: the lease has nothing left to say
                self._renew(released=True)
                return
            if time.monotonic() >= next_renewal:
                self._renew()
                next_renewal = time.monotonic() + self._renew_seconds

    def _watch(self) -> str | None:
        """Read the run; fence it on a verdict (terminated, or failed as stale). Its status word."""
        status, stale = self._run_status()
        if status in ("CANCELING", "CANCELED"):
            self._fence_for(f"run {self._run_id} was terminated ({status})", canceled=True)
        elif stale:
            self._fence_for(f"run {self._run_id} was judged dead and failed: {stale}", canceled=False)
        return status

    def _run_status(self) -> tuple[str | None, str | None]:
        """The run's status word (None when the storage cannot say: it may come back), and the
        recovery's verdict when it failed the run as stale (its tag; a run that failed by its own
        error is not fenced: it is ending here anyway)."""
        try:
            run = self._instance.get_run_by_id(self._run_id)
        except Exception:
            return None, None
        if run is None:
            return "SUCCESS", None
        stale = run.tags.get(STALE_TAG) if run.status.value == "FAILURE" else None
        return run.status.value, stale

    def _fence_for(self, reason: str, canceled: bool) -> None:
        if self._fenced or self._on_fenced is None:
            return
        self._fenced = True
        try:
            self._on_fenced(reason, canceled)
        except Exception:  # fencing must never kill the watch
            pass

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        atexit.unregister(self.release)
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._renew(released=True)


_FINISHED = frozenset({"SUCCESS", "FAILURE", "CANCELED"})
# Dagster's engine events that name the run worker's PID: the code server's "Started process for run"
# and the multiprocess executor's parent ("Executing steps using multiprocess executor: parent process").
_PID_METADATA = "pid"


def run_worker_pid(instance: DagsterInstance, run_id: str) -> int:
    """The run worker of ``run_id`` as seen from this process: the nearest of this process's ancestors
    that the run's engine events name by PID (the orchestrating process of a multiprocess run), else
    this process (the in-process executor, ``dg launch``, a step launched where its parent is not)."""
    me = os.getpid()
    try:
        ancestors = [p.pid for p in psutil.Process(me).parents()]
    except psutil.Error:
        return me
    if not ancestors:
        return me
    try:
        records = instance.get_records_for_run(
            run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=200
        ).records
    except Exception:  # the storage is down: this process answers for the run
        return me
    named: set[int] = set()
    for record in records:
        event = record.event_log_entry.dagster_event
        data = event.engine_event_data if event is not None else None
        value = (data.metadata or {}).get(_PID_METADATA) if data is not None else None
        text = getattr(value, "value", getattr(value, "text", value))
        with contextlib.suppress(TypeError, ValueError):
            named.add(int(str(text)))
    named.discard(me)
    return next((pid for pid in ancestors if pid in named), me)
