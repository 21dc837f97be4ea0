"""The chaos soak's faults (bench/soak/chaos_soak.py), at random times from a seeded plan:

* ``run_worker``: ``kill -9`` of a maintenance run's worker (the PID its lease names, checked to be
  in the daemon's process group);
* ``daemon_group``: ``kill -9`` of the daemon's whole process group (daemon, code server, the runs it
  launched), as when the host dies, then a restart;
* ``seaweedfs``: ``kill -9`` of the store and catalog, then a restart on the same data and ports;
* ``spark_driver``: ``kill -9`` of the resident Spark driver (the PID in its ``driver.json``);
* ``postgres``: ``kill -9`` of the PostgreSQL postmaster holding the Dagster instance (``--storage
  postgres``), then a restart on the same data folder and port (bench/common/postgres.py);
* ``terminate``: a maintenance run in progress, ideally inside a partial-progress rewrite, terminated
  through the API as the UI's Terminate does it, through the daemon's code server
  (bench/soak/terminate.py);
* ``pause``: ``SIGSTOP`` of a maintenance run's worker, ``SIGCONT`` past its lease
  (bench/soak/pause.py).

A fault whose target does not exist yet (no run in progress, no driver) waits for one, at most
TARGET_WAIT_SECONDS and never past the end of the phase.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

from bench.common.postgres import Postgres
from bench.soak.pause import HOLD_SECONDS, Pauser
from bench.soak.stack import Daemon, Weed, read_proc
from bench.soak.terminate import Terminator
from icelake_assets.maintenance.spark.resident_spark import STATE_FILE
from icelake_assets.orchestration.runs.leases import read_leases
from icelake_assets.orchestration.sensors.maintenance import MAINTENANCE_SENSOR
from icelake_assets.processes import pid_alive

KINDS = ("run_worker", "daemon_group", "seaweedfs", "spark_driver", "postgres", "terminate", "pause")
MEAN_GAP_SECONDS = 60.0
TARGET_WAIT_SECONDS = 120.0  # how long a fault waits for its target to exist


@dataclass(frozen=True)
class Fault:
    at: float  # seconds after the chaos phase began
    kind: str


def plan_faults(
    rng: random.Random, seconds: float, mean_gap: float = MEAN_GAP_SECONDS, kinds_: tuple[str, ...] = KINDS
) -> list[Fault]:
    """About one fault per ``mean_gap`` (at least one of each kind of ``kinds_``), the kinds in shuffled
    rounds so each comes as often, at uniform random times inside the phase."""
    count = max(len(kinds_), round(seconds / mean_gap))
    kinds: list[str] = []
    while len(kinds) < count:
        round_ = list(kinds_)
        rng.shuffle(round_)
        kinds += round_
    margin = min(15.0, seconds / 10)
    times = sorted(rng.uniform(margin, seconds - margin) for _ in range(count))
    return [Fault(at, kind) for at, kind in zip(times, kinds[:count], strict=True)]


@dataclass(frozen=True)
class FaultRecord:
    at: float  # seconds after the soak's start, when the kill was sent
    kind: str
    target: int | None  # the PID killed (None: skipped, no target in time)
    detail: str
    back_after: float = 0.0  # seconds until the restarted server answered (restarts only)


def kill9(pid: int, timeout: float = 10.0) -> None:
    """``kill -9``, returning once the process is gone (the next fault must not find it again)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)


