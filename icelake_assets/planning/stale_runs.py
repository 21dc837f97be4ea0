"""When a run is stale: its worker is gone, whatever killed it (Dagster-free).

Every run of the product holds a *lease* while its worker lives: the worker's host and PID, renewed
every few seconds (orchestration/runs/leases.py writes it into the instance). Dagster's own run
monitoring asks the code server that launched a run whether its worker lives; when the daemon's whole
process group died (a host crash, ``kill -9`` of the group), the new code server does not know the old
workers, so their runs stay STARTED forever and hold their pools and the run slots. The sensor reads
the leases on every tick and fails the runs this module calls stale, so the table goes through the
normal backoff and retry.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

# The worker renews its lease this often; a lease not renewed for LEASE_TTL_SECONDS is lost (the
# worker is frozen, or on a host the sensor cannot see: its PID cannot be asked).
LEASE_RENEW_SECONDS = 10.0
LEASE_TTL_SECONDS = 90.0
# A run without a lease this long after it started (or was launched) never reached its worker's
# first resource: the worker died while starting (Dagster's own start timeout is 300 s).
NO_LEASE_GRACE_SECONDS = 300.0


@dataclass(frozen=True)
class Lease:
    """A run worker's claim on its run: where it runs and when it last said so (epoch s)."""

    host: str
    pid: int
    renewed_at: float
    released: bool = False  # the run ended (the lease has nothing left to say)
    # The process's start time (epoch s), so a PID reused by another process after the worker died
    # is not taken for the worker. None where it cannot be read. Stored as "created": a lease of an
    # earlier version ("started", clock ticks since boot) is judged by its PID alone.
    started: float | None = None

    def dumps(self) -> str:
        return json.dumps(
            {
                "host": self.host,
                "pid": self.pid,
                "renewed_at": self.renewed_at,
                "released": self.released,
                "created": self.started,
            }
        )

    @staticmethod
    def loads(text: str | None) -> Lease | None:
        """None for a missing or unreadable lease (a lease is advisory: never an error)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            started = data.get("created")
            return Lease(
                str(data["host"]),
                int(data["pid"]),
                float(data["renewed_at"]),
                bool(data["released"]),
                None if started is None else float(started),
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class RunView:
    """What the sensor knows of one unfinished run: its status word and its clock (epoch s)."""

    run_id: str
    status: str  # "STARTING", "STARTED", ... (DagsterRunStatus values)
    since: float  # start time, else launch or creation time
    lease: Lease | None


def stale_reason(
    run: RunView,
    now: float,
    host: str,
    worker_alive: Callable[[Lease], bool],
    ttl_seconds: float = LEASE_TTL_SECONDS,
    grace_seconds: float = NO_LEASE_GRACE_SECONDS,
) -> str | None:
    """Why ``run`` is stale (its worker is gone), or None while it may live.

    * its lease names a process of this host: stale at once when that process is gone (its PID, and
      its start time against a reused PID), never while it lives (a storage outage that kept it from
      renewing its lease does not make a live worker stale);
    * a lease of another host not renewed for ``ttl_seconds`` (its PID cannot be asked from here);
    * no lease ``grace_seconds`` after it started or launched (its worker never came up).
    Queued runs are the run queue's, never stale here."""
    if run.status not in ("STARTING", "STARTED"):
        return None
    lease = run.lease
    if lease is None:
        waited = now - run.since
        if waited < grace_seconds:
            return None
        return (
            f"its worker never took its lease: {run.status.lower()} for {waited:.0f} s "
            f"(grace {grace_seconds:.0f} s); the worker died while starting"
        )
    if lease.host == host:
        if worker_alive(lease):
            return None
        return (
            f"its worker (PID {lease.pid} on {lease.host}) is gone; "
            f"lease last renewed {now - lease.renewed_at:.0f} s ago"
        )
    silent = now - lease.renewed_at
    if silent > ttl_seconds:
        return (
            f"its worker (PID {lease.pid} on {lease.host}) has not renewed its lease for {silent:.0f} s "
            f"(limit {ttl_seconds:.0f} s)"
        )
    return None


def lost_worker_reason(
    lease: Lease | None,
    now: float,
    host: str,
    worker_alive: Callable[[Lease], bool],
    ttl_seconds: float = LEASE_TTL_SECONDS,
) -> str | None:
    """Why a run that ended failed without naming a cause lost its worker, or None when it did not.

    Dagster fails a run whose worker was killed while its code server lived (run monitoring), naming
    no cause the product knows. Its lease tells: a worker that ends, failing or not, releases its
    lease at exit; one killed (``kill -9``, out of memory) leaves it unreleased, naming a process of
    this host that is gone, or a process of another host silent for ``ttl_seconds``."""
    if lease is None or lease.released:
        return None
    # The worker is gone by the rule of a run in progress (its PID here, its renewals elsewhere).
    gone = stale_reason(RunView("", "STARTED", now, lease), now, host, worker_alive, ttl_seconds)
    return None if gone is None else f"{gone}: it died before its run ended (killed, or out of memory)"


# Seconds a maintenance run may take before Dagster's run monitoring stops it (``dagster/max_runtime``),
# a backstop behind the leases: generous, from the bytes the run plans to rewrite.
MAX_RUNTIME_FLOOR_SECONDS = 3600
MAX_RUNTIME_CEILING_SECONDS = 24 * 3600
# A slow rewrite's pace (bytes per second), times a margin: a run slower than this is stuck.
SLOW_REWRITE_BYTES_PER_SECOND = 2 * 1024 * 1024


def max_runtime_seconds(estimated_rewrite_bytes: int) -> int:
    """The run's max runtime: an hour, plus the planned rewrite at a slow pace, at most a day."""
    paced = int(max(0, estimated_rewrite_bytes) / SLOW_REWRITE_BYTES_PER_SECOND)
    return min(MAX_RUNTIME_CEILING_SECONDS, MAX_RUNTIME_FLOOR_SECONDS + paced)
