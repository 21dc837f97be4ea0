"""The health sensor reports every table's checks on its first tick and then only for the tables
whose metadata changed (real sensor ticks, a real SQLite catalog, no Spark)."""

import pytest
from dagster import AssetCheckSeverity, DagsterInstance, DagsterRun, DagsterRunStatus
from dagster._core.utils import make_new_run_id

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.demo.lake import add_snapshots, build_demo_lake
from icelake_assets.orchestration.checks.asset_checks import HEALTH_CHECK, METADATA_CHECKS
from icelake_assets.orchestration.checks.configuration import CONFIG_CHECK
from icelake_assets.orchestration.checks.partition_report_job import PARTITION_REPORT_JOB
from icelake_assets.orchestration.project import MAINTENANCE_JOB, build_definitions
from icelake_assets.orchestration.sensors.health import HEALTH_SENSOR
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG
from icelake_assets_tests.conftest import catalog_name, sensor_tick


@pytest.fixture
def lake(make_lake, tmp_path):
    settings = make_lake(extra={"automation": {"sensor_default_status": "stopped"}})
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        yield settings, build_definitions(settings), instance


def _tick(settings, defs, instance, cursor=None):
    return sensor_tick(defs, settings, instance, HEALTH_SENSOR, cursor)


def test_first_tick_reports_every_check_of_every_table_then_only_changed_tables(lake):
    settings, defs, instance = lake
    # It reads metadata only, so it runs even where the maintenance sensor starts stopped.
    assert defs.get_sensor_def(HEALTH_SENSOR).default_status.value == "RUNNING"
    first = _tick(settings, defs, instance)
    events = {(e.asset_key.path[-1], e.check_name): e for e in first.asset_events}
    assert set(events) == {
        (t, c) for t in ("trips", "clicks", "orders") for c in (*METADATA_CHECKS, HEALTH_CHECK, CONFIG_CHECK)
    }
    assert not events[("trips", "small_files")].passed
    assert events[("clicks", HEALTH_CHECK)].severity is AssetCheckSeverity.ERROR
    assert f"/guess/{MAINTENANCE_JOB})" in events[("clicks", HEALTH_CHECK)].metadata["summary"].value
    # The same verdict as the checks' own (orchestration/health.table_health): a table whose orphan
    # check never ran is Unknown, not Healthy (the old sensor said "Healthy" from the metadata alone).
    orders = events[("orders", HEALTH_CHECK)]
    assert not orders.passed and orders.severity is AssetCheckSeverity.WARN
    assert (
        orders.description.startswith("Unknown") and "not evaluated yet: orphan_files" in orders.description
    )

    # trips is partitioned: its checks per partition come from the one run the tick asked for
    # (test_partition_reports.py), which the daemon launches before the next tick.
    [request] = first.run_requests
    report = defs.resolve_job_def(PARTITION_REPORT_JOB)
    assert report.execute_in_process(
        instance=instance, run_config=request.run_config, tags=request.tags
    ).success

    unchanged = _tick(settings, defs, instance, first.cursor)
    assert not unchanged.asset_events and "no table changed" in unchanged.skip_message

    clicks = open_catalog(settings, catalog_name(settings)).load_table(("events", "clicks"))
    add_snapshots(clicks, 1, seed=7)
    changed = _tick(settings, defs, instance, first.cursor)
    assert {e.asset_key.path[-1] for e in changed.asset_events} == {"clicks"}


def test_an_orphan_check_run_reports_the_tables_verdict_again(lake):
    """orders holds old orphans: Unknown until its orphan check runs; once it ran (the orphan checks job,
    no metadata change), the next tick reports its health again, failing on orphan_files, not
    the stale Unknown (the old sensor compared only metadata files)."""
    from icelake_assets.orchestration.checks.asset_checks import ORPHANS_JOB
    from icelake_assets.orchestration.resources import IcelakeResource

    settings, defs, instance = lake
    first = _tick(settings, defs, instance)
    orders = {e.check_name: e for e in first.asset_events if e.asset_key.path[-1] == "orders"}
    assert orders[HEALTH_CHECK].description.startswith("Unknown")
    job = defs.resolve_job_def(ORPHANS_JOB)
    result = job.execute_in_process(
        instance=instance, resources={"icelake": IcelakeResource(config_path=settings.source)}
    )
    assert result.success
    again = _tick(settings, defs, instance, first.cursor)
    reported = {(e.asset_key.path[-1], e.check_name): e for e in again.asset_events}
    # Every table's orphan check ran (the job checks them all): each verdict is reported again.
    assert {t for t, _ in reported} == {"orders", "trips", "clicks"}
    assert not any(e.description.startswith("Unknown") for (_, c), e in reported.items() if c == HEALTH_CHECK)
    health = reported[("orders", HEALTH_CHECK)]
    assert not health.passed and "failing: orphan_files" in health.description
    assert "orphan_files" in health.description
    assert not _tick(settings, defs, instance, again.cursor).asset_events  # reported once


