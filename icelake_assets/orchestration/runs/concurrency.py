"""How many maintenance runs may go at once (run model, model.py): the product's pools get their
limit of one run before the sensor queues a run in them (:class:`PoolLimits`), the sensor requests only
the global run cap's free slots (:func:`free_slots`), where a deployment applies pools per op a
later run of a table stops before it commits (:func:`earlier_run_maintaining`), and no run of a table
starts its work while a stopped run of it may still commit (:func:`stopped_run_may_commit`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime

from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

from icelake_assets.orchestration.runs.leases import read_leases, worker_alive
from icelake_assets.orchestration.runs.maintained_tables import pools_of, run_tables
from icelake_assets.planning.stale_runs import FENCE_GRACE_SECONDS
from icelake_assets.private_api import NOT_FINISHED_STATUSES
from icelake_assets.processes import host_identity


class PoolLimits:
    """Gives the product's table pools their limit before the sensor queues a run in them.

    * The stand-alone code location's ``dagster.yaml`` sets ``pools: default_limit: 1``: Dagster
      creates a pool's limit the first time its run queue sees the pool, but after it read the known
      pools, so on that first pass the new pool blocks nothing and two queued runs of a new table
      would start together. The pool is created here, at the default, ahead of that.
    * In a user's project (embedding.py) the deployment's pools are the user's: no default limit is
      assumed and none is changed. The product's own pools (``icelake/...``) get an explicit limit of
      one, unless someone set one already (a limit an operator chose is theirs).

    About 10 ms per new pool, once per table, within the sensor's tick budget. A run queued by
    someone else before the sensor first visits a new table is not covered."""

    def __init__(self, instance: DagsterInstance) -> None:
        self._instance = instance
        self._default = instance.global_op_concurrency_default_limit
        self._known = set(instance.event_log_storage.get_concurrency_keys())

    def ensure(self, pool: str) -> bool:
        """Create ``pool``'s limit if missing; True when it was created."""
        if pool in self._known:
            return False
        if self._default:
            self._instance.event_log_storage.initialize_concurrency_limit_to_default(pool)
        else:
            self._instance.event_log_storage.set_concurrency_slots(pool, 1)
        self._known.add(pool)
        return True


def run_cap(instance: DagsterInstance) -> int | None:
    """The instance's global cap on runs in progress (``concurrency.runs.max_concurrent_runs`` of the
    queued run coordinator); None when runs are not queued or the cap is off (-1)."""
    config = instance.get_concurrency_config().run_queue_config
    if config is None or config.max_concurrent_runs < 0:
        return None
    return config.max_concurrent_runs


def maintenance_runs_in_flight(instance: DagsterInstance, pools_by_key: Mapping[AssetKey, str]) -> int:
    """Queued or running runs that maintain at least one of the tables (launched by anyone)."""
    wanted = set(pools_by_key.values())
    return sum(
        1
        for run in instance.get_runs(RunsFilter(statuses=NOT_FINISHED_STATUSES))
        if pools_of(run, pools_by_key) & wanted
    )


def free_slots(
    instance: DagsterInstance, pools_by_key: Mapping[AssetKey, str], queued_ahead: int | None = None
) -> tuple[int | None, str]:
    """How many maintenance runs the sensor may request now, and why: the global cap, plus
    ``queued_ahead`` runs waiting in the queue (default: as many as the cap, so a slot that frees is
    refilled by the run queue within seconds instead of at the next sensor tick), minus the
    maintenance runs queued or in progress. None: no cap, every table that wants a run gets one."""
    cap = run_cap(instance)
    if cap is None:
        return None, "no global run cap"
    ahead = cap if queued_ahead is None else queued_ahead
    busy = maintenance_runs_in_flight(instance, pools_by_key)
    free = max(0, cap + ahead - busy)
    return free, f"cap {cap} runs + {ahead} queued ahead, {busy} maintenance run(s) in flight: {free} free"


def earlier_run_maintaining(instance: DagsterInstance, run_id: str, key: AssetKey, pool: str) -> str | None:
    """Another run, started before run ``run_id`` and still running, that maintains the table
    ``key`` (whose pool is ``pool``): its id, else None.

    Where the deployment applies pools per run (``granularity: run``, the stand-alone dagster.yaml)
    this never finds one. Where it applies them per op (Dagster's default, a user's deployment) two
    runs of one table could interleave their ops; the first op of each run asks this, and the later
    run stops before its first commit. Start time decides (a queued run that starts later yields)."""
    me = instance.get_run_record_by_id(run_id)
    mine = me.start_time if me and me.start_time else time.time()
    started = instance.get_run_records(
        RunsFilter(statuses=[DagsterRunStatus.STARTING, DagsterRunStatus.STARTED])
    )
    for record in started:
        run = record.dagster_run
        if run.run_id == run_id or record.start_time is None or record.start_time >= mine:
            continue
        if key in run_tables(run, {key: pool}, {pool: [key]}):
            return run.run_id
    return None


def stopped_run_may_commit(
    instance: DagsterInstance, run_id: str, key: AssetKey, pool: str, now: float | None = None
) -> tuple[str, float] | None:
    """Another run of the table ``key`` that was told to stop and whose worker may still commit: one
    CANCELING (terminated), or FAILED/CANCELED less than ``FENCE_GRACE_SECONDS`` ago (a fenced worker
    finishes a commit in flight within that), whose lease is not released by a worker that ended
    (a run that failed by its own error released it: nothing waits for it). Its id and the seconds
    until its grace ends (infinite while CANCELING); None when there is none. Every path that starts
    a table's maintenance (the sensor, a queued run, an approval, Materialize, a schedule, a
    backfill) goes through the table's first op, which asks this before its first commit."""
    now = time.time() if now is None else now
    records = list(instance.get_run_records(RunsFilter(statuses=[DagsterRunStatus.CANCELING])))
    records += instance.get_run_records(
        RunsFilter(
            statuses=[DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED],
            updated_after=datetime.fromtimestamp(now - FENCE_GRACE_SECONDS, UTC),
        )
    )
    stopped = {
        r.dagster_run.run_id: r
        for r in records
        if r.dagster_run.run_id != run_id and key in run_tables(r.dagster_run, {key: pool}, {pool: [key]})
    }
    worst: tuple[str, float] | None = None
    for other, lease in read_leases(instance, stopped).items():
        if lease.released or (lease.identity == host_identity() and not worker_alive(lease)):
            continue  # its worker ended (a lease of another host is trusted to its grace)
        record = stopped[other]
        if record.dagster_run.status == DagsterRunStatus.CANCELING:
            left = float("inf")
        elif record.end_time is None or (left := record.end_time + FENCE_GRACE_SECONDS - now) <= 0:
            continue
        if worst is None or left > worst[1]:
            worst = (other, left)
    return worst
