"""Prometheus metrics on prometheus_client: audit records mapped to metrics, the textfile read back with
prometheus_client's own parser, counters that add up across writers and processes (multiprocess mode),
atomic replacement of the .prom file, the HTTP endpoint a setting starts."""

import math
import multiprocessing
import os
import socket
import stat
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from icelake_assets.audit import AuditRecord
from icelake_assets.audit.metrics import (
    FAMILIES,
    MetricsError,
    MetricsWriter,
    one_textfile_write,
    record_health,
    record_sensor_tick,
    serve_http,
    stop_http,
)
from icelake_assets.health.score import HealthStatus
from icelake_assets.settings import load_settings


def parse(text: str) -> dict[str, Metric]:
    """The families of an exposition text, by their exported name, parsed by prometheus_client; each
    must be one this product declares, with its type and help, and histograms must be consistent."""
    assert text.endswith("\n"), "the last line must end with a newline"
    families: dict[str, Metric] = {}
    for fam in text_string_to_metric_families(text):
        name = f"{fam.name}_total" if fam.type == "counter" else fam.name
        assert name not in families, f"{name} announced twice"
        declared = FAMILIES[name]
        assert (fam.type, fam.documentation) == (declared.type, declared.help), name
        assert "pid" not in {k for s in fam.samples for k in s.labels}, f"{name}: per-process series"
        families[name] = fam
        if fam.type == "histogram":
            _check_histogram(name, fam)
    return families


def _check_histogram(name: str, fam: Metric) -> None:
    series: dict[tuple, list[tuple[float, float]]] = {}
    for s in fam.samples:
        if s.name.endswith("_bucket"):
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            series.setdefault(key, []).append((float(s.labels["le"]), s.value))
    for key, buckets in series.items():
        counts = [v for _, v in sorted(buckets)]
        assert counts == sorted(counts), f"{name}{key}: buckets not cumulative"
        assert sorted(buckets)[-1][0] == math.inf, f"{name}{key}: no +Inf bucket"
        assert counts[-1] == value({name: fam}, name, f"{name}_count", **dict(key)), (
            f"{name}{key}: +Inf != count"
        )


def value(families: dict[str, Metric], name: str, sample: str | None = None, **labels: str) -> float:
    for s in families[name].samples:
        if s.name == (sample or name) and s.labels == labels:
            return s.value
    raise KeyError(f"{sample or name}{labels}")


T = {"catalog": "demo", "namespace": "taxi", "table": "trips"}


def _rewrite(**kw) -> AuditRecord:
    return AuditRecord(
        **{
            **dict(
                table_name="demo.taxi.trips",
                kind="op",
                decision="acted",
                trigger="sensor",
                op="rewrite_data_files",
                duration_s=7.5,
                partitions=("d=1", "d=2", "d=3"),
                failed_partitions=("d=3",),
                results={
                    "rewritten_data_files_count": 180,
                    "added_data_files_count": 6,
                    "rewritten_bytes_count": 1_000_000,
                    "failed_data_files_count": 0,
                },
            ),
            **kw,
        }
    )


def test_every_family_parses_with_prometheus_clients_parser(tmp_path):
    with MetricsWriter(tmp_path) as m:
        m.record(_rewrite())
        m.record(
            AuditRecord(
                "demo.taxi.trips",
                "op",
                "acted",
                "sensor",
                op="expire_snapshots",
                results={"snapshots_expired": 2, "deleted_data_files_count": 1},
            )
        )
        m.record(
            AuditRecord(
                "demo.taxi.trips",
                "op",
                "acted",
                "sensor",
                op="remove_orphan_files",
                results={"orphans_removed": 1},
            )
        )
        m.record(
            AuditRecord(
                "demo.taxi.trips",
                "op",
                "acted",
                "sensor",
                op="rewrite_manifests",
                results={"rewritten_manifests_count": 1},
            )
        )
        m.record(AuditRecord("demo.taxi.trips", "validation", "passed", "sensor", op="validate"))
        m.record(AuditRecord("demo.taxi.trips", "rollback", "refused", "sensor"))
        m.record(AuditRecord("demo.taxi.trips", "decision", "held", "sensor"))
        m.run_finished("demo.taxi.trips", "partial", 1.0)
        m.health("demo.taxi.trips", HealthStatus.WARNING, 70)
        m.sensor_ticked("icelake_maintenance_sensor")
    families = parse(m.path.read_text())
    assert set(families) == set(FAMILIES)
    assert time.time() - value(families, "icelake_metrics_updated_timestamp_seconds") < 60


