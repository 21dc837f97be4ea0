"""This process's side of prometheus_client's multiprocess mode (audit/metrics.py says why): its
metric objects, which write the process's own files in the lake's multiprocess folder, the registry
that sums every process's files, and the HTTP endpoint a process serves that sum from.

One set of metric objects per process (and per folder), one endpoint per port: both are process
state, kept here under one lock."""

from __future__ import annotations

import errno
import glob
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server, values
from prometheus_client.multiprocess import MultiProcessCollector

from icelake_assets.audit.loop_state import LoopCollector
from icelake_assets.audit.metric_families import FAMILIES, Family

log = logging.getLogger(__name__)

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
HTTP_HOST = "127.0.0.1"  # loopback only: a scraper elsewhere goes through the node exporter or a proxy

Metric = Counter | Gauge | Histogram


@dataclass(frozen=True)
class _Store:
    folder: Path
    metrics: dict[str, Metric]


_lock = threading.Lock()
_store: _Store | None = None
_servers: dict[int, WSGIServer] = {}


def _make(f: Family) -> Metric:
    # registry=None: the objects only write their files; collections read the files (multiprocess mode).
    if f.type == "counter":
        return Counter(f.name, f.help, f.labels, registry=None)
    if f.type == "gauge":
        return Gauge(f.name, f.help, f.labels, registry=None, multiprocess_mode=f.mode)
    return Histogram(f.name, f.help, f.labels, registry=None, buckets=f.buckets)


def process_metrics(folder: Path) -> dict[str, Metric]:
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
