"""Housekeeping of the product's run keys in the instance's key-value store: a run's lease, what the
recovery saw of it, and its reconciliation mark are deleted once the run has ended and no reader of
them looks back that far (the reconciliation looks a day back), so the store does not grow with
every run. A key whose run no longer exists (deleted from the UI) goes too."""

from __future__ import annotations

import time
from collections.abc import Sequence

from dagster import DagsterInstance, RunsFilter

from icelake_assets import private_api
from icelake_assets.orchestration.runs.leases import LEASE_KEY_PREFIX, SEEN_KEY_PREFIX
from icelake_assets.orchestration.runs.recovery import RECONCILE_WINDOW_SECONDS, RECONCILED_KEY_PREFIX

RUN_KEY_PREFIXES = (LEASE_KEY_PREFIX, SEEN_KEY_PREFIX, RECONCILED_KEY_PREFIX)
# A settled run's keys are kept this long after it ended (the reconciliation's window, plus an hour).
KEEP_SECONDS = RECONCILE_WINDOW_SECONDS + 3600.0
# Keys looked at per call (a tick's budget; a backlog drains over a few ticks).
SWEEP_LIMIT = 500


def _run_keys(instance: DagsterInstance, prefixes: Sequence[str], limit: int) -> list[str]:
    table = private_api.KeyValueStoreTable
    storage = instance.run_storage
    import sqlalchemy as db

    query = (
        db.select(table.c.key)
        .where(db.or_(*(table.c.key.startswith(p) for p in prefixes)))
        .order_by(table.c.key)
        .limit(limit)
    )
    with storage.connect() as conn:  # type: ignore[attr-defined]
        return [row[0] for row in conn.execute(query).fetchall()]


def _delete(instance: DagsterInstance, keys: Sequence[str]) -> None:
    table = private_api.KeyValueStoreTable
    with instance.run_storage.connect() as conn:  # type: ignore[attr-defined]
        conn.execute(table.delete().where(table.c.key.in_(list(keys))))


def sweep_run_keys(instance: DagsterInstance, now: float | None = None, limit: int = SWEEP_LIMIT) -> int:
    """Delete the run keys of runs that ended more than ``KEEP_SECONDS`` ago, or are gone; how many."""
    now = time.time() if now is None else now
    keys = _run_keys(instance, RUN_KEY_PREFIXES, limit)
    if not keys:
        return 0
    run_of = {key: key[len(next(p for p in RUN_KEY_PREFIXES if key.startswith(p))) :] for key in keys}
    records = {
        r.dagster_run.run_id: r
        for r in instance.get_run_records(RunsFilter(run_ids=sorted(set(run_of.values()))))
    }
    doomed = []
    for key, run_id in run_of.items():
        record = records.get(run_id)
        if record is None:
            doomed.append(key)
            continue
        ended = record.end_time or record.update_timestamp.timestamp()
        if record.dagster_run.is_finished and now - ended > KEEP_SECONDS:
            doomed.append(key)
    if doomed:
        _delete(instance, doomed)
    return len(doomed)
