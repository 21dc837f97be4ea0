"""The closed loop through real Dagster runs on real Spark: a run proves its effect or says why not.

The table of issue 11 (seed 004's shape): 6 identity partitions, two appends of one small file each,
and a policy that flags more than 1 file per partition."""

from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from dagster import DagsterInstance
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.many_files import write_many_files
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.orchestration.checks.asset_checks import HEALTH_JOB, OVERVIEW_KEY
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets.planning.health import evaluate
from icelake_assets.planning.relaunch import OUTCOME_TAG
from icelake_assets.settings import load_settings
from icelake_assets_tests.conftest import catalog_name, sensor_tick

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "region", StringType()),
    NestedField(3, "payload", StringType()),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))
REGIONS = [f"r{i}" for i in range(6)]


def _batch(start: int, rows_per_region: int = 5) -> pa.Table:
    ids = list(range(start, start + rows_per_region * len(REGIONS)))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([REGIONS[i % len(REGIONS)] for i in range(len(ids))]),
            "payload": pa.array([f"p{i}" for i in ids]),
        }
    )


def _twelve_file_lake(make_lake, **policy):
    thresholds = {
        "mode": "enforce",
        "guards": {"quiet_period_minutes": 0},
        "small_files": {"max_files_per_partition": 1},
        **policy,
    }
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
    settings, ref, table = _twelve_file_lake(make_lake, loop={"cross_engine_check": True, "scan_probe": True})
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
    assert md["effect/rewrite"].value.startswith("effective:")
    assert md["outcome"].value == "effective" and md["snapshots/added"].value == 1
    after = evaluate(compute_table_stats(table, settings.thresholds), settings.thresholds)
    assert after.finding("small_files").passed
    assert md["health/status"].value == after.status.value
    assert md["health/score"].value == after.score.score
    run = instance.get_run_by_id(results[0].run_id)
    assert run.tags[OUTCOME_TAG] == "effective"
    # Proof of benefit, measured on the snapshot the run started from and on the one it ended on.
    assert (md["scan/files_before"].value, md["scan/files_after"].value) == (12, 6)
    assert md["plan/manifests_before"].value == 2 and md["plan/manifests_after"].value >= 1
    assert md["plan/bytes_before"].value > 0 and md["plan/seconds_after"].value > 0
    assert md["benefit"].value.startswith("a full scan opens 12 → 6 files")
    # The opt-in probe (loop.scan_probe): a full-scan query timed on both snapshots in the run's Spark.
    probe = (md["scan/query_seconds_before"].value, md["scan/query_seconds_after"].value)
    assert all(seconds > 0 for seconds in probe)
    assert f"a full-scan query took {probe[0]:.2f} → {probe[1]:.2f} s" in md["benefit"].value
    [validation] = [r for r in AuditLog.from_settings(settings).records() if r.kind == "validation"]
    benefit = validation.results["effects"]["benefit"]
    assert (benefit["files_saved"], benefit["nil"]) == (6, False)
    assert benefit["probe_seconds"] == {"before": probe[0], "after": probe[1]}
    # Summed lake-wide on the overview (each table's latest maintenance run).
    defs = build_definitions(settings)
    health = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance)
    [overview] = [e for e in health.get_asset_materialization_events() if e.asset_key == OVERVIEW_KEY]
    lake = overview.materialization.metadata
    assert (lake["benefit/runs"].value, lake["benefit/files_saved"].value) == (1, 6)
    assert (
        lake["benefit/metadata_bytes_saved"].value
        == md["plan/bytes_before"].value - md["plan/bytes_after"].value
    )
    # Spark, pyiceberg and DuckDB read the compacted table alike (60 rows, sum(id) of both batches).
    expected = f"60 rows, sum(id) = {sum(range(30)) + sum(range(1000, 1030))}"
    assert md["cross_engine"].value == ", ".join(f"{e}: {expected}" for e in ("spark", "pyiceberg", "duckdb"))


def _tick(settings, instance, cursor=None):
    defs = build_definitions(settings)
    return defs, sensor_tick(defs, settings, instance, cursor=cursor)


