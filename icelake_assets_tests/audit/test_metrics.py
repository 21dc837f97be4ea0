"""Prometheus metrics: strict parsing of the exposition text, counters that add up across writers and
processes, atomic replacement of the .prom file, audit records mapped to metrics, the HTTP endpoint."""

import json
import math
import multiprocessing
import os
import re
import stat
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from icelake_assets.audit import AuditRecord
from icelake_assets.audit.metrics import CONTENT_TYPE, FAMILIES, MetricsError, MetricsWriter, serve_metrics
from icelake_assets.settings import load_settings

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
_VALUE = r"[+-]?(?:Inf|NaN|[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)"
_SAMPLE = re.compile(rf"^({_NAME})(\{{(.*)\}})? ({_VALUE})$")
_PAIR = re.compile(rf'({_LABEL})="((?:[^"\\\n]|\\[\\"n])*)"')


def _unescape(v: str) -> str:
    return re.sub(r"\\([\\\"n])", lambda m: "\n" if m.group(1) == "n" else m.group(1), v)


def parse(text: str) -> dict[str, dict]:
    """A strict parser of the text format 0.0.4: every rule a scraper relies on is asserted.

    Returns {family: {"type", "help", "samples": {(sample_name, ((label, value), ...)): float}}}."""
    assert text.endswith("\n"), "the last line must end with a newline"
    families: dict[str, dict] = {}
    current = None
    for n, line in enumerate(text[:-1].split("\n"), 1):
        where = f"line {n}: {line!r}"
        if line.startswith("# HELP "):
            name, _, help_ = line[7:].partition(" ")
            assert re.fullmatch(_NAME, name) and help_, where
            assert name not in families, f"{where}: second HELP for {name}"
            families[name] = {"help": help_, "type": None, "samples": {}}
            current = name
        elif line.startswith("# TYPE "):
            name, _, type_ = line[7:].partition(" ")
            assert name == current and families[name]["type"] is None and not families[name]["samples"], where
            assert type_ in ("counter", "gauge", "histogram", "summary", "untyped"), where
            families[name]["type"] = type_
        else:
            assert not line.startswith("#") and line.strip(), f"{where}: stray comment or blank line"
            m = _SAMPLE.match(line)
            assert m, f"{where}: not a sample"
            sample, label_text, value = m.group(1), m.group(3) or "", m.group(4)
            assert current is not None and families[current]["type"], f"{where}: sample before HELP/TYPE"
            fam = families[current]
            allowed = (
                {current}
                if fam["type"] != "histogram"
                else {f"{current}_{s}" for s in ("bucket", "sum", "count")}
            )
            assert sample in allowed, f"{where}: sample {sample} outside its family {current}"
            pairs = _PAIR.findall(label_text)
            assert ",".join(f'{k}="{v}"' for k, v in pairs) == label_text, f"{where}: malformed labels"
            labels = tuple((k, _unescape(v)) for k, v in pairs)
            assert len({k for k, _ in labels}) == len(labels), f"{where}: repeated label"
            key = (sample, labels)
            assert key not in fam["samples"], f"{where}: duplicate series"
            fam["samples"][key] = float(value.replace("Inf", "inf"))
    for name, fam in families.items():
        assert fam["type"], f"{name} has no TYPE"
        if fam["type"] == "counter":
            assert name.endswith("_total") and all(v >= 0 for v in fam["samples"].values()), name
        if fam["type"] == "histogram":
            _check_histogram(name, fam["samples"])
    return families


def _check_histogram(name: str, samples: dict) -> None:
    series: dict[tuple, list] = {}
    for (sample, labels), v in samples.items():
        if sample.endswith("_bucket"):
            le = dict(labels)["le"]
            series.setdefault(tuple(p for p in labels if p[0] != "le"), []).append(
                (float(le.replace("Inf", "inf")), v)
            )
    for labels, buckets in series.items():
        counts = [v for _, v in sorted(buckets)]
        assert counts == sorted(counts), f"{name}{labels}: buckets not cumulative"
        assert sorted(buckets)[-1][0] == math.inf, f"{name}{labels}: no +Inf bucket"
        assert counts[-1] == samples[(f"{name}_count", labels)], f"{name}{labels}: +Inf bucket != count"
        assert (f"{name}_sum", labels) in samples


def value(families: dict, name: str, sample: str | None = None, **labels: str) -> float:
    want = tuple(sorted(labels.items()))
    for (s, ls), v in families[name]["samples"].items():
        if s == (sample or name) and tuple(sorted(ls)) == want:
            return v
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


