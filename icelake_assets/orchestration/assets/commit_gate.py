"""Who may commit to a table now, asked by every op of a run (orchestration/assets/ops.py) and the
restore job: a fenced run stops before its next commit and is never retried after a terminate; a run
stops before its first commit while an earlier run maintains the table, and waits while a stopped run
of it may still commit (orchestration/runs/concurrency.py)."""

import contextlib
import time
from collections.abc import Iterator

from dagster import Failure, OpExecutionContext

from icelake_assets import private_api
from icelake_assets.catalog.connection import TableRef
from icelake_assets.causes import RedactedCause
from icelake_assets.maintenance.spark import fencing
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.runs.model import earlier_run_maintaining, stopped_run_may_commit
from icelake_assets.orchestration.runs.run_tags import failure_tags
from icelake_assets.planning.stale_runs import FENCE_GRACE_SECONDS

__all__ = [
    "STOPPED_RUN_WAIT_SECONDS",
    "no_retry_after_terminate",
    "refuse_if_another_run_maintains",
    "stop_if_fenced",
    "wait_for_stopped_runs",
]


def refuse_if_another_run_maintains(context: OpExecutionContext, ref: TableRef, pool: str) -> None:
    """One run at a time per table, also where pools are applied per op (orchestration/runs/model.py)."""
    other = earlier_run_maintaining(context.instance, context.run_id, table_asset_key(ref), pool)
    if other is not None:
        said = f"{ref}: run {other} is maintaining this table; this run stops before any commit"
        context.instance.add_run_tags(context.run_id, failure_tags(str(ref), "concurrent_run", said))
        raise Failure(description=said, allow_retries=False)


# How long a run's first op waits for a stopped run of its table to be past its grace before it
# refuses (a CANCELING run whose worker never ends would otherwise hold it for good).
STOPPED_RUN_WAIT_SECONDS = 60.0
_POLL_SECONDS = 2.0


def wait_for_stopped_runs(context: OpExecutionContext, ref: TableRef, pool: str) -> None:
    """No commit while a run of the table that was terminated, fenced or failed may still commit
    (orchestration/runs/concurrency.py): wait out its grace, or stop before any commit saying why."""
    deadline = time.monotonic() + STOPPED_RUN_WAIT_SECONDS
    told = False
    while (
        found := stopped_run_may_commit(context.instance, context.run_id, table_asset_key(ref), pool)
    ) is not None:
        other, left = found
        why = (
            f"run {other} of this table is being canceled"
            if left == float("inf")
            else f"run {other} of this table stopped less than {FENCE_GRACE_SECONDS:g} s ago"
        )
        if time.monotonic() + min(left, _POLL_SECONDS) > deadline:
            said = f"{ref}: {why} and may still commit; this run stops before any commit"
            context.instance.add_run_tags(context.run_id, failure_tags(str(ref), "concurrent_run", said))
            raise Failure(description=said, allow_retries=False)
        if not told:
            context.log.info(
                f"{ref}: {why} and may still commit: waiting up to {STOPPED_RUN_WAIT_SECONDS:g} s"
            )
            told = True
        time.sleep(min(left, _POLL_SECONDS))
        stop_if_fenced(context)


def stop_if_fenced(context: OpExecutionContext, err: BaseException | None = None) -> None:
    """A fenced run (maintenance/spark/fencing.py) stops here: terminated, it ends CANCELED (the interrupt
    Dagster raises itself on Terminate); judged dead or without a lease, it fails saying why."""
    reason = fencing.fenced()
    if reason is None:
        return
    context.log.warning(f"this run stops before its next commit: {reason}")
    # A Failure that allows no retry, also when terminated: Dagster turns an interrupt raised in an op
    # with a retry policy into a retry, and the run stayed CANCELING until it came. A run that is
    # CANCELING with a failed step ends CANCELED.
    # Dagster's event log keeps a chain's messages: the stopped work's error is told redacted (causes.py).
    raise Failure(description=f"this run stops before its next commit: {reason}", allow_retries=False) from (
        RedactedCause.of(err) if err is not None else None
    )


@contextlib.contextmanager
def no_retry_after_terminate(context: OpExecutionContext) -> Iterator[None]:
    """Around an op's work: Dagster's interrupt of a terminated run (the UI's Terminate through the
    code server, ``dagster/max_runtime``) fences the run and fails the step without a retry."""
    try:
        yield
    except (KeyboardInterrupt, private_api.DagsterExecutionInterruptedError) as err:
        run = context.instance.get_run_by_id(context.run_id)
        if not fencing.was_canceled() and (run is None or run.status.value not in ("CANCELING", "CANCELED")):
            raise  # not a terminate (a shutdown the run resumes from): Dagster decides
        fencing.fence_interrupted(f"run {context.run_id} was terminated")
        stop_if_fenced(context, err)
        raise
