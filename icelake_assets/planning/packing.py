"""Small tables share a run (issue 42): the fixed cost of a run (its queue turn, its process, the
definitions it loads, its attach to the Spark driver: seconds) is most of the work of a small
table, so the sensor packs the small tables it launches in a tick into runs of several tables.

A table is small when its predicted work is within its policy's ``packing`` thresholds: the bytes
the run would read and write again (the cost guard's estimate) and the files every op plans over
(data and delete files). Larger tables, and tables whose run takes partitions (a range or a key),
keep a run of their own. A pack holds tables of one maintenance job (a run is of one job), at most
``automation.packed_run_max_tables`` tables and ``packed_run_max_bytes`` bytes of predicted work.

A run claims the concurrency pools of every table it carries (a pool admits one run at a time), so
two runs that share a pool run one after the other, whatever the run cap. Packs are therefore cut
with disjoint pools, each carrying whole pools: a pack that takes a small table takes its pool-mates
wanting a run too (they would wait on its run anyway, and the tables of one pool share one maintenance
graph, so they cost the run one chain of steps, not one each: Dagster's own work per step is a good
part of a small table's), and a small table whose pool a run in flight holds is not
launched this tick (a run for it, alone or packed, would only wait on that run, holding a queue
slot meanwhile): it is packed once the pool frees. With 64 pools and hundreds of small tables,
packs cut without regard to pools shared pools almost surely and ran one at a time (measured by
bench.loop.fleet_bench: 200 tables took 1.95x the raw procedures). A pool goes whole to the first pack
of its job that can take it (first fit): cut at a pack's boundary, the rest of the pool waited for
the run that claimed it, and those tables gathered into small runs at the end of a heal.

Packing keeps the launch order (planning/priority.py): a pack takes the place of its best-ranked
table, and the run slots are counted in runs, not tables. The tables are spread over the runs the
instance runs at once (its run cap): 20 small tables under a cap of 2 make two runs of 10, which
the shared Spark driver serves side by side, not one run of 20 and an idle slot; more tables than
the runs at once can hold fill whole rounds of runs (50 under a cap of 2: four runs of 13 or fewer,
not 20, 20 and a last run of 10 beside an idle slot); a pack holds at least MIN_SHARED tables when
there are as many (3 small tables under a cap of 10 still share one). Pure: the sensor wires it
(tick_stages.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from icelake_assets.health.stats import TableStats
from icelake_assets.planning.guards import Verdict
from icelake_assets.settings import Policy
from icelake_assets.text import human_bytes


@dataclass(frozen=True)
class PredictedWork:
    """What a table's run would do, as far as its metadata tells before the run."""

    bytes: int  # read and written again (rewrites, row expiry): the cost guard's estimate
    files: int  # data and delete files the ops plan over


def predicted_work(stats: TableStats, verdict: Verdict) -> PredictedWork:
    """A table's predicted work from its stats and the guards' verdict (the cost estimate they priced)."""
    return PredictedWork(
        int(verdict.details.get("estimated_rewrite_bytes", 0)),
        stats.data_files + stats.position_delete_files + stats.equality_delete_files,
    )


@dataclass(frozen=True)
class LaunchMode:
    """How the sensor launches a table's maintenance: in a run shared with other small tables or
    in a run of its own, and why."""

    shared: bool
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"shared": self.shared, "reason": self.reason}


def launch_mode(policy: Policy, work: PredictedWork, partitioned_run: bool = False) -> LaunchMode:
    """``partitioned_run``: the run takes a partition or a range of them (a run of its own: a run
    of several tables is a whole-table run of each)."""
    packing = policy.packing
    if not packing.enabled:
        return LaunchMode(False, "a run of its own: packing disabled by policy (packing.enabled)")
    if partitioned_run:
        return LaunchMode(False, "a run of its own: it maintains some partitions, not the whole table")
    over = []
    if work.bytes > packing.max_bytes:
        over.append(
            f"{human_bytes(work.bytes)} to rewrite > packing.max_bytes {human_bytes(packing.max_bytes)}"
        )
    if work.files > packing.max_files:
        over.append(f"{work.files} files > packing.max_files {packing.max_files}")
    if over:
        return LaunchMode(False, "a run of its own: " + ", ".join(over))
    return LaunchMode(
        True,
        f"shares a run with other small tables ({human_bytes(work.bytes)} to rewrite, {work.files} files: "
        f"within packing.max_bytes {human_bytes(packing.max_bytes)} and max_files {packing.max_files})",
    )


@dataclass(frozen=True)
class LaunchCandidate:
    """A table wanting a run this tick, in the launch order."""

    table: str
    job: str  # the maintenance job its run targets: a run is of one job
    pool: str
    work: PredictedWork
    mode: LaunchMode


@dataclass(frozen=True)
class LaunchUnit:
    """One run the sensor requests: one table, or several small ones (best-ranked first)."""

    tables: tuple[str, ...]
    bytes: int

    @property
    def packed(self) -> bool:
        return len(self.tables) > 1


