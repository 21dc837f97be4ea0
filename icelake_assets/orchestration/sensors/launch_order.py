"""The tick's launch order (a stage of tick_stages.py): the tables wanting a run ranked
(planning/priority.py), packed into runs (planning/packing.py) and capped by the free run slots."""

from collections.abc import Mapping, Sequence
from dataclasses import replace

from dagster import SensorEvaluationContext

from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.runs import model as run_model
from icelake_assets.orchestration.runs.usage import run_seconds
from icelake_assets.orchestration.sensors.events import TableEvaluation, in_shared_run, ranked
from icelake_assets.orchestration.sensors.tick_stages import LaunchOrder, RecoveredRuns, TickPlan
from icelake_assets.planning.history import finding_since
from icelake_assets.planning.outcome import Outcome
from icelake_assets.planning.packing import LaunchCandidate, Packs, pack_launches
from icelake_assets.planning.priority import Rank, Usage, rank_launches
from icelake_assets.settings import AutomationSettings


def _launch_units(
    evaluations: Mapping[str, TableEvaluation],
    ranks: Sequence[Rank],
    runs: RecoveredRuns,
    automation: AutomationSettings,
    parallel: int | None,
) -> Packs:
    """The runs for the ranked tables: small tables of one job packed (planning/packing.py) and
    spread over ``parallel`` runs, with disjoint pools; a small table whose pool another run holds
    waits for it."""
    busy = frozenset(
        runs.pools[key] for key, state in runs.runs.items() if state.in_flight and key in runs.pools
    )
    candidates = []
    for rank in ranks:
        # A table wanting a run has one request (events._run_requests) and its launch mode.
        e = evaluations[rank.table]
        [request] = e.run_requests
        assert e.launch is not None
        pool = runs.pools.get(table_asset_key(e.ref), "")
        # A maintenance job has one partitions definition (table_groups.maintenance_jobs): packing by
        # job never mixes definitions in a run, which Dagster refuses.
        candidates.append(LaunchCandidate(rank.table, request.job_name or "", pool, e.work, e.launch))
    return pack_launches(
        candidates, automation.packed_run_max_tables, automation.packed_run_max_bytes, busy, parallel
    )


def order_and_cap(
    context: SensorEvaluationContext,
    automation: AutomationSettings,
    plan: TickPlan,
    runs: RecoveredRuns,
    now: float,
) -> LaunchOrder:
    """The tables wanting a run, in the launch order (planning/priority.py: waited past the bound, then
    benefit within the fair share, then over it), packed into runs (small tables share one,
    planning/packing.py). When the instance's global run cap leaves fewer slots than runs, the free
    slots' worth are requested; the tables of the other runs, and small tables whose pool a run
    holds, become ``queued_by_priority`` (re-ranked next tick)."""
    # When the finding was first seen (an older finding goes first among equal benefits).
    found_at = {e.name: finding_since(e.previous, now) for e in plan.evaluated}
    evaluations = dict(plan.evaluations)
    wanting = [e.name for e in plan.evaluated if evaluations[e.name].outcome == Outcome.LAUNCHED]
    if not wanting:
        return LaunchOrder(evaluations, (), found_at)
    free, slots = run_model.free_slots(context.instance, runs.pools, automation.queued_runs_ahead)
    usage = None
    if free is not None and free < len(wanting):  # the runs' time is read only when slots are short
        window = automation.fair_share_window_hours * 3600
        used = run_seconds(context.instance, runs.pools, runs.names, now, window)
        usage = Usage.of(wanting, used, automation.fair_share_by, window)
    wait = automation.max_wait_minutes * 60
    ranks = rank_launches([(w, evaluations[w].benefit) for w in wanting], found_at, None, now, wait, usage)
    # Spread over the runs the instance runs at once (its run cap; none: as full as allowed).
    packs = _launch_units(evaluations, ranks, runs, automation, run_model.run_cap(context.instance))
    launched = packs.units if free is None else packs.units[:free]
    unit_of = {table: unit for unit in launched for table in unit.tables}
    ranking = []
    for rank in ranks:
        rank = replace(rank, queued=rank.table not in unit_of)
        placed = ranked(evaluations[rank.table], rank, slots, packs.held.get(rank.table))
        if rank.table in unit_of and unit_of[rank.table].packed:
            placed = in_shared_run(placed, unit_of[rank.table].tables)
        evaluations[rank.table] = placed
        ranking.append(
            f"{rank.rank}. {placed.ref} {placed.outcome} ({rank.rule}: {rank.benefit} files/scan, {rank.age})"
        )
    shared = sum(len(u.tables) for u in launched if u.packed)
    context.log.info(
        f"launch order ({slots}; {len(launched)} run(s), {shared} table(s) in shared runs): "
        + "; ".join(ranking[:20])
        + (f" and {len(ranking) - 20} more" if len(ranking) > 20 else "")
    )
    return LaunchOrder(evaluations, tuple(u.tables for u in launched), found_at)
