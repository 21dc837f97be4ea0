"""`dagster definitions validate` passes for the project, and assets follow the documented conventions."""

import os
from pathlib import Path

from dagster import AssetKey

from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.orchestration.project import build_definitions
from icelake_assets_tests.conftest import catalog_name, dagster_definitions_validate

ROOT = Path(__file__).resolve().parents[1]


def test_dagster_definitions_validate_passes(make_lake):
    settings = make_lake()
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    env = {**os.environ, "ICELAKE_CONFIG": settings.source}
    dagster_definitions_validate(["-w", "workspace.yaml"], ROOT, env)


def test_tables_become_assets_with_keys_groups_kinds_and_metadata(make_lake):
    settings = make_lake()
    name = catalog_name(settings)
    build_demo_lake(settings, catalog=name, scale="test")
    defs = build_definitions(settings)
    key = AssetKey([name, "taxi", "trips"])
    spec = next(s for s in defs.resolve_all_asset_specs() if s.key == key)
    assert spec.group_name == "taxi"
    assert spec.kinds == {"iceberg", "spark"}
    assert spec.metadata["partition_spec"].value == "day(pickup_at)"
    assert spec.metadata["format_version"].value == 2
    assert "location" in spec.metadata and "current_snapshot_id" in spec.metadata
    keys = {s.key for s in defs.resolve_all_asset_specs()}
    assert keys == {
        AssetKey([name, "taxi", "trips"]),
        AssetKey([name, "events", "clicks"]),
        AssetKey([name, "sales", "orders"]),
        AssetKey(["icelake", "health_overview"]),
    }
    checks = {(k.asset_key.path[-1], k.name) for k in defs.resolve_asset_graph().asset_check_keys}
    assert ("trips", "small_files") in checks and ("orders", "orphan_files") in checks
