"""Fencing: a run that may no longer maintain its table stops before its next commit (Dagster-free).

A run is *fenced* when its worker learns (orchestration/runs/leases.py watches the run every
``WATCH_SECONDS``) that it was judged dead and failed, that it was terminated (the UI's Terminate,
``dagster/max_runtime``), or when it could not renew its lease long enough that the sensor may judge
it lost. The token is the run itself: the sensor launches the table again only after the run judged
dead is marked failed in the instance, so "my run is still in progress" is the fencing check, read
fresh by the watch and acted on at once. From then on, in this process:

* every path that commits or deletes (:func:`committing` around Spark procedures and actions, which
  marks the shared driver's lease too; :func:`check` before a pyiceberg commit, a rollback or an
  orphan's deletion) refuses with :class:`RunFencedError`;
* Spark work in flight is stopped: on the shared driver the lease is marked fenced (the resident
  cancels the run's job group, and stops itself and its JVM when the run was committing, as for a
  dead run); a driver of the run's own has its jobs cancelled, and its JVM killed when the run was
  committing (a rewrite with partial progress commits the file groups it finished otherwise).

The window that remains (a commit whose check passed just before the verdict) is bounded and covered
in docs/safety.md: the relaunch waits ``FENCE_GRACE_SECONDS``, Iceberg's optimistic concurrency
refuses a commit based on metadata the new run replaced, validation and reconciliation account for
what landed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

from icelake_assets.maintenance.spark import resident_spark
from icelake_assets.planning.stale_runs import SELF_FENCE_SECONDS


class RunFencedError(resident_spark.RunFencedError):
    """This run may no longer commit: it was judged dead, terminated or lost its lease."""

    def __init__(self, what: str, reason: str, canceled: bool) -> None:
        super().__init__(f"{what} refused: {reason}")
        self.reason = reason
        self.canceled = canceled  # terminated by a user or max_runtime (the run ends CANCELED)


_LOCK = threading.Lock()
# armed: the run whose op this process executes now or last (only its watch may fence); acting: an op
# of it is running (the fence guards the product's ops, never other code of a long-lived process).
_state: dict[str, object] = {
    "armed": None,
    "reason": None,
    "canceled": False,
    "committing": None,
    "acting": 0,
    "renewed": None,  # monotonic time of the run lease's last renewal (None: no run lease)
}
_COMMITS: list[str] = []  # what this process's threads commit now ("committing": the latest of them)


def fenced() -> str | None:
    """Why this process's run is fenced, or None."""
    reason = _state["reason"]
    return reason if isinstance(reason, str) else None


def was_canceled() -> bool:
    return bool(_state["canceled"])


def lease_renewed() -> None:
    """The run's lease was renewed now (orchestration/runs/leases.py): its commits may go on for
    ``SELF_FENCE_SECONDS``. The shared driver's lease is touched too, so the resident can tell a
    worker that stopped renewing (paused by SIGSTOP, a frozen VM) while its procedure commits."""
    _state["renewed"] = time.monotonic()
    resident_spark.heartbeat()


def lease_expired() -> str | None:
    """Why the run's lease is past its self-fence deadline, read on this process's clock at the call
    (not by a thread that a paused process has not run yet), or None."""
    renewed = _state["renewed"]
    if not isinstance(renewed, float):
        return None
    silent = time.monotonic() - renewed
    return f"its lease was not renewed for {silent:.0f} s" if silent > SELF_FENCE_SECONDS else None


def check(what: str) -> None:
    """Raise :class:`RunFencedError` if this process's run is fenced while one of its ops acts: call
    immediately before a commit. A lease past its deadline fences the run here and now: a worker
    resumed after a pause past its lease commits nothing, whatever its threads have done since."""
    if _state["acting"] and (expired := lease_expired()) is not None:
        armed = _state["armed"]
        if isinstance(armed, str):
            fence(armed, expired, canceled=False)
    reason = fenced()
    if reason is not None and _state["acting"]:
        raise RunFencedError(what, reason, was_canceled())


def fence(run_id: str, reason: str, canceled: bool = False) -> None:
    """Fence run ``run_id`` if it is this process's run (idempotent: the first reason stays), and stop
    the Spark work of its op in flight."""
    with _LOCK:
        if _state["armed"] != run_id or _state["reason"] is not None:
            return
        _state["reason"], _state["canceled"] = reason, canceled
        busy, acting = _state["committing"], bool(_state["acting"])
    if acting:
        resident_spark.fence_lease(reason)
        _stop_own_driver(busy is not None)


def arm(run_id: str) -> None:
    """This process works for run ``run_id`` now: an earlier run's fence is forgotten (Dagster's
    in-process execution and tests run several runs in one process)."""
    with _LOCK:
        if _state["armed"] == run_id:
            return  # a retry of the same run's step: its fence stands
        _state.update(armed=run_id, reason=None, canceled=False, committing=None, renewed=None)
        _COMMITS.clear()
    resident_spark.reset_fence()


@contextlib.contextmanager
def acting() -> Iterator[None]:
    """An op of the armed run does its work (its commits are checked, its Spark work stopped when fenced)."""
    with _LOCK:
        _state["acting"] = int(_state["acting"]) + 1  # type: ignore[call-overload]
        reason = fenced()
    if reason is not None:
        resident_spark.fence_lease(reason)
    try:
        yield
    finally:
        with _LOCK:
            _state["acting"] = int(_state["acting"]) - 1  # type: ignore[call-overload]


@contextlib.contextmanager
def committing(what: str) -> Iterator[None]:
    """Around a call that may commit: refused when fenced, marked committing (here and in the shared
    driver's lease). An interrupt arriving meanwhile (a terminate's SIGINT) fences the run before the
    mark is cleared, so the work left in the JVM cannot commit."""
    check(what)
    with resident_spark.committing(what):
        with _LOCK:  # tables of a run maintained at once commit from several threads
            _COMMITS.append(what)
            _state["committing"] = what
        try:
            yield
        except BaseException as err:
            # Not an error of the work: an interrupt (KeyboardInterrupt, Dagster's own interrupt error).
            if not isinstance(err, Exception):
                fence_interrupted(f"interrupted while {what}")
            raise
        finally:
            with _LOCK:  # committing until the last thread's commit is done
                if what in _COMMITS:
                    _COMMITS.remove(what)
                _state["committing"] = _COMMITS[-1] if _COMMITS else None


def fence_interrupted(reason: str) -> None:
    """The armed run was interrupted (a terminate's SIGINT): fenced as canceled, its work stopped."""
    armed = _state["armed"]
    if isinstance(armed, str):
        fence(armed, reason, canceled=True)


def _stop_own_driver(committing_now: bool) -> None:
    """A driver of this process's own: cancel its jobs, and kill its JVM if a commit was under way."""
    if resident_spark.attached_lease() is not None:
        return  # the resident stops the shared driver's work (its lease says fenced)
    from pyspark import SparkContext

    context = SparkContext._active_spark_context  # noqa: SLF001 - PySpark has no public probe
    if context is None:
        return
    with contextlib.suppress(Exception):  # a dead JVM has no jobs left
        context.cancelAllJobs()
    if not committing_now:
        return
    proc = getattr(context._gateway, "proc", None)  # noqa: SLF001 - the JVM PySpark launched
    if proc is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
