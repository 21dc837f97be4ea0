"""The fair share of the run slots through a real sensor tick (a real Dagster instance with the shipped
run cap, no Spark: runs are queued, not executed): while a large namespace's table runs and the cap
leaves one slot, a small table of another namespace launches before a more beneficial table of the
namespace that is running. Packing is off here (``packed_run_max_tables: 1``): both waiting tables
are small and would share one run (test_packed_runs.py)."""

from dagster import DagsterEvent, DagsterEventType

from icelake_assets.audit.loop_state import load_loop_snapshot
from icelake_assets.audit.metrics import MetricsWriter
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.runs import model as run_model
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG
from icelake_assets_tests.orchestration.runs.test_model import (
    _named_for_pool,
    _queue,
    _queued_instance,
    _tick,
)
from icelake_assets_tests.orchestration.sensors.test_maintenance import SCHEMA, _batch, _lake


def test_a_small_table_launches_while_a_large_namespace_runs_and_one_slot_is_left(make_lake):
    automation = {"queued_runs_ahead": 0, "fair_share_by": "namespace", "packed_run_max_tables": 1}
    settings, small, _ = _lake(make_lake, files=22, automation=automation)  # ns.t: 42 file opens saved
    cat = open_catalog(settings, small.catalog)
    cat.create_namespace("big")
    refs = []
    for base in ("running", "next"):  # big.running runs now, big.next wants a run: 78 file opens saved
        ref = _named_for_pool(settings, base, [small, *refs], namespace=("big",))
        table = cat.create_table(ref.identifier, SCHEMA)
        for i in range(40):
            table.append(_batch(i, 2))
        refs.append(ref)
    running, big_next = refs
    defs = build_definitions(settings)
    with _queued_instance() as instance:
        run = _queue(instance, defs, running, {})
        start = DagsterEvent(DagsterEventType.RUN_START.value, job_name=run.job_name)
        instance.report_dagster_event(start, run_id=run.run_id)  # it runs: its time so far is big's
        assert run_model.run_cap(instance) == 2  # one slot left

        tick = _tick(defs, settings, instance)

        assert [r.tags[TABLE_TAG] for r in tick.run_requests] == [str(small)]
        meta = {e.asset_key.path[-1]: e.metadata for e in tick.asset_events}
        assert meta[running.name]["sensor/outcome"].value == "in_flight"
        assert meta[small.name]["sensor/launch_rule"].value == "benefit"
        queued = meta[big_next.name]
        assert (queued["sensor/outcome"].value, queued["sensor/launch_rule"].value) == (
            "queued_by_priority",
            "over its fair share",
        )
        assert queued["sensor/benefit_files"].value > meta[small.name]["sensor/benefit_files"].value
        assert "priority 2 of 2, over its fair share (ran " in queued["sensor/reason"].value
        assert "sensor/waiting_minutes" in queued
        # The tick exported the lag of each table waiting for maintenance (the loop's gauges).
        snapshot = load_loop_snapshot(MetricsWriter(settings.metrics.textfile_dir).multiprocess_dir)
        assert snapshot is not None
        assert {(lag.table, lag.outcome) for lag in snapshot.lags} == {
            (str(running), "in_flight"),
            (str(big_next), "queued_by_priority"),
        }
