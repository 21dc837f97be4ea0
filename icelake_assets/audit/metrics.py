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

This module turns what the product does into metric updates (:class:`MetricsWriter`) and writes the
textfile; the process's metric objects, the summing registry and the endpoint are
audit/multiprocess_metrics.py's.

Typical use, from an op or a sensor::

    with MetricsWriter.from_settings(settings) as metrics:  # flushes once on exit
        metrics.record(audit_record)  # any AuditRecord: decision, op, ...
        metrics.run_finished("demo.taxi.trips", "succeeded", 12.5)
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest, write_to_textfile

from icelake_assets.audit.metric_families import FAMILIES, RESULT_COUNTERS, RUN_OUTCOMES, table_labels
from icelake_assets.audit.multiprocess_metrics import (
    collector_registry,
    process_metrics,
    serve_http,
    stop_http,
)
from icelake_assets.audit.records import AuditRecord
from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.score import HealthStatus
from icelake_assets.settings import Settings
from icelake_assets.types import IcelakeError

log = logging.getLogger(__name__)

DEFAULT_FILE = "icelake.prom"
MULTIPROCESS_DIR = "multiprocess"


class MetricsError(IcelakeError, ValueError):
    """A metric update that cannot be recorded; the message names the metric and the cause."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


# The hold of :func:`one_textfile_write` in this thread: ``writer`` is None (or unset) when not
# holding, False while holding with no rewrite asked for, else the writer whose rewrite waits.
_held = threading.local()


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
        metric = process_metrics(self.multiprocess_dir)[name]
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
