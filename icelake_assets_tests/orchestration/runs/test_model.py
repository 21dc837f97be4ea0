"""The run model with a real Dagster instance: the sensor requests no second run for a table whose
maintenance is queued or running (launched by anyone), retries a failed one after a backoff, and the
real run queue (QueuedRunCoordinatorDaemon with the shipped dagster.yaml) never runs two maintenance
runs of one table at once, whatever launched them. No Spark: runs are queued and launched, not executed."""

from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from dagster import DagsterRunStatus, RunsFilter, instance_for_test
from dagster._core.remote_origin import InProcessCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.test_utils import create_test_daemon_workspace_context
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
from dagster._core.workspace.load_target import EmptyWorkspaceTarget
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import QueuedRunCoordinatorDaemon

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.runs import model as run_model
from icelake_assets.orchestration.runs.pools import pool_index
from icelake_assets.orchestration.sensors.maintenance import RANK_TAG, TABLE_TAG, TRIGGER_TAG
from icelake_assets_tests.conftest import sensor_tick
from icelake_assets_tests.orchestration.sensors.test_maintenance import SCHEMA, _batch, _lake

ROOT = Path(__file__).resolve().parents[3]


ONE_PER_RUN = {"packed_run_max_tables": 1}  # every table a run of its own (no shared runs)


def _lake_of(make_lake, names, **lake):
    """Degraded unpartitioned tables ``ns.<name>`` (25 small files each); ``lake``: _lake's options."""
    settings, ref, table = _lake(make_lake, files=25, **lake)
    cat = open_catalog(settings, ref.catalog)
    refs = {"t": ref}
    for name in names:
        wanted = refs[name.removeprefix("same_as_")] if name.startswith("same_as_") else None
        candidate = _named_for_pool(settings, name, refs.values(), wanted)
        t = cat.create_table(candidate.identifier, SCHEMA)
        for i in range(25):
            t.append(_batch(i, 2))
        refs[name] = candidate
    return settings, refs


def _named_for_pool(settings, name, refs, same_as=None, namespace=("ns",)) -> TableRef:
    """``<namespace>.<name>``, or ``<name><i>``: the first whose pool none of ``refs`` has (``same_as``:
    the pool of that table). Tables share a pool by hash of their name, and the catalog's name changes
    with each test: so a test does not depend on the hash's luck."""
    pools = settings.automation.maintenance_pools
    catalog = next(iter(refs)).catalog
    taken = {pool_index(r, pools) for r in refs}
    return next(
        r
        for i in ["", *range(100_000)]
        if (r := TableRef(catalog, tuple(namespace), f"{name}{i}"))
        and (
            pool_index(r, pools) == pool_index(same_as, pools)
            if same_as
            else pool_index(r, pools) not in taken
        )
    )


def _queue(instance, defs, ref, tags, also=()):
    """A queued run of the table's maintenance (and of the tables ``also``: a shared run), as a
    backfill, the UI or the sensor would create it."""
    job = defs.resolve_implicit_global_asset_job_def()
    location = InProcessCodeLocationOrigin(
        LoadableTargetOrigin(module_name="icelake_assets.definitions"), location_name="icelake"
    )
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, "__repository__"), job.name)
    return instance.create_run_for_job(
        job,
        asset_selection={table_asset_key(r) for r in (ref, *also)},
        tags=tags,
        status=DagsterRunStatus.QUEUED,
        remote_job_origin=origin,
    )


def _tick(defs, settings, instance, cursor=None):
    return sensor_tick(defs, settings, instance, cursor=cursor)


def _outcomes(tick):
    return {e.asset_key.path[-1]: e.metadata["sensor/outcome"].value for e in tick.asset_events}


