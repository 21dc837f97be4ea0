"""The spine end to end: a degraded demo lake, its checks failing, one maintenance run through a
real Dagster instance on real Spark, then the same checks passing and the rows unchanged."""

import os
from pathlib import Path

import pytest
from dagster import DagsterInstance, FloatMetadataValue, IntMetadataValue

from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.demo.lake import age_all_files, build_demo_lake, list_orphans
from icelake_assets.health.orphans import referenced_files
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops.chain import MAINTENANCE_OPS
from icelake_assets.orchestration.display import human_bytes, human_duration
from icelake_assets.orchestration.project import CHECKS_JOB, build_definitions, execute_maintenance
from icelake_assets.planning.partition_health import PARTITION_CHECKS
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake


def _evaluations(results):
    results = results if isinstance(results, list) else [results]
    return {(e.asset_key.path[-1], e.check_name): e for r in results for e in r.get_asset_check_evaluations()}


def _materializations(results):
    return [e for r in results for e in r.get_asset_materialization_events()]


def _rows(table):
    # Every demo table's first column is its unique id.
    return table.scan().to_arrow().sort_by(table.schema().column_names[0])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    settings = new_lake(tmp_path_factory)
    refs = {r.name: r for r in build_demo_lake(settings, catalog=catalog_name(settings), scale="test")}
    cat = open_catalog(settings, catalog_name(settings))
    tables = {name: load_table(cat, ref) for name, ref in refs.items()}
    age_all_files(tables["orders"], 5)  # referenced files as old as the orphans: only orphans may go
    before = {
        "rows": {n: _rows(t) for n, t in tables.items()},
        "stats": {n: compute_table_stats(t, settings.thresholds) for n, t in tables.items()},
        "orphans": list_orphans(tables["orders"]),
        "orders_referenced": referenced_files(tables["orders"]),
    }
    defs = build_definitions(settings)
    instance = DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster_home")))
    checks = defs.resolve_job_def(CHECKS_JOB).execute_in_process(instance=instance)
    maintenance = execute_maintenance(defs, instance)
    for t in tables.values():
        t.refresh()
    return {
        "settings": settings,
        "defs": defs,
        "instance": instance,
        "tables": tables,
        "before": before,
        "checks": checks,
        "maintenance": maintenance,
    }


def test_maintenance_run_succeeds_and_records_one_materialization_per_table(run):
    results = run["maintenance"]
    assert len(results) == 2  # unpartitioned tables together, the day-partitioned trips on its own
    assert all(r.success for r in results)
    keys = sorted(e.asset_key.path[-1] for e in _materializations(results))
    assert keys == ["clicks", "orders", "trips"]


def test_checks_fail_on_the_degraded_lake_and_pass_after_maintenance(run):
    before, after = _evaluations(run["checks"]), _evaluations(run["maintenance"])
    failing = {k for k, e in before.items() if not e.passed}
    assert {
        ("trips", "small_files"),
        ("trips", "snapshot_retention"),
        ("trips", "manifest_fragmentation"),
        ("clicks", "snapshot_retention"),
        ("orders", "orphan_files"),
    } <= failing
    # every table check ran again after maintenance (the lake-level catalogs check is not a table's), and
    # the run reported the day-partitioned table's checks per partition (the checks job leaves them out)
    by_partition = {k for k in after if k[1].endswith("_by_partition")}
    assert by_partition == {("trips", f"{c}_by_partition") for c in PARTITION_CHECKS}
    assert set(after) - by_partition == {k for k in before if k[0] != "health_overview"}
    assert [(k, e.description) for k, e in after.items() if not e.passed] == []
    days = [e for r in run["maintenance"] for e in r.get_asset_check_evaluations() if e.partition]
    assert len({e.partition for e in days}) == 6 and all(e.passed for e in days)
    small = before[("trips", "small_files")].metadata
    assert small["candidate_partitions"].value == 6 and small["small_files"].value == 180


