"""The health checks and the lake-wide overview through a real Dagster instance on the degraded demo
lake (pyiceberg only: these jobs never start Spark)."""

import pytest
from dagster import AssetCheckSeverity, AssetKey, DagsterInstance

from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.orchestration.checks.asset_checks import (
    CHECKS_JOB,
    HEALTH_CHECK,
    METADATA_CHECKS,
    ORPHAN_CHECK,
    OVERVIEW_KEY,
)
from icelake_assets.orchestration.checks.lake_access import CATALOGS_CHECK
from icelake_assets.orchestration.display import human_bytes
from icelake_assets.orchestration.project import (
    HEALTH_JOB,
    MAINTENANCE_JOB,
    ORPHANS_JOB,
    build_definitions,
    table_maintenance_job,
)
from icelake_assets_tests.conftest import catalog_name, new_lake

# The lake-level check on the overview (orchestration/checks/lake_access.py): in every health run.
LAKE_CHECK = ("health_overview", CATALOGS_CHECK)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    settings = new_lake(tmp_path_factory)
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    defs = build_definitions(settings)
    instance = DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster_home")))
    health = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance)
    orphans = defs.resolve_job_def(ORPHANS_JOB).execute_in_process(instance=instance)
    return {"settings": settings, "defs": defs, "health": health, "orphans": orphans, "instance": instance}


def _evaluations(result):
    return {(e.asset_key.path[-1], e.check_name): e for e in result.get_asset_check_evaluations()}


def test_every_table_gets_one_result_per_metadata_check(run):
    evaluations = _evaluations(run["health"])
    assert run["health"].success
    assert set(evaluations) == {
        (t, c) for t in ("trips", "clicks", "orders") for c in (*METADATA_CHECKS, HEALTH_CHECK)
    } | {LAKE_CHECK}


def test_each_table_has_one_health_summary_linking_failing_checks_to_the_job_that_fixes_them(run):
    evaluations = _evaluations(run["health"])
    name = catalog_name(run["settings"])
    trips = evaluations[("trips", HEALTH_CHECK)]
    assert not trips.passed and trips.severity is AssetCheckSeverity.WARN
    assert trips.description.startswith("Warning, score ") and "failing: small_files" in trips.description
    summary = trips.metadata["summary"].value
    # trips is partitioned: its own whole-table maintenance job fixes it.
    job = table_maintenance_job(run["defs"], AssetKey([name, "taxi", "trips"]))
    assert (
        "| small_files | **WARN** |" in summary and f"[{job}](/guess/{job}) (rewrite_data_files)" in summary
    )
    assert "| delete_files | passed |" in summary
    assert f"(/guess/{job})" in evaluations[("trips", "small_files")].metadata["fix"].value
    assert "fix" not in evaluations[("trips", "delete_files")].metadata
    clicks = evaluations[("clicks", HEALTH_CHECK)]
    assert (
        clicks.severity is AssetCheckSeverity.ERROR and clicks.metadata["health_status"].value == "Critical"
    )
    assert (
        f"[{MAINTENANCE_JOB}](/guess/{MAINTENANCE_JOB}) (expire_snapshots)"
        in clicks.metadata["summary"].value
    )
    orders = evaluations[("orders", HEALTH_CHECK)]
    # every metadata check passes, but the orphan check (storage) never ran: Unknown, never Healthy
    assert (
        not orders.passed and orders.description == "Unknown, score 100/100; not evaluated yet: orphan_files"
    )
    assert orders.metadata["failing_checks"].value == 0 and orders.metadata["health_score"].value == 100


def test_results_carry_severity_numbers_score_and_worst_partitions(run):
    evaluations = _evaluations(run["health"])
    small = evaluations[("trips", "small_files")]
    assert not small.passed and small.severity is AssetCheckSeverity.WARN  # 30 files per day, max 20
    md = small.metadata
    assert md["small_files"].value == 180 and md["candidate_partitions"].value == 6
    assert md["health_status"].value == "Warning" and 0 <= md["health_score"].value < 100
    assert len(md["worst_partitions"].value.records) == 6
    assert "rewrite_data_files" in md["recommendation"].value
    # Byte counts stay numbers (plots) and read in human units (one text for people).
    assert isinstance(md["data_bytes"].value, int)
    assert f"data {human_bytes(md['data_bytes'].value)}" in md["sizes"].value
    assert str(md["data_bytes"].value) not in md["sizes"].value

    manifests = evaluations[("clicks", "manifest_fragmentation")]
    assert not manifests.passed and manifests.severity is AssetCheckSeverity.ERROR  # 60 manifests, 4 x max 10
    assert manifests.metadata["health_status"].value == "Critical"
    for check in METADATA_CHECKS:
        assert evaluations[("orders", check)].passed
    assert evaluations[("orders", "delete_files")].metadata["delete_files"].value == 0
    assert evaluations[("trips", "layout_drift")].metadata["drift_files"].value == 0


def test_the_orphan_check_runs_on_its_own(run):
    evaluations = _evaluations(run["orphans"])
    assert set(evaluations) == {(t, ORPHAN_CHECK) for t in ("trips", "clicks", "orders")}
    orders = evaluations[("orders", ORPHAN_CHECK)]
    assert not orders.passed and orders.metadata["orphan_files"].value == 3
    assert len(orders.metadata["sample"].value.records) == 3
    assert evaluations[("trips", ORPHAN_CHECK)].passed


def test_the_overview_ranks_tables_in_the_ui(run):
    event = next(e for e in run["health"].get_asset_materialization_events() if e.asset_key == OVERVIEW_KEY)
    md = event.materialization.metadata
    assert md["tables"].value == 3 and md["tables_critical"].value == 1  # clicks
    ranking = [r.data["table"] for r in md["ranking"].value.records]
    name = catalog_name(run["settings"])
    assert ranking[0] == f"{name}.taxi.trips"  # 174 data files saved, the most
    assert f"`{name}.events.clicks`" in md["overview"].value


