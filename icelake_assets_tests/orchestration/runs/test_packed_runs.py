"""Small tables share a run (issue 42, planning/packing.py) through real sensor ticks on a real Dagster
instance: the sensor packs the small tables it launches into one run that names them all; a table
over its packing threshold keeps a run of its own, a small one whose pool another run holds waits for
that pool (a run for it would only wait on that run in the queue); the run
model, the stale-run recovery and the next tick see every table of the shared run in flight. Then
the shared run executed on real Spark, one of its tables dropped from the catalog between the tick
and the run: that table fails, the others are maintained and materialized, each with its own
outcome tags and audit, and the run's failure counts against the dropped table alone."""

from __future__ import annotations

import json

from dagster import DagsterRunStatus, instance_for_test

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.runs import model as run_model
from icelake_assets.orchestration.runs.run_tags import TABLE_COUNT_TAG, TABLE_TAG, TABLES_TAG, named_tables
from icelake_assets.orchestration.sensors.recovery import product_run
from icelake_assets.planning.relaunch import OUTCOME_TABLE_TAG, OUTCOME_TAG, outcome_of
from icelake_assets_tests.conftest import sensor_tick
from icelake_assets_tests.orchestration.runs.test_model import _lake_of, _queue, _queued_instance

BIG = {"ns.big*": {"packing": {"max_files": 5}}}  # 25 files: over its threshold


def _shared(tick):
    [request] = [r for r in tick.run_requests if TABLES_TAG in r.tags]
    return request


def test_small_tables_share_a_run_a_large_one_keeps_its_own_a_busy_pool_waits(make_lake):
    settings, refs = _lake_of(make_lake, ["a", "b", "big", "x", "same_as_x"], policies={"tables": BIG})
    small = {str(refs[k]) for k in ("t", "a", "b")}
    defs = build_definitions(settings)
    with instance_for_test() as instance:
        _queue(instance, defs, refs["x"], {})  # x's run holds its pool, which same_as_x shares
        tick = sensor_tick(defs, settings, instance)

        shared = _shared(tick)
        assert set(json.loads(shared.tags[TABLES_TAG])) == small and shared.tags[TABLE_COUNT_TAG] == "3"
        assert TABLE_TAG not in shared.tags
        assert set(shared.asset_selection) == {table_asset_key(refs[k]) for k in ("t", "a", "b")}
        alone = sorted(r.tags[TABLE_TAG] for r in tick.run_requests if r is not shared)
        assert alone == [str(refs["big"])]
        observed = {e.asset_key.path[-1]: e.metadata for e in tick.asset_events}
        waits = observed[refs["same_as_x"].name]
        assert waits["sensor/outcome"].value == "queued_by_priority"
        assert "is held by a run in flight: packed once it frees" in waits["sensor/reason"].value
        assert set(observed[refs["a"].name]["sensor/shared_run_tables"].value) == small
        assert "sensor/shared_run_tables" not in observed[refs["big"].name]
        decisions = [
            r for r in AuditLog.from_settings(settings).records(table=str(refs["a"])) if r.kind == "decision"
        ]
        assert "maintained in one run with 2 other small table(s)" in decisions[-1].reason

        # The shared run queued: each of its tables is in flight, for the run model, the recovery
        # and the next tick, which launches none of them again.
        run = _queue(instance, defs, refs["t"], shared.tags, also=(refs["a"], refs["b"]))
        names = {table_asset_key(r): str(r) for r in refs.values()}
        pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
        state = run_model.table_runs(instance, pools, names=names)
        assert all(state[table_asset_key(refs[k])].in_flight == f"run {run.run_id}" for k in ("t", "a", "b"))
        assert set(product_run(run) or ()) == small and set(named_tables(run.tags) or ()) == small
        again = sensor_tick(defs, settings, instance, cursor=tick.cursor)
        assert not [r for r in again.run_requests if set(named_tables(r.tags) or ()) & small]