def test_no_second_run_while_one_is_queued_and_a_failed_run_is_retried_after_a_backoff(
    make_lake, monkeypatch
):
    settings, refs = _lake_of(make_lake, ["u"])
    defs = build_definitions(settings)
    with instance_for_test() as instance:
        # A backfill's run carries no icelake tag: the sensor knows it by the table's pool in its plan.
        backfill_run = _queue(instance, defs, refs["t"], {"dagster/backfill": "abcdefgh"})
        first = _tick(defs, settings, instance)
        assert [r.tags[TABLE_TAG] for r in first.run_requests] == [str(refs["u"])]
        assert _outcomes(first) == {"t": "in_flight", refs["u"].name: "launched"}

        # Still queued, and a writer commits meanwhile: nothing for t. The run holds it, so the tick
        # does not even read it (u is unchanged and launched).
        open_catalog(settings, refs["t"].catalog).load_table(refs["t"].identifier).append(_batch(900, 2))
        again = _tick(defs, settings, instance, first.cursor)
        assert again.run_requests == [] and _outcomes(again) == {}

        instance.report_run_failed(backfill_run)
        backoff = _tick(defs, settings, instance, again.cursor)
        assert backoff.run_requests == [] and _outcomes(backoff) == {"t": "backoff"}
        records = [
            r for r in AuditLog.from_settings(settings).records(table=str(refs["t"])) if r.kind == "decision"
        ]
        assert (
            records[-1].decision == "deferred"
            and "maintenance run(s) failed; retrying after" in records[-1].reason
        )

        monkeypatch.setattr(run_model, "FAILED_RUN_BACKOFF_SECONDS", 0.0)  # the backoff is over
        retried = _tick(defs, settings, instance, backoff.cursor)
        assert [r.tags[TABLE_TAG] for r in retried.run_requests] == [str(refs["t"])]


@contextmanager
def _queued_instance():
    """An instance with the shipped dagster.yaml's concurrency and monitoring, a real run queue and a
    launcher that records launches without executing them."""
    shipped = yaml.safe_load((ROOT / "dagster.yaml").read_text())
    overrides = {
        "concurrency": shipped["concurrency"],
        "run_monitoring": shipped["run_monitoring"],
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "QueuedRunCoordinator"},
        "run_launcher": {"module": "dagster._core.test_utils", "class": "MockedRunLauncher"},
    }
    with instance_for_test(overrides=overrides) as instance:
        yield instance


def _dequeue(instance) -> set[str]:
    """One pass of the daemon's run queue; returns the ids of the runs in progress."""
    with create_test_daemon_workspace_context(EmptyWorkspaceTarget(), instance) as context:
        list(QueuedRunCoordinatorDaemon(interval_seconds=1).run_iteration(context))
    return {
        r.run_id
        for r in instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTING, DagsterRunStatus.STARTED]))
    }


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


def test_tables_sharing_a_pool_take_turns_and_other_pools_go_in_parallel(make_lake):
    """Tables are spread over ``automation.maintenance_pools`` pools by a hash of their name; a pool
    admits one run at a time, so two tables of one pool never run together (one table never does)."""
    settings, refs = _lake_of(make_lake, ["same_as_t", "v"])
    defs = build_definitions(settings)
    pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
    assert pools[table_asset_key(refs["t"])] == pools[table_asset_key(refs["same_as_t"])]
    assert pools[table_asset_key(refs["t"])] != pools[table_asset_key(refs["v"])]
    with _queued_instance() as instance:
        _tick(defs, settings, instance)  # creates the pools
        first = _queue(instance, defs, refs["t"], {})
        neighbour = _queue(instance, defs, refs["same_as_t"], {})
        other = _queue(instance, defs, refs["v"], {})
        assert _dequeue(instance) == {first.run_id, other.run_id}
        _finish(instance, first.run_id)
        assert _dequeue(instance) == {other.run_id, neighbour.run_id}


def _finish(instance, run_id):
    """The run ended well (as the run worker reports it)."""
    from dagster import DagsterEvent, DagsterEventType

    run = instance.get_run_by_id(run_id)
    instance.report_dagster_event(
        DagsterEvent(DagsterEventType.RUN_SUCCESS.value, job_name=run.job_name), run_id=run_id
    )


def _ranks(tick, refs):
    """Outcome and rank of each ranked table, by its key in ``refs``."""
    short = {r.name: k for k, r in refs.items()}
    return {
        short[e.asset_key.path[-1]]: (
            e.metadata["sensor/outcome"].value,
            e.metadata["sensor/priority_rank"].value,
        )
        for e in tick.asset_events
        if "sensor/priority_rank" in e.metadata
    }


