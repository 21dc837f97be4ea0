"""The chaos soak's phases around its chaos (bench/soak/chaos_soak.py): before it, the day-partitioned
table's first days and the first maintenance run; after it, healing: the writers stopped, the product
alone, polled until every table is Healthy with no run in flight."""

from __future__ import annotations

import time

from bench.soak import checks, retention_checks
from bench.soak.lake import CATALOG, DAILY, NAMESPACE, SENSOR_INTERVAL, TABLES
from bench.soak.report import say
from bench.soak.writers import DAYS, WRITERS, ledger_path, read_ledger

WARM_UP_SECONDS = 300.0  # the faults start once a first maintenance run started (at most this late)
FIRST_APPENDS_SECONDS = 180.0  # the daemon starts once the day-partitioned table holds its days

HEAL_LIMIT_SECONDS = 600.0  # every table Healthy this long after the last fault (issue 31)
# Past the limit the soak goes on watching this long, to tell "late" from "never".
HEAL_OVERTIME_SECONDS = 900.0
QUIET_CHECKS = 2  # healed: healthy and nothing in flight at this many polls in a row ...
POLL_SECONDS = SENSOR_INTERVAL  # ... one sensor interval apart (the reconciling tick in between)
RUNS_GRACE_SECONDS = 300.0  # then how long runs still in flight may take to end


def first_appends(soak) -> None:
    """Waits until the day-partitioned table holds each of its days (the code server's first load
    makes them its Dagster partitions), at most FIRST_APPENDS_SECONDS."""
    daily = next(w for w in WRITERS if w.table == DAILY)
    deadline = soak.clock() + FIRST_APPENDS_SECONDS
    while soak.clock() < deadline:
        if read_ledger(ledger_path(soak.folder, daily)).actions[("append", "ok")] >= DAYS:
            return
        time.sleep(1)
    say(
        soak.t0, f"{DAILY}: not {DAYS} appends within {FIRST_APPENDS_SECONDS:.0f} s: the daemon starts anyway"
    )


def warm_up(soak, instance) -> None:
    """The faults start once the loop turns: a first maintenance run started (the code server's first
    load takes a minute or more on a busy machine), or after WARM_UP_SECONDS."""
    from dagster import DagsterRunStatus, RunsFilter

    from icelake_assets.orchestration.runs.model import TABLE_TAG

    deadline = soak.clock() + WARM_UP_SECONDS
    while soak.clock() < deadline:
        started = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
        if any(TABLE_TAG in r.tags for r in started):
            say(soak.t0, "a first maintenance run started")
            return
        time.sleep(2)
    say(soak.t0, f"no maintenance run started within {WARM_UP_SECONDS:.0f} s: the faults start anyway")


def lake_state(settings, instance) -> tuple[list[checks.HealthCheck], list[str]]:
    """Every table's health (the retention table's too) and the runs queued or in progress."""
    from dagster import RunsFilter

    from icelake_assets.catalog.connection import TableRef, open_catalog
    from icelake_assets.catalog.known_tables import known_tables
    from icelake_assets.private_api import NOT_FINISHED_STATUSES

    catalog = open_catalog(settings, CATALOG)
    known = known_tables(settings)
    health = [
        checks.check_health(settings, catalog, TableRef(CATALOG, (NAMESPACE,), t), known) for t in TABLES
    ]
    health.append(retention_checks.health_check(settings, catalog, known))
    runs = instance.get_runs(RunsFilter(statuses=list(NOT_FINISHED_STATUSES)))
    return health, [
        f"{r.run_id[:8]} {r.status.value} {r.tags.get('icelake/table', r.job_name)}" for r in runs
    ]


def heal(soak, settings, instance) -> tuple[list[checks.HealthCheck], list[str]]:
    """The product alone, polled until every table is Healthy with no run in flight at QUIET_CHECKS
    polls in a row (``soak.healed_at``: the first of them), or HEAL_OVERTIME_SECONDS past the limit
    (then the runs still in flight get RUNS_GRACE_SECONDS to end)."""
    cap = max(soak.last_fault, soak.chaos_end) + HEAL_LIMIT_SECONDS + HEAL_OVERTIME_SECONDS
    quiet, health, in_flight, said = 0, [], [], ""
    while soak.clock() < cap:
        try:
            health, in_flight = lake_state(settings, instance)
        except Exception as err:  # the catalog may be restarting: the next poll sees it
            say(soak.t0, f"heal: lake not readable: {err}")
            time.sleep(POLL_SECONDS)
            continue
        if all(h.ok for h in health) and not in_flight:
            quiet += 1
            soak.healed_at = soak.healed_at if quiet > 1 else soak.clock()
            if quiet >= QUIET_CHECKS:
                return health, in_flight
        else:
            quiet, soak.healed_at = 0, None
        state = f"{sum(h.ok for h in health)}/{len(health)} Healthy, runs in flight: {in_flight or 'none'}"
        if state != said:
            say(
                soak.t0,
                f"heal: {state}; "
                + "; ".join(f"{h.table}: {h.failing[0][:70]}" for h in health if h.failing),
            )
            said = state
        time.sleep(POLL_SECONDS)
    deadline = soak.clock() + RUNS_GRACE_SECONDS
    while in_flight and soak.clock() < deadline:
        time.sleep(POLL_SECONDS)
        health, in_flight = lake_state(settings, instance)
    return health, in_flight


def health_details(health: list[checks.HealthCheck], healed_in: float | None) -> tuple[str, ...]:
    if healed_in is None:
        return tuple(f"{h.table}: {h.status}: {'; '.join(h.failing)}" for h in health if not h.ok)
    return (f"every table Healthy {healed_in:.0f} s after the last fault",)
