"""The loop's state as gauges: a snapshot written whole and exported as it is, by the textfile and
the HTTP endpoint alike, so a table whose run ended leaves the gauge instead of keeping its last value
(the per-process gauges of multiprocess mode cannot forget a series)."""

import logging

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from icelake_assets.audit.loop_state import (
    STATE_FILE,
    LoopSnapshot,
    TableInFlight,
    TableLag,
    load_loop_snapshot,
    save_loop_snapshot,
)
from icelake_assets.audit.metric_families import FAMILIES, LOOP_FAMILIES
from icelake_assets.audit.metrics import MetricsWriter
from icelake_assets.audit.writer import write_loop_metrics

STUCK = TableInFlight("demo.taxi.trips", "run-1", "STARTED", 7200.0, 600.0)
WAITING = TableInFlight("demo.sales.orders", "run-2", "QUEUED", 1000.0)
SNAPSHOT = LoopSnapshot((STUCK, WAITING), runs_queued=1, oldest_queued_seconds=1000.0, runs_in_progress=1)


def families(text: str) -> dict[str, Metric]:
    """Every family of the exposition, each declared with its type and help."""
    out = {}
    for fam in text_string_to_metric_families(text):
        name = f"{fam.name}_total" if fam.type == "counter" else fam.name
        declared = {**FAMILIES, **LOOP_FAMILIES}[name]
        assert (fam.type, fam.documentation) == (declared.type, declared.help), name
        assert name not in out, f"{name} announced twice"
        out[name] = fam
    return out


def series(fams: dict[str, Metric], name: str) -> dict[tuple, float]:
    return {tuple(sorted(s.labels.items())): s.value for s in fams[name].samples} if name in fams else {}


def test_a_snapshot_reads_back_as_it_was_written(tmp_path):
    assert load_loop_snapshot(tmp_path) is None
    save_loop_snapshot(tmp_path, SNAPSHOT)
    assert load_loop_snapshot(tmp_path) == SNAPSHOT
    assert [p.name for p in tmp_path.iterdir()] == [STATE_FILE]  # no temporary file left


def test_the_gauges_show_the_last_snapshot_only(tmp_path):
    writer = MetricsWriter(tmp_path)
    save_loop_snapshot(writer.multiprocess_dir, SNAPSHOT)
    fams = families(writer.flush().read_text())
    trips = {"catalog": "demo", "namespace": "taxi", "table": "trips"}
    orders = {"catalog": "demo", "namespace": "sales", "table": "orders"}
    assert series(fams, "icelake_table_run_in_flight_seconds") == {
        tuple(sorted({**trips, "run_id": "run-1", "run_status": "STARTED"}.items())): 7200.0,
        tuple(sorted({**orders, "run_id": "run-2", "run_status": "QUEUED"}.items())): 1000.0,
    }
    # orders has no successful run to compare with: no typical series (the alert's 1-hour rule).
    assert series(fams, "icelake_table_run_typical_seconds") == {tuple(sorted(trips.items())): 600.0}
    assert series(fams, "icelake_runs_queued") == {(): 1.0}
    assert series(fams, "icelake_oldest_queued_run_seconds") == {(): 1000.0}
    assert series(fams, "icelake_runs_in_progress") == {(): 1.0}

    # trips' run ended, orders' started: trips is gone (not left at 7200 s), orders changed status.
    running = TableInFlight("demo.sales.orders", "run-2", "STARTED", 5.0)
    save_loop_snapshot(writer.multiprocess_dir, LoopSnapshot((running,), runs_in_progress=1))
    for text in (writer.flush().read_text(), writer.render()):  # the textfile and a scrape
        fams = families(text)
        assert series(fams, "icelake_table_run_in_flight_seconds") == {
            tuple(sorted({**orders, "run_id": "run-2", "run_status": "STARTED"}.items())): 5.0
        }
        assert series(fams, "icelake_table_run_typical_seconds") == {}
        assert series(fams, "icelake_runs_queued") == {(): 0.0}
        assert series(fams, "icelake_oldest_queued_run_seconds") == {(): 0.0}


