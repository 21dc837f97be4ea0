"""The maintenance run time each table took in a recent window, for the fair share of the run slots
(planning/priority.py ``Usage``).

Two bounded queries, asked only when the run cap leaves fewer slots than tables wanting a run: the
newest :data:`USAGE_RECORDS` finished runs updated in the window, and the runs in progress (at most
the run cap's worth, their time so far counts). A run's time is clipped to the window and split
evenly among the tables it maintains (a run of a whole pool is not one table's)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime

from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter

from icelake_assets.orchestration.runs.model import run_tables
from icelake_assets.private_api import FINISHED_STATUSES

USAGE_RECORDS = 2000  # one page of the instance's run storage, whatever the lake's size
IN_PROGRESS = (DagsterRunStatus.STARTING, DagsterRunStatus.STARTED, DagsterRunStatus.CANCELING)


def run_seconds(
    instance: DagsterInstance,
    pools_by_key: Mapping[AssetKey, str],
    names: Mapping[AssetKey, str],
    now: float,
    window_seconds: float,
) -> dict[str, float]:
    """Seconds of maintenance run time in ``[now - window_seconds, now]``, by table name."""
    since = now - window_seconds
    keys_by_pool: dict[str, list[AssetKey]] = {}
    for key, pool in pools_by_key.items():
        keys_by_pool.setdefault(pool, []).append(key)
    key_by_name = {name: key for key, name in names.items()}
    finished = instance.get_run_records(
        RunsFilter(statuses=list(FINISHED_STATUSES), updated_after=datetime.fromtimestamp(since, tz=UTC)),
        limit=USAGE_RECORDS,
    )
    running = instance.get_run_records(RunsFilter(statuses=list(IN_PROGRESS)), limit=USAGE_RECORDS)
    used: dict[str, float] = {}
    for record in [*finished, *running]:
        if record.start_time is None:
            continue  # never started: it took no run time
        seconds = min(record.end_time or now, now) - max(record.start_time, since)
        keys = run_tables(record.dagster_run, pools_by_key, keys_by_pool, key_by_name) if seconds > 0 else []
        for key in keys:
            name = names.get(key) or ".".join(key.path)
            used[name] = used.get(name, 0.0) + seconds / len(keys)
    return used


__all__ = ["USAGE_RECORDS", "run_seconds"]
