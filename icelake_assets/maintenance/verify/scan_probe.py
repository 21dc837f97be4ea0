"""The opt-in probe of proof of benefit (``loop.scan_probe``): the time a reader's full scan takes
on the snapshot a run started from and on the one it ended on, in the run's own Spark session.

pyiceberg measures what planning reads and what a scan would open (health/scan_cost.py); this
measures what a query costs. The query counts the rows of a snapshot with Iceberg's aggregate
push-down off, so every data file (and delete file) is opened rather than answered from manifest
statistics. It is bounded by size: the run probes only tables up to ``loop.scan_probe_max_bytes``.
Both snapshots are probed in turn, twice, and the faster time of each kept, so the JVM's warm-up
and the file system's cache favour neither side.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pyspark.sql import SparkSession

from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.types import TableRef

PUSH_DOWN = "spark.sql.iceberg.aggregate-push-down.enabled"
ROUNDS = 2


@dataclass(frozen=True)
class ScanProbe:
    before_seconds: float
    after_seconds: float
    query: str | None = None  # the policy's query (None: a full scan)


FULL_SCAN = "SELECT count(*) AS n FROM {table}"


def probe_scan(
    spark: SparkSession,
    ref: TableRef,
    before_snapshot_id: int,
    after_snapshot_id: int,
    query: str | None = None,
) -> ScanProbe:
    """Time ``query`` (default ``SELECT count(*)``) on ``ref`` as of each snapshot: ``{table}`` becomes
    the quoted table and ``VERSION AS OF <id>`` (ids are integers: nothing pasted; the query itself
    comes from the settings file, checked to be one SELECT naming ``{table}`` once)."""
    table = table_identifier(ref)
    sql = query or FULL_SCAN
    timings: dict[int, list[float]] = {before_snapshot_id: [], after_snapshot_id: []}
    previous = spark.conf.get(PUSH_DOWN, None)
    spark.conf.set(PUSH_DOWN, "false")
    try:
        for _ in range(ROUNDS):
            for snapshot_id in timings:
                started = time.perf_counter()
                spark.sql(sql.replace("{table}", f"{table} VERSION AS OF {int(snapshot_id)}")).collect()
                timings[snapshot_id].append(time.perf_counter() - started)
    finally:
        if previous is None:
            spark.conf.unset(PUSH_DOWN)
        else:
            spark.conf.set(PUSH_DOWN, previous)
    return ScanProbe(
        before_seconds=round(min(timings[before_snapshot_id]), 4),
        after_seconds=round(min(timings[after_snapshot_id]), 4),
        query=query,
    )