# A shared run carries at least this many tables when there are as many: under it, the run's fixed
# cost (queue turn, process, definitions, Spark attach: about 9 s measured by bench.loop.fleet_bench)
# outweighs its tables' work (about 2-5 s each), and the slots it would keep busy are not worth it.
MIN_SHARED = 4


def _share(tables: int, max_tables: int, spread_over: int) -> int:
    """Tables per pack for ``tables`` small tables of one job: spread evenly over whole rounds of
    ``spread_over`` runs (the runs that run at once), over fewer runs when that would leave packs of
    fewer than MIN_SHARED tables. 50 tables at most 20 a run under a cap of 2 make four runs of 13 or
    fewer, two rounds with both slots busy; packs of 20, 20 and 10 left the last one alone beside an
    idle slot (60 tables took a third longer than they needed, bench.loop.fleet_bench)."""
    rounds = -(-tables // (max_tables * spread_over))
    packs = max(1, min(spread_over * rounds, -(-tables // MIN_SHARED)))
    return max(1, min(max_tables, -(-tables // packs)))


@dataclass(frozen=True)
class Packs:
    """The runs for a tick's candidates, in launch order, and the small tables held back this tick
    (table -> why: its pool is held by a run in flight, or by a full pack of this tick)."""

    units: list[LaunchUnit]
    held: dict[str, str]


def pack_launches(
    candidates: Sequence[LaunchCandidate],
    max_tables: int,
    max_bytes: int,
    busy_pools: frozenset[str] = frozenset(),
    spread_over: int | None = None,
) -> Packs:
    """The runs for ``candidates`` (best first), in launch order: a table not shared is a unit of its
    own at its place; a shared table's pool (its mates of its job) goes whole to the first pack of the
    job with room for it in tables (its share) and ``max_bytes``, else to a new pack placed where the
    table ranked, the packs' pools kept disjoint (module docstring). A pack's share is
    ``max_tables``, or fewer when ``spread_over`` (the runs that may run at once) is given: the job's
    shared tables are then spread evenly over that many runs (fewer when the packs would hold under
    MIN_SHARED tables), so tables do not wait in one run while a run slot stays idle."""
    shared = [c for c in candidates if c.mode.shared and c.pool not in busy_pools]
    per_job: dict[str, int] = {}
    for c in shared:
        per_job[c.job] = per_job.get(c.job, 0) + 1
    share = {
        job: max_tables if spread_over is None else _share(n, max_tables, spread_over)
        for job, n in per_job.items()
    }
    units: list[list[str]] = []
    sizes: list[int] = []
    claimed: set[str] = set()  # the pools the units of this tick claim
    packs_of: dict[str, list[int]] = {}  # job -> indexes of its packs, in launch order
    held: dict[str, str] = {}

    def fits(at: int, c: LaunchCandidate, limit: int) -> bool:
        return len(units[at]) < limit and sizes[at] + c.work.bytes <= max_bytes

    def fits_whole(at: int, group: Sequence[LaunchCandidate], limit: int) -> bool:
        return (
            len(units[at]) + len(group) <= limit and sizes[at] + sum(m.work.bytes for m in group) <= max_bytes
        )

    def add(at: int, c: LaunchCandidate) -> None:
        units[at].append(c.table)
        sizes[at] += c.work.bytes
        claimed.add(c.pool)

    def new_unit() -> int:
        units.append([])
        sizes.append(0)
        return len(units) - 1

    # A pack carries whole pools: the tables of one pool share one maintenance graph (their steps
    # maintain them in turn), so a pool's tables in one run cost one chain of steps, not one each.
    mates: dict[tuple[str, str], list[LaunchCandidate]] = {}
    for c in shared:
        mates.setdefault((c.job, c.pool), []).append(c)
    placed: set[str] = set()

    def place(at: int, c: LaunchCandidate) -> None:
        """``c`` (the first of its pool not placed) into unit ``at``, then its pool-mates that fit."""
        for mate in mates[(c.job, c.pool)]:
            if mate.table in placed:
                continue
            placed.add(mate.table)
            if mate is c or fits(at, mate, max_tables):
                add(at, mate)
            else:
                held[mate.table] = f"its pool {mate.pool} goes to a run of this tick that cannot take it"

    for c in candidates:
        if c.table in placed:
            continue
        if not c.mode.shared:
            add(new_unit(), c)
            continue
        if c.pool in busy_pools:
            held[c.table] = f"its pool {c.pool} is held by a run in flight"
            continue
        # Claimed already: by a large table's run or another job's pack (a pack of this job took
        # every table of the pool when it took the first).
        if c.pool in claimed:
            held[c.table] = f"its pool {c.pool} goes to a run of this tick that cannot take it"
            continue
        # The first pack of its job that takes its whole pool (first fit: a pool split over two packs
        # leaves its other tables waiting for the run that claims it, to make small runs at the end).
        group = [m for m in mates[(c.job, c.pool)] if m.table not in placed]
        packs = packs_of.setdefault(c.job, [])
        at = next((i for i in packs if fits_whole(i, group, share[c.job])), None)
        if at is None:
            at = new_unit()
            packs.append(at)
        place(at, c)
    return Packs([LaunchUnit(tuple(u), s) for u, s in zip(units, sizes, strict=True)], held)
