"""The chaos soak's state and its chaos phase (bench/soak/chaos_soak.py): the faults of the seeded plan
at their times, the servers watched between them (one that died by itself is an event, restarted),
then the writers stopped."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.common.postgres import Postgres
from bench.soak.faults import KINDS, FaultRecord, Injector, plan_faults
from bench.soak.report import say
from bench.soak.stack import Daemon, Weed, kill_group


@dataclass
class Soak:
    """Everything the soak started and learned, for the checks and the report."""

    seed: int
    minutes: float
    folder: Path
    t0: float = field(default_factory=time.monotonic)
    faults: list[FaultRecord] = field(default_factory=list)
    events: list[str] = field(default_factory=list)  # what happened without a fault (a crash by itself)
    writers: dict[str, subprocess.Popen] = field(default_factory=dict)
    chaos_end: float = 0.0
    last_fault: float = 0.0
    healed_at: float | None = None  # seconds after the soak's start
    load: dict[str, str] = field(default_factory=dict)
    postgres: Postgres | None = None  # the instance's server (--storage postgres)
    retention: dict = field(default_factory=dict)  # the retention table's check (bench/soak/retention.py)

    def clock(self) -> float:
        return time.monotonic() - self.t0


def watch(soak: Soak, weed: Weed, daemon: Daemon) -> None:
    """Between faults: a server that died by itself is an event (and restarted)."""
    for name, proc in (("dagster-daemon", daemon.proc), ("SeaweedFS", weed.proc)):
        if proc is not None and proc.poll() is not None:
            soak.events.append(
                f"{soak.clock():.0f} s: {name} exited by itself ({proc.returncode}); restarted"
            )
            say(soak.t0, soak.events[-1])
            (daemon if name == "dagster-daemon" else weed).start()
    if soak.postgres is not None and soak.postgres.postmaster() is None:
        soak.events.append(f"{soak.clock():.0f} s: PostgreSQL exited by itself; restarted")
        say(soak.t0, soak.events[-1])
        soak.postgres.restart()
    for name, proc in soak.writers.items():
        if proc.poll() is not None and not any(name in e for e in soak.events):
            soak.events.append(f"{soak.clock():.0f} s: writer {name} exited ({proc.returncode})")
            say(soak.t0, soak.events[-1])


def chaos(soak: Soak, weed: Weed, daemon: Daemon, injector: Injector, seconds: float) -> None:
    start = soak.clock()
    injector.until = start + seconds
    kinds = KINDS if soak.postgres is not None else tuple(k for k in KINDS if k != "postgres")
    plan = plan_faults(random.Random(soak.seed), seconds, kinds_=kinds)
    say(soak.t0, f"chaos for {seconds:.0f} s: {len(plan)} faults planned")
    for fault in plan:
        if soak.clock() >= start + seconds:  # earlier faults waited for their targets until the end
            soak.faults.append(FaultRecord(soak.clock(), fault.kind, None, "not injected: the phase ended"))
            continue
        while soak.clock() < start + fault.at:
            watch(soak, weed, daemon)
            time.sleep(1)
        record = injector.inject(fault.kind)
        soak.faults.append(record)
        if record.target is not None:
            soak.last_fault = soak.clock()
        say(soak.t0, f"fault {fault.kind}: PID {record.target} ({record.detail})")
    while soak.clock() < start + seconds:
        watch(soak, weed, daemon)
        time.sleep(1)


def stop_writers(soak: Soak) -> None:
    for proc in soak.writers.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # each ends between two commits
    deadline = time.monotonic() + 90
    for proc in soak.writers.values():
        try:
            proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait()