def test_in_a_shared_run_one_failing_table_leaves_the_others_maintained(make_lake):
    settings, refs = _lake_of(make_lake, ["a", "b"])
    defs = build_definitions(settings)
    with instance_for_test() as instance:
        tick = sensor_tick(defs, settings, instance)
        shared = _shared(tick)
        assert len(tick.run_requests) == 1 and len(shared.asset_selection) == 3
        # Between the tick and the run, a user drops ns.a (its files stay: no purge).
        open_catalog(settings, refs["a"].catalog).drop_table(refs["a"].identifier)

        job = (
            defs.resolve_job_def(shared.job_name)
            if shared.job_name
            else defs.resolve_implicit_global_asset_job_def()
        )
        result = job.execute_in_process(
            instance=instance, asset_selection=shared.asset_selection, tags=shared.tags, raise_on_error=False
        )

        assert not result.success
        materialized = {e.asset_key for e in result.get_asset_materialization_events()}
        assert materialized == {table_asset_key(refs["t"]), table_asset_key(refs["b"])}
        for k in ("t", "b"):
            table = open_catalog(settings, refs[k].catalog).load_table(refs[k].identifier)
            assert len(table.inspect.files()) < 25  # compacted
            records = AuditLog.from_settings(settings).records(table=str(refs[k]))
            assert any(r.run_id == result.run_id for r in records)
        # The run's log: an op's skipped tables in one line per step, naming each with its reason.
        lines = [e.user_message for e in instance.all_logs(result.run_id) if not e.dagster_event]
        skipped = [line for line in lines if line.startswith("expire_data skipped ")]
        assert skipped and all(" table(s): " in line for line in skipped)
        assert all(sum(str(refs[k]) + ": " in line for line in skipped) == 1 for k in ("t", "b"))
        # Each maintained table's outcome under its own keys; no run-wide outcome in a shared run.
        run = instance.get_run_by_id(result.run_id)
        assert run is not None and OUTCOME_TABLE_TAG not in run.tags and OUTCOME_TAG not in run.tags
        for k in ("t", "b"):
            assert outcome_of(run.tags, str(refs[k]))[OUTCOME_TAG] == "effective"
        assert outcome_of(run.tags, str(refs["a"])) == {}
        # The run's failure is the dropped table's alone: the others count as maintained.
        names = {table_asset_key(r): str(r) for r in refs.values()}
        pools = run_model.pools_by_key(refs.values(), settings.automation.maintenance_pools)
        state = run_model.table_runs(instance, pools, names=names)
        assert state[table_asset_key(refs["a"])].failures_in_a_row == 1
        for k in ("t", "b"):
            entry = state[table_asset_key(refs[k])]
            assert (entry.last_status, entry.failures_in_a_row) == (DagsterRunStatus.SUCCESS, 0)


def test_under_the_run_cap_shared_runs_count_as_runs_and_spread_over_the_cap(make_lake):
    """The shipped dagster.yaml: 2 runs at once and 2 queued ahead. Five small tables make two shared
    runs (3 and 2 tables: the cap's two runs side by side), not one run of five and an idle slot, and
    use two of the four free slots."""
    settings, refs = _lake_of(make_lake, ["u", "v", "w", "x"])
    defs = build_definitions(settings)
    with _queued_instance() as instance:
        assert run_model.run_cap(instance) == 2
        tick = sensor_tick(defs, settings, instance)
        carried = [json.loads(r.tags[TABLES_TAG]) for r in tick.run_requests]
        assert [len(c) for c in carried] == [3, 2]
        assert sorted(t for c in carried for t in c) == sorted(str(r) for r in refs.values())
        outcomes = {e.asset_key.path[-1]: e.metadata["sensor/outcome"].value for e in tick.asset_events}
        assert set(outcomes.values()) == {"launched"}
        ranks = [r.tags["icelake/priority_rank"] for r in tick.run_requests]
        assert ranks[0].startswith("1/")  # the best-ranked table's run first
