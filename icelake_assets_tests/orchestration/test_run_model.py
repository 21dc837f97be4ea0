"""The run model with a real Dagster instance: the sensor requests no second run for a table whose
maintenance is queued or running (launched by anyone), retries a failed one after a backoff, and the
real run queue (QueuedRunCoordinatorDaemon with the shipped dagster.yaml) never runs two maintenance
runs of one table at once, whatever launched them. No Spark: runs are queued and launched, not executed."""

from contextlib import contextmanager
from pathlib import Path

import yaml
from dagster import DagsterRunStatus, RunsFilter, build_sensor_context, instance_for_test
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.load_target import EmptyWorkspaceTarget
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

from icelake_assets.audit.store import AuditLog
from icelake_assets.orchestration import run_model
from icelake_assets.orchestration.assets import table_asset_key
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.sensors import MAINTENANCE_SENSOR, TABLE_TAG, TRIGGER_TAG
from icelake_assets_tests.orchestration.test_sensors import SCHEMA, _batch, _lake

ROOT = Path(__file__).resolve().parents[2]


def _lake_of(make_lake, names):
    """Degraded unpartitioned tables ``ns.<name>`` (25 small files each)."""
    settings, ref, table = _lake(make_lake, files=25)
    from icelake_assets.catalog.connection import TableRef, open_catalog
    cat = open_catalog(settings, ref.catalog)
    refs = {"t": ref}
    for name in names:
        t = cat.create_table(("ns", name), SCHEMA)
        for i in range(25):
            t.append(_batch(i, 2))
        refs[name] = TableRef(ref.catalog, ("ns",), name)
    return settings, refs


def _queue(instance, defs, ref, tags):
    """A queued run of the table's maintenance, as a backfill, the UI or the sensor would create it."""
    job = defs.resolve_implicit_global_asset_job_def()
    location = InProcessCodeLocationOrigin(LoadableTargetOrigin(module_name="icelake_assets.definitions"),
                                           location_name="icelake")
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), job.name)
    return instance.create_run_for_job(job, asset_selection={table_asset_key(ref)}, tags=tags,
                                       status=DagsterRunStatus.QUEUED, remote_job_origin=origin)


def _tick(defs, settings, instance, cursor=None):
    context = build_sensor_context(instance=instance, cursor=cursor, definitions=defs,
                                   resources={"icelake": IcelakeResource(config_path=settings.source)})
    return defs.get_sensor_def(MAINTENANCE_SENSOR).evaluate_tick(context)


def _outcomes(tick):
    return {e.asset_key.path[-1]: e.metadata["sensor/outcome"].value for e in tick.asset_events}


def test_no_second_run_while_one_is_queued_and_a_failed_run_is_retried_after_a_backoff(make_lake, monkeypatch):
    settings, refs = _lake_of(make_lake, ["u"])
    defs = build_definitions(settings)
    with instance_for_test() as instance:
        # A backfill's run carries no icelake tag: the sensor knows it by the table's pool in its plan.
        backfill_run = _queue(instance, defs, refs["t"], {"dagster/backfill": "abcdefgh"})
        first = _tick(defs, settings, instance)
        assert [r.tags[TABLE_TAG] for r in first.run_requests] == [str(refs["u"])]
        assert _outcomes(first) == {"t": "in_flight", "u": "launched"}

        # Still queued: still nothing for t (it is looked at again, u is unchanged and launched).
        again = _tick(defs, settings, instance, first.cursor)
        assert again.run_requests == [] and _outcomes(again) == {"t": "in_flight"}

        instance.report_run_failed(backfill_run)
        backoff = _tick(defs, settings, instance, again.cursor)
        assert backoff.run_requests == [] and _outcomes(backoff) == {"t": "backoff"}
        records = [r for r in AuditLog.from_settings(settings).records(table=str(refs["t"])) if r.kind == "decision"]
        assert records[-1].decision == "deferred" and "maintenance run(s) failed; retrying after" in records[-1].reason

        monkeypatch.setattr(run_model, "FAILED_RUN_BACKOFF_SECONDS", 0.0)  # the backoff is over
        retried = _tick(defs, settings, instance, backoff.cursor)
        assert [r.tags[TABLE_TAG] for r in retried.run_requests] == [str(refs["t"])]


@contextmanager
def _queued_instance():
    """An instance with the shipped dagster.yaml's concurrency and monitoring, a real run queue and a
    launcher that records launches without executing them."""
    shipped = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    overrides = {"concurrency": shipped["concurrency"], "run_monitoring": shipped["run_monitoring"],
                 "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"},
                 "run_launcher": {"module": "dagster._core.test_utils", "class": "MockedRunLauncher"}}
    with instance_for_test(overrides=overrides) as instance:
        yield instance


def _dequeue(instance) -> set[str]:
    """One pass of the daemon's run queue; returns the ids of the runs in progress."""
    with create_test_daemon_workspace_context(EmptyWorkspaceTarget(), instance) as context:
        list(QueuedRunCoordinatorDaemon(interval_seconds=1).run_iteration(context))
    return {r.run_id for r in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTING,
                                                                     DagsterRunStatus.STARTED]))}


def test_the_run_queue_never_overlaps_two_runs_of_one_table_whatever_launched_them(make_lake):
    settings, refs = _lake_of(make_lake, ["u", "v"])
    defs = build_definitions(settings)
    with _queued_instance() as instance:
        # Run monitoring marks a run whose process died as failed (freeing its pool); never resumed.
        assert instance.run_monitoring_enabled and instance.run_monitoring_max_resume_run_attempts == 0
        _tick(defs, settings, instance)  # the sensor's first tick creates the tables' pools
        backfill = _queue(instance, defs, refs["t"], {"dagster/backfill": "abcdefgh"})
        sensor = _queue(instance, defs, refs["t"], {TABLE_TAG: str(refs["t"]), TRIGGER_TAG: "sensor"})
        manual = _queue(instance, defs, refs["u"], {})
        other = _queue(instance, defs, refs["v"], {})
        # t's second run waits for its pool; v waits for the global cap of 2 runs.
        assert _dequeue(instance) == {backfill.run_id, manual.run_id}
        assert _dequeue(instance) == {backfill.run_id, manual.run_id}
        instance.report_run_failed(instance.get_run_by_id(manual.run_id))
        assert _dequeue(instance) == {backfill.run_id, other.run_id}  # a free slot, t still busy
        instance.report_run_failed(instance.get_run_by_id(backfill.run_id))
        instance.report_run_failed(instance.get_run_by_id(other.run_id))
        assert _dequeue(instance) == {sensor.run_id}
