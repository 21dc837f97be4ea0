"""The resident Spark driver's own process (``python -m icelake_assets.maintenance.spark.resident_driver``,
started by resident_spark.attach): holds a SparkSession for the configuration read from stdin, cancels
the job groups of leaseholders that die and, on every pass, of fenced leases (resident_spark.fence_lease),
stops itself and its JVM at once when a leaseholder dies, is fenced or stops renewing its run lease
while committing, and exits after
``idle`` seconds without a lease or a job (or on SIGTERM)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from icelake_assets.maintenance.spark.resident_spark import (
    BUSY,
    FENCED,
    LEASES,
    POLL_S,
    RENEWING,
    STATE_FILE,
    locked,
)
from icelake_assets.planning.stale_runs import SELF_FENCE_SECONDS
from icelake_assets.processes import pid_alive

# How often the resident sweeps while a lease of it is fenced: each job such a run submits is
# cancelled within this (the pass also runs when a leaseholder dies, and every POLL_S otherwise).
FENCED_POLL_S = 0.1


@dataclass(frozen=True)
class Lease:
    """A lease file (resident_spark: written by attach, committing and fence_lease)."""

    group: str
    holder: str  # the PID of the resident it attached to
    busy: str | None  # "committing <what>" while committing
    fenced: str | None  # the reason, once fenced
    renewing: bool = False  # its run lease's renewals beat it: its mtime is the last renewal


def parse_lease(text: str) -> Lease:
    head, *rest = text.splitlines() or [""]
    group, _, holder = head.strip().partition(" ")
    busy = next((line for line in rest if line.startswith(BUSY)), None)
    fenced = next((line[len(FENCED) :].strip() for line in rest if line.startswith(FENCED)), None)
    return Lease(group, holder, busy, fenced, any(line.strip() == RENEWING for line in rest))


def _silent(lease: Path, state: Lease, now: float) -> float | None:
    """How long a renewing lease has not been renewed, when past the self-fence deadline (a holder
    paused by SIGSTOP or a frozen VM, or a storage hanging its renewals: it cannot fence itself)."""
    if not state.renewing:
        return None
    try:
        silent = now - lease.stat().st_mtime
    except OSError:
        return None
    return silent if silent > SELF_FENCE_SECONDS else None


@dataclass
class _Sweep:
    live: int = 0  # leases whose holder lives
    doomed: list[str] = field(default_factory=list)  # what dead or fenced runs of this resident commit
    cancel: dict[str, str] = field(default_factory=dict)  # job groups to cancel, and what to log
    fenced: bool = False


def _sweep_leases(folder: Path, owner: int, told: set[str]) -> _Sweep:
    """Read the leases (files only: the caller holds the folder lock, and a JVM call could block for
    good under it, every attaching run waiting behind). The job groups to cancel: of leaseholders that
    died, and on every pass of live ones whose lease is fenced (``told``: fences already logged). What
    the dead or fenced ones of this resident (``owner``, its PID) were committing: their procedure
    goes on in the JVM, the caller must stop it. A dead run of an earlier resident, killed with its
    JVM, left its lease behind: its work died with that JVM, so the lease is only removed (a new driver
    stopped itself at once for such leases, failing the run that had just started it: the chaos soak)."""
    sweep = _Sweep()
    for lease in (folder / LEASES).glob("*"):
        alive = lease.name.isdigit() and pid_alive(int(lease.name))
        sweep.live += alive
        try:
            state = parse_lease(lease.read_text())
        except OSError:
            continue
        if alive:
            silent = _silent(lease, state, time.time()) if state.holder == str(owner) else None
            if silent is not None and state.busy:
                sweep.doomed.append(
                    f"PID {lease.name} stopped renewing its run lease ({silent:.0f} s) while {state.busy}"
                )
            if state.fenced is None or state.holder != str(owner):
                continue
            sweep.fenced = True
            said = f"PID {lease.name} is fenced ({state.fenced}): cancelling job group {state.group} on every pass"
            if state.group:  # every pass: the jobs it submitted since the last one fail (logged once)
                sweep.cancel[state.group] = "" if said in told else said
                told.add(said)
            if state.busy:
                sweep.doomed.append(f"PID {lease.name} is fenced ({state.fenced}) while {state.busy}")
            continue
        if state.holder == str(owner):
            if state.group:
                sweep.cancel[state.group] = f"PID {lease.name} is gone: cancelled job group {state.group}"
            if state.busy:
                sweep.doomed.append(f"PID {lease.name} died while {state.busy}")
        lease.unlink(missing_ok=True)
    return sweep


def _live(folder: Path) -> int:
    return sum(p.name.isdigit() and pid_alive(int(p.name)) for p in (folder / LEASES).glob("*"))


class _Deaths:
    """Wakes the resident the moment a leaseholder dies (a pidfd per leaseholder, Linux 5.3+; else
    every ``POLL_S``): a dead run's committing work is stopped within milliseconds, not a poll."""

    def __init__(self) -> None:
        self._fds: dict[int, int] = {}

    def wait(self, folder: Path, timeout: float) -> None:
        pids = {int(p.name) for p in (folder / LEASES).glob("*") if p.name.isdigit()}
        for pid in [p for p in self._fds if p not in pids]:
            os.close(self._fds.pop(pid))
        for pid in pids - set(self._fds):
            try:
                self._fds[pid] = os.pidfd_open(pid)
            except (AttributeError, OSError):  # gone already (the sweep sees it), or no pidfd here
                pass
        if self._fds:
            select.select(list(self._fds.values()), [], [], timeout)
        else:
            time.sleep(timeout)


