"""The run model: at most one maintenance run per table at a time, whatever launched it.

* **Concurrency** is enforced by Dagster, not by our tags: every op of a table's maintenance claims
  the table's pool (maintained_tables.table_pool; tables share ``automation.maintenance_pools`` pools
  by a hash of their name, so 10,000 tables need no 10,000 op definitions), and ``dagster.yaml``
  limits every pool to one run (``pools: default_limit: 1, granularity: run``) plus a global cap on
  runs. Two tables of one pool take turns; a table never runs twice at once. The run queue applies
  pools to every queued run: sensor runs, schedules, *Materialize* in the UI and backfill runs alike.
* **No duplicate work**: before requesting a run the sensor asks the instance which tables already
  have a queued or running maintenance run (by the pools in the run's plan, so runs launched by
  anyone count) or a backfill in progress over their asset (:func:`table_runs`).
* **Priority under the global cap**: when more tables want a run than the cap leaves slots for, the
  sensor requests only the free slots' worth (concurrency.free_slots), best first by the overview's
  ranking, and defers the others to a later tick; every request carries ``dagster/priority`` so
  the run queue, too, starts the most beneficial run first.
* **Retries after failure**: a table whose last maintenance run failed is retried after a backoff
  that doubles with each failure in a row (:meth:`TableRuns.retry_at`). A run of several tables
  counts against the tables that failed in it, not against those it maintained (materialized), and
  the failed table's cause (e.g. access denied) comes back with it from the run's tags. A run
  *interrupted* by something other than its table (an outage, a lost worker, a conflicting commit,
  the catalog refusing a token) is retried soon instead, but every kind of interruption has a cap:
  past it, in a row, the next ones count as the table's failures (:data:`INTERRUPTIONS_BEFORE_FAILURE`).

This module keeps each table's run history and its retries; which tables a run maintains is
maintained_tables.py, the pools' limits and the global cap's slots concurrency.py (both re-exported
here, the run model's names for its callers).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from dagster import AssetKey, DagsterEventType, DagsterInstance, DagsterRunStatus, RunsFilter

from icelake_assets.orchestration.runs.concurrency import (  # noqa: F401 - re-exported
    PoolLimits as PoolLimits,
    earlier_run_maintaining as earlier_run_maintaining,
    free_slots as free_slots,
    maintenance_runs_in_flight as maintenance_runs_in_flight,
    run_cap as run_cap,
    stopped_run_may_commit as stopped_run_may_commit,
)
from icelake_assets.orchestration.runs.maintained_tables import (  # noqa: F401 - re-exported
    names_no_table,
    pools_by_key as pools_by_key,
    product_run_tables as product_run_tables,
    run_tables as run_tables,
    table_pool as table_pool,
)
from icelake_assets.orchestration.runs.run_tags import (  # noqa: F401 - re-exported
    FAILURE_CAUSE_MAX as FAILURE_CAUSE_MAX,
    FAILURE_CAUSE_TAG as FAILURE_CAUSE_TAG,
    FAILURE_KIND_TAG as FAILURE_KIND_TAG,
    FAILURE_TABLE_TAG as FAILURE_TABLE_TAG,
    TABLE_TAG as TABLE_TAG,
    TABLES_TAG as TABLES_TAG,
    failure_of,
    failure_tags as failure_tags,
    named_tables as named_tables,
)
from icelake_assets.private_api import (
    FINISHED_STATUSES,
    NOT_FINISHED_STATUSES,
    BulkActionsFilter,
    BulkActionStatus,
)

# First retry of a table whose maintenance failed after this long, then 2x per failure in a row.
FAILED_RUN_BACKOFF_SECONDS = 600.0
# A run that failed because the store, the catalog or the Spark driver was down (causes.py "outage")
# is not the table's failure: retried after this long, 2x per outage in a row, at most the backoff.
OUTAGE_RETRY_SECONDS = 60.0
OUTAGE = "outage"
# A run whose worker died under it (killed, out of memory, its host gone: runs/recovery.py tags it),
# or whose commit conflicted with a writer's (Iceberg refused it; one of unknown state, should it have
# landed, is reconciled by its run id), did not fail for its table either: retried as soon.
WORKER_LOST = "worker_lost"
COMMIT_CONFLICT = "commit_conflict"
# The catalog refused the maintenance identity (causes.py "auth"): once, a token that went stale when
# the catalog restarted (the chaos soak restarts its REST catalog; the next run gets a new one).
AUTH = "auth"
# The wait after an interruption doubles per interruption in a row up to this (as Kubernetes' crash
# loop backoff does): a lake under repeated faults is retried within minutes of the last one (the
# chaos soak: doubling on, a table interrupted five times in a row waited 16 minutes).
INTERRUPTION_MAX_WAIT_SECONDS = 300.0
# Every kind of interruption is capped: a table whose runs are interrupted by one kind this many
# times in a row is failing after all, and the next ones count as its failures, with its backoff.
# Runs that lose their worker every time run out of memory, say.
LOST_WORKERS_BEFORE_FAILURE = 10
# Retried 1, 2, 4, then every 5 minutes: about 50 minutes of a store, catalog or driver down, more
# than twice the longest streak the chaos soak saw (5), before the table's failure state shows it.
OUTAGES_BEFORE_FAILURE = 12
# A conflict is retried on a fresh snapshot and lands unless writers keep committing: five in a row
# (about 17 minutes) says the table's writers leave maintenance no window (its quiet period is short).
CONFLICTS_BEFORE_FAILURE = 5
# A token gone stale is replaced by the next run's: a second refusal in a row is wrong credentials.
AUTH_FAILURES_BEFORE_FAILURE = 1
# Interruptions of mixed kinds (an outage, then a lost worker, ...): at most this many in a row, so
# no mix of kinds is retried every few minutes forever (above every kind's own cap).
INTERRUPTIONS_BEFORE_FAILURE = 20
# A run terminated (the UI's Terminate, dagster/max_runtime) that named no cause of its own: stopped,
# not failed by its table, so retried after the interruption wait (an operator who wants the table
# left alone sets its mode to observe, or stops the sensor). Three in a row: the table's failure.
CANCELED = "canceled"
CANCELS_BEFORE_FAILURE = 3
INTERRUPTIONS = frozenset({OUTAGE, WORKER_LOST, COMMIT_CONFLICT, AUTH, CANCELED})
ANY_INTERRUPTION = "any"  # the key of TableRuns.streaks counting interruptions of any kind
MAX_BACKOFF_SECONDS = 6 * 3600.0
# Finished runs older than this do not count (a failure a day ago is retried anyway).
HISTORY_SECONDS = 24 * 3600.0
_IN_FLIGHT_BACKFILLS = [BulkActionStatus.REQUESTED, BulkActionStatus.CANCELING, BulkActionStatus.FAILING]


@dataclass
class TableRuns:
    """What the instance knows about one table's maintenance runs."""

    in_flight: str | None = None  # "run <id>" or "backfill <id>" of a queued or running maintenance
    last_status: DagsterRunStatus | None = None  # of the latest finished run
    last_finished: float | None = None  # its end time (epoch s)
    failures_in_a_row: int = 0
    last_failure_kind: str | None = None  # of the latest failure, when its run named this table
    last_failure_cause: str | None = None
    # The latest runs were interrupted: an outage, a lost worker, a conflict, a refused token (within
    # their caps: not counted as failures).
    interruptions_in_a_row: int = 0
    # Runs in a row that the latest kind of interruption ended, by kind (another kind starts its own
    # streak), and under ANY_INTERRUPTION those that any kind ended; counted on past the caps.
    streaks: dict[str, int] = field(default_factory=dict)

    def failure_reason(self) -> str | None:
        """What the latest failure's run recorded of its cause, for the sensor's reason (None: nothing)."""
        kind, cause = self.last_failure_kind, self.last_failure_cause
        if kind == AUTH:
            said = f"the catalog refused the maintenance identity's credentials: {cause}"
            said += " (fix them in icelake.yaml)"
            return f"{said}; retrying once soon" if self.interruptions_in_a_row else said
        if self.interruptions_in_a_row:
            what = _INTERRUPTED.get(kind or OUTAGE, _INTERRUPTED[OUTAGE])
            return f"{what}: {cause}; retrying soon"
        if kind in _INTERRUPTED:  # past its cap
            runs = self.streaks.get(ANY_INTERRUPTION, 0)
            return (
                f"{_INTERRUPTED[kind]}: {cause} (interrupted {runs} runs in a row: the table's failure now)"
            )
        if kind == "access_denied":
            return f"access denied: {cause} (fix the permissions of the maintenance identity)"
        return cause

    def retry_at(self, base_seconds: float = FAILED_RUN_BACKOFF_SECONDS) -> float | None:
        """When a table whose last run failed may be launched again (None: its last run did not fail).
        After an interruption: soon (OUTAGE_RETRY_SECONDS, doubling per interruption in a row, at most
        INTERRUPTION_MAX_WAIT_SECONDS or the table's own backoff if shorter), whatever failures came
        before it."""
        if self.last_finished is None:
            return None
        if self.interruptions_in_a_row:
            wait = OUTAGE_RETRY_SECONDS * 2 ** min(self.interruptions_in_a_row - 1, 30)
            cap = min(max(base_seconds, OUTAGE_RETRY_SECONDS), INTERRUPTION_MAX_WAIT_SECONDS)
            return self.last_finished + min(wait, cap)
        if not self.failures_in_a_row:
            return None
        return self.last_finished + min(base_seconds * 2 ** (self.failures_in_a_row - 1), MAX_BACKOFF_SECONDS)


