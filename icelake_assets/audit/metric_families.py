"""The metric families the lake exports: names, types, labels and help text (what dashboards and the
alert rules in deploy/prometheus/ rely on), and the procedure result columns they count."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from icelake_assets.types import TableRef

MetricType = Literal["counter", "gauge", "histogram"]
# prometheus_client's multiprocess modes for gauges: how the files of several processes combine.
GaugeMode = Literal["mostrecent", "max"]

# Maintenance takes seconds to an hour: buckets (seconds) wide enough for both.
DURATION_BUCKETS: tuple[float, ...] = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)
RUN_OUTCOMES = frozenset({"succeeded", "partial", "failed", "rolled_back"})
TABLE = ("catalog", "namespace", "table")


def table_labels(table: str | TableRef) -> dict[str, str]:
    ref = table if isinstance(table, TableRef) else TableRef.parse(str(table))
    return {"catalog": ref.catalog, "namespace": ref.namespace_name, "table": ref.name}


@dataclass(frozen=True)
class Family:
    name: str
    type: MetricType
    help: str
    labels: tuple[str, ...]
    buckets: tuple[float, ...] = ()
    # Gauges hold a state (the last decision, the last run): the most recent write wins, whichever
    # process made it.
    mode: GaugeMode = "mostrecent"


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "icelake_decisions_total",
            "counter",
            "Sensor decisions per table: launched, deferred (writers active), held (cost over the cap, awaiting "
            "approval), skipped.",
            (*TABLE, "outcome"),
        ),
        Family(
            "icelake_ops_total",
            "counter",
            "Maintenance ops by outcome: acted, skipped, failed.",
            (*TABLE, "op", "outcome"),
        ),
        Family(
            "icelake_files_compacted_total",
            "counter",
            "Data or delete files rewritten by compaction (the small input files).",
            (*TABLE, "op"),
        ),
        Family(
            "icelake_files_added_total",
            "counter",
            "Files written by compaction (the compacted output files).",
            (*TABLE, "op"),
        ),
        Family(
            "icelake_bytes_rewritten_total",
            "counter",
            "Bytes of the files rewritten by compaction.",
            (*TABLE, "op"),
        ),
        Family("icelake_snapshots_expired_total", "counter", "Snapshots removed by expire_snapshots.", TABLE),
        Family(
            "icelake_expired_files_deleted_total",
            "counter",
            "Data, delete and manifest files deleted because only expired snapshots referenced them.",
            TABLE,
        ),
        Family(
            "icelake_orphan_files_removed_total",
            "counter",
            "Orphan files deleted by remove_orphan_files.",
            TABLE,
        ),
        Family(
            "icelake_manifests_rewritten_total", "counter", "Manifests rewritten by rewrite_manifests.", TABLE
        ),
        Family(
            "icelake_partitions_total",
            "counter",
            "Partitions an op or validation worked on, by outcome: succeeded, failed.",
            (*TABLE, "op", "outcome"),
        ),
        Family(
            "icelake_validations_total",
            "counter",
            "Validations after a rewrite: passed, partial, failed.",
            (*TABLE, "outcome"),
        ),
        Family(
            "icelake_rollbacks_total",
            "counter",
            "Rollbacks after a failed validation: rolled_back, refused (a later commit exists), failed.",
            (*TABLE, "outcome"),
        ),
        Family(
            "icelake_op_duration_seconds",
            "histogram",
            "Duration of maintenance ops.",
            (*TABLE, "op", "outcome"),
            DURATION_BUCKETS,
        ),
        Family(
            "icelake_run_duration_seconds",
            "histogram",
            "Duration of maintenance runs: succeeded, partial, failed, rolled_back.",
            (*TABLE, "outcome"),
            DURATION_BUCKETS,
        ),
        Family(
            "icelake_awaiting_approval",
            "gauge",
            "1 while the table's last decision is held (cost over the cap, awaiting an operator's approval).",
            TABLE,
        ),
        Family(
            "icelake_deferred",
            "gauge",
            "1 while the table's last decision is deferred (writers active: waiting for a quiet period).",
            TABLE,
        ),
        Family(
            "icelake_last_run_timestamp_seconds",
            "gauge",
            "Unix time the table's last maintenance run ended.",
            (*TABLE, "outcome"),
        ),
        Family("icelake_health_score", "gauge", "The table's health score, 0-100 (100: healthy).", TABLE),
        Family(
            "icelake_health_status",
            "gauge",
            "1 for the table's current health status (Healthy, Warning, Critical, Unknown), 0 for the others.",
            (*TABLE, "status"),
        ),
        Family(
            "icelake_sensor_last_tick_timestamp_seconds",
            "gauge",
            "Unix time the sensor last finished a tick (a heartbeat: alerts fire when it stops).",
            ("sensor",),
            mode="max",
        ),
        Family(
            "icelake_metrics_updated_timestamp_seconds",
            "gauge",
            "Unix time the metrics were last written.",
            (),
            mode="max",
        ),
    )
}

# The maintenance loop's state (audit/loop_state.py): one snapshot the maintenance sensor writes each
# tick and every output exports whole, not per-process gauges, so a table whose run ended is absent
# instead of stuck at its last value.
LOOP_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "icelake_table_run_in_flight_seconds",
            "gauge",
            "Seconds the table's oldest unfinished maintenance run has been in flight: since it started, or "
            "since it was created while it waits to start.",
            (*TABLE, "run_id", "run_status"),
        ),
        Family(
            "icelake_table_run_typical_seconds",
            "gauge",
            "Median duration of the table's last successful maintenance runs (tables in flight only).",
            TABLE,
        ),
        Family(
            "icelake_table_maintenance_lag_seconds",
            "gauge",
            "Seconds since the table's finding was first seen failing while it waits for maintenance "
            "(deferred, held, in flight, in backoff or queued by priority); absent once maintained.",
            (*TABLE, "outcome"),
        ),
        Family(
            "icelake_runs_queued", "gauge", "Maintenance runs waiting to start (QUEUED, NOT_STARTED).", ()
        ),
        Family(
            "icelake_oldest_queued_run_seconds",
            "gauge",
            "Seconds the oldest maintenance run waiting to start has waited since it was created (0: none).",
            (),
        ),
        Family(
            "icelake_runs_in_progress",
            "gauge",
            "Maintenance runs started and not finished (STARTING, STARTED, CANCELING, SUSPENDED).",
            (),
        ),
    )
}

# Iceberg procedure result columns (Spark 3.5, Iceberg 1.10) and the runner's own keys → counters.
RESULT_COUNTERS: dict[str, str] = {
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

__all__ = [
    "DURATION_BUCKETS",
    "FAMILIES",
    "LOOP_FAMILIES",
    "RESULT_COUNTERS",
    "RUN_OUTCOMES",
    "TABLE",
    "Family",
    "table_labels",
]
