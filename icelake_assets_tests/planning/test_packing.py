"""Which tables share a run and how the runs are cut (planning/packing.py)."""

from icelake_assets.planning.packing import LaunchCandidate, PredictedWork, launch_mode, pack_launches
from icelake_assets.settings import MiB, Policy


def _policy(**packing) -> Policy:
    return Policy.model_validate({"packing": packing})


def test_a_table_within_both_thresholds_shares_a_run_and_the_reason_names_the_threshold_crossed():
    policy = _policy(max_bytes=10 * MiB, max_files=100)
    small = launch_mode(policy, PredictedWork(MiB, 30))
    assert small.shared and "packing.max_bytes" in small.reason
    by_bytes = launch_mode(policy, PredictedWork(11 * MiB, 30))
    assert not by_bytes.shared and "> packing.max_bytes 10.5 MB" in by_bytes.reason
    by_files = launch_mode(policy, PredictedWork(0, 101))
    assert not by_files.shared and "101 files > packing.max_files 100" in by_files.reason
    assert not launch_mode(policy, PredictedWork(0, 1), partitioned_run=True).shared
    off = launch_mode(_policy(enabled=False), PredictedWork(0, 1))
    assert not off.shared and "packing.enabled" in off.reason


def _candidate(table, shared=True, job="j", pool=None, size=MiB):
    policy = _policy(max_bytes=100 * MiB) if shared else _policy(enabled=False)
    work = PredictedWork(size, 10)
    return LaunchCandidate(table, job, pool or f"p-{table}", work, launch_mode(policy, work))


def test_packs_keep_the_launch_order_and_respect_the_run_limits():
    ranked = [
        _candidate("a"),
        _candidate("big", shared=False),
        _candidate("b"),
        _candidate("other_job", job="k"),
        _candidate("c"),
        _candidate("d", size=60 * MiB),  # would take the first pack past 64 MiB: a new pack
        _candidate("e"),
    ]
    units = pack_launches(ranked, max_tables=3, max_bytes=64 * MiB).units
    assert [u.tables for u in units] == [("a", "b", "c"), ("big",), ("other_job",), ("d", "e")]
    assert units[0].packed and not units[1].packed and units[3].bytes == 61 * MiB


def test_a_small_table_whose_pool_is_busy_waits_for_it_and_a_large_one_keeps_its_run():
    ranked = [
        _candidate("a"),
        _candidate("waits", pool="held"),
        _candidate("large", shared=False, pool="held"),
        _candidate("b"),
    ]
    packs = pack_launches(ranked, max_tables=20, max_bytes=10**12, busy_pools=frozenset({"held"}))
    assert [u.tables for u in packs.units] == [("a", "b"), ("large",)]
    assert packs.held == {"waits": "its pool held is held by a run in flight"}


def test_packs_of_one_tick_carry_whole_pools_and_never_share_one():
    """A pool admits one run at a time: two packs sharing one run one after the other. A pack takes
    the pool-mates of each table it takes (one pool's tables share one chain of steps), and a pool goes
    whole to the first pack that can take it: split over two packs, its other tables would wait for
    the run that claims it and make small runs at the end of a heal (bench.loop.fleet_bench: 20, 10, 5 and 5
    tables for the last 40). Only a pool larger than a pack, or one that a large table's run or
    another job's pack claims, leaves tables waiting."""
    ranked = [
        _candidate("a", pool="p1"),
        _candidate("b", pool="p2", size=60 * MiB),
        _candidate("c", pool="p3"),
        _candidate("x", pool="p6", size=10 * MiB),  # fits the first pack (b's pool did not)
        _candidate("d", pool="p1"),  # a's pool-mate: in a's pack
        _candidate("e", pool="p4"),  # the first pack is full: the second takes it
        _candidate("f", pool="p2"),  # b's pool-mates: with b in a pack of their own
        _candidate("y", pool="p2"),
        _candidate("big", shared=False, pool="p5"),
        _candidate("g", pool="p5"),  # the large table's pool
        _candidate("h", job="k", pool="p4"),  # e's pool, another job
        *(_candidate(f"z{i}", pool="p7") for i in range(5)),  # a pool larger than a pack
    ]
    packs = pack_launches(ranked, max_tables=4, max_bytes=64 * MiB)
    assert [u.tables for u in packs.units] == [
        ("a", "d", "c", "x"),
        ("b", "f", "y", "e"),
        ("big",),
        ("z0", "z1", "z2", "z3"),
    ]
    assert set(packs.held) == {"g", "h", "z4"} and "cannot take it" in packs.held["z4"]
    pools = [{c.pool for c in ranked if c.table in u.tables} for u in packs.units]
    assert all(not (x & y) for i, x in enumerate(pools) for y in pools[i + 1 :])


def test_one_table_per_run_when_packs_hold_one_table():
    ranked = [_candidate("a"), _candidate("b")]
    assert [u.tables for u in pack_launches(ranked, max_tables=1, max_bytes=10**12).units] == [("a",), ("b",)]


def test_tables_are_spread_over_the_runs_that_run_at_once():
    ranked = [_candidate(f"t{i}") for i in range(7)] + [_candidate("big", shared=False)]
    units = pack_launches(ranked, max_tables=20, max_bytes=10**12, spread_over=2).units
    assert [len(u.tables) for u in units] == [4, 3, 1]  # two runs side by side, not one of 7
    many = pack_launches(
        [_candidate(f"t{i}") for i in range(50)], max_tables=20, max_bytes=10**12, spread_over=2
    ).units
    # Never past max_tables, and in whole rounds of the runs at once: 20, 20 and 10 left the last
    # run alone beside an idle slot.
    assert [len(u.tables) for u in many] == [13, 13, 13, 11]
    for tables, sizes in ((60, [15] * 4), (80, [20] * 4), (81, [14] * 5 + [11]), (200, [20] * 10)):
        units = pack_launches(
            [_candidate(f"t{i}") for i in range(tables)], max_tables=20, max_bytes=10**12, spread_over=2
        ).units
        assert [len(u.tables) for u in units] == sizes, tables


def test_packs_are_not_spread_thinner_than_the_minimum_a_run_is_worth():
    three = pack_launches(
        [_candidate(f"t{i}") for i in range(3)], max_tables=20, max_bytes=10**12, spread_over=10
    ).units
    assert [len(u.tables) for u in three] == [3]  # one run, not three runs of one under a cap of 10
    twenty = pack_launches(
        [_candidate(f"t{i}") for i in range(20)], max_tables=20, max_bytes=10**12, spread_over=10
    ).units
    assert [len(u.tables) for u in twenty] == [4] * 5


def test_no_table_waits_on_a_pool_its_own_ticks_packs_split():
    """40 small tables in 13 pools (3 or 4 tables each), two runs at once. The old cut filled a pack
    table by table and left the rest of the pool at its boundary waiting for the run that claims it:
    a few tables per run, which gathered into small runs at the end of a heal (bench.loop.fleet_bench: the
    last 40 of 200 tables went as 20, 10, 5 and 5). Now every table is in a pack, pools whole; what
    the free slots do not launch is packed again next tick, with nothing held."""
    ranked = [_candidate(f"t{i:02d}", pool=f"p{i % 13}") for i in range(40)]
    packs = pack_launches(ranked, max_tables=20, max_bytes=10**12, spread_over=2)
    assert packs.held == {}
    assert sum(len(u.tables) for u in packs.units) == 40 and all(len(u.tables) <= 20 for u in packs.units)
    assert [len(u.tables) for u in packs.units] == [19, 18, 3]  # bins of 3 and 4 cannot make 20 and 20