def test_every_family_is_announced_even_before_any_sample(tmp_path):
    with MetricsWriter(tmp_path) as m:
        pass
    families = parse(m.path.read_text())
    assert list(families) == list(FAMILIES)
    assert value(families, "icelake_metrics_updated_timestamp_seconds") > 1.7e9


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
    assert value(f, "icelake_op_duration_seconds", "icelake_op_duration_seconds_bucket", **dur, le="5") == 0
    assert value(f, "icelake_op_duration_seconds", "icelake_op_duration_seconds_bucket", **dur, le="15") == 1
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
    # A new instance (a new process, a restart) continues from the stored totals.
    fresh = MetricsWriter(tmp_path)
    assert (
        parse(fresh.render())
        and value(parse(fresh.render()), "icelake_files_compacted_total", **T, op="rewrite_data_files") == 720
    )


def test_two_processes_flushing_at_once_lose_no_increment(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_flush_many, args=(str(tmp_path), 100, start)) for _ in range(2)]
    for p in procs:
        p.start()
    start.set()  # both flush in the same moment: without the lock, read-modify-write loses increments
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    f = parse((tmp_path / "icelake.prom").read_text())
    assert value(f, "icelake_decisions_total", **T, outcome="deferred") == 200


def _flush_many(folder: str, n: int, start) -> None:
    start.wait(60)
    for _ in range(n):
        m = MetricsWriter(folder)
        m.inc("icelake_decisions_total", outcome="deferred", **T)
        m.flush()


def test_readers_only_ever_see_a_complete_file(tmp_path):
    m = MetricsWriter(tmp_path)
    m.flush()
    stop, reads, errors = threading.Event(), [], []

    def read() -> None:
        while not stop.is_set():
            try:
                reads.append(parse(m.path.read_text()))
            except AssertionError as err:
                errors.append(err)

    reader = threading.Thread(target=read)
    reader.start()
    for i in range(150):  # a growing file: a partial read would lose its last lines or end mid-line
        m.inc("icelake_orphan_files_removed_total", 1, catalog="demo", namespace=f"ns{i}", table="t")
        m.flush()
    stop.set()
    reader.join()
    assert errors == [] and len(reads) > 10
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".icelake.prom.lock",
        ".icelake.prom.state.json",
        "icelake.prom",
    ]  # no temp file left behind
    assert stat.S_IMODE(m.path.stat().st_mode) == 0o644


def test_a_failed_write_keeps_the_old_file_and_the_updates(tmp_path, monkeypatch):
    m = MetricsWriter(tmp_path)
    m.inc("icelake_orphan_files_removed_total", 2, **T)
    m.flush()
    before = m.path.read_text()
    m.inc("icelake_orphan_files_removed_total", 3, **T)
    real_replace = os.replace

    def disk_full(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    with pytest.raises(OSError, match="No space left"):
        m.flush()
    assert m.path.read_text() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []
    monkeypatch.setattr(os, "replace", real_replace)
    assert value(parse(m.flush().read_text()), "icelake_orphan_files_removed_total", **T) == 5


def test_labels_are_escaped(tmp_path):
    with MetricsWriter(tmp_path) as m:
        m.inc("icelake_orphan_files_removed_total", 1, catalog="c", namespace='a"b\\c\nd', table="t")
    f = parse(m.path.read_text())
    assert value(f, "icelake_orphan_files_removed_total", catalog="c", namespace='a"b\\c\nd', table="t") == 1


def test_an_unreadable_state_is_set_aside_and_counting_restarts(tmp_path):
    m = MetricsWriter(tmp_path)
    m.state_path.write_text("{not json")
    m.inc("icelake_orphan_files_removed_total", 1, **T)
    f = parse(m.flush().read_text())
    assert value(f, "icelake_orphan_files_removed_total", **T) == 1
    assert [p.read_text() for p in tmp_path.glob(".icelake.prom.state.json.corrupt-*")] == ["{not json"]
    assert json.loads(m.state_path.read_text())["version"] == 1


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
    assert m._pending == []


def test_the_file_name_must_be_one_the_collector_reads(tmp_path):
    with pytest.raises(MetricsError, match="ending in .prom"):
        MetricsWriter(tmp_path, "icelake.txt")


def test_the_folder_comes_from_settings_relative_to_the_file(make_lake):
    settings = make_lake(extra={"metrics": {"textfile_dir": "prom"}})
    m = MetricsWriter.from_settings(settings)
    assert m.path == Path(settings.source).parent / "prom" / "icelake.prom"
    assert load_settings(settings.source).metrics.textfile_dir == str(Path(settings.source).parent / "prom")


def test_http_endpoint_on_loopback(tmp_path):
    m = MetricsWriter(tmp_path)
    server = serve_metrics(m.path, port=0)
    try:
        host, port = server.server_address[:2]
        assert host == "127.0.0.1"
        with pytest.raises(urllib.error.HTTPError, match="503"):
            urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5)
        m.inc("icelake_orphan_files_removed_total", 7, **T)
        m.flush()
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as resp:
            assert resp.headers["Content-Type"] == CONTENT_TYPE
            assert value(parse(resp.read().decode()), "icelake_orphan_files_removed_total", **T) == 7
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://{host}:{port}/", timeout=5)
    finally:
        server.shutdown()
        server.server_close()