def test_audit_records_become_metrics(tmp_path):
    with MetricsWriter(tmp_path) as m:
        m.record(_rewrite())
        m.record(
            AuditRecord(
                "demo.taxi.trips",
                "op",
                "acted",
                "sensor",
                op="expire_snapshots",
                duration_s=0.5,
                results={
                    "snapshots_before": 30,
                    "snapshots_after": 5,
                    "deleted_data_files_count": 12,
                    "deleted_manifest_files_count": 3,
                    "deleted_manifest_lists_count": 25,
                },
            )
        )
        m.record(
            AuditRecord(
                "demo.taxi.trips",
                "op",
                "acted",
                "sensor",
                op="remove_orphan_files",
                results={"orphans_found": 4, "orphans_removed": 4},
            )
        )
        m.record(
            AuditRecord(
                "demo.taxi.trips",
                "op",
                "acted",
                "sensor",
                op="rewrite_manifests",
                results={"rewritten_manifests_count": 9, "added_manifests_count": 1},
            )
        )
        m.record(
            AuditRecord("demo.taxi.trips", "op", "skipped", "sensor", op="rewrite_manifests", duration_s=0.01)
        )
        m.record(
            AuditRecord(
                "demo.taxi.trips",
                "op",
                "failed",
                "manual",
                op="rewrite_position_delete_files",
                partitions=("d=4", "d=5"),
            )
        )
        m.record(
            AuditRecord(
                "demo.taxi.trips",
                "validation",
                "partial",
                "sensor",
                op="validate",
                partitions=("d=1", "d=2"),
                failed_partitions=("d=2",),
            )
        )
        m.record(AuditRecord("demo.taxi.trips", "rollback", "rolled_back", "sensor", rolled_back_to=1))
        for decision in ("deferred", "deferred", "held"):
            m.record(AuditRecord("demo.sales.orders", "decision", decision, "sensor"))
        m.record(AuditRecord("demo.taxi.trips", "decision", "launched", "sensor"))
        m.run_finished("demo.taxi.trips", "succeeded", 42.0, finished_at=1_800_000_000)
    f = parse(m.path.read_text())
    rw = {**T, "op": "rewrite_data_files"}
    assert value(f, "icelake_files_compacted_total", **rw) == 180
    assert value(f, "icelake_files_added_total", **rw) == 6
    assert value(f, "icelake_bytes_rewritten_total", **rw) == 1_000_000
    assert value(f, "icelake_snapshots_expired_total", **T) == 25
    assert value(f, "icelake_expired_files_deleted_total", **T) == 40
    assert value(f, "icelake_orphan_files_removed_total", **T) == 4
    assert value(f, "icelake_manifests_rewritten_total", **T) == 9
    assert value(f, "icelake_partitions_total", **rw, outcome="succeeded") == 2
    assert value(f, "icelake_partitions_total", **rw, outcome="failed") == 1
    assert (
        value(f, "icelake_partitions_total", **T, op="rewrite_position_delete_files", outcome="failed") == 2
    )
    assert value(f, "icelake_partitions_total", **T, op="validate", outcome="failed") == 1
    assert value(f, "icelake_ops_total", **T, op="rewrite_manifests", outcome="skipped") == 1
    assert value(f, "icelake_ops_total", **T, op="rewrite_position_delete_files", outcome="failed") == 1
    assert value(f, "icelake_validations_total", **T, outcome="partial") == 1
    assert value(f, "icelake_rollbacks_total", **T, outcome="rolled_back") == 1
    orders = {**T, "namespace": "sales", "table": "orders"}
    assert value(f, "icelake_decisions_total", **orders, outcome="deferred") == 2
    assert value(f, "icelake_decisions_total", **orders, outcome="held") == 1
    assert value(f, "icelake_awaiting_approval", **orders) == 1
    assert value(f, "icelake_awaiting_approval", **T) == 0
    dur = {**rw, "outcome": "acted"}
    assert value(f, "icelake_op_duration_seconds", "icelake_op_duration_seconds_bucket", **dur, le="5.0") == 0
    assert (
        value(f, "icelake_op_duration_seconds", "icelake_op_duration_seconds_bucket", **dur, le="15.0") == 1
    )
    assert value(f, "icelake_op_duration_seconds", "icelake_op_duration_seconds_sum", **dur) == 7.5
    run = {**T, "outcome": "succeeded"}
    assert value(f, "icelake_run_duration_seconds", "icelake_run_duration_seconds_count", **run) == 1
    assert value(f, "icelake_last_run_timestamp_seconds", **run) == 1_800_000_000