def test_no_snapshot_no_loop_gauges_and_a_bad_one_is_logged_not_raised(tmp_path, caplog):
    writer = MetricsWriter(tmp_path)
    writer.inc("icelake_orphan_files_removed_total", 1, catalog="demo", namespace="taxi", table="trips")
    assert not set(families(writer.render())) & set(LOOP_FAMILIES)  # silent until the sensor's first tick
    (writer.multiprocess_dir / STATE_FILE).write_text('{"tables": [')
    with caplog.at_level(logging.WARNING):
        fams = families(writer.flush().read_text())
    assert "icelake_orphan_files_removed_total" in fams and not set(fams) & set(LOOP_FAMILIES)
    assert f"{STATE_FILE}: loop state not exported" in caplog.text


def test_write_loop_metrics_replaces_the_state_for_scrapes_and_the_next_flush(make_lake):
    settings = make_lake(extra={"metrics": {"textfile_dir": "prom"}})
    assert write_loop_metrics(settings, SNAPSHOT) is None
    metrics = MetricsWriter.from_settings(settings)
    assert len(series(families(metrics.render()), "icelake_table_run_in_flight_seconds")) == 2
    # The textfile shows it from the next flush: the heartbeat's, later in the same sensor tick.
    assert not metrics.path.exists()
    assert len(series(families(metrics.flush().read_text()), "icelake_table_run_in_flight_seconds")) == 2
    assert write_loop_metrics(settings, LoopSnapshot()) is None
    fams = families(metrics.flush().read_text())
    assert series(fams, "icelake_table_run_in_flight_seconds") == {}
    assert series(fams, "icelake_runs_in_progress") == {(): 0.0}
    path = metrics.path
    # Best effort: a state that cannot be written is reported, never raised into the sensor's tick.
    state = path.parent / "multiprocess" / STATE_FILE
    state.unlink()
    state.mkdir()
    assert "Is a directory" in (write_loop_metrics(settings, SNAPSHOT) or "")


def test_the_lag_per_table_is_exported_and_forgotten_once_maintained(tmp_path):
    """icelake_table_maintenance_lag_seconds: since each waiting table's finding started failing."""
    writer = MetricsWriter(tmp_path)
    lagging = LoopSnapshot(
        lags=(
            TableLag("demo.taxi.trips", "queued_by_priority", 5400.0),
            TableLag("demo.sales.orders", "held", 60.0),
        )
    )
    save_loop_snapshot(writer.multiprocess_dir, lagging)
    assert load_loop_snapshot(writer.multiprocess_dir) == lagging
    trips = {"catalog": "demo", "namespace": "taxi", "table": "trips", "outcome": "queued_by_priority"}
    orders = {"catalog": "demo", "namespace": "sales", "table": "orders", "outcome": "held"}
    for text in (writer.flush().read_text(), writer.render()):  # the textfile and a scrape
        assert series(families(text), "icelake_table_maintenance_lag_seconds") == {
            tuple(sorted(trips.items())): 5400.0,
            tuple(sorted(orders.items())): 60.0,
        }
    save_loop_snapshot(
        writer.multiprocess_dir, LoopSnapshot(lags=(TableLag("demo.sales.orders", "held", 120.0),))
    )
    assert series(families(writer.render()), "icelake_table_maintenance_lag_seconds") == {
        tuple(sorted(orders.items())): 120.0
    }


def test_a_snapshot_written_before_lags_were_exported_reads_with_none(tmp_path):
    (tmp_path / STATE_FILE).write_text(
        '{"tables": [], "runs_queued": 0, "oldest_queued_seconds": 0.0, "runs_in_progress": 0}'
    )
    assert load_loop_snapshot(tmp_path) == LoopSnapshot()