def test_the_overview_shows_how_long_each_table_has_waited_for_maintenance(run):
    """From the loop's state the maintenance sensor writes each tick (its cursor's waiting tables)."""
    from icelake_assets.audit.loop_state import LoopSnapshot, TableLag
    from icelake_assets.audit.writer import write_loop_metrics

    def overview(result):
        event = next(e for e in result.get_asset_materialization_events() if e.asset_key == OVERVIEW_KEY)
        return event.materialization.metadata

    assert overview(run["health"])["tables/max_wait_minutes"].value == 0  # no tick yet: nobody waits
    name = catalog_name(run["settings"])
    lags = (TableLag(f"{name}.taxi.trips", "queued_by_priority", 5400.0), TableLag("other.ns.t", "held", 9e5))
    assert write_loop_metrics(run["settings"], LoopSnapshot(lags=lags)) is None
    md = overview(run["defs"].resolve_job_def(HEALTH_JOB).execute_in_process(instance=run["instance"]))
    assert md["tables/max_wait_minutes"].value == 90.0  # another lake's table is not this overview's
    assert f"| {name}.taxi.trips | queued_by_priority | 90.0 |" in md["waiting_time"].value
    assert "other.ns.t" not in md["waiting_time"].value


def test_maintenance_does_not_materialize_the_overview(run):
    defs = run["defs"]
    names = [j.name for j in defs.jobs if j.name.startswith(MAINTENANCE_JOB)]
    selected = set().union(*(defs.resolve_job_def(n).asset_layer.selected_asset_keys for n in names))
    assert OVERVIEW_KEY not in selected
    assert AssetKey([catalog_name(run["settings"]), "taxi", "trips"]) in selected


def _statuses(result):
    """Per table: the health_status its metadata checks report, and the overview's status."""
    checks = {
        e.asset_key.path[-1]: e.metadata["health_status"].value
        for e in result.get_asset_check_evaluations()
        if "health_status" in e.metadata
    }
    event = next(e for e in result.get_asset_materialization_events() if e.asset_key == OVERVIEW_KEY)
    overview = {
        r.data["table"].rsplit(".", 1)[-1]: r.data["status"]
        for r in event.materialization.metadata["ranking"].value.records
    }
    return checks, overview


def test_a_failing_orphan_check_sets_the_status_everywhere(run):
    # orders passes every metadata check, but its orphan check (run by the fixture) failed.
    again = run["defs"].resolve_job_def(HEALTH_JOB).execute_in_process(instance=run["instance"])
    orders = {
        e.check_name: e for e in again.get_asset_check_evaluations() if e.asset_key.path[-1] == "orders"
    }
    assert all(e.passed for name, e in orders.items() if name != HEALTH_CHECK)
    assert not orders[HEALTH_CHECK].passed  # the summary counts the failing orphan check
    checks, overview = _statuses(again)
    assert checks["orders"] == overview["orders"] == "Warning"  # 3 orphans, max 0
    assert checks == overview


def test_a_failing_configuration_check_sets_the_status_everywhere(tmp_path_factory):
    settings = new_lake(
        tmp_path_factory,
        extra={
            "policies": {
                "defaults": {"configuration": {"write_distribution_mode": "hash", "severity": "error"}}
            }
        },
    )
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    instance = DagsterInstance.ephemeral()
    defs = build_definitions(settings)
    result = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance)
    checks, overview = _statuses(result)
    assert checks["orders"] == overview["orders"] == "Critical"  # no write.distribution-mode set
    assert checks == overview


def test_summary_checks_keep_the_health_and_orphan_checks_with_every_finding(tmp_path_factory):
    """``automation.checks_per_table: summary`` (lakes of thousands of tables): each table carries the
    health summary and the orphan check only; the summary still names every failing check."""
    settings = new_lake(tmp_path_factory, extra={"automation": {"checks_per_table": "summary"}})
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    defs = build_definitions(settings)
    checks = {(k.asset_key.path[-1], k.name) for c in defs.asset_checks for k in c.check_keys}
    assert checks == {(t, c) for t in ("trips", "clicks", "orders") for c in (HEALTH_CHECK, ORPHAN_CHECK)} | {
        LAKE_CHECK
    }
    instance = DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster_home")))
    health = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance)
    evaluations = _evaluations(health)
    assert set(evaluations) == {(t, HEALTH_CHECK) for t in ("trips", "clicks", "orders")} | {LAKE_CHECK}
    trips = evaluations[("trips", HEALTH_CHECK)]
    assert not trips.passed and "failing: small_files" in trips.description
    assert "| small_files | **WARN** |" in trips.metadata["summary"].value


def test_a_run_of_every_check_never_calls_a_table_healthy_while_its_orphan_check_fails(tmp_path_factory):
    """The checks job runs the orphan check beside the metadata checks: the health summary, computed
    while the orphan check was only planned in the same run, was "Healthy, score 100/100" next to a
    failing orphan_files (docs/demo.md's transcript). One op evaluates a table's orphan check first and
    its summary reads that fresh result: one verdict in the same run, and the same in the next."""
    settings = new_lake(tmp_path_factory)
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    defs = build_definitions(settings)
    instance = DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster_home")))
    for _ in range(2):
        evaluations = _evaluations(defs.resolve_job_def(CHECKS_JOB).execute_in_process(instance=instance))
        assert not evaluations[("orders", ORPHAN_CHECK)].passed
        health = evaluations[("orders", HEALTH_CHECK)]
        assert not health.passed and "failing: orphan_files" in health.description
