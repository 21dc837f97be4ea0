"""The self-healing loop through real sensor ticks (build_sensor_context + evaluate_tick), a real
Dagster instance, a real SQLite catalog and, for the launched runs, real Spark."""

from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from dagster import DagsterInstance
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG, TRIGGER_TAG, TickCursor
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, sensor_tick

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "payload", StringType()))


def _scanned_a_day_earlier(cursor: TickCursor, name: str) -> None:
    seen = cursor.seen[name]
    assert seen.scanned_at is not None
    cursor.seen[name] = replace(seen, scanned_at=seen.scanned_at - 25 * 3600)


def _batch(start: int, rows: int, width: int = 8) -> pa.Table:
    rng = np.random.default_rng(start)
    payload = [rng.bytes(width).hex() for _ in range(rows)]
    return pa.table({"id": pa.array(range(start, start + rows), pa.int64()), "payload": pa.array(payload)})


def _lake(
    make_lake,
    files: int = 25,
    rows_per_file: int = 10,
    width: int = 8,
    automation=None,
    policies=None,
    **policy,
):
    """A lake with one unpartitioned table `ns.t` of ``files`` small files (one commit each);
    ``policies``: the settings' policy layers (per table, namespace, catalog)."""
    defaults = {"mode": "enforce", "guards": {"quiet_period_minutes": 0}}
    extra = {
        **({"automation": automation} if automation else {}),
        **({"policies": policies} if policies else {}),
    }
    settings = make_lake(thresholds={**TEST_THRESHOLDS, **defaults, **policy}, extra=extra or None)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), SCHEMA)
    for i in range(files):
        table.append(_batch(i * rows_per_file, rows_per_file, width))
    return settings, TableRef(catalog_name(settings), ("ns",), "t"), table


def _tick(settings, instance, cursor=None):
    defs = build_definitions(settings)
    return defs, sensor_tick(defs, settings, instance, cursor=cursor)


def _audit(settings, ref):
    return [r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "decision"]


@pytest.fixture
def instance(tmp_path):
    with DagsterInstance.local_temp(str(tmp_path)) as inst:
        yield inst


def test_a_degraded_table_gets_exactly_one_run_and_then_its_checks_pass(make_lake, instance):
    settings, ref, table = _lake(make_lake)
    defs, tick = _tick(settings, instance)
    assert len(tick.run_requests) == 1
    request = tick.run_requests[0]
    assert request.tags[TABLE_TAG] == str(ref) and request.tags[TRIGGER_TAG] == "sensor"
    assert request.partition_key is None and request.asset_selection == [
        defs.get_assets_def(request.asset_selection[0]).key
    ]
    observed = {e.asset_key.path[-1]: e.metadata for e in tick.asset_events}
    assert observed["t"]["health/data_files"].value == 25
    assert [r.decision for r in _audit(settings, ref)] == ["launched"]

    # The same state on the next tick launches nothing more (unchanged tables cost nothing).
    _, again = _tick(settings, instance, cursor=tick.cursor)
    assert again.run_requests == [] and again.asset_events == []

    # The run targets the table's named maintenance job (the UI's run list names it, not __ASSET_JOB).
    assert request.job_name == "icelake_maintenance"
    job = defs.resolve_job_def(request.job_name)
    result = job.execute_in_process(
        instance=instance, asset_selection=request.asset_selection, tags=request.tags
    )
    assert result.success and result.dagster_run.job_name == "icelake_maintenance"
    assert all(e.passed for e in result.get_asset_check_evaluations())
    table.refresh()
    assert table.scan().to_arrow().num_rows == 250

    # Maintenance changed the table: the sensor looks again and finds nothing to do.
    _, after = _tick(settings, instance, cursor=again.cursor)
    assert after.run_requests == []
    assert [r.decision for r in _audit(settings, ref)] == ["launched", "skipped"]


