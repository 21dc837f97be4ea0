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
import re
from collections.abc import Callable
from dataclasses import dataclass

# The worker renews its lease this often; a lease of another host (or PID namespace) the sensor has
# not seen change for LEASE_TTL_SECONDS, on its own clock, is lost (the worker is frozen, or on a host
# whose PIDs cannot be asked from here).
LEASE_RENEW_SECONDS = 10.0
LEASE_TTL_SECONDS = 90.0
# A worker that could not renew its lease for this long stops committing (it fences itself): by the
# time the sensor could judge it lost (LEASE_TTL_SECONDS) it no longer acts (runs/leases.py).
SELF_FENCE_SECONDS = 60.0
# A run without a lease this long after it started (or was launched) never reached its worker's
# first resource: the worker died while starting (Dagster's own start timeout is 300 s).
NO_LEASE_GRACE_SECONDS = 300.0
# What a fenced run may still finish after its verdict: the worker's watch sees its run failed within
# WATCH_SECONDS and stops its Spark work; an Iceberg commit already in flight (a metadata swap) takes
# seconds. The table is launched again no sooner than this after the verdict (run_model's shortest
# wait after a lost worker, 60 s, is longer: a test holds the two together).
WATCH_SECONDS = 2.0
FENCE_GRACE_SECONDS = 45.0


@dataclass(frozen=True)
class Lease:
    """A run's claim on its worker: the process whose life is the run's (the run worker: the step
    process itself in-process, the orchestrating parent under the multiprocess executor), where it
    runs, and the renewals of whichever step process holds the lease now."""

    host: str  # the hostname, for messages
    pid: int  # the run worker's PID
    renewed_at: float  # the writer's clock (epoch s): for messages only, never compared with ours
    released: bool = False  # the step process that wrote it ended (the run may go on in another)
    # hostname/boot id/PID namespace of the run worker (processes.host_identity): its PID means
    # something only there. None: a lease of an earlier version, judged by its renewals alone.
    identity: str | None = None
    ticks: int | None = None  # the run worker's start, clock ticks since boot (a reused PID is another)
    beat: int = 0  # grows with every renewal: the sensor sees it change on its own clock
    holder: int | None = None  # the step process that wrote it (the run worker itself in-process)

    def dumps(self) -> str:
        return json.dumps(
            {
                "host": self.host,
                "pid": self.pid,
                "renewed_at": self.renewed_at,
                "released": self.released,
                "identity": self.identity,
                "ticks": self.ticks,
                "beat": self.beat,
                "holder": self.holder,
            }
        )

    @staticmethod
    def loads(text: str | None) -> Lease | None:
        """None for a missing or unreadable lease (a lease is advisory: never an error)."""
        if not text:
            return None
        try:
            data = json.loads(text)
            ticks, holder = data.get("ticks"), data.get("holder")
            return Lease(
                str(data["host"]),
                int(data["pid"]),
                float(data["renewed_at"]),
                bool(data["released"]),
                data.get("identity") or None,
                None if ticks is None else int(ticks),
                int(data.get("beat") or 0),
                None if holder is None else int(holder),
            )
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class RunView:
    """What the sensor knows of one unfinished run: its status word, its clock (epoch s), its lease and
    how long the sensor has seen that lease unchanged, on the sensor's own clock (None: never seen)."""

    run_id: str
    status: str  # "STARTING", "STARTED", ... (DagsterRunStatus values)
    since: float  # start time, else launch or creation time
    lease: Lease | None
    unchanged_for: float | None = None


def stale_reason(
    run: RunView,
    now: float,
    identity: str,
    worker_alive: Callable[[Lease], bool],
    ttl_seconds: float = LEASE_TTL_SECONDS,
    grace_seconds: float = NO_LEASE_GRACE_SECONDS,
) -> str | None:
    """Why ``run`` is stale (its worker is gone), or None while it may live.

    * its lease names a run worker where this sensor's PIDs are (``identity``: the same host, boot and
      PID namespace): stale at once when that process is gone (its PID and start ticks), never while
      it lives, whichever step process holds the lease (a storage outage that kept it from renewing
      does not make a live worker stale);
    * elsewhere (another host, a container's own PID namespace): stale when a step process holds the
      lease (not released) and the sensor has not seen it renewed for ``ttl_seconds`` on its own
      clock. A lease released between step processes says nothing there: a user's own step may run
      for hours without the product; Dagster's run monitoring asks the launcher about such runs;
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
    if lease.identity == identity:
        if worker_alive(lease):
            return None
        return f"its worker (PID {lease.pid} on {lease.host}) is gone"
    silent = run.unchanged_for
    if lease.released or silent is None or silent <= ttl_seconds:
        return None
    return (
        f"its worker (PID {lease.pid} on {lease.host}, {lease.identity or 'unknown namespace'}) has not "
        f"renewed its lease for {silent:.0f} s (limit {ttl_seconds:.0f} s)"
    )


def lost_worker_reason(
    lease: Lease | None,
    now: float,
    identity: str,
    worker_alive: Callable[[Lease], bool],
    unchanged_for: float | None,
    ttl_seconds: float = LEASE_TTL_SECONDS,
) -> str | None:
    """Why a run that ended failed without naming a cause lost its worker, or None when it did not.

    Dagster fails a run whose worker was killed while its code server lived (run monitoring), naming
    no cause the product knows. Its lease tells: a step process that ends, failing or not, releases
    the lease at exit; one killed (``kill -9``, out of memory) leaves it unreleased, naming a run
    worker of this host that is gone, or elsewhere a lease the sensor saw unchanged for ``ttl_seconds``."""
    if lease is None or lease.released:
        return None
    # The worker is gone by the rule of a run in progress (its PID here, its renewals elsewhere).
    view = RunView("", "STARTED", now, lease, unchanged_for)
    gone = stale_reason(view, now, identity, worker_alive, ttl_seconds)
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


# Dagster's code server, when the run worker it started dies before it reports that it started:
# "Subprocess for <run> terminated unexpectedly with exit code -9" (a negative code: killed by a signal).
_LAUNCH_KILLED = re.compile(r"terminated unexpectedly with exit code (-\d+)")


def launch_killed_reason(text: str) -> str | None:
    """Why a run that failed at launch lost its worker (killed by a signal while it started, as under
    ``kill -9`` or the OOM killer), or None: a worker that exited by itself (a bad environment, an
    import error) failed for a reason of its own, and that is a failure."""
    found = _LAUNCH_KILLED.search(text)
    if found is None:
        return None
    return f"its worker was killed while it was launched (exit code {found.group(1)})"
