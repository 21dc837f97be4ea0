"""Proof of benefit from metadata alone: a full scan's planning and opening cost on two snapshots of a
real table (SQLite catalog, local files), before and after it is compacted."""

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.health.scan_cost import ScanBenefit, measure_scan_cost
from icelake_assets_tests.conftest import catalog_name

SCHEMA = Schema(NestedField(1, "id", LongType()))


def _table(make_lake, appends: int):
    settings = make_lake()
    catalog = open_catalog(settings, catalog_name(settings), create=True)
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "t"), SCHEMA)
    for i in range(appends):
        table.append(pa.table({"id": pa.array(range(i * 10, i * 10 + 10), pa.int64())}))
    return table


def test_a_compaction_shows_fewer_files_to_open_and_fewer_manifests_to_plan(make_lake):
    table = _table(make_lake, 6)
    start = table.current_snapshot().snapshot_id
    table.overwrite(table.scan().to_arrow())  # one file, one data manifest: what a compaction leaves
    benefit = ScanBenefit(measure_scan_cost(table, start), measure_scan_cost(table))
    before, after = benefit.before, benefit.after
    assert (before.snapshot_id, before.data_files, before.manifests) == (start, 6, 6)
    assert after.data_files == 1 and after.manifests < before.manifests
    assert before.metadata_bytes > after.metadata_bytes > 0 and before.data_bytes > after.data_bytes > 0
    assert before.plan_seconds > 0 and after.plan_seconds > 0
    assert benefit.files_saved == 5 and not benefit.nil
    assert benefit.describe().startswith("a full scan opens 6 → 1 files; planning reads 6 → ")
    assert benefit.to_dict()["before"]["data_files"] == 6


def test_a_run_that_changed_nothing_for_readers_says_no_benefit(make_lake):
    table = _table(make_lake, 3)
    same = measure_scan_cost(table)
    benefit = ScanBenefit(same, measure_scan_cost(table))
    assert benefit.nil and benefit.files_saved == 0
    assert benefit.describe().startswith("no benefit to readers: a full scan opens 3 → 3 files")


def test_an_empty_table_costs_nothing_to_scan(make_lake):
    cost = measure_scan_cost(_table(make_lake, 0))
    assert (cost.snapshot_id, cost.files_opened, cost.manifests, cost.metadata_bytes) == (None, 0, 0, 0)