def test_an_active_writer_defers_maintenance_and_says_so(make_lake, instance):
    settings, ref, _ = _lake(make_lake, guards={"quiet_period_minutes": 30})
    _, tick = _tick(settings, instance)
    assert tick.run_requests == []
    [record] = _audit(settings, ref)
    assert record.decision == "deferred" and "quiet period of 30 min" in record.reason
    assert record.writer_check["quiet_period_minutes"] == 30
    # The tick itself says why it launched nothing (the UI's tick list shows it, not "0 runs requested").
    reason = tick.skip_message
    assert reason.startswith("1 of 1 tables evaluated, no run: 1 deferred")
    assert f"{ref} deferred:" in reason and "quiet period of 30 min" in reason
    # Deferred tables are looked at again on the next tick (the quiet period may be over), but the
    # same decision is neither recorded nor observed twice.
    assert len(tick.asset_events) == 1
    _, again = _tick(settings, instance, cursor=tick.cursor)
    assert again.run_requests == [] and again.asset_events == []
    assert len(_audit(settings, ref)) == 1


def test_a_rewrite_over_the_cost_cap_is_held_for_approval(make_lake, instance):
    # 25 files of ~64 KiB of incompressible text: about 1.6 MiB to rewrite, over a 1 MiB cap.
    settings, ref, _ = _lake(
        make_lake,
        rows_per_file=2000,
        width=16,
        guards={"quiet_period_minutes": 0, "max_rewrite_bytes": 1024 * 1024},
    )
    _, tick = _tick(settings, instance)
    assert tick.run_requests == []
    [record] = _audit(settings, ref)
    assert record.decision == "held" and "awaiting approval" in record.reason
    assert record.cost_estimate_bytes > 1024 * 1024


@pytest.mark.parametrize(
    "mode, runs, decisions", [("observe", 0, []), ("propose", 0, ["proposed"]), ("enforce", 1, ["launched"])]
)
def test_modes_through_a_sensor_tick(make_lake, instance, mode, runs, decisions):
    settings, ref, _ = _lake(make_lake, mode=mode)
    _, tick = _tick(settings, instance)
    assert len(tick.run_requests) == runs
    assert [r.decision for r in _audit(settings, ref)] == decisions
    assert len(tick.asset_events) == 1  # health is observed in every mode


def test_the_cursor_splits_many_tables_across_ticks(make_lake, instance):
    # A budget so small that each tick evaluates one table, then hands over to the next tick.
    settings, _, _ = _lake(make_lake, files=1, automation={"tick_budget_seconds": 0.001})
    cat = open_catalog(settings, catalog_name(settings))
    for i in range(4):
        cat.create_table(("ns", f"more{i}"), SCHEMA).append(_batch(0, 1))
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        _, tick = _tick(settings, instance, cursor=cursor)
        assert len(tick.asset_events) == 1
        seen.append(tick.asset_events[0].asset_key.path[-1])
        cursor = tick.cursor
    assert sorted(seen) == ["more0", "more1", "more2", "more3", "t"]
    # Everything seen and unchanged: a full pass costs no table load and observes nothing.
    _, idle = _tick(settings, instance, cursor=cursor)
    assert idle.asset_events == [] and idle.run_requests == []


def test_a_cron_policy_schedules_the_tables_maintenance(make_lake, instance):
    settings, ref, _ = _lake(make_lake, files=1, schedule={"cron": "0 3 * * *", "timezone": "Europe/Paris"})
    defs = build_definitions(settings)
    schedule = defs.get_schedule_def(f"{ref.safe_name}__maintenance_schedule")
    assert schedule.cron_schedule == "0 3 * * *" and schedule.execution_timezone == "Europe/Paris"
    job = defs.resolve_job_def(schedule.job_name)
    assert [k.path[-1] for k in job.asset_layer.selected_asset_keys] == ["t"]
    # Automation obeys the mode: a table that only proposes gets no schedule.
    proposing, _, _ = _lake(make_lake, files=1, mode="propose", schedule={"cron": "0 3 * * *"})
    assert not [s for s in build_definitions(proposing).schedules if "maintenance_schedule" in s.name]


