"""Maintenance metrics in the Prometheus text exposition format (version 0.0.4).

The product runs in many short processes (sensor ticks in the daemon, runs in their own processes),
so the counters live in a small JSON state file next to the output, not in memory: each flush takes
a file lock, adds its pending increments to the stored totals, rewrites the state and renders the
``.prom`` file. Counters therefore only grow, across processes and restarts. Both files are written
to a temporary file in the same folder and renamed over the old one, so a node exporter's textfile
collector (``--collector.textfile.directory``) never reads half a file; ``serve_metrics`` offers the
same text over HTTP for a direct scrape.

Typical use, from an op or a sensor::

    with MetricsWriter.from_settings(settings) as metrics:  # flushes once on exit
        metrics.record(audit_record)  # any AuditRecord: decision, op, ...
        metrics.run_finished("demo.taxi.trips", "succeeded", 12.5)
"""

from __future__ import annotations

import fcntl
import json
import logging
import math
import os
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from icelake_assets.audit.records import AuditRecord
from icelake_assets.catalog.connection import TableRef
from icelake_assets.settings import Settings
from icelake_assets.types import IcelakeError

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_FILE = "icelake.prom"
STATE_VERSION = 1
# Maintenance takes seconds to an hour: buckets (seconds) wide enough for both.
DURATION_BUCKETS: tuple[float, ...] = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)
RUN_OUTCOMES = frozenset({"succeeded", "partial", "failed", "rolled_back"})

MetricType = Literal["counter", "gauge", "histogram"]
_TABLE = ("catalog", "namespace", "table")


@dataclass(frozen=True)
class Family:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "icelake_decisions_total",
            "counter",
            "Sensor decisions per table: launched, deferred (writers active), held (cost over the cap, awaiting "
            "approval), skipped.",
            (*_TABLE, "outcome"),
        ),
        Family(
            "icelake_ops_total",
            "counter",
            "Maintenance ops by outcome: acted, skipped, failed.",
            (*_TABLE, "op", "outcome"),
        ),
        Family(
            "icelake_files_compacted_total",
            "counter",
            "Data or delete files rewritten by compaction (the small input files).",
            (*_TABLE, "op"),
        ),
        Family(
            "icelake_files_added_total",
            "counter",
            "Files written by compaction (the compacted output files).",
            (*_TABLE, "op"),
        ),
        Family(
            "icelake_bytes_rewritten_total",
            "counter",
            "Bytes of the files rewritten by compaction.",
            (*_TABLE, "op"),
        ),
        Family(
            "icelake_snapshots_expired_total", "counter", "Snapshots removed by expire_snapshots.", _TABLE
        ),
        Family(
            "icelake_expired_files_deleted_total",
            "counter",
            "Data, delete and manifest files deleted because only expired snapshots referenced them.",
            _TABLE,
        ),
        Family(
            "icelake_orphan_files_removed_total",
            "counter",
            "Orphan files deleted by remove_orphan_files.",
            _TABLE,
        ),
        Family(
            "icelake_manifests_rewritten_total",
            "counter",
            "Manifests rewritten by rewrite_manifests.",
            _TABLE,
        ),
        Family(
            "icelake_partitions_total",
            "counter",
            "Partitions an op or validation worked on, by outcome: succeeded, failed.",
            (*_TABLE, "op", "outcome"),
        ),
        Family(
            "icelake_validations_total",
            "counter",
            "Validations after a rewrite: passed, partial, failed.",
            (*_TABLE, "outcome"),
        ),
        Family(
            "icelake_rollbacks_total",
            "counter",
            "Rollbacks after a failed validation: rolled_back, refused (a later commit exists), failed.",
            (*_TABLE, "outcome"),
        ),
        Family(
            "icelake_op_duration_seconds",
            "histogram",
            "Duration of maintenance ops.",
            (*_TABLE, "op", "outcome"),
            DURATION_BUCKETS,
        ),
        Family(
            "icelake_run_duration_seconds",
            "histogram",
            "Duration of maintenance runs: succeeded, partial, failed, rolled_back.",
            (*_TABLE, "outcome"),
            DURATION_BUCKETS,
        ),
        Family(
            "icelake_awaiting_approval",
            "gauge",
            "1 while the table's last decision is held (cost over the cap, awaiting an operator's approval).",
            _TABLE,
        ),
        Family(
            "icelake_last_run_timestamp_seconds",
            "gauge",
            "Unix time the table's last maintenance run ended.",
            (*_TABLE, "outcome"),
        ),
        Family(
            "icelake_metrics_updated_timestamp_seconds", "gauge", "Unix time this file was last written.", ()
        ),
    )
}

