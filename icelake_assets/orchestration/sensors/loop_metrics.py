"""The maintenance loop's state, read from the Dagster instance for the alerts of a stalled loop.

A run left STARTED by a crash holds its table's pool and a run slot; the sensor says "in_flight" on
every tick and its heartbeat stays fresh, so nothing alerted. :func:`loop_snapshot` measures what a
stalled loop shows instead: each table's unfinished maintenance run and how long it has been in
flight, next to how long the table's runs usually take, and the runs waiting in the queue. The
sensor writes it each tick (audit/writer.py ``write_loop_metrics``); the alert rules compare.

Two queries at most: the runs not finished, and (only while some table is in flight) the last
successful runs. Maintenance runs only: those that maintain a table of the lake, by the rule the run
model uses (a user's own runs in an embedded project are not the loop's)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunRecord, RunsFilter

from icelake_assets.audit.loop_state import LoopSnapshot, TableInFlight, TableLag
from icelake_assets.orchestration.runs.model import run_tables
from icelake_assets.planning.history import Seen
from icelake_assets.planning.outcome import WAITING as WAITING_OUTCOMES
from icelake_assets.private_api import NOT_FINISHED_STATUSES

# The typical duration: the median of a table's last TYPICAL_RUNS successful runs that maintained it
# alone (a run of many tables says nothing of one table's), among the newest TYPICAL_RECORDS
# successful runs of the last TYPICAL_WINDOW_SECONDS (one bounded query, whatever the lake's size).
TYPICAL_RUNS = 5
TYPICAL_RECORDS = 1000
TYPICAL_WINDOW_SECONDS = 7 * 24 * 3600.0
# Runs that wait to start; every other unfinished status holds a run slot.
WAITING = frozenset({DagsterRunStatus.QUEUED, DagsterRunStatus.NOT_STARTED})


def loop_snapshot(
    instance: DagsterInstance,
    pools_by_key: Mapping[AssetKey, str],
    names: Mapping[AssetKey, str],
    now: float,
) -> LoopSnapshot:
    """The loop's state at ``now`` (epoch s): per table with an unfinished maintenance run, the one
    longest in flight (since its start, or its creation while it waits) and its typical duration;
    the maintenance runs waiting to start, the oldest one's wait, and the runs in progress.
    ``pools_by_key``: each table's pool (run_model.pools_by_key); ``names``: each table's Iceberg name."""
    keys_by_pool: dict[str, list[AssetKey]] = {}
    for key, pool in pools_by_key.items():
        keys_by_pool.setdefault(pool, []).append(key)
    key_by_name = {name: key for key, name in names.items()}
    in_flight: dict[AssetKey, TableInFlight] = {}
    waiting: list[float] = []
    in_progress = 0
    for record in instance.get_run_records(RunsFilter(statuses=NOT_FINISHED_STATUSES)):
        run = record.dagster_run
        keys = run_tables(run, pools_by_key, keys_by_pool, key_by_name)
        if not keys:
            continue
        created = record.create_timestamp.timestamp()
        if run.status in WAITING:
            waiting.append(now - created)
            since = created
        else:
            in_progress += 1
            since = record.start_time or created  # STARTING: no start time yet
        for key in keys:
            seen = in_flight.get(key)
            if seen is None or now - since > seen.seconds:
                in_flight[key] = TableInFlight(
                    names.get(key) or ".".join(key.path), run.run_id, run.status.value, max(0.0, now - since)
                )
    typical = _typical_seconds(instance, set(in_flight), pools_by_key, keys_by_pool, key_by_name, now)
    tables = tuple(
        TableInFlight(t.table, t.run_id, t.run_status, t.seconds, typical.get(key))
        for key, t in sorted(in_flight.items(), key=lambda item: item[1].table)
    )
    return LoopSnapshot(tables, len(waiting), max([0.0, *waiting]), in_progress)


def _typical_seconds(
    instance: DagsterInstance,
    wanted: set[AssetKey],
    pools_by_key: Mapping[AssetKey, str],
    keys_by_pool: Mapping[str, list[AssetKey]],
    key_by_name: Mapping[str, AssetKey],
    now: float,
) -> dict[AssetKey, float]:
    """Median duration of each wanted table's last successful runs that maintained it alone."""
    if not wanted:
        return {}
    since = datetime.fromtimestamp(now - TYPICAL_WINDOW_SECONDS, tz=UTC)
    records: Sequence[RunRecord] = instance.get_run_records(
        RunsFilter(statuses=[DagsterRunStatus.SUCCESS], updated_after=since), limit=TYPICAL_RECORDS
    )
    durations: dict[AssetKey, list[float]] = {}
    for record in records:  # newest first
        if record.start_time is None or record.end_time is None:
            continue
        keys = run_tables(record.dagster_run, pools_by_key, keys_by_pool, key_by_name)
        if len(keys) != 1 or keys[0] not in wanted:
            continue
        got = durations.setdefault(keys[0], [])
        if len(got) < TYPICAL_RUNS:
            got.append(record.end_time - record.start_time)
    return {key: statistics.median(d) for key, d in durations.items()}


def table_lags(seen: Mapping[str, Seen], now: float) -> tuple[TableLag, ...]:
    """Each table the cursor remembers as waiting for maintenance, with the time since its finding was
    first seen failing (``Seen.since``), longest first: the tables visited in earlier ticks included."""
    lags = [
        TableLag(name, str(s.outcome), max(0.0, now - s.since))
        for name, s in seen.items()
        if s.since is not None and s.outcome in WAITING_OUTCOMES
    ]
    return tuple(sorted(lags, key=lambda lag: (-lag.seconds, lag.table)))


__all__ = ["TYPICAL_RUNS", "loop_snapshot", "run_tables", "table_lags"]