def test_old_orphans_launch_maintenance_once_a_scan_is_due(make_lake, instance):
    from icelake_assets.demo.lake import age_all_files, plant_orphans

    settings, ref, table = _lake(make_lake, files=2, automation={"orphan_scan_hours": 24})
    _, first = _tick(settings, instance)
    assert first.run_requests == []  # healthy, and its storage listed: no orphan yet
    plant_orphans(table, 2, age_days=5)
    age_all_files(table, 5)
    _, unchanged = _tick(settings, instance, cursor=first.cursor)
    assert unchanged.run_requests == [] and unchanged.asset_events == []  # scanned < 24 h ago: not listed
    cursor = TickCursor.loads(unchanged.cursor)
    _scanned_a_day_earlier(cursor, str(ref))  # the last scan is now a day old
    _, due = _tick(settings, instance, cursor=cursor.dumps())
    assert len(due.run_requests) == 1 and "remove_orphan_files" in due.run_requests[0].tags["icelake/ops"]


def test_orphans_found_while_writers_are_active_are_not_forgotten_when_they_stop(make_lake, instance):
    """The demo's orders table: old orphans, found by the scan of its first tick while a writer is
    inside the quiet period (deferred). Once the writers are quiet, the next tick launches their removal
    (the old sensor had recorded the scan as done and skipped the table until the next scan, a day on)."""
    import yaml

    from icelake_assets.demo.lake import age_all_files, plant_orphans
    from icelake_assets.settings import load_settings

    settings, ref, table = _lake(
        make_lake, files=2, guards={"quiet_period_minutes": 30}, automation={"orphan_scan_hours": 24}
    )
    plant_orphans(table, 2, age_days=5)
    age_all_files(table, 5)
    _, first = _tick(settings, instance)
    assert first.run_requests == [] and [r.decision for r in _audit(settings, ref)] == ["deferred"]
    # The writers stop: the quiet period is over (the same lake, its guard at 0).
    path = Path(settings.source)
    data = yaml.safe_load(path.read_text())
    data["thresholds"]["guards"]["quiet_period_minutes"] = 0
    path.write_text(yaml.safe_dump(data))
    quiet = load_settings(path)
    _, later = _tick(quiet, instance, cursor=first.cursor)
    assert len(later.run_requests) == 1, later.skip_message
    assert "remove_orphan_files" in later.run_requests[0].tags["icelake/ops"]


def test_a_waiting_tables_orphan_scan_serves_until_its_metadata_changes(make_lake, instance, monkeypatch):
    """A deferred table keeps its scan due so that each tick sees its orphans; while its metadata file is
    unchanged the tick reuses the last listing (every tick listed the storage and read every manifest of
    every snapshot again: most of a 200-table lake's ticks). A commit makes it list again."""
    from icelake_assets.demo.lake import age_all_files, plant_orphans
    from icelake_assets.orchestration import resources

    scans: list[str] = []
    real = resources.scan_table_orphans
    monkeypatch.setattr(
        resources, "scan_table_orphans", lambda c, ref, *a: scans.append(str(ref)) or real(c, ref, *a)
    )
    settings, ref, table = _lake(
        make_lake, files=2, guards={"quiet_period_minutes": 30}, automation={"orphan_scan_hours": 24}
    )
    plant_orphans(table, 2, age_days=5)
    age_all_files(table, 5)
    _, first = _tick(settings, instance)
    _, second = _tick(settings, instance, cursor=first.cursor)
    assert scans == [str(ref)] and [r.decision for r in _audit(settings, ref)] == ["deferred"]
    assert TickCursor.loads(second.cursor).seen[str(ref)].outcome == "deferred"
    table.append(_batch(1000, 2))
    _tick(settings, instance, cursor=second.cursor)
    assert scans == [str(ref), str(ref)]