_INTERRUPTED = {
    WORKER_LOST: "the run's worker was lost",
    COMMIT_CONFLICT: "a writer's commit conflicted with the run's",
    OUTAGE: "the store, catalog or Spark driver was unreachable",
    CANCELED: "the run was terminated",
}


def _caps() -> dict[str, int]:
    # Read at each call, so a test may change a cap.
    return {
        OUTAGE: OUTAGES_BEFORE_FAILURE,
        WORKER_LOST: LOST_WORKERS_BEFORE_FAILURE,
        COMMIT_CONFLICT: CONFLICTS_BEFORE_FAILURE,
        AUTH: AUTH_FAILURES_BEFORE_FAILURE,
        CANCELED: CANCELS_BEFORE_FAILURE,
    }


def _interrupted(entry: TableRuns, kind: str | None, caps: Mapping[str, int]) -> bool:
    """Counts the run that ended with ``kind`` (None: it did not fail) in the table's streaks; True
    when it was an interruption within its caps (not the table's failure)."""
    if kind not in INTERRUPTIONS:
        entry.streaks = {}
        return False
    streaks = entry.streaks
    entry.streaks = {ANY_INTERRUPTION: streaks.get(ANY_INTERRUPTION, 0) + 1, kind: streaks.get(kind, 0) + 1}
    return (
        entry.streaks[kind] <= caps[kind] and entry.streaks[ANY_INTERRUPTION] <= INTERRUPTIONS_BEFORE_FAILURE
    )


