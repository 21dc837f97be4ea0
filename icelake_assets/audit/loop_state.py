"""The maintenance loop's state as gauges: which tables have a run in flight and for how long, how
many runs wait and how long the oldest has waited (the alerts of a stalled loop, deploy/prometheus/).

The per-process gauges of metrics.py cannot forget a series: in multiprocess mode a value stays in
its process's file, so a table whose run ended would keep its last in-flight time for ever. The
loop's state is therefore one snapshot, computed by the maintenance sensor on each tick
(orchestration/sensors/loop_metrics.py) and written whole over the last one (:func:`save_loop_snapshot`);
every output (the textfile, the HTTP endpoint) exports the snapshot as it is (:class:`LoopCollector`),
so a table no longer in flight is absent. Dagster-free: plain values in, gauges out."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from icelake_assets.audit.metric_families import LOOP_FAMILIES, TABLE, table_labels

log = logging.getLogger(__name__)

# In the multiprocess folder, whose collector reads only *.db files.
STATE_FILE = "loop_state.json"


@dataclass(frozen=True)
class TableInFlight:
    """A table's oldest unfinished maintenance run."""

    table: str  # Iceberg name, catalog.namespace.table
    run_id: str
    run_status: str  # Dagster's word: QUEUED, NOT_STARTED, STARTING, STARTED, CANCELING, SUSPENDED
    seconds: float  # since the run started, or since it was created while it waits to start
    typical_seconds: float | None = None  # median of its last successful runs; None: none known


@dataclass(frozen=True)
class TableLag:
    """A table that wants maintenance and has not had it: how long since its finding was first seen
    failing (the sensor's cursor, orchestration/sensors/cursor.py), and the sensor's last word on it."""

    table: str
    outcome: str  # deferred, held, in_flight, backoff, queued_by_priority
    seconds: float


@dataclass(frozen=True)
class LoopSnapshot:
    """The loop's state at one sensor tick (seconds as of that tick)."""

    tables: tuple[TableInFlight, ...] = ()
    runs_queued: int = 0  # maintenance runs waiting to start
    oldest_queued_seconds: float = 0.0  # 0 when none waits
    runs_in_progress: int = 0  # maintenance runs started and not finished
    lags: tuple[TableLag, ...] = ()  # the tables waiting for maintenance

    def dumps(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def loads(text: str) -> LoopSnapshot:
        data = json.loads(text)
        return LoopSnapshot(
            tables=tuple(
                TableInFlight(
                    str(t["table"]),
                    str(t["run_id"]),
                    str(t["run_status"]),
                    float(t["seconds"]),
                    None if t["typical_seconds"] is None else float(t["typical_seconds"]),
                )
                for t in data["tables"]
            ),
            runs_queued=int(data["runs_queued"]),
            oldest_queued_seconds=float(data["oldest_queued_seconds"]),
            runs_in_progress=int(data["runs_in_progress"]),
            # A snapshot written before lags were exported has none.
            lags=tuple(
                TableLag(str(t["table"]), str(t["outcome"]), float(t["seconds"]))
                for t in data.get("lags", ())
            ),
        )


def save_loop_snapshot(folder: Path, snapshot: LoopSnapshot) -> Path:
    """Replace the last snapshot in ``folder`` atomically (readers see the old one or the new one)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STATE_FILE
    fd, tmp = tempfile.mkstemp(prefix=f".{STATE_FILE}.", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(snapshot.dumps())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_loop_snapshot(folder: Path) -> LoopSnapshot | None:
    """The last snapshot written in ``folder``; None when there is none or it cannot be read (logged:
    an output without the loop's gauges is better than no output)."""
    path = folder / STATE_FILE
    try:
        return LoopSnapshot.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as err:
        log.warning("%s: loop state not exported: %s", path, err)
        return None


def loop_families(snapshot: LoopSnapshot) -> list[GaugeMetricFamily]:
    """The snapshot as gauge families (LOOP_FAMILIES), each table's series with its table's labels."""
    fams = {name: GaugeMetricFamily(name, f.help, labels=list(f.labels)) for name, f in LOOP_FAMILIES.items()}
    for t in snapshot.tables:
        labels = [table_labels(t.table)[k] for k in TABLE]
        fams["icelake_table_run_in_flight_seconds"].add_metric([*labels, t.run_id, t.run_status], t.seconds)
        if t.typical_seconds is not None:
            fams["icelake_table_run_typical_seconds"].add_metric(labels, t.typical_seconds)
    for lag in snapshot.lags:
        labels = [table_labels(lag.table)[k] for k in TABLE]
        fams["icelake_table_maintenance_lag_seconds"].add_metric([*labels, lag.outcome], lag.seconds)
    fams["icelake_runs_queued"].add_metric([], snapshot.runs_queued)
    fams["icelake_oldest_queued_run_seconds"].add_metric([], snapshot.oldest_queued_seconds)
    fams["icelake_runs_in_progress"].add_metric([], snapshot.runs_in_progress)
    return list(fams.values())


class LoopCollector(Collector):
    """Exports the last snapshot in ``folder`` at each collection (nothing before the first)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def describe(self) -> list[GaugeMetricFamily]:
        return []  # the registry needs no names up front; collecting here would read the file

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snapshot = load_loop_snapshot(self.folder)
        if snapshot is not None:
            yield from loop_families(snapshot)


__all__ = [
    "STATE_FILE",
    "LoopCollector",
    "LoopSnapshot",
    "TableInFlight",
    "TableLag",
    "load_loop_snapshot",
    "loop_families",
    "save_loop_snapshot",
]
