"""The one path by which audit records leave a process: appended to the lake's audit table (when the
audit is enabled) and counted in the metrics, for a maintenance run (orchestration/assets/audit_trail.py)
and for a sensor tick alike.

Best effort, each part on its own: a locked audit table or a full metrics disk is reported, never
raised, so the caller (a run whose maintenance is validated, a sensor tick) goes on and says so."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from icelake_assets.audit.loop_state import LoopSnapshot, save_loop_snapshot
from icelake_assets.audit.metrics import MetricsWriter
from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef
from icelake_assets.settings import Settings


@dataclass(frozen=True)
class RunFinished:
    """A maintenance run of a table ended (metrics: its duration and last-run time by outcome)."""

    table: str | TableRef
    outcome: str  # succeeded, partial, failed or rolled_back
    duration_s: float


@dataclass(frozen=True)
class AuditWrite:
    """What became of the records: the errors of the audit table and of the metrics, if any."""

    records: int
    log_error: str | None = None
    metrics_error: str | None = None

    @property
    def error(self) -> str | None:
        return self.log_error or self.metrics_error


def write_audit(
    settings: Settings,
    records: Sequence[AuditRecord],
    *,
    run: RunFinished | None = None,
    heartbeat: str | None = None,
) -> AuditWrite:
    """Append ``records`` to the audit log (when ``audit.enabled``) and count them in the metrics,
    with the run's end (``run``) or the sensor's heartbeat (``heartbeat``: the sensor's name, on
    every tick, records or not); the metrics textfile is written once."""
    log_error = None
    if records and settings.audit.enabled:
        try:
            AuditLog.from_settings(settings).append(list(records))
        except Exception as err:
            log_error = str(err)
    metrics_error = None
    try:
        with MetricsWriter.from_settings(settings) as metrics:
            for record in records:
                metrics.record(record)
            if run is not None:
                metrics.run_finished(run.table, run.outcome, run.duration_s)
            if heartbeat is not None:
                metrics.sensor_ticked(heartbeat)
    except Exception as err:
        metrics_error = str(err)
    return AuditWrite(len(records), log_error, metrics_error)


def write_loop_metrics(settings: Settings, snapshot: LoopSnapshot) -> str | None:
    """Replace the loop's state in the metrics with ``snapshot`` (audit/loop_state.py), for the
    maintenance sensor once per tick, before its heartbeat: a scrape of the endpoint sees it at once,
    the textfile at the heartbeat's flush (a flush of 10,000 tables' metrics takes seconds: one per
    tick). Best effort: returns the error, never raises."""
    try:
        save_loop_snapshot(MetricsWriter.from_settings(settings).multiprocess_dir, snapshot)
    except Exception as err:
        return str(err)
    return None


__all__ = ["AuditWrite", "RunFinished", "write_audit", "write_loop_metrics"]