def test_old_orphans_of_a_table_containing_another_launch_nothing(make_lake, instance):
    from icelake_assets.demo.lake import age_all_files, plant_orphans

    settings, ref, table = _lake(make_lake, files=2, automation={"orphan_scan_hours": 24})
    cat = open_catalog(settings, catalog_name(settings))
    cat.create_table(("ns", "inner"), SCHEMA, location=table.metadata.location.rstrip("/") + "/inner")
    plant_orphans(table, 2, age_days=5)
    age_all_files(table, 5)
    _, first = _tick(settings, instance)
    cursor = TickCursor.loads(first.cursor)
    _scanned_a_day_earlier(cursor, str(ref))  # a scan is due: the storage is listed on this tick
    _, due = _tick(settings, instance, cursor=cursor.dumps())
    assert due.run_requests == []  # `ns.t` holds `ns.inner`: its orphans are never removed
    assert TickCursor.loads(due.cursor).seen[str(ref)].outcome != "error"


def test_broken_tables_a_down_catalog_and_a_failing_audit_do_not_stop_the_tick(
    make_lake, instance, monkeypatch
):
    import os

    import yaml

    from icelake_assets.audit import metrics, store
    from icelake_assets.settings import load_settings

    settings, ref, _ = _lake(make_lake)
    # A second catalog, unreachable once the code location has loaded.
    data = yaml.safe_load(open(settings.source))
    data["catalogs"]["other"] = {**data["catalogs"][ref.catalog], "uri": "sqlite:///lake/other.db"}
    open(settings.source, "w").write(yaml.safe_dump(data))
    settings = load_settings(settings.source)
    other = open_catalog(settings, "other", create=True)
    other.create_namespace("ns")
    other.create_table(("ns", "far"), SCHEMA).append(_batch(0, 1))
    cat = open_catalog(settings, ref.catalog)
    for name in ("corrupt", "unreadable", "gone"):
        cat.create_table(("ns", name), SCHEMA).append(_batch(0, 1))
    defs = build_definitions(settings)

    with open(cat.load_table(("ns", "corrupt")).metadata_location.removeprefix("file://"), "w") as f:
        f.write("{not json")  # corrupt metadata
    with open(
        cat.load_table(("ns", "unreadable")).current_snapshot().manifest_list.removeprefix("file://"), "wb"
    ) as f:
        f.write(b"not avro")  # storage that cannot be read
    cat.drop_table(("ns", "gone"))
    os.remove(settings.catalog_properties("other")["uri"].removeprefix("sqlite:///"))
    # The audit table locked and the metrics disk full: logged, never fatal.
    monkeypatch.setattr(
        store.AuditLog,
        "append",
        lambda self, records: (_ for _ in ()).throw(store.AuditLogError("database is locked")),
    )
    monkeypatch.setattr(
        metrics.MetricsWriter,
        "flush",
        lambda self: (_ for _ in ()).throw(OSError(28, "No space left on device")),
    )

    tick = sensor_tick(defs, settings, instance)
    assert [r.tags[TABLE_TAG] for r in tick.run_requests] == [str(ref)]
    outcomes = {
        e.asset_key.path[-1]: (e.metadata["sensor/outcome"].value, e.metadata["sensor/reason"].value)
        for e in tick.asset_events
    }
    assert outcomes["t"][0] == "launched"
    assert {k: v[0] for k, v in outcomes.items() if k != "t"} == dict.fromkeys(
        ("corrupt", "unreadable", "gone", "far"), "error"
    )
    assert "no longer exists" in outcomes["gone"][1] and "other.db does not exist" in outcomes["far"][1]

    monkeypatch.undo()  # the audit works again: every error is recorded once, with its cause
    sensor_tick(defs, settings, instance)
    decisions = {
        r.table_name.rsplit(".", 1)[-1]: r.decision
        for r in AuditLog.from_settings(settings).records()
        if r.kind == "decision"
    }
    assert decisions == {
        "t": "launched",
        "corrupt": "error",
        "unreadable": "error",
        "gone": "error",
        "far": "error",
    }