def test_counters_add_up_across_two_writer_instances(tmp_path):
    a, b = MetricsWriter(tmp_path), MetricsWriter(tmp_path)
    seen = []
    for writer in (a, b, a, b):
        writer.record(_rewrite())
        writer.run_finished("demo.taxi.trips", "failed", 3.0)
        seen.append(parse(writer.flush().read_text()))
    compacted = [value(f, "icelake_files_compacted_total", **T, op="rewrite_data_files") for f in seen]
    assert compacted == [180, 360, 540, 720]
    runs = [
        value(f, "icelake_run_duration_seconds", "icelake_run_duration_seconds_count", **T, outcome="failed")
        for f in seen
    ]
    assert runs == [1, 2, 3, 4]
    fresh = MetricsWriter(tmp_path)
    assert value(parse(fresh.render()), "icelake_files_compacted_total", **T, op="rewrite_data_files") == 720


def test_flushes_inside_one_textfile_write_rewrite_the_textfile_once_at_its_end(tmp_path):
    """A run's validation writes each table's audit: the counts go to the files at once (a scrape sees
    them), the textfile is rewritten once, when the run's tables are all written."""
    writer = MetricsWriter(tmp_path)
    writer.record(_rewrite())
    before = writer.flush().read_text()
    with one_textfile_write():
        for _ in range(3):
            MetricsWriter(tmp_path).record(_rewrite())
            MetricsWriter(tmp_path).flush()
        with one_textfile_write():  # nested: the outer block writes
            MetricsWriter(tmp_path).run_finished("demo.taxi.trips", "failed", 3.0)
            MetricsWriter(tmp_path).flush()
        assert writer.path.read_text() == before  # not rewritten yet
        compacted = value(
            parse(writer.render()), "icelake_files_compacted_total", **T, op="rewrite_data_files"
        )
        assert compacted == 720  # the endpoint's view: every update already counted
    after = parse(writer.path.read_text())
    assert value(after, "icelake_files_compacted_total", **T, op="rewrite_data_files") == 720
    runs = "icelake_run_duration_seconds_count"
    assert value(after, "icelake_run_duration_seconds", runs, **T, outcome="failed") == 1


def test_two_processes_counts_add_up_in_multiprocess_mode(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_count_many, args=(str(tmp_path), 100, start)) for _ in range(2)]
    for p in procs:
        p.start()
    start.set()  # both count and write the textfile in the same moment
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    # Each process kept its own counter file; every reader sums them, after the processes are gone.
    pids = {p.pid for p in procs}
    assert {f"counter_{pid}.db" for pid in pids} <= set(os.listdir(tmp_path / "multiprocess"))
    assert (
        value(
            parse((tmp_path / "icelake.prom").read_text()), "icelake_decisions_total", **T, outcome="deferred"
        )
        >= 100
    )
    m = MetricsWriter(tmp_path)
    m.inc("icelake_decisions_total", outcome="deferred", **T)  # this process goes on from the sum
    assert value(parse(m.flush().read_text()), "icelake_decisions_total", **T, outcome="deferred") == 201


def _count_many(folder: str, n: int, start) -> None:
    start.wait(60)
    for _ in range(n):
        m = MetricsWriter(folder)
        m.inc("icelake_decisions_total", outcome="deferred", **T)
        m.flush()