def _manifest_lake(make_lake):
    """12 appends (12 manifests) and a manifest target so small that rewrite_manifests writes about
    10 manifests again: a policy whose options make the rewrite a no-op."""
    thresholds = {"mode": "enforce", "guards": {"quiet_period_minutes": 0}, "manifests": {"max_count": 2}}
    settings = make_lake(thresholds=thresholds)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), SCHEMA)
    for i in range(12):
        table.append(_batch(i * 100, 1))
    target = compute_table_stats(table, settings.thresholds).manifest_bytes // 10
    with table.transaction() as tx:
        tx.set_properties({"commit.manifest.target-size-bytes": str(target)})
    return settings, TableRef(catalog_name(settings), ("ns",), "t"), table


def _run(defs, instance, request):
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=instance, asset_selection=request.asset_selection, tags=request.tags, raise_on_error=False
    )


def test_a_forced_no_op_is_reported_ineffective_and_not_relaunched(make_lake, instance):
    settings, ref, table = _manifest_lake(make_lake)
    defs, tick = _tick(settings, instance)
    assert len(tick.run_requests) == 1 and "rewrite_manifests" in tick.run_requests[0].tags["icelake/ops"]
    result = _run(defs, instance, tick.run_requests[0])
    assert result.success  # default loop.on_ineffective: warn — the run succeeds, its check stays failed
    md = _materialization([result])
    assert "rewrite_manifests" in md["ops/acted"].value
    assert md["effect/manifests"].value.startswith("ineffective:")
    assert "manifest_fragmentation still fails" in md["effect/manifests"].value
    assert md["outcome"].value == "ineffective"
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert not checks["manifest_fragmentation"].passed
    assert instance.get_run_by_id(result.run_id).tags[OUTCOME_TAG] == "ineffective"
    audit = [r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "validation"]
    assert audit[-1].results["effects"]["outcome"] == "ineffective"

    # The table changed (the run's own commit), the sensor re-evaluates it and holds back, tick after tick.
    _, again = _tick(settings, instance, cursor=tick.cursor)
    assert again.run_requests == []
    observed = again.asset_events[0].metadata
    assert observed["sensor/outcome"].value == "backoff" and "ineffective" in observed["sensor/reason"].value
    _, third = _tick(settings, instance, cursor=again.cursor)
    assert third.run_requests == []

    # A policy change is a new plan: launched; with on_ineffective: fail the run fails naming the op.
    data = yaml.safe_load(Path(settings.source).read_text())
    data["thresholds"]["manifests"]["max_count"] = 3
    data["thresholds"]["loop"] = {"on_ineffective": "fail"}
    Path(settings.source).write_text(yaml.safe_dump(data))
    settings = load_settings(settings.source)
    defs, changed = _tick(settings, instance, cursor=third.cursor)
    assert len(changed.run_requests) == 1
    failed = _run(defs, instance, changed.run_requests[0])
    assert not failed.success
    failure = next(e for e in failed.all_events if e.event_type_value == "STEP_FAILURE")
    assert "ineffective" in failure.step_failure_data.error.message


def test_partial_progress_commits_are_followed_by_a_manifest_rewrite(make_lake, instance, spark_for):
    # 8 day partitions of 6 files; partial progress past 2 groups, at most 4 commits.
    thresholds = {
        "mode": "enforce",
        "guards": {"quiet_period_minutes": 0},
        "small_files": {
            "max_files_per_partition": 5,
            "partial_progress_min_groups": 2,
            "partial_progress_max_commits": 4,
        },
    }
    settings = make_lake(thresholds=thresholds)
    ref = TableRef(catalog_name(settings), ("ns",), "many")
    cat = open_catalog(settings, ref.catalog, create=True)
    cat.create_namespace("ns")
    write_many_files(spark_for(settings), ref, files=48, days=8)
    table = cat.load_table(("ns", "many"))
    assert compute_table_stats(table, settings.thresholds).data_files == 48
    before_rows = table.scan().to_arrow().num_rows

    results = execute_maintenance(build_definitions(settings), instance, raise_on_error=True)
    table.refresh()
    md = _materialization(results)
    ops = [s.summary.operation.value for s in table.metadata.snapshots]
    assert ops == ["append"] + ["replace"] * 5  # 4 partial-progress commits, then the manifest rewrite
    assert "rewrite_manifests" in md["ops/acted"].value
    assert "partial progress" in md["why/manifests"].value
    stats = compute_table_stats(table, settings.thresholds)
    assert (stats.data_files, stats.manifests) == (8, 1)
    assert md["snapshots/added"].value == 5 <= md["snapshots/max_added"].value
    assert md["outcome"].value == "effective"
    assert table.scan().to_arrow().num_rows == before_rows