def test_a_tables_offending_days_go_into_one_run_and_its_partitions_span_its_data(make_lake, instance):
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    from icelake_assets.demo.lake import TRIPS_SCHEMA, TRIPS_SPEC, append, trips_batch

    settings = make_lake(
        thresholds={
            **TEST_THRESHOLDS,
            "mode": "enforce",
            "guards": {"quiet_period_minutes": 0},
            "small_files": {"max_files_per_partition": 4},
        }
    )
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    trips = cat.create_table(("ns", "trips"), schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
    rng = np.random.default_rng(3)
    for c in range(6):  # 6 files in each of 5 days of January 2024: every day is over the threshold
        append(trips, trips_batch(rng, c * 5, 5, 5))
    defs, tick = _tick(settings, instance)
    ref = TableRef(catalog_name(settings), ("ns",), "trips")
    # The partitions are the days with data, not every day since 2024 (all but 5 "missing" forever).
    keys = defs.resolve_assets_def(ref.asset_key_path).partitions_def.get_partition_keys()
    assert keys == [f"2024-01-0{d}" for d in range(1, 6)]
    # One run (one Spark application) over the range of the offending days, not one run per day.
    [request] = tick.run_requests
    assert request.partition_key is None
    assert (request.tags[ASSET_PARTITION_RANGE_START_TAG], request.tags[ASSET_PARTITION_RANGE_END_TAG]) == (
        "2024-01-01",
        "2024-01-05",
    )
    [record] = _audit(settings, ref)
    assert record.decision == "launched" and record.partitions == ("2024-01-01...2024-01-05",)


def test_the_tick_log_line_has_no_dangling_colon_when_no_table_acts(make_lake, instance, capfd):
    settings, _, _ = _lake(make_lake, files=1)
    _, result = _tick(settings, instance)
    assert not result.run_requests
    # The sensor context's logger writes to stderr (it does not propagate to the root logger).
    line = next(x for x in capfd.readouterr().err.splitlines() if "evaluated 1 of 1 tables" in x)
    assert line.rstrip().endswith("}"), line  # the counts, then nothing: no "...{'skipped': 1}: "


def test_check_schedules_are_named_after_the_jobs_they_run(make_lake):
    settings, _, _ = _lake(make_lake, files=1)
    schedules = build_definitions(settings).schedules
    assert {s.name: s.job_name for s in schedules} == {
        "icelake_health_schedule": "icelake_health",
        "icelake_orphan_checks_schedule": "icelake_orphan_checks",
    }


def test_a_table_seen_for_the_first_time_has_its_orphans_scanned_on_that_tick(make_lake, instance):
    """Issue 22: the first orphan scan is not spread over the next interval (a table with only orphans
    waited up to a day, its orphan check 'Not Evaluated' and the table shown Healthy meanwhile)."""
    from icelake_assets.demo.lake import age_all_files, plant_orphans
    from icelake_assets.orchestration.sensors.maintenance import OPS_TAG

    settings, ref, table = _lake(make_lake, files=2, orphans={"max_count": 0})
    age_all_files(table, 5)
    plant_orphans(table, 3, age_days=5)
    _, tick = _tick(settings, instance)
    (request,) = tick.run_requests
    assert request.tags[OPS_TAG] == "remove_orphan_files"


def test_a_running_sensor_keeps_its_state_across_the_upgrade_of_its_cursor(make_lake, instance):
    """A sensor whose stored cursor is the JSON of earlier versions: its next tick reads it (the
    table unchanged: nothing evaluated, nothing launched) and stores the readable form."""
    import json

    settings, ref, _ = _lake(make_lake, files=2)
    _, first = _tick(settings, instance)
    state = TickCursor.loads(first.cursor)
    seen = {k: [v.metadata_file, str(v.outcome), v.scanned_at, v.since] for k, v in state.seen.items()}
    old = json.dumps({"offset": state.offset, "seen": seen}, separators=(",", ":"))
    _, upgraded = _tick(settings, instance, cursor=old)
    assert upgraded.run_requests == [] and upgraded.asset_events == []
    assert upgraded.cursor.startswith("icelake/v2\t") and str(ref) in upgraded.cursor
    upgraded_seen = TickCursor.loads(upgraded.cursor).seen[str(ref)]
    assert (upgraded_seen.metadata_file, upgraded_seen.outcome) == (
        state.seen[str(ref)].metadata_file,
        state.seen[str(ref)].outcome,
    )
