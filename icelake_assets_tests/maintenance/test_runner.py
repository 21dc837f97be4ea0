"""Expiry through a real Dagster run: fresh snapshots survive whatever their count (min_age_hours),
and a tagged old snapshot survives an expiry that removes its neighbours."""

import pyarrow as pa
from dagster import DagsterInstance
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets_tests.conftest import catalog_name

QUIET = {"small_files": {"max_files_per_partition": 1000}, "manifests": {"max_count": 1000}}  # only expiry acts


def _table(settings, commits: int):
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), Schema(NestedField(1, "id", LongType())))
    for i in range(commits):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    return table


def _run(settings):
    results = execute_maintenance(build_definitions(settings), DagsterInstance.ephemeral(), raise_on_error=True)
    events = [e for r in results for e in r.get_asset_materialization_events()]
    checks = {e.check_name: e for r in results for e in r.get_asset_check_evaluations()}
    return events[0].materialization.metadata, checks


def test_fresh_snapshots_over_the_count_are_kept_and_the_check_agrees(make_lake):
    settings = make_lake({**QUIET, "snapshots": {"max_count": 20, "min_keep": 5}})  # min_age_hours: default 24
    table = _table(settings, 30)
    md, checks = _run(settings)
    assert md["expire_snapshots/acted"].value is False
    assert "none may go yet: 5 of the newest 5 kept, 25 younger than 24 h" in md["expire_snapshots/reason"].value
    table.refresh()
    assert len(table.metadata.snapshots) == 30
    assert checks["snapshot_retention"].passed and "none may expire yet" in checks["snapshot_retention"].description


def test_a_tagged_old_snapshot_survives_expiry(make_lake):
    settings = make_lake({**QUIET, "snapshots": {"max_count": 20, "min_keep": 5, "min_age_hours": 0}})
    table = _table(settings, 30)
    first = table.metadata.snapshots[0].snapshot_id
    table.manage_snapshots().create_tag(first, "audit-2026").commit()
    table.refresh()
    md, checks = _run(settings)
    assert md["expire_snapshots/acted"].value is True
    assert "24 older than 0 h beyond the newest 5 will go" in md["expire_snapshots/reason"].value
    assert md["expire_snapshots/snapshots_expired"].value == 24
    table.refresh()
    kept = [s.snapshot_id for s in table.metadata.snapshots]
    assert len(kept) == 6 and first in kept and table.metadata.refs["audit-2026"].snapshot_id == first
    assert checks["snapshot_retention"].passed
