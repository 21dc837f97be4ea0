"""The compute_statistics op (Dagster-free), last of the chain before validation: NDV sketches of the
policy's columns for the current snapshot (Iceberg's compute_table_stats, through its action) and,
for a partitioned table, its partition statistics (compute_partition_stats). Both register a file in
the table metadata without committing a snapshot, so no row can change and validation's baseline is
untouched. The result names the files and what pyiceberg found afterwards: the statistics file
registered for the snapshot and, read from the Puffin file itself, an NDV blob per column.

A failure of the statistics (a column type the sketch refuses, a full disk) is recorded, not raised:
the run's rewrites committed and are validated either way, and the op's effect says it failed. An
outage (the driver or the store down) still fails the run, which is then retried soon.

The two files are judged apart. The table statistics (the Puffin file the statistics finding reads) may
be registered while the store refuses the partition statistics file: SeaweedFS's S3 Tables buckets admit
only Iceberg's usual names under ``metadata/`` (``*.metadata.json``, ``*.avro``, ``*.stats``), and
Iceberg writes partition statistics as ``metadata/partition-stats-<snapshot>-<uuid>.parquet``, which
the store answers with 403 whatever the identity. That refusal is recorded beside statistics that
were written (``partition_statistics_error``), not as the op's failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.causes import root_cause
from icelake_assets.health.statistics import read_puffin_ndv, statistics_facts
from icelake_assets.maintenance.ops.attempts import retry_on_conflict
from icelake_assets.maintenance.ops.runner import StatsFn, timed
from icelake_assets.maintenance.results.models import StatisticsResult
from icelake_assets.maintenance.spark import actions as spark_actions
from icelake_assets.planning.statistics import decide_statistics, plan_statistics
from icelake_assets.settings import Policy


def compute_statistics(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    policy: Policy,
    stats_fn: StatsFn,
    rewrite_commits: int = 0,
) -> StatisticsResult:
    """``rewrite_commits``: snapshots this run's rewrites committed (the statistics then follow the
    new current snapshot, planning/statistics.py)."""

    def work() -> StatisticsResult:
        stats = stats_fn(table)
        d = decide_statistics(stats, policy, rewrite_commits)
        if not d.act:
            return StatisticsResult(acted=False, reason=d.reason, signals=d.signals)
        planned = plan_statistics(stats, policy)
        spark = spark_fn()  # outside the try: a pre-flight refusal ends the op with its own cause
        partitions = policy.statistics.partition_stats and stats.statistics.partitioned
        try:
            # Registering a statistics file is a metadata commit Iceberg does not retry (SetStatistics).
            written = retry_on_conflict(
                lambda: spark_actions.compute_table_stats(spark, ref, planned.columns)
            )
        except Exception as err:
            cause = root_cause(err)
            if cause.kind == "outage":
                raise
            return StatisticsResult(
                acted=True,
                reason=f"{d.reason}; failed: {cause}",
                signals=d.signals,
                columns=planned.columns,
                error=str(cause),
                error_kind=cause.kind,
            )
        found = _found(table, d.reason, d.signals, planned.columns, written)
        if not partitions:
            return found
        # The table statistics are registered by now: a failure of the partition statistics file must
        # not discard them (the finding reads the table statistics; Spark and Trino use them).
        try:
            partition_written = retry_on_conflict(lambda: spark_actions.compute_partition_stats(spark, ref))
        except Exception as err:
            cause = root_cause(err)
            if cause.kind == "outage":
                raise
            return replace(
                found,
                reason=f"{found.reason}; partition statistics failed: {cause}",
                partition_statistics_error=str(cause),
                partition_statistics_error_kind=cause.kind,
            )
        return replace(
            found,
            partition_statistics_file=partition_written.get("partition_statistics_file"),
            partition_statistics_snapshot_id=partition_written.get("snapshot_id"),
        )

    return timed(table, work)


def _found(table: Table, reason: str, signals, columns: tuple[str, ...], written: dict) -> StatisticsResult:
    """What the op wrote, checked with pyiceberg: the file is the one the metadata names for the
    current snapshot, and its footer holds an NDV blob for each column."""
    table.refresh()
    facts = statistics_facts(table)
    path = written.get("statistics_file")
    names = {i: n for i, n in facts.columns}
    ndv = {names.get(i, str(i)): n for i, n in (written.get("ndv") or {}).items()}
    read_back = read_puffin_ndv(table, path) if path else {}
    return StatisticsResult(
        acted=True,
        reason=reason,
        signals=signals,
        columns=columns,
        statistics_file=path,
        statistics_snapshot_id=written.get("snapshot_id"),
        statistics_bytes=written.get("file_size_in_bytes"),
        ndv=ndv,
        ndv_read_back=sum(1 for c in columns if facts.field_id(c) in read_back),
        registered=path is not None and facts.path == path and facts.current,
    )