def test_under_the_global_cap_the_most_beneficial_tables_go_first_the_rest_on_later_ticks(make_lake, capfd):
    """Cap 2 (shipped dagster.yaml), no runs queued ahead: 4 degraded tables, 2 launched, by benefit
    (a run per table: small tables sharing runs is test_packed_runs.py's)."""
    settings, ref, _ = _lake(make_lake, files=40, automation={"queued_runs_ahead": 0, **ONE_PER_RUN})
    cat = open_catalog(settings, ref.catalog)
    refs = {"t": ref}
    # Each table a pool of its own: pool-mates never launch in one tick (test_packed_runs.py's).
    for name, files in (("mid", 32), ("old", 26), ("small", 22)):
        refs[name] = _named_for_pool(settings, name, refs.values())
        table = cat.create_table(refs[name].identifier, SCHEMA)
        for i in range(files):
            table.append(_batch(i, 2))
    defs = build_definitions(settings)
    with _queued_instance() as instance:
        assert run_model.run_cap(instance) == 2
        first = _tick(defs, settings, instance)
        # One partition and one manifest per commit: compaction and manifest rewrite save 2 x (files - 1)
        # file opens per scan.
        requested = [
            (r.tags[TABLE_TAG], r.tags["dagster/priority"], r.tags[RANK_TAG]) for r in first.run_requests
        ]
        assert requested == [(str(refs["t"]), "78", "1/4"), (str(refs["mid"]), "62", "2/4")]
        assert _ranks(first, refs) == {
            "t": ("launched", 1),
            "mid": ("launched", 2),
            "old": ("queued_by_priority", 3),
            "small": ("queued_by_priority", 4),
        }
        log = next(line for line in capfd.readouterr().err.splitlines() if "launch order (" in line)
        assert "cap 2 runs + 0 queued ahead, 0 maintenance run(s) in flight: 2 free" in log
        assert (
            log.index("1. " + str(refs["t"]))
            < log.index("2. " + str(refs["mid"]))
            < log.index("3. " + str(refs["old"]))
            < log.index("4. " + str(refs["small"]))
        )
        log_ = AuditLog.from_settings(settings)
        audit = {
            n: [r for r in log_.records(table=str(ref_)) if r.kind == "decision"] for n, ref_ in refs.items()
        }
        assert [r.decision for r in audit["t"]] == ["launched"] and audit["t"][0].reason.startswith(
            "priority 1 of 4, by benefit: 78 file opens saved per scan"
        )
        assert [r.decision for r in audit["small"]] == ["deferred"]
        assert audit["small"][0].reason.startswith(
            "priority 4 of 4, by benefit: 42 file opens saved per scan"
        ) and ("the free run slots went to higher-ranked tables" in audit["small"][0].reason)
        # The daemon submits the two requested runs; both are queued or running.
        runs = [
            _queue(instance, defs, refs[n], dict(r.tags))
            for n, r in zip(("t", "mid"), first.run_requests, strict=True)
        ]

        # A new table as beneficial as `old` appears (its name sorts first): the older finding ranks first.
        refs["aaa"] = _named_for_pool(settings, "aaa", refs.values())
        table = cat.create_table(refs["aaa"].identifier, SCHEMA)
        for i in range(26):
            table.append(_batch(i, 2))
        defs = build_definitions(settings)
        capfd.readouterr()
        full = _tick(defs, settings, instance, first.cursor)
        assert full.run_requests == []  # no free slot while the cap's 2 runs are in flight
        # Observed: the new table only (one observation per change of decision); the tick's log
        # ranks every waiting table.
        assert _ranks(full, refs) == {"aaa": ("queued_by_priority", 2)}
        log = next(line for line in capfd.readouterr().err.splitlines() if "launch order (" in line)
        assert (
            log.index("1. " + str(refs["old"]))
            < log.index("2. " + str(refs["aaa"]))
            < log.index("3. " + str(refs["small"]))
        )
        recorded = [
            r
            for r in AuditLog.from_settings(settings).records(table=str(refs["small"]))
            if r.kind == "decision"
        ]
        assert len(recorded) == 1  # one audit record per change of decision, not per tick

        for run in runs:
            _finish(instance, run.run_id)
        freed = _tick(defs, settings, instance, full.cursor)
        assert [r.tags[TABLE_TAG] for r in freed.run_requests] == [str(refs["old"]), str(refs["aaa"])]
        # The launched tables' decisions changed; small still waits (already observed waiting).
        assert _ranks(freed, refs) == {"old": ("launched", 1), "aaa": ("launched", 2)}


