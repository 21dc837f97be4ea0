"""Tables of one shared run maintained at once (issue 53 item 1, ``automation.table_concurrency``), on
real Spark through a real sensor tick and Dagster run: the Spark stages of different tables run at the
same time, each table's in a FAIR pool of its own thread (read back from Spark's own status store:
each stage's pool, submission and completion time), and every table is validated, committed and
audited. With one table's data file deleted from storage and another dropped from the catalog, the
first's rewrite fails with its cause, recorded and audited, the second's first op raises in its thread,
and the others are maintained as if neither were there. Without Spark: the outcomes come back in the
tables' order, an interrupt fences and waits for the tables in flight, and the shared driver's lease
and the fence say committing until the last thread's commit ends."""

from __future__ import annotations

import _thread
import json
import time
import uuid
from itertools import combinations

import pytest
from dagster import DagsterEventType, instance_for_test

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.lake import local_path
from icelake_assets.maintenance.spark import fencing, resident_lease
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.assets.table_concurrency import POOL_PREFIX, each_at_once, outcomes
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.orchestration.runs.run_tags import TABLES_TAG
from icelake_assets_tests.conftest import sensor_tick
from icelake_assets_tests.orchestration.sensors.test_maintenance import SCHEMA, _batch, _lake

# One pool: the three tables share one table group, so one chain of steps whose every op maintains
# them (tables of different pools are chains of their own, which Dagster's in-process executor runs
# one step at a time: table_concurrency overlaps the tables of one step).
AT_ONCE = {"table_concurrency": 3, "maintenance_pools": 1}


def _lake_of(make_lake, names=("a", "b")):
    """Degraded small tables ``ns.t`` and ``ns.<name>`` (25 files each) in one table group."""
    settings, ref, table = _lake(make_lake, files=25, automation=AT_ONCE)
    catalog = open_catalog(settings, ref.catalog)
    refs = {"t": ref}
    for name in names:
        table = catalog.create_table(("ns", name), SCHEMA)
        for i in range(25):
            table.append(_batch(i, 2))
        refs[name] = TableRef(ref.catalog, ("ns",), name)
    return settings, refs


def _shared_run(settings, instance, tables: int, drop=None):
    """The tick's one shared run of the lake's small tables, executed in this process (``drop``: a
    table dropped from the catalog between the tick and the run)."""
    defs = build_definitions(settings)
    tick = sensor_tick(defs, settings, instance)
    [request] = tick.run_requests
    assert len(json.loads(request.tags[TABLES_TAG])) == tables
    if drop is not None:
        open_catalog(settings, drop.catalog).drop_table(drop.identifier)
    job = defs.resolve_implicit_global_asset_job_def()
    return job.execute_in_process(
        instance=instance, asset_selection=request.asset_selection, tags=request.tags, raise_on_error=False
    )


def _stages_since(settings, since_ms: int) -> list[tuple[str, int, int]]:
    """Every finished Spark stage submitted since ``since_ms`` from a table thread's pool: (pool,
    submitted, completed), epoch ms, from the driver's status store (no listener needed)."""
    spark = IcebergSparkResource(spark_config=spark_config(settings)).spark_session
    jvm, store = spark._jvm, spark._jsc.sc().statusStore()  # noqa: SLF001 - Spark's own job timings
    empty = jvm.java.util.ArrayList()
    stages = store.stageList(empty, False, False, spark.sparkContext._gateway.new_array(jvm.double, 0), empty)  # noqa: SLF001
    out = []
    for i in range(stages.size()):
        stage = stages.apply(i)
        pool, sub, done = stage.schedulingPool(), stage.submissionTime(), stage.completionTime()
        if pool.startswith(POOL_PREFIX) and sub.isDefined() and done.isDefined():
            submitted, completed = sub.get().getTime(), done.get().getTime()
            if submitted >= since_ms:
                out.append((pool, submitted, completed))
    return out


def _overlaps(stages: list[tuple[str, int, int]]) -> list[tuple[str, str, int]]:
    """Pairs of stages of different pools (tables) that ran at the same time, with the ms they shared."""
    return [
        (a[0], b[0], min(a[2], b[2]) - max(a[1], b[1]))
        for a, b in combinations(stages, 2)
        if a[0] != b[0] and max(a[1], b[1]) < min(a[2], b[2])
    ]


def _validated_and_audited(settings, ref, run_id) -> None:
    records = [r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.run_id == run_id]
    assert [r.decision for r in records if r.kind == "validation"] == ["passed"], records
    assert any(r.op == "rewrite_data_files" and r.decision != "failed" for r in records)
    table = open_catalog(settings, ref.catalog).load_table(ref.identifier)
    assert len(table.inspect.files()) < 25  # compacted: the rewrite committed