class Injector:
    """Injects faults into the soak's stack; ``clock`` gives seconds since the soak's start."""

    def __init__(
        self,
        weed: Weed,
        daemon: Daemon,
        spark_state: Path,
        rng: random.Random,
        clock: Callable[[], float],
        postgres: Postgres | None = None,
        load_table: Callable[[str], object] | None = None,
    ) -> None:
        self.weed, self.daemon, self.spark_state, self.rng, self.clock = weed, daemon, spark_state, rng, clock
        self.postgres = postgres
        self.instance = DagsterInstance.from_config(str(daemon.home))
        self.terminator = Terminator(self.instance, load_table or (lambda name: None), clock)
        self.pauser = Pauser(
            self.instance,
            lambda: self.daemon.proc.pid if self.daemon.proc else -1,
            load_table or (lambda name: None),
            clock,
            random.Random(rng.getstate()[1][0]),  # its own draws: the other faults' stay as they were
        )
        self.until = float("inf")  # the end of the chaos phase (soak clock): no fault waits past it

    def inject(self, kind: str) -> FaultRecord:
        return getattr(self, f"_{kind}")()

    def _left(self) -> float:
        """How long a fault may wait for its target: TARGET_WAIT_SECONDS, never past the phase."""
        return min(TARGET_WAIT_SECONDS, max(0.0, self.until - self.clock()))

    def _wait(self, find: Callable[[], list]) -> list:
        deadline = time.monotonic() + self._left()
        while time.monotonic() < deadline:
            try:
                found = find()
            except Exception:  # the instance's PostgreSQL restarting: look again
                found = []
            if found:
                return found
            time.sleep(1)
        return []

    def _run_worker(self) -> FaultRecord:
        def find() -> list[tuple[int, str, str]]:
            runs = self.instance.get_runs(
                RunsFilter(
                    statuses=[DagsterRunStatus.STARTED], tags={"dagster/sensor_name": MAINTENANCE_SENSOR}
                )
            )
            leases = read_leases(self.instance, [r.run_id for r in runs])
            daemon_group = self.daemon.proc.pid if self.daemon.proc else -1
            out = []
            for run in runs:
                lease = leases.get(run.run_id)
                proc = read_proc(lease.pid) if lease and not lease.released else None
                # The PID must be a live process of the daemon's group: never a reused PID elsewhere.
                if proc is not None and proc.pgid == daemon_group:
                    out.append((proc.pid, run.run_id, run.tags.get("icelake/table", "?")))
            return out

        found = self._wait(find)
        if not found:
            return FaultRecord(self.clock(), "run_worker", None, "skipped: no run in progress")
        # Somewhere inside the run, not always at its first second.
        time.sleep(self.rng.uniform(0, 10))
        live = [t for t in find() if pid_alive(t[0])]
        if not live:
            return FaultRecord(self.clock(), "run_worker", None, "skipped: the run ended meanwhile")
        pid, run_id, table = self.rng.choice(live)
        kill9(pid)
        return FaultRecord(self.clock(), "run_worker", pid, f"run {run_id[:8]} of {table}")

    def _daemon_group(self) -> FaultRecord:
        at = self.clock()
        pid, members = self.daemon.kill_group()
        down = self.rng.uniform(1, 5)
        time.sleep(down)
        started = time.monotonic()
        self.daemon.start()
        return FaultRecord(
            at,
            "daemon_group",
            pid,
            f"{members} processes; restarted after {down:.1f} s",
            down + time.monotonic() - started,
        )

    def _seaweedfs(self) -> FaultRecord:
        at = self.clock()
        pid = self.weed.kill()
        down = self.rng.uniform(2, 10)
        time.sleep(down)
        started = time.monotonic()
        self.weed.start()
        back = down + time.monotonic() - started
        return FaultRecord(at, "seaweedfs", pid, f"down {back:.1f} s, same data and ports", back)

    def _spark_driver(self) -> FaultRecord:
        def find() -> list[int]:
            pids = []
            for state in self.spark_state.glob(f"*/{STATE_FILE}"):
                try:
                    pid = int(json.loads(state.read_text())["pid"])
                except (OSError, ValueError, KeyError):
                    continue
                proc = read_proc(pid)
                if proc is not None and "resident_driver" in proc.cmdline:
                    pids.append(pid)
            return pids

        found = self._wait(find)
        if not found:
            return FaultRecord(self.clock(), "spark_driver", None, "skipped: no resident driver")
        pid = self.rng.choice(found)
        leases = len(list((self.spark_state).glob("*/leases/*")))
        kill9(pid)
        return FaultRecord(self.clock(), "spark_driver", pid, f"{leases} run(s) attached")

    def _postgres(self) -> FaultRecord:
        if self.postgres is None:
            return FaultRecord(self.clock(), "postgres", None, "skipped: the instance is on SQLite")
        at = self.clock()
        pid, backends, outlived = self.postgres.kill()
        down = self.rng.uniform(2, 8)
        time.sleep(down)
        started = time.monotonic()
        self.postgres.restart()
        back = down + time.monotonic() - started
        left = f"; {outlived} outlived it (killed)" if outlived else ""
        return FaultRecord(
            at, "postgres", pid, f"{backends} backends{left}; down {back:.1f} s, same data and port", back
        )

    def _terminate(self) -> FaultRecord:
        done = self.terminator.inject(self._left())
        if done is None:
            return FaultRecord(self.clock(), "terminate", None, "skipped: no run in progress")
        return FaultRecord(
            done.soak_at,
            "terminate",
            done.worker or 0,
            f"run {done.run_id[:8]} of {done.table} in {done.step}; launcher answered {done.answer}",
        )

    def _pause(self) -> FaultRecord:
        done = self.pauser.inject(self._left())
        if done is None:
            return FaultRecord(self.clock(), "pause", None, "skipped: no run in progress")
        return FaultRecord(
            done.soak_at,
            "pause",
            done.pid,
            f"SIGSTOP of run {done.run_id[:8]} of {done.table} in {done.step}; SIGCONT in {HOLD_SECONDS:.0f} s",
        )
