"""The bare code locations of bench/scale/definitions_bench.py: the same-shape one must have exactly the
product's assets, checks, check ops, jobs and ops per table group (else the benchmark's ratio
compares unlike things), the minimal one the product's tables with one check each."""

from dagster import AssetKey, GraphDefinition

from bench.scale.bare_shapes import MINIMAL_CHECK, from_environment, minimal_shape, same_shape
from bench.scale.shape_spec import ShapeSpec, spec_of
from icelake_assets.health.findings import CHECKS
from icelake_assets.maintenance.ops.chain import MAINTENANCE_OPS
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.planning.partition_health import PARTITION_CHECKS
from icelake_assets.private_api import IMPLICIT_ASSET_JOB_NAME
from icelake_assets_tests.conftest import discovered_table

DAYS = ("2026-01-01", "2026-01-03")


def _product(make_lake):
    """A small product repository: unpartitioned tables in two pools, a day-partitioned group and a
    dynamically partitioned table of its own (three kinds of maintenance job)."""
    settings = make_lake(extra={"automation": {"maintenance_pools": 2, "checks_per_table": "each"}})
    tables = [
        *(discovered_table(f"t{i}") for i in range(5)),
        discovered_table("d0", day=DAYS),
        discovered_table("d1", day=DAYS),
        discovered_table("kinds", identity=True),
    ]
    return build_definitions(settings, tables).get_repository_def()


def _checks(repo) -> set:
    return set(repo.asset_graph.asset_check_keys)


def _ops(repo) -> dict[str, list[str]]:
    """Each table group's graph: its op definitions."""
    return {
        a.node_def.name: sorted(n.definition.name for n in a.node_def.nodes_in_topological_order)
        for a in repo.asset_graph.assets_defs
        if a.keys and isinstance(a.node_def, GraphDefinition)
    }


def test_the_same_shape_has_the_products_assets_checks_jobs_and_ops(make_lake, tmp_path):
    product = _product(make_lake)
    spec = spec_of(product)
    path = tmp_path / "shape.json"
    spec.write(path)
    assert ShapeSpec.read(path) == spec  # what the fresh processes read is what was extracted
    bare = same_shape(ShapeSpec.read(path)).get_repository_def()

    assert bare.asset_graph.get_all_asset_keys() == product.asset_graph.get_all_asset_keys()
    # 8 tables x (every check, health, table_configuration), plus the overview's catalogs_reachable, plus
    # the checks per partition of the 3 partitioned tables (automation.partition_checks: auto)
    expected = 8 * (len(CHECKS) + 2) + 1 + 3 * len(PARTITION_CHECKS)
    assert _checks(bare) == _checks(product) and len(_checks(product)) == expected
    assert {j.name for j in bare.get_all_jobs()} == {j.name for j in product.get_all_jobs()}
    assert len(product.get_all_jobs()) >= 6  # maintenance (x3 partitions kinds), health, checks, orphans
    assert _ops(bare) == _ops(product) and len(_ops(product)) == 4
    assert all(len(names) == len(MAINTENANCE_OPS) + 1 for names in _ops(product).values())  # + validate
    # Every job executes the same asset and check keys, every check op holds the same checks.
    assert spec_of(bare) == spec


def test_the_minimal_shape_is_the_tables_with_one_check_each_and_no_job(make_lake):
    spec = spec_of(_product(make_lake))
    minimal = minimal_shape(spec).get_repository_def()
    tables = {AssetKey(k) for k in spec.table_keys}
    assert minimal.asset_graph.get_all_asset_keys() == tables and len(tables) == 8
    assert {(c.asset_key, c.name) for c in _checks(minimal)} == {(k, MINIMAL_CHECK) for k in tables}
    assert [j.name for j in minimal.get_all_jobs()] == [IMPLICIT_ASSET_JOB_NAME]


def test_the_module_builds_the_kind_its_environment_names(make_lake, tmp_path, monkeypatch):
    path = tmp_path / "shape.json"
    spec_of(_product(make_lake)).write(path)
    monkeypatch.delenv("BARE_SHAPE", raising=False)
    assert from_environment() is None  # importable without a spec (tests, tools)
    monkeypatch.setenv("BARE_SHAPE", str(path))
    monkeypatch.setenv("BARE_KIND", "minimal")
    defs = from_environment()
    assert defs is not None and not list(defs.jobs or ())
    monkeypatch.setenv("BARE_KIND", "same")
    defs = from_environment()
    assert defs is not None and len(list(defs.jobs or ())) >= 5