def test_by_default_the_queue_holds_as_many_runs_ahead_as_the_cap(make_lake):
    settings, refs = _lake_of(make_lake, ["u", "v", "w", "x"], automation=ONE_PER_RUN)
    defs = build_definitions(settings)
    with _queued_instance() as instance:
        assert (
            run_model.free_slots(
                instance, run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
            )[0]
            == 4
        )
        tick = _tick(defs, settings, instance)
        assert len(tick.run_requests) == 4
        assert sorted(o for o in _outcomes(tick).values()) == ["launched"] * 4 + ["queued_by_priority"]
    direct = {
        "run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"}
    }
    with instance_for_test(overrides=direct) as unqueued:  # no run queue, no cap: every table gets its run
        assert run_model.run_cap(unqueued) is None
        assert len(_tick(defs, settings, unqueued).run_requests) == 5


def _start(instance, run_id):
    """The run started (as the run worker reports it): its record gets a start time."""
    from dagster import DagsterEvent, DagsterEventType

    run = instance.get_run_by_id(run_id)
    instance.report_dagster_event(
        DagsterEvent(DagsterEventType.RUN_START.value, job_name=run.job_name), run_id=run_id
    )


def test_where_pools_apply_per_op_a_later_run_of_the_table_stops_before_any_commit(make_lake, tmp_path):
    """A user's deployment (embedding.py) applies pools per op, Dagster's default: two runs of one
    table could interleave their ops. The later run's first op finds the earlier one and stops."""
    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert instance.get_concurrency_config().pool_config.pool_granularity in (None, "op")
        earlier = _queue(instance, defs, ref, {TABLE_TAG: str(ref)})
        _start(instance, earlier.run_id)
        result = defs.resolve_job_def("icelake_maintenance").execute_in_process(
            instance=instance, asset_selection=[table_asset_key(ref)], raise_on_error=False
        )
        assert not result.success
        [failure] = [e for e in result.all_events if e.is_step_failure]
        said = failure.step_failure_data.user_failure_data.description
        assert (
            said == f"{ref}: run {earlier.run_id} is maintaining this table; this run stops before any commit"
        )
        assert result.dagster_run.run_id != earlier.run_id
        tags = instance.get_run_by_id(result.run_id).tags
        assert tags[run_model.FAILURE_KIND_TAG] == "concurrent_run"
        table = open_catalog(settings, ref.catalog).load_table(ref.identifier)
        assert len(table.inspect.snapshots()) == 25  # nothing committed
        # The earlier run does not yield to the later one.
        assert run_model.earlier_run_maintaining(instance, earlier.run_id, table_asset_key(ref), "p") is None


def test_a_commit_conflict_with_a_writer_is_retried_soon_not_after_the_tables_backoff(make_lake, tmp_path):
    """Iceberg refused the run's commit because a writer's came first (the chaos soak: "Missing
    required files to delete" while a writer deleted rows): nothing of it committed, the table is
    not at fault. It waited the table's 600 s failure backoff."""
    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    cause = "ValidationException: Missing required files to delete: s3://warehouse/t/data/a.parquet"
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        tags = {TABLE_TAG: str(ref), **run_model.failure_tags(str(ref), "commit_conflict", cause)}
        run = _queue(instance, defs, ref, tags)
        _start(instance, run.run_id)
        instance.report_run_failed(instance.get_run_by_id(run.run_id))
        pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
        state = run_model.table_runs(instance, pools)[table_asset_key(ref)]
        assert state.failures_in_a_row == 0 and state.interruptions_in_a_row == 1
        assert state.last_finished is not None
        assert state.retry_at(600.0) == state.last_finished + run_model.OUTAGE_RETRY_SECONDS
        assert "conflicted" in (state.failure_reason() or "")


def test_a_table_whose_runs_keep_losing_their_worker_is_failing_after_all(make_lake, tmp_path):
    """One lost worker is not the table's failure; a run that loses its worker every time (out of
    memory, say) is: past LOST_WORKERS_BEFORE_FAILURE in a row, the losses count as failures."""
    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
    tags = {TABLE_TAG: str(ref), **run_model.failure_tags(str(ref), run_model.WORKER_LOST, "its worker died")}
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        for n in range(run_model.LOST_WORKERS_BEFORE_FAILURE + 2):
            run = _queue(instance, defs, ref, tags)
            _start(instance, run.run_id)
            instance.report_run_failed(instance.get_run_by_id(run.run_id))
            state = run_model.table_runs(instance, pools)[table_asset_key(ref)]
            if n < run_model.LOST_WORKERS_BEFORE_FAILURE:
                assert (state.interruptions_in_a_row, state.failures_in_a_row) == (n + 1, 0)
        assert state.failures_in_a_row == 2 and state.interruptions_in_a_row == 0
        assert state.last_finished is not None
        assert state.retry_at(600.0) == state.last_finished + 1200.0


