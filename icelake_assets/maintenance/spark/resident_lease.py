"""This process's lease on the shared Spark driver (resident_spark.attach takes it), what it says and
when: the resident (resident_driver.py) reads the lease files of its folder on every pass.

A lease's first line: the run's job group and the PID of the resident it attached to (a lease left by
a run of an earlier resident, killed with its JVM, names that one: its work died with it). Then
"committing <what>" while :func:`committing` runs (kept once fenced meanwhile), "fenced <reason>" once
:func:`fence_lease` was called, and "renewing" once the run's lease renewals beat it
(:func:`heartbeat`: its mtime is then the last renewal)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from icelake_assets.maintenance.spark import resident_identity as identity
from icelake_assets.types import IcelakeError


class ResidentSparkError(IcelakeError, RuntimeError):
    """The resident Spark driver could not be started or reached."""


class RunFencedError(ResidentSparkError):
    """This run's lease on the shared driver is fenced (:func:`fence_lease`): it may not commit."""


_LEASE: Path | None = None
_HEAD = ""
_BUSY: str | None = None  # what committing() marks
_COMMITS: list[str] = []  # every committing() in flight, oldest first (_BUSY: the latest)
_FENCED: str | None = None  # why fence_lease() was called (also without a resident)
_RENEWING = False  # heartbeat() was called: the lease's mtime is its run lease's renewal
_WRITING = threading.Lock()
BUSY = "committing"
FENCED = "fenced"
RENEWING = "renewing"


def _write_lease() -> None:
    """This process's lease as its state says, replaced at once (the resident never reads half)."""
    if _LEASE is not None:
        busy = "" if _BUSY is None else f"\n{BUSY} {_BUSY}"
        fenced = "" if _FENCED is None else f"\n{FENCED} {_FENCED}"
        fenced += f"\n{RENEWING}" if _RENEWING else ""
        tmp = _LEASE.parent.parent / f".lease.{os.getpid()}"  # not in leases/: the resident reads all there
        identity.write_private(tmp, f"{_HEAD}{busy}{fenced}\n")
        os.replace(tmp, _LEASE)


def fence_lease(reason: str) -> None:
    """This run must not commit any more (say, its run lease was lost): marks its lease fenced. The
    resident cancels the run's Spark jobs on every pass from now on (each new job fails within a
    fraction of a second), and stops itself and its JVM at once should the run be committing; and
    :func:`committing` refuses to begin. Without a resident, only the latter. The first reason stays."""
    global _FENCED
    with _WRITING:
        if _FENCED is None:
            _FENCED = " ".join(reason.split()) or "fenced"
        with contextlib.suppress(OSError):
            _write_lease()


def heartbeat() -> None:
    """The run's lease on the resident says its holder still renews its run lease (its mtime, and a
    ``renewing`` line from the first beat on): the resident stops the JVM of one that stopped renewing
    while committing (resident_driver.py). Leases that never beat (no run lease: the CLI, tests) are
    judged by their holder's life alone."""
    global _RENEWING
    with _WRITING, contextlib.suppress(OSError):
        if not _RENEWING:
            _RENEWING = True
            _write_lease()
        elif _LEASE is not None:
            os.utime(_LEASE)


def reset_fence() -> None:
    """Forget the fence (a new run in this process: tests, Dagster's in-process execution)."""
    global _FENCED, _BUSY, _RENEWING
    with _WRITING:
        _FENCED = _BUSY = None
        _COMMITS.clear()
        _RENEWING = False
        with contextlib.suppress(OSError):
            _write_lease()


def hold(path: Path, head: str) -> None:
    """This process's lease is ``path``, its first line ``head`` (resident_spark.attach)."""
    global _LEASE, _HEAD
    with _WRITING:
        _LEASE, _HEAD = path, head
        _write_lease()


def attached_lease() -> Path | None:
    """This process's lease on a resident driver, or None (no resident: a driver of its own, or none)."""
    return _LEASE


def lease_fenced() -> str | None:
    """Why this process's lease is fenced (:func:`fence_lease`), or None."""
    return _FENCED


@contextlib.contextmanager
def committing(what: str) -> Iterator[None]:
    """Marks this process's lease as committing while the block runs (nothing without a resident):
    should the process die meanwhile, the resident stops before the work can commit again. Refused
    (:class:`RunFencedError`) once this process is fenced."""
    global _BUSY
    if _FENCED is not None:
        raise RunFencedError(f"this run is fenced ({_FENCED}): it may not begin {what}")
    if _LEASE is None:
        yield
        return
    with _WRITING:
        _COMMITS.append(what)
        _BUSY = what
        _write_lease()
    try:
        yield
    finally:
        with _WRITING, contextlib.suppress(OSError):
            # Fenced meanwhile (say, an interrupt): the mark stays until reset_fence, so the resident
            # sees "committing + fenced" and stops the JVM before it commits finished groups.
            if _FENCED is None:
                # Several threads (tables of a run at once) may commit: committing until the last ends.
                if what in _COMMITS:
                    _COMMITS.remove(what)
                _BUSY = _COMMITS[-1] if _COMMITS else None
                _write_lease()
