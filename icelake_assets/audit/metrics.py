"""Maintenance metrics on prometheus_client, in its multiprocess mode.

The product runs in many processes (sensor ticks in the code server, each run in its own process), so
every count goes through prometheus_client's multiprocess mode: each process adds to its own files in
``<textfile_dir>/multiprocess`` (``PROMETHEUS_MULTIPROC_DIR``) and a collection sums the files of every
process, dead or alive. Counters therefore only grow, across processes and restarts; that folder is
never wiped. Two outputs read that sum:

* the textfile: ``flush()`` rewrites ``<textfile_dir>/icelake.prom`` atomically (``write_to_textfile``)
  for a node exporter's textfile collector (``--collector.textfile.directory``);
* an HTTP endpoint: with ``metrics.http_port`` set, the first process that writes metrics and can bind
  ``127.0.0.1:<port>`` serves ``/metrics`` (``start_http_server``) for a direct scrape.

Typical use, from an op or a sensor::

    with MetricsWriter.from_settings(settings) as metrics:  # flushes once on exit
        metrics.record(audit_record)  # any AuditRecord: decision, op, ...
        metrics.run_finished("demo.taxi.trips", "succeeded", 12.5)
"""

from __future__ import annotations

import errno
import glob
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
    values,
    write_to_textfile,
)
from prometheus_client.multiprocess import MultiProcessCollector

from icelake_assets.audit.loop_state import LoopCollector
from icelake_assets.audit.metric_families import FAMILIES, RESULT_COUNTERS, RUN_OUTCOMES, Family, table_labels
from icelake_assets.audit.records import AuditRecord
from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.score import HealthStatus
from icelake_assets.settings import Settings
from icelake_assets.types import IcelakeError

log = logging.getLogger(__name__)

DEFAULT_FILE = "icelake.prom"
MULTIPROCESS_DIR = "multiprocess"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
HTTP_HOST = "127.0.0.1"  # loopback only: a scraper elsewhere goes through the node exporter or a proxy