def test_a_gauge_shows_the_most_recent_state_whichever_process_wrote_it(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    m = MetricsWriter(tmp_path)
    awaiting = lambda: value(parse(m.render()), "icelake_awaiting_approval", **T)  # noqa: E731
    _in_process(ctx, tmp_path, "held")
    assert awaiting() == 1
    m.record(AuditRecord("demo.taxi.trips", "decision", "launched", "sensor"))  # approved, launched here
    assert awaiting() == 0
    _in_process(ctx, tmp_path, "held")  # held again, by another process: older files must not win
    assert awaiting() == 1


def _in_process(ctx, folder: Path, decision: str) -> None:
    p = ctx.Process(target=_decide, args=(str(folder), decision))
    p.start()
    p.join(timeout=120)
    assert p.exitcode == 0


def _decide(folder: str, decision: str) -> None:
    MetricsWriter(folder).record(AuditRecord("demo.taxi.trips", "decision", decision, "sensor"))


def test_readers_only_ever_see_a_complete_file(tmp_path):
    m = MetricsWriter(tmp_path)
    m.flush()
    stop, reads, errors = threading.Event(), [], []

    def read() -> None:
        while not stop.is_set():
            try:
                f = parse(m.path.read_text())
                # The series are written at once: a partial read would miss some of them.
                namespaces = {
                    s.labels["namespace"]
                    for s in f.get("icelake_orphan_files_removed_total", Metric("x", "", "counter")).samples
                }
                assert namespaces == {f"ns{i}" for i in range(len(namespaces))}, namespaces
                assert "icelake_metrics_updated_timestamp_seconds" in f
                reads.append(len(namespaces))
            except (AssertionError, ValueError) as err:
                errors.append(err)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(150):  # a growing file: a partial read would lose its last lines or end mid-line
        m.inc("icelake_orphan_files_removed_total", 1, catalog="demo", namespace=f"ns{i}", table="t")
        m.flush()
    stop.set()
    reader.join()
    assert errors == [] and len(reads) > 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["icelake.prom", "multiprocess"]  # no temp file
    assert stat.S_IMODE(m.path.stat().st_mode) == 0o644


def test_a_failed_write_keeps_the_old_file_and_the_updates(tmp_path, monkeypatch):
    m = MetricsWriter(tmp_path)
    m.inc("icelake_orphan_files_removed_total", 2, **T)
    m.flush()
    before = m.path.read_text()
    m.inc("icelake_orphan_files_removed_total", 3, **T)

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "rename", disk_full)  # write_to_textfile's atomic step
    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        m.flush()
    assert m.path.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["icelake.prom", "multiprocess"]
    monkeypatch.undo()
    assert value(parse(m.flush().read_text()), "icelake_orphan_files_removed_total", **T) == 5


def test_labels_are_escaped(tmp_path):
    with MetricsWriter(tmp_path) as m:
        m.inc("icelake_orphan_files_removed_total", 1, catalog="c", namespace='a"b\\c\nd', table="t")
    f = parse(m.path.read_text())
    assert value(f, "icelake_orphan_files_removed_total", catalog="c", namespace='a"b\\c\nd', table="t") == 1


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m.inc("icelake_nope_total", catalog="c"), "unknown metric 'icelake_nope_total'"),
        (lambda m: m.inc("icelake_orphan_files_removed_total", catalog="c"), "takes labels"),
        (lambda m: m.inc("icelake_orphan_files_removed_total", -1, **T), "counters never go down"),
        (lambda m: m.inc("icelake_orphan_files_removed_total", math.nan, **T), "finite number"),
        (lambda m: m.inc("icelake_orphan_files_removed_total", 1, **{**T, "table": ""}), "non-empty strings"),
        (lambda m: m.set("icelake_orphan_files_removed_total", 1, **T), "is a counter: use inc()"),
        (lambda m: m.inc("icelake_awaiting_approval", 1, **T), "is a gauge: use set()"),
        (lambda m: m.run_finished("demo.taxi.trips", "great", 1.0), "run outcome must be one of"),
        (lambda m: m.run_finished("trips", "failed", 1.0), "invalid table name 'trips'"),
        (lambda m: m.record({"kind": "op"}), "expected an AuditRecord"),
    ],
)
def test_bad_updates_are_refused_clearly(tmp_path, call, message):
    m = MetricsWriter(tmp_path)
    with pytest.raises(ValueError, match=message):
        call(m)
    assert list(text_string_to_metric_families(m.render())) == []  # nothing recorded


def test_the_file_name_must_be_one_the_collector_reads(tmp_path):
    with pytest.raises(MetricsError, match="ending in .prom"):
        MetricsWriter(tmp_path, "icelake.txt")


def test_the_folder_comes_from_settings_relative_to_the_file(make_lake):
    settings = make_lake(extra={"metrics": {"textfile_dir": "prom"}})
    m = MetricsWriter.from_settings(settings)
    assert m.path == Path(settings.source).parent / "prom" / "icelake.prom"
    assert m.multiprocess_dir == Path(settings.source).parent / "prom" / "multiprocess"
    assert m.textfile and settings.metrics.http_port is None
    assert load_settings(settings.source).metrics.textfile_dir == str(Path(settings.source).parent / "prom")