def _failed_run(instance, defs, ref, kind, cause):
    """A maintenance run of the table that failed naming it, its kind and cause (as the op tags it)."""
    tags = {TABLE_TAG: str(ref), **run_model.failure_tags(str(ref), kind, cause)}
    run = _queue(instance, defs, ref, tags)
    _start(instance, run.run_id)
    instance.report_run_failed(instance.get_run_by_id(run.run_id))


def test_a_run_of_a_pool_mates_own_job_is_not_the_tables_run(make_lake, tmp_path):
    """A partitioned table has a job of its own, in the pool its name hashes to, which an unpartitioned
    table may share. A run of that job launched whole (the UI's "Materialize all": no selection, no
    tag) is known by its pool: its failure backed off the pool-mate too (twice failed, the second
    time with no cause: test_fault_isolation's flake), its success cleared the pool-mate's failures.
    Only the tables the run planned are its own."""
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    from icelake_assets.orchestration.project import table_maintenance_job

    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    mate = _named_for_pool(settings, "parts", [ref], same_as=ref)
    spec = PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "payload"))
    parts = open_catalog(settings, ref.catalog).create_table(mate.identifier, SCHEMA, partition_spec=spec)
    for i in range(3):
        parts.append(_batch(i, 2))
    defs = build_definitions(settings)
    pools = run_model.pools_by_key([ref, mate], settings.automation.maintenance_pools)
    assert pools[table_asset_key(ref)] == pools[table_asset_key(mate)]
    own_job = defs.resolve_job_def(table_maintenance_job(defs, table_asset_key(mate)))
    assert own_job.name != table_maintenance_job(defs, table_asset_key(ref))

    def whole_run_of_own_job(failed: bool) -> None:
        tags = run_model.failure_tags(str(mate), "access_denied", "Operation not permitted") if failed else {}
        run = instance.create_run_for_job(own_job, tags=tags, status=DagsterRunStatus.NOT_STARTED)
        assert not run.asset_selection and run_model.named_tables(run.tags) is None
        _start(instance, run.run_id)
        if failed:
            instance.report_run_failed(instance.get_run_by_id(run.run_id))
        else:
            _finish(instance, run.run_id)

    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        _failed_run(instance, defs, ref, "access_denied", "Permission denied on t's folder")
        whole_run_of_own_job(failed=True)
        runs = run_model.table_runs(instance, pools)
        own, other = runs[table_asset_key(ref)], runs[table_asset_key(mate)]
        assert (own.failures_in_a_row, own.last_failure_cause) == (1, "Permission denied on t's folder")
        assert (other.failures_in_a_row, other.last_failure_kind) == (1, "access_denied")

        whole_run_of_own_job(failed=False)
        runs = run_model.table_runs(instance, pools)
        assert runs[table_asset_key(ref)].failures_in_a_row == 1  # still backing off: its own run failed
        assert runs[table_asset_key(mate)].failures_in_a_row == 0


def _refused_by_spark():
    from icelake_assets_tests.test_causes import NOT_AUTHORIZED

    return Exception(NOT_AUTHORIZED)


def _refused_by_pyiceberg():
    from pyiceberg.exceptions import UnauthorizedError

    from icelake_assets.catalog.connection import TableUnreadableError

    try:
        try:
            raise UnauthorizedError("NotAuthorizedException: Credentials have expired")
        except UnauthorizedError as err:
            raise TableUnreadableError("catalog 'lake' failed to load table: UnauthorizedError") from err
    except TableUnreadableError as err:
        return err


@pytest.mark.parametrize("refused", [_refused_by_spark, _refused_by_pyiceberg])
def test_a_catalog_that_refuses_the_identity_twice_in_a_row_is_the_tables_failure(
    make_lake, tmp_path, refused
):
    """A wrong credential (a 401 every time) was taken for an outage and retried every few minutes
    forever. The first refusal may be a token gone stale when the catalog restarted: retried once
    soon; the second in a row is the table's failure, with its backoff and the fix in the reason."""
    from icelake_assets.causes import root_cause

    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
    cause = root_cause(refused())
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        _failed_run(instance, defs, ref, cause.kind, str(cause))
        first = run_model.table_runs(instance, pools)[table_asset_key(ref)]
        assert (first.interruptions_in_a_row, first.failures_in_a_row) == (1, 0)
        assert first.last_finished is not None
        assert first.retry_at(600.0) == first.last_finished + run_model.OUTAGE_RETRY_SECONDS
        assert "retrying once soon" in (first.failure_reason() or "")

        _failed_run(instance, defs, ref, cause.kind, str(cause))
        second = run_model.table_runs(instance, pools)[table_asset_key(ref)]
        assert (second.interruptions_in_a_row, second.failures_in_a_row) == (0, 1)
        assert second.last_finished is not None
        assert second.retry_at(600.0) == second.last_finished + 600.0
        reason = second.failure_reason() or ""
        assert reason == (
            f"the catalog refused the maintenance identity's credentials: {cause} (fix them in icelake.yaml)"
        )
        assert "Credentials have expired" in reason


