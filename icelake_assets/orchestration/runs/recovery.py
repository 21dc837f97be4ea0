"""Recovery after a crash, on every tick of the maintenance sensor:

* stale runs: the product's runs whose worker is gone (their leases, runs/leases.py; the rule,
  planning/stale_runs.py) are terminated through the instance's run launcher (a verdict that was
  wrong stops the run: its worker sees it and fences itself, maintenance/spark/fencing.py), then failed
  through Dagster's public ``report_run_failed``: their pools and run slots free up, and the run
  model sees a lost worker (a short wait, then a retry);
* lost workers: the product's runs that Dagster failed after their worker was killed (its code server
  lived), or whose worker was killed while it was launched, are tagged the same way, so their tables
  too are retried soon, not after a failure backoff;
* commits no record spans: the commits of failed runs, found by the run id they carry, are written to
  the audit (audit/reconcile.py), so the audit covers every maintenance commit."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dagster import DagsterEventType, DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter
from pyiceberg.table import Table

from icelake_assets.audit.reconcile import reconcile
from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.audit.writer import write_audit
from icelake_assets.orchestration.runs.leases import STALE_TAG, observe_leases, read_leases, worker_alive
from icelake_assets.orchestration.runs.model import FAILURE_KIND_TAG, WORKER_LOST
from icelake_assets.orchestration.runs.run_tags import tables_failure_tags
from icelake_assets.planning import stale_runs
from icelake_assets.planning.stale_runs import (
    Lease,
    RunView,
    launch_killed_reason,
    lost_worker_reason,
    stale_reason,
)
from icelake_assets.private_api import NOT_FINISHED_STATUSES
from icelake_assets.processes import host_identity
from icelake_assets.settings import Settings
from icelake_assets.types import TableRef

# A failed run whose launch the recovery read (so its events are read once).
LAUNCH_CHECKED_TAG = "icelake/launch_checked"


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


def _ours(
    run: DagsterRun, is_ours: Callable[[DagsterRun], Sequence[str] | None], leases: Mapping[str, Lease]
) -> Sequence[str] | None:
    tables = is_ours(run)
    if tables is None and run.run_id in leases:
        return ()
    return tables


def fail_stale_runs(
    instance: DagsterInstance,
    is_ours: Callable[[DagsterRun], Sequence[str] | None],
    now: float | None = None,
    alive: Callable[[Lease], bool] = worker_alive,
    ttl_seconds: float | None = None,
    grace_seconds: float | None = None,
) -> list[StaleRun]:
    """Fail every run of the product (``is_ours`` gives the table names a run maintains, ``()`` for a
    run of the product that names no table, None for a run not of the product) whose worker is gone,
    through Dagster's public ``report_run_failed``: its pools and run slot free up, and the sensor's
    run model sees a failure (the table's backoff, then a retry). One query of the unfinished runs and
    one of their leases per call."""
    now = time.time() if now is None else now
    identity = host_identity()
    records = instance.get_run_records(
        RunsFilter(statuses=[DagsterRunStatus.STARTING, DagsterRunStatus.STARTED])
    )
    # A run holding a lease is the product's whatever its job (only the product's resource takes one):
    # the overview asset's runs, say, which name no table and no job of the product's.
    leases = read_leases(instance, [r.dagster_run.run_id for r in records])
    unchanged = observe_leases(instance, leases, now)
    ours = [(r, tables) for r in records if (tables := _ours(r.dagster_run, is_ours, leases)) is not None]
    failed: list[StaleRun] = []
    for record, tables in ours:
        run = record.dagster_run
        view = RunView(
            run.run_id,
            run.status.value,
            _since(instance, run, record),
            leases.get(run.run_id),
            unchanged.get(run.run_id),
        )
        reason = stale_reason(
            view,
            now,
            identity,
            alive,
            stale_runs.LEASE_TTL_SECONDS if ttl_seconds is None else ttl_seconds,
            stale_runs.NO_LEASE_GRACE_SECONDS if grace_seconds is None else grace_seconds,
        )
        if reason is None:
            continue
        current = instance.get_run_by_id(run.run_id)  # it may have finished meanwhile
        if current is None or current.status not in NOT_FINISHED_STATUSES:
            continue
        message = f"icelake_assets: run {run.run_id} failed by the maintenance sensor: {reason}"
        # The run names its tables (each of a shared run), so the sensor's backoff reason says what
        # happened to them.
        named = tables_failure_tags(tables, WORKER_LOST, reason)
        instance.add_run_tags(run.run_id, {STALE_TAG: WORKER_LOST, **named})
        # Stopped before it is failed: should the verdict be wrong, the launcher stops the worker
        # (its container, its process) and the worker, seeing its run end, commits nothing more.
        _terminate(instance, run.run_id)
        current = instance.get_run_by_id(run.run_id) or current
        if current.is_finished:
            continue
        instance.report_run_failed(current, message)
        failed.append(StaleRun(run.run_id, run.job_name, run.status.value, reason, tuple(tables)))
    return failed


def ended_runs(
    instance: DagsterInstance, is_ours: Callable[[DagsterRun], Sequence[str] | None], now: float | None = None
) -> list[tuple[DagsterRun, Sequence[str]]]:
    """The product's runs that failed or were canceled in the last day, with the tables each maintains."""
    now = time.time() if now is None else now
    since = datetime.fromtimestamp(now - RECONCILE_WINDOW_SECONDS, tz=UTC)
    finished = instance.get_run_records(
        RunsFilter(statuses=[DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED], updated_after=since)
    )
    return [(r.dagster_run, tables) for r in finished if (tables := is_ours(r.dagster_run))]


def mark_lost_workers(
    instance: DagsterInstance,
    failed: Sequence[tuple[DagsterRun, Sequence[str]]],
    now: float | None = None,
    alive: Callable[[Lease], bool] = worker_alive,
) -> list[StaleRun]:
    """Tag the runs of the product among ``failed`` (ended runs with the tables each maintains; only
    those that ended FAILURE count) that Dagster failed after their worker was killed while its code
    server lived, or that were killed at launch: no failure cause of the product's, a
    lease never released (planning/stale_runs.py, ``lost_worker_reason``). Tagged as the stale runs
    are, the run model retries their tables soon instead of after a failure backoff. One read of the
    candidates' leases per call; a tagged run is not a candidate again."""
    now = time.time() if now is None else now
    identity = host_identity()
    candidates = [
        (r, tables)
        for r, tables in failed
        if r.status == DagsterRunStatus.FAILURE and FAILURE_KIND_TAG not in r.tags and STALE_TAG not in r.tags
    ]
    leases = read_leases(instance, [run.run_id for run, _ in candidates])
    unchanged = observe_leases(instance, leases, now)
    lost: list[StaleRun] = []
    for run, tables in candidates:
        lease = leases.get(run.run_id)
        reason = lost_worker_reason(
            lease, now, identity, alive, unchanged.get(run.run_id), stale_runs.LEASE_TTL_SECONDS
        )
        if reason is None and lease is None and LAUNCH_CHECKED_TAG not in run.tags:
            reason = _launch_killed(instance, run)
        if reason is None:
            continue
        named = tables_failure_tags(tables, WORKER_LOST, reason)
        instance.add_run_tags(run.run_id, {STALE_TAG: WORKER_LOST, FAILURE_KIND_TAG: WORKER_LOST, **named})
        lost.append(StaleRun(run.run_id, run.job_name, run.status.value, reason, tuple(tables)))
    return lost


def _terminate(instance: DagsterInstance, run_id: str) -> None:
    """Ask the instance's run launcher to stop the run (Dagster's Terminate). A worker that is really
    gone leaves the launcher nothing to stop: its answer and errors are not the verdict's concern."""
    with contextlib.suppress(Exception):
        instance.run_launcher.terminate(run_id)


def _launch_killed(instance: DagsterInstance, run: DagsterRun) -> str | None:
    """Why a failed run that never took a lease lost its worker at launch (the run queue's engine
    error names the code server's "terminated unexpectedly with exit code -9"), or None. Read once
    per run (a tag says it was)."""
    records = instance.get_records_for_run(
        run.run_id, of_type=DagsterEventType.ENGINE_EVENT, limit=50
    ).records
    instance.add_run_tags(run.run_id, {LAUNCH_CHECKED_TAG: "1"})
    for record in records:
        entry = record.event_log_entry
        event = entry.dagster_event
        data = event.engine_event_data if event is not None else None
        error = data.error if data is not None else None
        texts = [entry.user_message or ""]
        while error is not None:
            texts.append(error.message)
            error = error.cause
        for text in texts:
            if (reason := launch_killed_reason(text)) is not None:
                return reason
    return None


RECONCILED_KEY_PREFIX = "icelake/reconciled/"
# Failed runs looked at per tick (each costs a read of the audit log and of its tables' metadata).
RECONCILE_PER_TICK = 20
RECONCILE_WINDOW_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class Reconciled:
    """What one tick's reconciliation did: the records it wrote, and the runs it could not settle."""

    records: tuple[AuditRecord, ...] = ()
    errors: tuple[str, ...] = ()


def reconcile_failed_runs(
    instance: DagsterInstance,
    settings: Settings,
    load_table: Callable[[TableRef], Table],
    is_ours: Callable[[DagsterRun], Sequence[str] | None],
    now: float | None = None,
    ended: Sequence[tuple[DagsterRun, Sequence[str]]] | None = None,
) -> Reconciled:
    """The commits of the product's failed or canceled runs (last day) that their own audit records do
    not span, written to the audit as ``recovery/reconciled`` records (audit/reconcile.py). Each run
    is settled once (a key in the instance's key-value store), after its records are written."""
    if not settings.audit.enabled:
        return Reconciled()
    ours = ended_runs(instance, is_ours, now) if ended is None else ended
    keys = {RECONCILED_KEY_PREFIX + run.run_id for run, _ in ours}
    settled = instance.run_storage.get_cursor_values(keys) if keys else {}
    todo = [(run, t) for run, t in ours if RECONCILED_KEY_PREFIX + run.run_id not in settled]
    written: list[AuditRecord] = []
    errors: list[str] = []
    log = AuditLog.from_settings(settings)
    for run, tables in todo[:RECONCILE_PER_TICK]:
        try:
            audited = log.records(run_id=run.run_id)
            found = [
                record
                for name in tables
                for record in reconcile(
                    TableRef.parse(name),
                    load_table(TableRef.parse(name)),
                    run.run_id,
                    audited,
                    f"it ended {run.status.value.lower()}",
                )
            ]
        except Exception as err:  # a table or the audit unreadable now: tried again next tick
            errors.append(f"run {run.run_id}: {err}")
            continue
        if found:
            wrote = write_audit(settings, found)
            if wrote.log_error:
                errors.append(f"run {run.run_id}: audit not written: {wrote.log_error}")
                continue
            written.extend(found)
        instance.run_storage.set_cursor_values({RECONCILED_KEY_PREFIX + run.run_id: str(len(found))})
    return Reconciled(tuple(written), tuple(errors))


def recover(
    log: Any,
    instance: DagsterInstance,
    settings: Settings,
    load_table: Callable[[TableRef], Table],
    is_ours: Callable[[DagsterRun], Sequence[str] | None],
) -> list[AuditRecord]:
    """A tick's recovery: stale runs failed (said in ``log``, the tick's; their audit records are
    returned for the tick to write with its own), then the commits of failed runs reconciled (written
    here, each run settled once). Never raises: what fails is logged and tried again next tick."""
    records: list[AuditRecord] = []
    for run in fail_stale_runs(instance, is_ours):
        log.warning(
            f"run {run.run_id} ({run.job_name}, {run.status}) failed: {run.reason}"
            + (f"; tables {', '.join(run.tables)} are retried soon" if run.tables else "")
        )
        records.extend(_recovery_records(run, "run_failed", f"run {run.run_id} failed: {run.reason}"))
    try:
        ended = ended_runs(instance, is_ours)
        for run in mark_lost_workers(instance, ended):
            log.warning(f"run {run.run_id} ({run.job_name}) failed: {run.reason}")
            records.extend(_recovery_records(run, "worker_lost", f"run {run.run_id} failed: {run.reason}"))
        done = reconcile_failed_runs(instance, settings, load_table, is_ours, ended=ended)
    except Exception as err:  # the audit or the instance unreachable: the next tick tries again
        log.error(f"commits of failed runs not reconciled this tick: {err}")
        return records
    for record in done.records:
        log.warning(f"{record.table_name}: reconciled {record.reason}")
    for error in done.errors:
        log.error(f"not reconciled this tick: {error}")
    return records


def _recovery_records(run: StaleRun, decision: str, reason: str) -> list[AuditRecord]:
    return [
        AuditRecord(
            table_name=table,
            kind="recovery",
            decision=decision,
            trigger="sensor",
            reason=reason,
            run_id=run.run_id,
        )
        for table in run.tables
    ]