def test_health_and_the_sensor_heartbeat(make_lake, monkeypatch, caplog):
    settings = make_lake(extra={"metrics": {"textfile_dir": "prom"}})
    record_sensor_tick(settings, "icelake_maintenance_sensor")
    record_health(settings, "demo.taxi.trips", HealthStatus.CRITICAL, 31)
    f = parse(MetricsWriter.from_settings(settings).path.read_text())
    tick = value(f, "icelake_sensor_last_tick_timestamp_seconds", sensor="icelake_maintenance_sensor")
    assert 0 <= time.time() - tick < 60
    # A health update is not flushed per table (a check run of 10,000 tables): scrapes see it at once,
    # the textfile at the next flush (the maintenance sensor's tick).
    assert "icelake_health_score" not in f
    f = parse(MetricsWriter.from_settings(settings).render())
    assert value(f, "icelake_health_score", **T) == 31
    status = {s.labels["status"]: s.value for s in f["icelake_health_status"].samples}
    assert status == {"Healthy": 0, "Warning": 0, "Critical": 1, "Unknown": 0}
    # Best effort: a full disk is logged, never raised into the sensor's tick or the check.
    disk_full = lambda self, *a: (_ for _ in ()).throw(OSError(28, "disk full"))  # noqa: E731
    monkeypatch.setattr(MetricsWriter, "flush", disk_full)
    monkeypatch.setattr(MetricsWriter, "health", disk_full)
    record_sensor_tick(settings, "icelake_maintenance_sensor")
    record_health(settings, "demo.taxi.trips", HealthStatus.HEALTHY, 90)
    assert (
        "sensor icelake_maintenance_sensor heartbeat: metric not written: [Errno 28] disk full" in caplog.text
    )
    assert "demo.taxi.trips health: metric not written: [Errno 28] disk full" in caplog.text


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port: int) -> tuple[str, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.headers["Content-Type"], resp.read().decode()


def test_the_http_endpoint_a_setting_starts(make_lake, tmp_path):
    port = _free_port()
    settings = make_lake(extra={"metrics": {"textfile_dir": "prom", "http_port": port, "textfile": False}})
    try:
        m = MetricsWriter.from_settings(settings)
        m.inc("icelake_orphan_files_removed_total", 7, **T)
        content_type, text = _scrape(port)  # no flush: a scrape reads the processes' files itself
        assert content_type.startswith("text/plain")
        assert value(parse(text), "icelake_orphan_files_removed_total", **T) == 7
        server = serve_http(m.multiprocess_dir, port)
        assert server is not None and server.server_address[0] == "127.0.0.1"
        MetricsWriter.from_settings(settings).inc("icelake_orphan_files_removed_total", 1, **T)
        assert serve_http(m.multiprocess_dir, port) is server  # once per process
        assert value(parse(_scrape(port)[1]), "icelake_orphan_files_removed_total", **T) == 8
        m.flush()
        assert not m.path.exists()  # textfile: false
    finally:
        stop_http(port)
    with pytest.raises(urllib.error.URLError):
        _scrape(port)


def test_a_taken_port_does_not_stop_the_writer(make_lake):
    with socket.socket() as taken:  # another process of the lake already serves it
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = make_lake(extra={"metrics": {"textfile_dir": "prom", "http_port": port}})
        m = MetricsWriter.from_settings(settings)
        assert serve_http(m.multiprocess_dir, port) is None
        m.inc("icelake_orphan_files_removed_total", 1, **T)
        assert value(parse(m.flush().read_text()), "icelake_orphan_files_removed_total", **T) == 1


def test_a_file_another_process_is_creating_does_not_fail_a_flush(tmp_path):
    """Between its creation and its first page another process's counter file is empty: a flush that
    met it raised struct.error (make test, under load, with two processes counting at once)."""
    m = MetricsWriter(tmp_path)
    m.inc("icelake_decisions_total", outcome="deferred", **T)
    (tmp_path / "multiprocess" / "counter_999999.db").write_bytes(b"")
    assert value(parse(m.flush().read_text()), "icelake_decisions_total", **T, outcome="deferred") == 1
