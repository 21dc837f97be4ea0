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
import os
import socket
import threading
import time
from collections.abc import Iterable

from dagster import DagsterInstance

from icelake_assets.planning.stale_runs import LEASE_RENEW_SECONDS, Lease
from icelake_assets.processes import process_start, same_process

LEASE_KEY_PREFIX = "icelake/run_lease/"


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


def read_lease(instance: DagsterInstance, run_id: str) -> Lease | None:
    return read_leases(instance, [run_id]).get(run_id)


def worker_alive(lease: Lease) -> bool:
    """Whether the process a lease of this host names still runs: its PID, and its start time when
    the lease has one (a PID reused after the worker died is another process)."""
    return same_process(lease.pid, lease.started)


class RunLease:
    """The lease of the run this process works for: taken at once, renewed by a daemon thread every
    ``renew_seconds`` until the run is finished (or :meth:`release`). Best effort: a storage error is
    retried on the next renewal (the lease's TTL is several renewals long)."""

    def __init__(
        self, instance: DagsterInstance, run_id: str, renew_seconds: float = LEASE_RENEW_SECONDS
    ) -> None:
        self._instance = instance
        self._run_id = run_id
        self._renew_seconds = renew_seconds
        self._stop = threading.Event()
        self._host = socket.gethostname()
        self._pid = os.getpid()
        self._started = process_start(self._pid)
        self._thread: threading.Thread | None = None

    def _renew(self, released: bool = False) -> None:
        try:
            _write(
                self._instance,
                self._run_id,
                Lease(self._host, self._pid, time.time(), released, self._started),
            )
        except Exception:  # the storage is down: the next renewal tries again
            pass

    def start(self) -> RunLease:
        self._renew()
        # A worker that ends (its run done, failed or not) says so at exit: a lease left unreleased by a
        # worker that is gone means it was killed (runs/recovery.py, mark_lost_workers).
        atexit.register(self.release)
        self._thread = threading.Thread(
            target=self._loop, name=f"icelake-lease-{self._run_id[:8]}", daemon=True
        )
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self._renew_seconds):
            if self._run_finished():
                self._renew(released=True)
                return
            self._renew()

    def _run_finished(self) -> bool:
        """The run ended (or its instance is gone): the lease has nothing left to say."""
        try:
            run = self._instance.get_run_by_id(self._run_id)
        except Exception:  # the storage is down: keep renewing, it may come back
            return False
        return run is None or run.is_finished

    def release(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        atexit.unregister(self.release)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._renew(released=True)