def test_a_shared_runs_tables_are_maintained_at_once_each_validated_and_audited(make_lake):
    settings, refs = _lake_of(make_lake)
    assert spark_config(settings)["spark.scheduler.mode"] == "FAIR"
    since = int(time.time() * 1000)
    with instance_for_test() as instance:
        result = _shared_run(settings, instance, len(refs))
        assert result.success
        assert {e.asset_key for e in result.get_asset_materialization_events()} == {
            table_asset_key(r) for r in refs.values()
        }
        for ref in refs.values():
            _validated_and_audited(settings, ref, result.run_id)
        # The ops' logs name the tables in the run's order, whichever finished first.
        lines = [e.user_message for e in instance.all_logs(result.run_id) if not e.dagster_event]
        skipped = [line for line in lines if " skipped 3 table(s): " in line]
        orders = {tuple(sorted(refs, key=lambda k: line.index(f"{refs[k]}: "))) for line in skipped}
        assert len(skipped) >= 2 and len(orders) == 1, skipped

    stages = _stages_since(settings, since)
    assert len({pool for pool, _, _ in stages}) == 3, stages  # a pool per table thread
    shared = _overlaps(stages)
    print(f"{len(stages)} stages, {len(shared)} overlapping pairs, longest {max(s for _, _, s in shared)} ms")
    assert shared, stages  # two tables' Spark stages ran at the same time


def test_a_failing_table_among_tables_at_once_leaves_the_others_validated_committed_and_audited(make_lake):
    settings, refs = _lake_of(make_lake, ("a", "b", "c"))
    broken = open_catalog(settings, refs["a"].catalog).load_table(refs["a"].identifier)
    lost = broken.inspect.files().column("file_path")[0].as_py()
    local_path(lost).unlink()  # its rewrite reads every small file: this one is gone from storage
    with instance_for_test() as instance:
        result = _shared_run(settings, instance, len(refs), drop=refs["c"])
        assert not result.success
        assert {e.asset_key for e in result.get_asset_materialization_events()} == {
            table_asset_key(refs["t"]),
            table_asset_key(refs["b"]),
        }
        for k in ("t", "b"):
            _validated_and_audited(settings, refs[k], result.run_id)
        records = [
            r
            for r in AuditLog.from_settings(settings).records(table=str(refs["a"]))
            if r.run_id == result.run_id
        ]
        # Its rewrite failed with its cause (retried, as a failed rewrite is), recorded in each
        # attempt's audit record; its validation audited the run's outcome and failed the table.
        rewrites = [r for r in records if r.op == "rewrite_data_files"]
        causes = [str(r.results.get("error") or "") for r in rewrites]
        missing = lost.rsplit("/", 1)[-1]
        assert rewrites and all(missing in c or "FileNotFound" in c for c in causes), causes
        [validation] = [r for r in records if r.kind == "validation"]
        assert validation.decision != "passed", validation
        failures = [e for e in result.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
        said = " ".join(e.event_specific_data.error.message for e in failures)
        assert f"{refs['a']}: 1 partition(s) not compacted after every retry" in said, said
        assert str(refs["t"]) not in said and str(refs["b"]) not in said
        # The dropped table's first op raised in its thread: recorded, and the others went on.
        lines = [e.user_message for e in instance.all_logs(result.run_id) if not e.dagster_event]
        gone = f"{refs['c']} manage_restore_points failed; the run's other tables go on"
        assert any(line.startswith(gone) for line in lines), lines


def test_tables_at_once_come_back_in_their_order_whichever_finishes_first():
    def work(n: int) -> int:
        if n == 1:
            raise ValueError("table 1 failed")
        time.sleep(0.05 * (5 - n))  # the later tables finish first
        return n * 10

    got = list(each_at_once(list(range(5)), work, 3, lambda err: None))
    assert [t for t, _ in got] == [0, 1, 2, 3, 4]
    assert [r for t, r in got if t != 1] == [0, 20, 30, 40] and isinstance(got[1][1], ValueError)
    assert [t for t, _ in outcomes([0, 1, 2], work, 1, lambda err: None)] == [0, 1, 2]  # in turn


def test_an_interrupt_fences_starts_no_table_and_waits_for_the_tables_in_flight():
    started: list[int] = []
    finished: list[int] = []
    told: list[BaseException] = []

    def work(n: int) -> None:
        started.append(n)
        if n == 0:
            _thread.interrupt_main()  # a terminate's SIGINT, in the op's thread
        time.sleep(0.5)
        finished.append(n)

    with pytest.raises(KeyboardInterrupt):
        list(each_at_once(list(range(8)), work, 2, told.append))
    assert len(told) == 1 and isinstance(told[0], KeyboardInterrupt)
    assert sorted(finished) == sorted(started) and len(started) < 8  # none left running, none started after


def test_the_lease_and_the_fence_say_committing_until_the_last_threads_commit_ends(tmp_path, monkeypatch):
    lease = tmp_path / "leases" / "1"
    lease.parent.mkdir()
    monkeypatch.setattr(resident_lease, "_LEASE", None)  # restored after the test
    monkeypatch.setattr(resident_lease, "_HEAD", "")
    resident_lease.hold(lease, "group 1")
    fencing.arm(f"test-{uuid.uuid4().hex}")
    first, second = fencing.committing("a rewrite"), fencing.committing("b rewrite")
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)  # a's thread ends first: b still commits
    assert "committing b rewrite" in lease.read_text() and fencing._state["committing"] == "b rewrite"
    second.__exit__(None, None, None)
    assert "committing" not in lease.read_text() and fencing._state["committing"] is None
