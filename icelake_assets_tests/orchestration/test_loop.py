"""The closed loop through real Dagster runs on real Spark: a run proves its effect or says why not.

The table of issue 11 (seed 004's shape): 6 identity partitions, two appends of one small file each,
and a policy that flags more than 1 file per partition."""

import pyarrow as pa
import pytest
from dagster import DagsterInstance, build_sensor_context
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.overview import evaluate
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.effect import OUTCOME_TAG
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.sensors import MAINTENANCE_SENSOR
from icelake_assets_tests.conftest import catalog_name

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "region", StringType()),
                NestedField(3, "payload", StringType()))
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
REGIONS = [f"r{i}" for i in range(6)]


def _batch(start: int, rows_per_region: int = 5) -> pa.Table:
    ids = list(range(start, start + rows_per_region * len(REGIONS)))
    return pa.table({"id": pa.array(ids, pa.int64()),
                     "region": pa.array([REGIONS[i % len(REGIONS)] for i in range(len(ids))]),
                     "payload": pa.array([f"p{i}" for i in ids])})


def _twelve_file_lake(make_lake, **policy):
    thresholds = {"mode": "enforce", "guards": {"quiet_period_minutes": 0},
                  "small_files": {"max_files_per_partition": 1}, **policy}
    settings = make_lake(thresholds=thresholds)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), SCHEMA, partition_spec=SPEC)
    table.append(_batch(0))
    table.append(_batch(1000))
    return settings, TableRef(catalog_name(settings), ("ns",), "t"), table


def _rows(table):
    return table.scan().to_arrow().sort_by("id")


def _materialization(results):
    events = [e for r in results for e in r.get_asset_materialization_events()]
    assert len(events) == 1
    return events[0].materialization.metadata


@pytest.fixture
def instance(tmp_path):
    with DagsterInstance.local_temp(str(tmp_path)) as inst:
        yield inst


def test_twelve_small_files_compact_to_six_in_one_replace_snapshot(make_lake, instance):
    settings, ref, table = _twelve_file_lake(make_lake)
    before_rows = _rows(table)
    stats = compute_table_stats(table, settings.thresholds)
    assert (stats.data_files, len(stats.compaction_candidates)) == (12, 6)

    results = execute_maintenance(build_definitions(settings), instance, raise_on_error=True)
    table.refresh()
    ops = [s.summary.operation.value for s in table.metadata.snapshots]
    assert ops == ["append", "append", "replace"]  # seed 004: one replace snapshot
    replace = table.current_snapshot().summary
    assert (replace["deleted-data-files"], replace["added-data-files"]) == ("12", "6")
    assert _rows(table).equals(before_rows)
    md = _materialization(results)
    assert md["rewrite_data_files/effect"].value == "effective"
    assert md["effect/outcome"].value == "effective" and md["run/snapshots_added"].value == 1
    after = evaluate(compute_table_stats(table, settings.thresholds), settings.thresholds)
    assert after.finding("small_files").passed
    assert md["after/health_status"].value == after.status.value
    assert md["after/health_score"].value == after.score.score
    run = instance.get_run_by_id(results[0].run_id)
    assert run.tags[OUTCOME_TAG] == "effective"


def _tick(settings, instance, cursor=None):
    defs = build_definitions(settings)
    context = build_sensor_context(instance=instance, cursor=cursor, definitions=defs,
                                   resources={"icelake": IcelakeResource(config_path=settings.source)})
    return defs, defs.get_sensor_def(MAINTENANCE_SENSOR).evaluate_tick(context)