# Iceberg procedure result columns (Spark 3.5, Iceberg 1.10) and the runner's own keys → counters.
_RESULT_COUNTERS: dict[str, str] = {
    "rewritten_data_files_count": "icelake_files_compacted_total",
    "rewritten_delete_files_count": "icelake_files_compacted_total",
    "added_data_files_count": "icelake_files_added_total",
    "added_delete_files_count": "icelake_files_added_total",
    "rewritten_bytes_count": "icelake_bytes_rewritten_total",
    "snapshots_expired": "icelake_snapshots_expired_total",
    "deleted_data_files_count": "icelake_expired_files_deleted_total",
    "deleted_position_delete_files_count": "icelake_expired_files_deleted_total",
    "deleted_equality_delete_files_count": "icelake_expired_files_deleted_total",
    "deleted_manifest_files_count": "icelake_expired_files_deleted_total",
    "deleted_manifest_lists_count": "icelake_expired_files_deleted_total",
    "deleted_statistics_files_count": "icelake_expired_files_deleted_total",
    "orphans_removed": "icelake_orphan_files_removed_total",
    "rewritten_manifests_count": "icelake_manifests_rewritten_total",
}


class MetricsError(IcelakeError, ValueError):
    """A metric update that cannot be recorded; the message names the metric and the cause."""


