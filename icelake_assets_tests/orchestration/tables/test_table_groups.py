"""Tables grouped for Dagster (one maintenance graph and pool per group), from discovered facts only."""

from collections import Counter
from datetime import UTC, datetime

from dagster import AssetKey, DailyPartitionsDefinition, Definitions, ResourceDefinition, mem_io_manager
from dagster._core.execution.api import create_execution_plan

from icelake_assets.orchestration.assets.graph import build_group_asset
from icelake_assets.orchestration.tables.table_groups import (
    group_tables,
    maintenance_job_name,
    maintenance_jobs,
    pool_index,
    pool_name,
)
from icelake_assets.types import TableRef
from icelake_assets_tests.conftest import discovered_table

NOW = datetime(2026, 11, 23, tzinfo=UTC)


def test_pools_are_stable_and_spread_evenly():
    refs = [TableRef("lake", (f"ns{i % 10}",), f"t{i}") for i in range(10_000)]
    counts = Counter(pool_index(r, 64) for r in refs)
    assert set(counts) == set(range(64))
    assert max(counts.values()) < 2 * 10_000 / 64  # no pool holds twice its share
    # Pinned: a change of the hash would move tables to other pools and graphs under running runs.
    assert pool_name(TableRef("lake", ("ns0",), "t0"), 64) == "icelake/maintain_039"
    assert pool_index(TableRef("lake", ("ns",), "o'brien"), 64) == 51


def test_unpartitioned_tables_share_their_pools_graph_and_names_do_not_depend_on_other_tables():
    tables = [discovered_table(f"t{i}") for i in range(200)]
    groups = group_tables(tables, 8, now=NOW)
    assert len(groups) == 8 and sum(len(g.tables) for g in groups) == 200
    assert all(g.partitions_def is None and g.name == f"maintain_{g.pool[-3:]}" for g in groups)
    # Adding tables never renames the group of an existing table (a run worker finds its graph).
    before = {t.ref: g.name for g in groups for t in g.tables}
    after = {
        t.ref: g.name for g in group_tables([*tables, discovered_table("new")], 8, now=NOW) for t in g.tables
    }
    assert all(after[ref] == name for ref, name in before.items())


def test_time_partitioned_tables_group_by_grain_and_first_partition_spanning_the_latest_data():
    a = discovered_table("a", day=("2024-01-01", "2024-01-05"))
    b = discovered_table("b", day=("2024-01-01", "2024-01-20"))
    c = discovered_table("c", day=("2024-02-01", "2024-02-03"))
    groups = {g.name: g for g in group_tables([a, b, c], 1, now=NOW)}
    assert set(groups) == {"maintain_000_day_2024_01_01", "maintain_000_day_2024_02_01"}
    jan = groups["maintain_000_day_2024_01_01"]
    assert {t.ref.name for t in jan.tables} == {"a", "b"}
    assert isinstance(jan.partitions_def, DailyPartitionsDefinition)
    keys = jan.partitions_def.get_partition_keys(current_time=NOW)
    assert keys[0] == "2024-01-01" and keys[-1] == "2024-01-20"  # up to b's latest day


def test_dynamic_partitions_and_lineage_make_a_group_of_their_own():
    kinds, fed, plain = (
        discovered_table("kinds", identity=True),
        discovered_table("fed"),
        discovered_table("plain"),
    )
    producers = {fed.ref: [AssetKey(["writer"])]}
    groups = group_tables([kinds, fed, plain], 1, producers, now=NOW)
    by_table = {t.ref.name: g for g in groups for t in g.tables}
    assert by_table["kinds"].name == f"maintain__{kinds.ref.safe_name}"
    assert by_table["fed"].name == f"maintain__{fed.ref.safe_name}" and by_table["fed"].producers == (
        AssetKey(["writer"]),
    )
    assert by_table["plain"].name == "maintain_000"
    assert len({g.pool for g in groups}) == 1  # one pool: the three still take turns


def test_time_groups_of_every_pool_share_their_partitions_and_one_whole_table_job():
    tables = [discovered_table(f"t{i}", day=("2024-01-01", f"2024-01-{i % 20 + 1:02d}")) for i in range(60)]
    groups = group_tables(tables, 8, now=NOW)
    assert len(groups) == 8 and len({g.partitions_def for g in groups}) == 1
    assets = [build_group_asset(g) for g in groups]
    jobs = maintenance_jobs(assets, "maint")
    assert [j.name for j in jobs] == ["maint__day_2024_01_01"]
    assert {maintenance_job_name(a, "maint") for a in assets} == {"maint__day_2024_01_01"}


def test_steps_are_named_by_op_and_op_definitions_stay_unique_in_a_job_of_several_groups():
    tables = [discovered_table(f"t{i}") for i in range(40)]
    groups = group_tables(tables, 4, now=NOW)
    assets = [build_group_asset(g) for g in groups]
    ops = [
        "compute_statistics",
        "expire_data",
        "expire_snapshots",
        "manage_restore_points",
        "remove_orphan_files",
        "rewrite_data_files",
        "rewrite_manifests",
        "validate",
    ]
    for g, a in zip(groups, assets, strict=True):
        # A run shows `maintain_017.rewrite_data_files`, not `maintain_017.maintain_017__rewrite_data_files`.
        assert sorted(a.node_def.node_dict) == ops
        assert {n.name: n.definition.name for n in a.node_def.nodes} == {op: f"{g.name}__{op}" for op in ops}
    # The whole-table job holds every group's graph: the short names do not collide across graphs.
    resources = {
        "icelake": ResourceDefinition.none_resource(),
        "icelake_spark": ResourceDefinition.none_resource(),
        "icelake_run_state_io_manager": mem_io_manager,
    }
    defs = Definitions(assets=assets, jobs=maintenance_jobs(assets, "maint"), resources=resources)
    job = defs.resolve_job_def("maint")
    steps = {s.key for s in create_execution_plan(job).steps}
    assert steps == {f"{g.name}.{op}" for g in groups for op in ops}