@pytest.mark.parametrize(
    ("kind", "cap"),
    [(run_model.OUTAGE, "OUTAGES_BEFORE_FAILURE"), (run_model.COMMIT_CONFLICT, "CONFLICTS_BEFORE_FAILURE")],
)
def test_outages_and_conflicts_past_their_cap_count_as_the_tables_failures(make_lake, tmp_path, kind, cap):
    """Every kind of interruption is capped, not only lost workers: a catalog down for good, or
    writers that leave maintenance no window, end in the table's failure state and its backoff."""
    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
    limit = getattr(run_model, cap)
    assert 1 < limit < run_model.INTERRUPTIONS_BEFORE_FAILURE
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        for n in range(limit + 2):
            _failed_run(instance, defs, ref, kind, "catalog 'lake' unreachable")
            state = run_model.table_runs(instance, pools)[table_asset_key(ref)]
            if n < limit:
                assert (state.interruptions_in_a_row, state.failures_in_a_row) == (n + 1, 0)
        assert (state.interruptions_in_a_row, state.failures_in_a_row) == (0, 2)
        assert state.last_finished is not None
        assert state.retry_at(600.0) == state.last_finished + 1200.0
        assert f"interrupted {limit + 2} runs in a row" in (state.failure_reason() or "")
        # A run that succeeds ends the streaks: the next interruption is retried soon again.
        run = _queue(instance, defs, ref, {TABLE_TAG: str(ref)})
        _start(instance, run.run_id)
        _finish(instance, run.run_id)
        _failed_run(instance, defs, ref, kind, "catalog 'lake' unreachable")
        state = run_model.table_runs(instance, pools)[table_asset_key(ref)]
        assert (state.interruptions_in_a_row, state.failures_in_a_row) == (1, 0)


def test_interruptions_of_mixed_kinds_are_capped_too(make_lake, tmp_path, monkeypatch):
    """Kinds that take turns (an outage, a lost worker, an outage...) never reach their own caps: the
    streak of any kind has one as well."""
    monkeypatch.setattr(run_model, "INTERRUPTIONS_BEFORE_FAILURE", 3)
    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
    kinds = [run_model.OUTAGE, run_model.WORKER_LOST, run_model.OUTAGE, run_model.WORKER_LOST]
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        seen = []
        for kind in kinds:
            _failed_run(instance, defs, ref, kind, "gone")
            state = run_model.table_runs(instance, pools)[table_asset_key(ref)]
            seen.append((state.interruptions_in_a_row, state.failures_in_a_row))
        assert seen == [(1, 0), (2, 0), (3, 0), (0, 1)]
        assert "the run's worker was lost: gone (interrupted 4 runs in a row" in (
            state.failure_reason() or ""
        )


def test_a_terminated_run_is_retried_after_the_interruption_wait_and_capped(make_lake, tmp_path):
    """A run stopped by Terminate (or max_runtime) says nothing of its table: on the old code it counted
    as a failure, and the table waited out its failure backoff (10 min in the chaos soak, past the lake's
    10 minutes to heal). A table whose runs keep being terminated is failing after all."""
    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        for n in range(run_model.CANCELS_BEFORE_FAILURE + 1):
            run = _queue(instance, defs, ref, {TABLE_TAG: str(ref)})
            _start(instance, run.run_id)
            instance.report_run_canceled(instance.get_run_by_id(run.run_id))
            state = run_model.table_runs(instance, pools)[table_asset_key(ref)]
            if n == 0:
                assert state.retry_at(600.0) == state.last_finished + run_model.OUTAGE_RETRY_SECONDS
                assert "terminated" in (state.failure_reason() or "")
        assert (state.interruptions_in_a_row, state.failures_in_a_row) == (0, 1)