def table_runs(
    instance: DagsterInstance,
    pools_by_key: Mapping[AssetKey, str],
    now: float | None = None,
    names: Mapping[AssetKey, str] | None = None,
) -> dict[AssetKey, TableRuns]:
    """Per table (asset key), its in-flight run or backfill and its recent finished runs (a run of
    another table of its pool does not count: the run queue makes the two take turns). Three queries
    per tick, whatever the number of tables: runs not finished, backfills in progress, runs finished
    in the last day. ``names``: each table's Iceberg name, as a failed run names it in its tags
    (default: the key's parts joined by dots, the default asset key scheme)."""
    now = now or time.time()
    keys_by_pool: dict[str, list[AssetKey]] = {}
    for key, pool in pools_by_key.items():
        keys_by_pool.setdefault(pool, []).append(key)
    key_by_name = {name: key for key, name in (names or {}).items()}
    out: dict[AssetKey, TableRuns] = {}
    for run in instance.get_runs(RunsFilter(statuses=NOT_FINISHED_STATUSES)):
        for key in run_tables(run, pools_by_key, keys_by_pool, key_by_name):
            out.setdefault(key, TableRuns()).in_flight = f"run {run.run_id}"
    for backfill in instance.get_backfills(filters=BulkActionsFilter(statuses=_IN_FLIGHT_BACKFILLS)):
        for key in backfill.asset_selection or ():
            if key in pools_by_key:
                entry = out.setdefault(key, TableRuns())
                entry.in_flight = entry.in_flight or f"backfill {backfill.backfill_id}"
    since = datetime.fromtimestamp(now - HISTORY_SECONDS, tz=UTC)
    records = instance.get_run_records(RunsFilter(statuses=FINISHED_STATUSES, updated_after=since))
    caps = _caps()
    # Oldest first, so the latest finished run of a table sets its status and resets its failure count.
    for record in sorted(records, key=lambda r: r.end_time or r.update_timestamp.timestamp()):
        run = record.dagster_run
        tables = run_tables(run, pools_by_key, keys_by_pool, key_by_name)
        run_failed = run.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED)
        by_pools = len(tables) > 1 and names_no_table(run, key_by_name)
        # A failed run of several tables: those it materialized were maintained; a run known by its
        # pools: only the tables it planned are its own, a pool-mate of another job neither fails nor
        # recovers with it (one query per such run).
        planned, maintained = (
            _assets_of_run(instance, run.run_id)
            if by_pools or (run_failed and len(tables) > 1)
            else (set(), set())
        )
        if by_pools and planned:  # a job of the project's own assets plans nothing: its pools' tables
            tables = [k for k in tables if k in planned]
        for key in tables:
            entry = out.setdefault(key, TableRuns())
            failed = run_failed and key not in maintained
            entry.last_status = run.status if failed or not run_failed else DagsterRunStatus.SUCCESS
            entry.last_finished = record.end_time or record.update_timestamp.timestamp()
            name = names[key] if names and key in names else ".".join(key.path)
            kind, cause = failure_of(run.tags, name) if failed else (None, None)
            entry.last_failure_kind, entry.last_failure_cause = kind, cause
            if failed and entry.last_failure_kind is None and run.status == DagsterRunStatus.CANCELED:
                entry.last_failure_kind, entry.last_failure_cause = CANCELED, "terminated before it ended"
            # An interruption is not the table's failure: its streak stays as it was, they count apart
            # (past its cap an interruption is the table's failure: its runs keep being interrupted).
            interrupted = _interrupted(entry, entry.last_failure_kind if failed else None, caps)
            entry.interruptions_in_a_row = entry.interruptions_in_a_row + 1 if interrupted else 0
            if not interrupted:
                entry.failures_in_a_row = entry.failures_in_a_row + 1 if failed else 0
    return out


def _assets_of_run(instance: DagsterInstance, run_id: str) -> tuple[set[AssetKey], set[AssetKey]]:
    """The tables (asset keys) a run planned (Dagster logs them when it creates the run) and those it
    materialized."""
    types = {DagsterEventType.ASSET_MATERIALIZATION_PLANNED, DagsterEventType.ASSET_MATERIALIZATION}
    planned: set[AssetKey] = set()
    materialized: set[AssetKey] = set()
    for record in instance.get_records_for_run(run_id, of_type=types, limit=100_000).records:
        event = record.event_log_entry.dagster_event
        if event is None or event.asset_key is None:
            continue
        if event.event_type == DagsterEventType.ASSET_MATERIALIZATION:
            materialized.add(event.asset_key)
        else:
            planned.add(event.asset_key)
    return planned, materialized