def _die(jvm_pid: int) -> None:
    """This process and its JVM, at once: the whole process group when this process leads it (as
    :func:`_start` starts it), else the JVM by its PID and then this process."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        os.kill(jvm_pid, signal.SIGKILL)
    os._exit(70)


def serve(folder: Path, idle_seconds: float) -> None:
    """Hold a SparkSession for the configuration read from stdin until idle or told to stop."""
    from pyspark.sql import SparkSession

    conf = json.loads(sys.stdin.read())
    stopping = False

    def _stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, _stop)
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    gateway = spark.sparkContext._gateway  # noqa: SLF001 - the port and token runs attach with
    assert gateway is not None
    params = gateway.java_parameters if hasattr(gateway, "java_parameters") else gateway.gateway_parameters
    (folder / LEASES).mkdir(exist_ok=True, mode=0o700)
    state = {
        "pid": os.getpid(),
        "port": params.port,
        "secret": params.auth_token,
        "started": time.time(),
        "app_id": spark.sparkContext.applicationId,
    }
    tmp = folder / f".{STATE_FILE}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump(state, handle)
    os.replace(tmp, folder / STATE_FILE)
    print(
        f"{time.strftime('%H:%M:%S')} resident Spark driver {state['app_id']} ready (PID {os.getpid()})",
        flush=True,
    )
    context = spark.sparkContext
    jvm = context._jvm  # noqa: SLF001 - the JVM's own PID, to stop it should this process not lead its group
    assert jvm is not None
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())
    idle_since = time.monotonic()
    deaths = _Deaths()
    sweep, told = _Sweep(), set[str]()
    while not stopping:
        deaths.wait(folder, FENCED_POLL_S if sweep.fenced else POLL_S)
        with locked(folder):  # no JVM call under the lock (_sweep_leases)
            sweep = _sweep_leases(folder, os.getpid(), told)
            if sweep.doomed:
                # Under the lock: no run attaches to a driver about to die.
                (folder / STATE_FILE).unlink(missing_ok=True)
                print(
                    f"{time.strftime('%H:%M:%S')} {'; '.join(sweep.doomed)}: stopping the driver and its JVM "
                    "so that work cannot commit (runs attached now fail and are retried)",
                    flush=True,
                )
                _die(jvm_pid)
        for group, note in sweep.cancel.items():
            context.cancelJobGroup(group)
            if note:
                print(f"{time.strftime('%H:%M:%S')} {note}", flush=True)
        if sweep.live > 0 or context.statusTracker().getActiveJobsIds():
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since >= idle_seconds:
            with locked(folder):  # no run attaches now; one that attached since the sweep has a lease
                if _live(folder) == 0:
                    (folder / STATE_FILE).unlink(missing_ok=True)
                    print(f"{time.strftime('%H:%M:%S')} idle for {idle_seconds:.0f} s: stopping", flush=True)
                    break
    (folder / STATE_FILE).unlink(missing_ok=True)
    spark.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--idle", type=float, default=600.0, help="seconds without a run before exiting")
    args = parser.parse_args(argv)
    serve(args.folder, args.idle)


if __name__ == "__main__":
    main()