class MetricsError(IcelakeError, ValueError):
    """A metric update that cannot be recorded; the message names the metric and the cause."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


# -- the process's metric objects -------------------------------------------------------------------

_Metric = Counter | Gauge | Histogram


@dataclass(frozen=True)
class _Store:
    folder: Path
    metrics: dict[str, _Metric]


_lock = threading.Lock()
_store: _Store | None = None
_servers: dict[int, WSGIServer] = {}
# The hold of :func:`one_textfile_write` in this thread: ``writer`` is None (or unset) when not
# holding, False while holding with no rewrite asked for, else the writer whose rewrite waits.
_held = threading.local()


def _make(f: Family) -> _Metric:
    # registry=None: the objects only write their files; collections read the files (multiprocess mode).
    if f.type == "counter":
        return Counter(f.name, f.help, f.labels, registry=None)
    if f.type == "gauge":
        return Gauge(f.name, f.help, f.labels, registry=None, multiprocess_mode=f.mode)
    return Histogram(f.name, f.help, f.labels, registry=None, buckets=f.buckets)


def _metrics(folder: Path) -> dict[str, _Metric]:
    """The process's metric objects, writing into ``folder``.

    One set per process, as prometheus_client expects in multiprocess mode: two objects for the same
    series in one process would each keep their own copy of the value and overwrite each other."""
    global _store
    with _lock:
        if _store is not None and _store.folder == folder:
            return _store.metrics
        folder.mkdir(parents=True, exist_ok=True)
        given = os.environ.get(MULTIPROC_ENV)
        if _store is None and given and Path(given).resolve() != folder:
            log.warning(
                "%s=%s replaced by the metrics folder of the settings, %s", MULTIPROC_ENV, given, folder
            )
        # Another folder's files (a second lake in this process, tests) are closed first.
        values.close_all_multiprocess_files()
        # Children started from here inherit the variable; prometheus_client reads it when it is imported,
        # so its value class is chosen again now that the variable is set.
        os.environ[MULTIPROC_ENV] = str(folder)
        values.ValueClass = values.get_value_class()
        _store = _Store(folder, {name: _make(f) for name, f in FAMILIES.items()})
        return _store.metrics


class _SettledFilesCollector(MultiProcessCollector):
    """prometheus_client's multiprocess sums, without the files another process is creating: a file
    is empty between its creation and its first page, and reading it then raises ``struct.error``
    (a process's flush failed so while another process started counting: seen in make test)."""

    def collect(self):
        files = [f for f in glob.glob(os.path.join(self._path, "*.db")) if os.path.getsize(f) >= 8]
        return self.merge(files, accumulate=True)


def collector_registry(multiprocess_dir: str | os.PathLike[str]) -> CollectorRegistry:
    """A registry summing every process's files in ``multiprocess_dir``, with the loop's last snapshot
    kept there (audit/loop_state.py)."""
    registry = CollectorRegistry()
    _SettledFilesCollector(registry, path=str(multiprocess_dir))
    registry.register(LoopCollector(Path(multiprocess_dir)))
    return registry


def serve_http(multiprocess_dir: Path, port: int) -> WSGIServer | None:
    """Serve the metrics at ``http://127.0.0.1:<port>/metrics`` from a daemon thread of this process,
    once per process. Returns the server, or None when the port is taken (normally by another process
    of the lake, which serves the same sums: any process can answer a scrape)."""
    with _lock:
        if port in _servers:
            return _servers[port]
        multiprocess_dir.mkdir(parents=True, exist_ok=True)
        try:
            server, _ = start_http_server(port, addr=HTTP_HOST, registry=collector_registry(multiprocess_dir))
        except OSError as err:
            level = logging.DEBUG if err.errno == errno.EADDRINUSE else logging.WARNING
            log.log(level, "metrics endpoint %s:%d not started: %s", HTTP_HOST, port, err)
            return None
        _servers[port] = server
        log.info("metrics served at http://%s:%d/metrics", HTTP_HOST, port)
        return server


def stop_http(port: int) -> None:
    """Stop this process's endpoint on ``port``, if it serves one."""
    with _lock:
        server = _servers.pop(port, None)
    if server is not None:
        server.shutdown()
        server.server_close()


# -- the writer -------------------------------------------------------------------------------------


class MetricsWriter:
    """Records metric updates (applied at once to this process's files) and writes the textfile.

    Several writers, threads and processes may share one folder: each process adds to its own files,
    and every output sums them, so nothing is lost and counters never go back."""

    def __init__(
        self, textfile_dir: str | os.PathLike[str], file_name: str = DEFAULT_FILE, *, textfile: bool = True
    ) -> None:
        if not file_name.endswith(".prom") or "/" in file_name or file_name.startswith("."):
            raise MetricsError(
                f"metrics file name {file_name!r} must be a plain name ending in .prom "
                "(the textfile collector reads only *.prom)"
            )
        self.folder = Path(textfile_dir).expanduser().resolve()
        self.path = self.folder / file_name
        self.multiprocess_dir = self.folder / MULTIPROCESS_DIR
        self.textfile = textfile

    @classmethod
    def from_settings(cls, settings: Settings) -> MetricsWriter:
        """The lake's writer; starts this process's HTTP endpoint when ``metrics.http_port`` is set."""
        writer = cls(settings.metrics.textfile_dir, textfile=settings.metrics.textfile)
        if settings.metrics.http_port is not None:
            serve_http(writer.multiprocess_dir, settings.metrics.http_port)
        return writer

    @cached_property
    def registry(self) -> CollectorRegistry:
        """Every process's metrics in this folder, summed (what the textfile and the endpoint show)."""
        self.multiprocess_dir.mkdir(parents=True, exist_ok=True)
        return collector_registry(self.multiprocess_dir)

    # -- updates ---------------------------------------------------------------------------------

    def _update(self, action: str, name: str, value: float, labels: dict[str, str]) -> None:
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
        allowed = {"counter": "inc", "gauge": "set", "histogram": "observe"}[fam.type]
        if action != allowed:
            raise MetricsError(f"metric {name} is a {fam.type}: use {allowed}(), not {action}()")
        if action in ("inc", "observe") and v < 0:
            raise MetricsError(
                f"metric {name}: {action} needs a value >= 0 (counters never go down), got {value!r}"
            )
        metric = _metrics(self.multiprocess_dir)[name]
        child = metric.labels(**labels) if fam.labels else metric
        if isinstance(child, Counter):
            child.inc(v)
        elif isinstance(child, Gauge):
            child.set(v)
        else:
            child.observe(v)

    def inc(self, name: str, value: float = 1.0, /, **labels: str) -> None:
        self._update("inc", name, value, labels)

    def set(self, name: str, value: float, **labels: str) -> None:
        self._update("set", name, value, labels)

    def observe(self, name: str, value: float, **labels: str) -> None:
        self._update("observe", name, value, labels)

    def record(self, record: AuditRecord) -> None:
        """Count what an audit record says: decisions, op outcomes and results, partitions, durations,
        validations, rollbacks."""
        if not isinstance(record, AuditRecord):
            raise MetricsError(f"expected an AuditRecord, got {type(record).__name__}")
        if record.kind == "agent":  # a tool call of an agent: the audit log's alone, no metric
            return
        t = table_labels(record.table_name)
        if record.kind == "decision":
            self.inc("icelake_decisions_total", outcome=record.decision, **t)
            # States, not events: the sensor records a decision only when it changes.
            self.set("icelake_awaiting_approval", 1.0 if record.decision == "held" else 0.0, **t)
            self.set("icelake_deferred", 1.0 if record.decision == "deferred" else 0.0, **t)
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
        for key, family in RESULT_COUNTERS.items():
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

    def health(self, table: str | TableRef, status: HealthStatus, score: int) -> None:
        """The table's health verdict (health/score.py): its score and a 1 for its status."""
        t = table_labels(table)
        self.set("icelake_health_score", score, **t)
        for s in HealthStatus:
            self.set("icelake_health_status", 1.0 if s is status else 0.0, status=s.value, **t)

    def sensor_ticked(self, sensor: str, at: float | None = None) -> None:
        """The sensor's heartbeat: it finished a tick (now, or at ``at``)."""
        self.set(
            "icelake_sensor_last_tick_timestamp_seconds", time.time() if at is None else at, sensor=sensor
        )

    # -- output ----------------------------------------------------------------------------------

    def flush(self) -> Path:
        """Rewrite the textfile (when on) with every process's sums; returns its path. Inside
        :func:`one_textfile_write` the rewrite waits for the end of the hold."""
        self.set("icelake_metrics_updated_timestamp_seconds", time.time())
        if self.textfile and getattr(_held, "writer", None) is not None:
            _held.writer = self
        elif self.textfile:
            # write_to_textfile writes a temporary file in the same folder (not *.prom, so the collector
            # skips it) and renames it over the old one: readers see the old or the new file, never half.
            write_to_textfile(str(self.path), self.registry)
            os.chmod(self.path, 0o644)  # the node exporter usually runs as another user
        return self.path

    def render(self) -> str:
        """The exposition text of every process's sums, as a scrape sees it."""
        return generate_latest(self.registry).decode()

    def __enter__(self) -> MetricsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.flush()


@contextmanager
def one_textfile_write() -> Iterator[None]:
    """Flushes inside (in this thread) rewrite the textfile once, when the block ends. Every update
    still reaches this process's multiprocess files at once (the HTTP endpoint sees it); only the
    textfile, which sums every file of every process the lake ever ran (a cost that grows with its
    history), waits: a run's validation writes each table's audit, and rewrote it per table."""
    if getattr(_held, "writer", None) is not None:  # nested: the outer hold writes
        yield
        return
    _held.writer = False
    try:
        yield
    finally:
        writer, _held.writer = _held.writer, None
        if writer:
            try:
                writer.flush()
            except Exception as err:  # best effort, as the writes it stands for
                log.warning("metrics textfile not written: %s", err)


def _best_effort(settings: Settings, what: str, update: Callable[[MetricsWriter], None]) -> None:
    """Apply ``update`` and write the textfile at once. A metrics failure is logged, never raised: a full
    disk must not stop a tick or a check (a stale heartbeat then alerts)."""
    try:
        with MetricsWriter.from_settings(settings) as metrics:
            update(metrics)
    except Exception as err:
        log.warning("%s: metric not written: %s", what, err)


def record_sensor_tick(settings: Settings, sensor: str) -> None:
    """The sensor's heartbeat, for a sensor to call once per finished tick (best effort)."""
    _best_effort(settings, f"sensor {sensor} heartbeat", lambda m: m.sensor_ticked(sensor))


def record_health(settings: Settings, table: str | TableRef, status: HealthStatus, score: int) -> None:
    """A table's health verdict, for a health check to call once evaluated (best effort). The update goes
    to this process's multiprocess files at once (the HTTP endpoint shows it); the textfile is not
    rewritten per table (10,000 rewrites per check run) but by the next flush, i.e. the maintenance
    sensor's tick."""
    try:
        MetricsWriter.from_settings(settings).health(table, status, score)
    except Exception as err:
        log.warning("%s health: metric not written: %s", table, err)


__all__ = [
    "FAMILIES",
    "MetricsError",
    "MetricsWriter",
    "collector_registry",
    "one_textfile_write",
    "record_health",
    "record_sensor_tick",
    "serve_http",
    "stop_http",
    "table_labels",
]