def table_labels(table: str | TableRef) -> dict[str, str]:
    ref = table if isinstance(table, TableRef) else TableRef.parse(str(table))
    return {"catalog": ref.catalog, "namespace": ref.namespace_name, "table": ref.name}


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _format_value(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v == int(v) and abs(v) < 2**53:
        return str(int(v))
    return repr(v)


def _escape_label(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n")


def _labels_text(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{_escape_label(v)}"' for k, v in pairs) + "}" if pairs else ""


def render(state: Mapping[str, Any]) -> str:
    """The exposition text of a state: HELP and TYPE once per family, samples sorted by labels."""
    lines: list[str] = []
    families = state.get("families", {})
    for fam in FAMILIES.values():
        series = families.get(fam.name, {})
        lines.append(f"# HELP {fam.name} {_escape_help(fam.help)}")
        lines.append(f"# TYPE {fam.name} {fam.type}")
        for key in sorted(series):
            pairs = list(zip(fam.labels, json.loads(key), strict=False))
            value = series[key]
            if fam.type != "histogram":
                lines.append(f"{fam.name}{_labels_text(pairs)} {_format_value(value)}")
                continue
            cumulative = 0
            for bound, count in zip(fam.buckets, value["buckets"], strict=False):
                cumulative += count
                lines.append(
                    f"{fam.name}_bucket{_labels_text([*pairs, ('le', _format_value(bound))])} {cumulative}"
                )
            lines.append(f"{fam.name}_bucket{_labels_text([*pairs, ('le', '+Inf')])} {value['count']}")
            lines.append(f"{fam.name}_sum{_labels_text(pairs)} {_format_value(value['sum'])}")
            lines.append(f"{fam.name}_count{_labels_text(pairs)} {value['count']}")
    return "\n".join(lines) + "\n"


def _atomic_write(path: Path, text: str) -> None:
    """Write to a hidden temp file in the same folder, then rename: readers see old or new, never half.
    The temp name does not end in .prom, so the textfile collector never picks it up."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # the node exporter usually runs as another user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class MetricsWriter:
    """Queues metric updates and flushes them into ``<textfile_dir>/<file_name>`` (plus its state).

    Several writers (threads, processes) may share one folder: flushes are serialized by a lock file
    and add to the stored totals, so nothing is lost and counters never go back."""

    def __init__(self, textfile_dir: str | os.PathLike[str], file_name: str = DEFAULT_FILE) -> None:
        if not file_name.endswith(".prom") or "/" in file_name or file_name.startswith("."):
            raise MetricsError(
                f"metrics file name {file_name!r} must be a plain name ending in .prom "
                "(the textfile collector reads only *.prom)"
            )
        self.folder = Path(textfile_dir).expanduser().resolve()
        self.path = self.folder / file_name
        self.state_path = self.folder / f".{file_name}.state.json"
        self.lock_path = self.folder / f".{file_name}.lock"
        self._pending: list[tuple[str, str, tuple[str, ...], float]] = []
        self._mutex = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> MetricsWriter:
        return cls(settings.metrics.textfile_dir)

    # -- queueing --------------------------------------------------------------------------------

    def _queue(self, action: str, name: str, value: float, labels: Mapping[str, str]) -> None:
        fam = FAMILIES.get(name)
        if fam is None:
            raise MetricsError(f"unknown metric {name!r} (known: {', '.join(FAMILIES)})")
        if set(labels) != set(fam.labels):
            raise MetricsError(f"metric {name} takes labels {list(fam.labels)}, got {sorted(labels)}")
        bad = [k for k, v in labels.items() if not isinstance(v, str) or not v]
        if bad:
            raise MetricsError(f"metric {name}: labels {bad} must be non-empty strings")
        v = _number(value)
        if v is None:
            raise MetricsError(f"metric {name}: value must be a finite number, got {value!r}")
        allowed = {"counter": ("inc",), "gauge": ("set",), "histogram": ("observe",)}[fam.type]
        if action not in allowed:
            raise MetricsError(f"metric {name} is a {fam.type}: use {allowed[0]}(), not {action}()")
        if action in ("inc", "observe") and v < 0:
            raise MetricsError(
                f"metric {name}: {action} needs a value >= 0 (counters never go down), got {value!r}"
            )
        with self._mutex:
            self._pending.append((action, name, tuple(labels[k] for k in fam.labels), v))

    def inc(self, name: str, value: float = 1.0, /, **labels: str) -> None:
        self._queue("inc", name, value, labels)

    def set(self, name: str, value: float, **labels: str) -> None:
        self._queue("set", name, value, labels)

    def observe(self, name: str, value: float, **labels: str) -> None:
        self._queue("observe", name, value, labels)

    def record(self, record: AuditRecord) -> None:
        """Count what an audit record says: decisions, op outcomes and results, partitions, durations,
        validations, rollbacks."""
        if not isinstance(record, AuditRecord):
            raise MetricsError(f"expected an AuditRecord, got {type(record).__name__}")
        t = table_labels(record.table_name)
        if record.kind == "decision":
            self.inc("icelake_decisions_total", outcome=record.decision, **t)
            self.set("icelake_awaiting_approval", 1.0 if record.decision == "held" else 0.0, **t)
            return
        if record.kind == "validation":
            self.inc("icelake_validations_total", outcome=record.decision, **t)
        elif record.kind == "rollback":
            self.inc("icelake_rollbacks_total", outcome=record.decision, **t)
            return
        op = record.op or record.kind
        if record.kind == "op":
            self.inc("icelake_ops_total", op=op, outcome=record.decision, **t)
            if record.duration_s is not None:
                self.observe(
                    "icelake_op_duration_seconds", record.duration_s, op=op, outcome=record.decision, **t
                )
            self._count_results(record, op, t)
        failed = set(record.failed_partitions)
        if record.decision == "failed" and not failed:
            failed = set(record.partitions)  # a failed op with no detail failed everywhere it worked
        succeeded = (
            set(record.partitions) - failed if record.decision in ("acted", "passed", "partial") else set()
        )
        if succeeded:
            self.inc("icelake_partitions_total", len(succeeded), op=op, outcome="succeeded", **t)
        if failed:
            self.inc("icelake_partitions_total", len(failed), op=op, outcome="failed", **t)

    def _count_results(self, record: AuditRecord, op: str, t: dict[str, str]) -> None:
        res = record.results
        totals: dict[str, float] = {}
        for key, family in _RESULT_COUNTERS.items():
            v = _number(res.get(key))
            if v is not None and v > 0:
                totals[family] = totals.get(family, 0.0) + v
        if "snapshots_expired" not in res:
            before, after = _number(res.get("snapshots_before")), _number(res.get("snapshots_after"))
            if before is not None and after is not None and before > after:
                totals["icelake_snapshots_expired_total"] = (
                    totals.get("icelake_snapshots_expired_total", 0.0) + before - after
                )
        for family, v in totals.items():
            extra = {"op": op} if "op" in FAMILIES[family].labels else {}
            self.inc(family, v, **extra, **t)

    def run_finished(
        self, table: str | TableRef, outcome: str, duration_s: float, finished_at: float | None = None
    ) -> None:
        """One maintenance run of ``table`` ended: succeeded, partial, failed or rolled_back."""
        if outcome not in RUN_OUTCOMES:
            raise MetricsError(f"run outcome must be one of {sorted(RUN_OUTCOMES)}, got {outcome!r}")
        t = table_labels(table)
        self.observe("icelake_run_duration_seconds", duration_s, outcome=outcome, **t)
        self.set(
            "icelake_last_run_timestamp_seconds",
            time.time() if finished_at is None else finished_at,
            outcome=outcome,
            **t,
        )

    # -- state and output ------------------------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.lock_path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # per open file: serializes threads and processes alike
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def load_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_path.read_text())
            if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
                raise ValueError(
                    f"unknown state version {state.get('version') if isinstance(state, dict) else state!r}"
                )
            return state
        except FileNotFoundError:
            return {"version": STATE_VERSION, "families": {}}
        except ValueError as err:
            # Metrics must never stop maintenance: keep the bad file for inspection and start over
            # (Prometheus' rate() treats the drop as a counter reset).
            aside = self.state_path.with_name(f"{self.state_path.name}.corrupt-{int(time.time())}")
            os.replace(self.state_path, aside)
            log.warning(
                "metrics state %s is unreadable (%s): moved to %s, counters restart at 0",
                self.state_path,
                err,
                aside,
            )
            return {"version": STATE_VERSION, "families": {}}

    def _apply(self, state: dict[str, Any], updates: list[tuple[str, str, tuple[str, ...], float]]) -> None:
        families = state.setdefault("families", {})
        for action, name, labels, v in updates:
            fam = FAMILIES[name]
            series = families.setdefault(name, {})
            key = json.dumps(list(labels))
            if action == "inc":
                series[key] = series.get(key, 0.0) + v
            elif action == "set":
                series[key] = v
            else:
                h = series.get(key)
                if not isinstance(h, dict) or len(h.get("buckets", ())) != len(fam.buckets):
                    h = {"buckets": [0] * len(fam.buckets), "sum": 0.0, "count": 0}  # new or re-bucketed
                for i, bound in enumerate(fam.buckets):
                    if v <= bound:
                        h["buckets"][i] += 1  # stored per bucket; rendering makes them cumulative
                        break
                h["sum"] += v
                h["count"] += 1
                series[key] = h

    def flush(self) -> Path:
        """Apply the queued updates to the stored totals and rewrite the .prom file; returns its path."""
        with self._mutex:
            updates, self._pending = self._pending, []
        try:
            with self._locked():
                state = self.load_state()
                self._apply(state, updates)
                self._apply(state, [("set", "icelake_metrics_updated_timestamp_seconds", (), time.time())])
                _atomic_write(self.state_path, json.dumps(state, sort_keys=True))
                _atomic_write(self.path, render(state))
        except BaseException:
            with self._mutex:
                self._pending[:0] = updates  # not written: keep them for the next flush
            raise
        return self.path

    def render(self) -> str:
        """The current stored metrics (without updates still queued here)."""
        with self._locked():
            return render(self.load_state())

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.flush()


def serve_metrics(
    prom_file: str | os.PathLike[str], host: str = "127.0.0.1", port: int = 9464
) -> ThreadingHTTPServer:
    """Serve ``prom_file`` at ``http://host:port/metrics`` from a daemon thread (port 0: any free port).

    For a direct Prometheus scrape when no node exporter runs. Stop it with ``server.shutdown()``."""
    path = Path(prom_file)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            try:
                body = path.read_bytes()
            except FileNotFoundError:
                self.send_error(503, f"{path} has not been written yet")
                return
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # scrapes every 15 s: keep logs quiet
            log.debug("metrics %s", format % args)

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, name="icelake-metrics", daemon=True).start()
    return server


__all__ = ["FAMILIES", "MetricsError", "MetricsWriter", "render", "serve_metrics", "table_labels"]
