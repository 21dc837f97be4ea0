"""Stale-run recovery: the maintenance sensor fails, on every tick, the product's runs whose worker
is gone (their leases, run_leases.py; the rule, planning/stale_runs.py), through Dagster's public
``report_run_failed``: their pools and run slots free up, and the run model sees a failure."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dagster import DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter

from icelake_assets.orchestration.run_leases import read_leases
from icelake_assets.orchestration.run_model import failure_tags
from icelake_assets.planning import stale_runs
from icelake_assets.planning.stale_runs import RunView, stale_reason
from icelake_assets.private_api import NOT_FINISHED_STATUSES

# Tags of a run the product failed because its worker was gone (the failure tags name its table).
STALE_TAG = "icelake/stale_run"
WORKER_LOST = "worker_lost"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it lives
        return True
    return True


@dataclass(frozen=True)
class StaleRun:
    """A run the sensor failed because its worker was gone, and why."""

    run_id: str
    job_name: str
    status: str
    reason: str
    tables: tuple[str, ...]  # the product's tables it maintained (names), when it names them


def _since(instance: DagsterInstance, run: DagsterRun, record) -> float:
    if record.start_time:
        return float(record.start_time)
    stats = instance.get_run_stats(run.run_id)
    return float(stats.launch_time or record.create_timestamp.timestamp())


def fail_stale_runs(
    instance: DagsterInstance,
    is_ours: Callable[[DagsterRun], Sequence[str] | None],
    now: float | None = None,
    pid_alive: Callable[[int], bool] = _pid_alive,
    ttl_seconds: float | None = None,
    grace_seconds: float | None = None,
) -> list[StaleRun]:
    """Fail every run of the product (``is_ours`` gives the table names a run maintains, ``()`` for a
    run of the product that names no table, None for a run not of the product) whose worker is gone,
    through Dagster's public ``report_run_failed``: its pools and run slot free up, and the sensor's
    run model sees a failure (the table's backoff, then a retry). One query of the unfinished runs and
    one of their leases per call."""
    now = time.time() if now is None else now
    host = socket.gethostname()
    records = instance.get_run_records(
        RunsFilter(statuses=[DagsterRunStatus.STARTING, DagsterRunStatus.STARTED])
    )
    ours = [(r, tables) for r in records if (tables := is_ours(r.dagster_run)) is not None]
    leases = read_leases(instance, [r.dagster_run.run_id for r, _ in ours])
    failed: list[StaleRun] = []
    for record, tables in ours:
        run = record.dagster_run
        view = RunView(run.run_id, run.status.value, _since(instance, run, record), leases.get(run.run_id))
        reason = stale_reason(
            view,
            now,
            host,
            pid_alive,
            stale_runs.LEASE_TTL_SECONDS if ttl_seconds is None else ttl_seconds,
            stale_runs.NO_LEASE_GRACE_SECONDS if grace_seconds is None else grace_seconds,
        )
        if reason is None:
            continue
        current = instance.get_run_by_id(run.run_id)  # it may have finished meanwhile
        if current is None or current.status not in NOT_FINISHED_STATUSES:
            continue
        message = f"icelake_assets: run {run.run_id} failed by the maintenance sensor: {reason}"
        # A run of one table names it, so the sensor's backoff reason says what happened to it.
        named = failure_tags(tables[0], WORKER_LOST, reason) if len(tables) == 1 else {}
        instance.add_run_tags(run.run_id, {STALE_TAG: WORKER_LOST, **named})
        instance.report_run_failed(current, message)
        failed.append(StaleRun(run.run_id, run.job_name, run.status.value, reason, tuple(tables)))
    return failed