def test_compaction_leaves_far_fewer_files_with_identical_rows(run):
    trips = run["tables"]["trips"]
    stats = compute_table_stats(trips, run["settings"].thresholds)
    assert run["before"]["stats"]["trips"].data_files == 180
    assert stats.data_files <= 6  # one file per day partition
    assert _rows(trips).equals(run["before"]["rows"]["trips"])
    md = _materialization(run, "trips")
    assert md["files/rewritten"].value == 180
    assert md["files/after"].value == stats.data_files
    assert md["rows/before"].value == md["rows/after"].value == trips.scan().to_arrow().num_rows


def _materialization(run, table):
    return next(
        e for e in _materializations(run["maintenance"]) if e.asset_key.path[-1] == table
    ).materialization.metadata


def test_snapshot_expiry_keeps_the_configured_minimum(run):
    min_keep = TEST_THRESHOLDS["snapshots"]["min_keep"]
    for name, before in (("clicks", 60), ("trips", 30)):
        assert run["before"]["stats"][name].snapshots == before
        md = _materialization(run, name)
        assert md["snapshots/expired"].value == before - min_keep
        # What remains: the newest min_keep writer snapshots, then only our own rewrites (replace).
        ops = [s.summary.operation.value for s in run["tables"][name].metadata.snapshots]
        assert ops[:min_keep] == ["append"] * min_keep and set(ops[min_keep:]) == {"replace"}
        assert _rows(run["tables"][name]).equals(run["before"]["rows"][name])


def test_orphan_removal_deletes_old_orphans_and_nothing_referenced(run):
    orphans = run["before"]["orphans"]
    assert len(orphans) == 3 and all(Path(p).exists() is False for p in orphans)
    referenced = run["before"]["orders_referenced"]
    assert referenced and all(os.path.exists(p) for p in referenced)
    orders = run["tables"]["orders"]
    assert _rows(orders).equals(run["before"]["rows"]["orders"])


def test_a_second_run_finds_nothing_to_do_says_so_and_points_to_the_last_run_that_acted(run):
    first = {
        e.asset_key: (r.run_id, e) for r in run["maintenance"] for e in r.get_asset_materialization_events()
    }
    for _ in range(2):  # the second no-op run finds the acting run through the first no-op run
        again = execute_maintenance(run["defs"], run["instance"], raise_on_error=True)
        for event in _materializations(again):
            md, (acted_run, acted) = event.materialization.metadata, first[event.asset_key]
            assert md["ops/acted"].value == "none" and md["outcome"].value == "nothing to do", event.asset_key
            assert md["summary"].value.startswith("**Nothing to do**")
            assert not [k for k in md if k.endswith("/before")]  # nothing that reads like a change
            assert (
                md["files/after"].value
                == compute_table_stats(
                    run["tables"][event.asset_key.path[-1]], run["settings"].thresholds
                ).data_files
            )
            assert md["last_effective_run"].value == acted_run
            assert md["last_effective_change"].value == acted.materialization.metadata["change"].value
            assert f"(/runs/{acted_run})" in md["summary"].value


def test_people_read_human_units_and_the_plots_keep_the_numbers(run):
    md = _materialization(run, "trips")
    before = run["before"]["stats"]["trips"]
    summary = md["summary"].value
    assert summary.startswith(f"**3 of {len(MAINTENANCE_OPS)} ops acted** · ")
    assert len(summary) < 1000  # the UI shows it inline
    assert isinstance(md["bytes/before"], IntMetadataValue) and md["bytes/before"].value == before.data_bytes
    assert isinstance(md["time/rewrite"], FloatMetadataValue)
    assert f"- {human_bytes(before.data_bytes)} → " in summary and str(before.data_bytes) not in summary
    assert f"| {human_duration(md['time/rewrite'].value)} |" in summary
    assert max(len(k) for k in md) <= 25