def test_a_table_whose_checks_a_run_judged_on_its_current_metadata_is_not_judged_again(lake):
    """A run's checks (a maintenance run's, the health job's) name the metadata file their health
    summary judged: the next tick does not report that table again; a table committed to since is."""
    from icelake_assets.orchestration.checks.asset_checks import HEALTH_JOB
    from icelake_assets.orchestration.resources import IcelakeResource

    settings, defs, instance = lake
    first = _tick(settings, defs, instance)
    catalog = open_catalog(settings, catalog_name(settings))
    clicks = catalog.load_table(("events", "clicks"))
    add_snapshots(clicks, 1, seed=7)
    result = defs.resolve_job_def(HEALTH_JOB).execute_in_process(
        instance=instance, resources={"icelake": IcelakeResource(config_path=settings.source)}
    )
    judged = {
        e.asset_key.path[-1]: e.metadata["metadata_file"].value
        for e in result.get_asset_check_evaluations()
        if e.check_name == HEALTH_CHECK
    }
    clicks.refresh()
    assert judged["clicks"] == clicks.metadata_location.rsplit("/", 1)[-1]
    trips = catalog.load_table(("taxi", "trips"))
    trips.transaction().set_properties({"owner": "ops"}).commit_transaction()  # after the run

    again = _tick(settings, defs, instance, first.cursor)
    assert {e.asset_key.path[-1] for e in again.asset_events} == {"trips"}
    assert not _tick(settings, defs, instance, again.cursor).asset_events


def test_a_table_under_maintenance_is_reported_once_its_run_ended(lake):
    settings, defs, instance = lake
    name = f"{catalog_name(settings)}.events.clicks"
    run = instance.add_run(
        DagsterRun(
            job_name="icelake_maintenance",
            run_id=make_new_run_id(),
            status=DagsterRunStatus.STARTED,
            tags={TABLE_TAG: name},
        )
    )
    during = _tick(settings, defs, instance)
    assert {e.asset_key.path[-1] for e in during.asset_events} == {"trips", "orders"}
    instance.report_run_failed(run)  # the run ended (how does not matter)
    after = _tick(settings, defs, instance, during.cursor)
    assert {e.asset_key.path[-1] for e in after.asset_events} == {"clicks"}


def test_with_summary_checks_the_sensor_reports_only_the_checks_the_tables_carry(make_lake, tmp_path):
    settings = make_lake(extra={"automation": {"checks_per_table": "summary"}})
    build_demo_lake(settings, catalog=catalog_name(settings), scale="test")
    defs = build_definitions(settings)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        first = _tick(settings, defs, instance)
    events = {(e.asset_key.path[-1], e.check_name): e for e in first.asset_events}
    assert set(events) == {(t, HEALTH_CHECK) for t in ("trips", "clicks", "orders")}
    assert events[("clicks", HEALTH_CHECK)].severity is AssetCheckSeverity.ERROR


def _report_in_run(instance, run_id: str, event_type: str, data) -> None:
    """An event of run ``run_id`` as a run worker stores it (Dagster's own event class)."""
    from dagster._core.events import DagsterEvent

    instance.report_dagster_event(
        DagsterEvent(event_type_value=event_type, job_name=MAINTENANCE_JOB, event_specific_data=data),
        run_id,
    )


def test_a_run_that_planned_its_orphan_check_after_the_summary_still_judged_the_table(lake):
    """A maintenance run plans its checks in no set order (Dagster's plan), and evaluates the orphan
    check before the health summary that reads it. The summary judged the table after the orphan
    check, whatever the planned rows' ids: the next tick does not judge it again (in the 200-table
    bench, every table of a run was reported a second time: ~440 evaluations a round)."""
    from dagster import AssetCheckEvaluation
    from dagster._core.events import AssetCheckEvaluationPlanned

    from icelake_assets.catalog.connection import TableRef
    from icelake_assets.orchestration.checks.health import ORPHAN_CHECK
    from icelake_assets.orchestration.resources import IcelakeResource
    from icelake_assets.orchestration.sensors.health import table_check_evaluations

    settings, defs, instance = lake
    first = _tick(settings, defs, instance)
    catalog = open_catalog(settings, catalog_name(settings))
    clicks = catalog.load_table(("events", "clicks"))
    add_snapshots(clicks, 1, seed=7)  # the run's commit
    ref = TableRef(catalog_name(settings), ("events",), "clicks")
    icelake = IcelakeResource(config_path=settings.source)
    summary = next(
        e for e in table_check_evaluations(icelake, ref, instance=instance) if e.check_name == HEALTH_CHECK
    )
    key = summary.asset_key
    run = instance.add_run(
        DagsterRun(job_name=MAINTENANCE_JOB, run_id=make_new_run_id(), status=DagsterRunStatus.STARTED)
    )
    for name in (HEALTH_CHECK, ORPHAN_CHECK):  # planned: the summary's row first
        _report_in_run(
            instance,
            run.run_id,
            "ASSET_CHECK_EVALUATION_PLANNED",
            AssetCheckEvaluationPlanned(asset_key=key, check_name=name),
        )
    orphans = AssetCheckEvaluation(asset_key=key, check_name=ORPHAN_CHECK, passed=True)
    for evaluation in (orphans, summary):  # evaluated: the orphan check first
        _report_in_run(instance, run.run_id, "ASSET_CHECK_EVALUATION", evaluation)
    instance.report_run_failed(run)  # ended (how does not matter)

    again = _tick(settings, defs, instance, first.cursor)
    assert not again.asset_events, {(e.asset_key.path[-1], e.check_name) for e in again.asset_events}
