"""Iceberg's Spark actions for the commits maintenance makes, each snapshot carrying the run's
properties (its Dagster run id, op and attempt: commit_tags.py).

Iceberg's procedures (``CALL ... rewrite_data_files``) take no snapshot properties, and their actions
read no session-wide ones (``CommitMetadata`` is used by writes only), so a commit could be tied to
its run by time alone. The actions behind the procedures take ``snapshotProperty``: these wrappers
call them through py4j as the procedures do (Iceberg 1.10's RewriteDataFilesProcedure,
RewriteManifestsProcedure, RewritePositionDeleteFilesProcedure: the same table load, options,
strategy, sort order, ``where`` translation, result rows, cache refresh), plus the properties.
Every call is checked against the run's fence and marked as committing in the run's lease on the
shared driver (fencing.py, resident_spark.py): a run that dies or is fenced in the middle of one cannot
go on committing through the driver.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from py4j.java_gateway import JavaObject
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.spark import commit_tags, fencing
from icelake_assets.partitions.quoting import quote_identifier


def _jvm(spark: SparkSession) -> Any:
    return spark._jvm  # noqa: SLF001 - PySpark's handle on the JVM (as Iceberg's own Python docs use)


def _jsession(spark: SparkSession) -> Any:
    return spark._jsparkSession  # noqa: SLF001


def _quoted(ref: TableRef) -> str:
    return ".".join(quote_identifier(p) for p in (ref.catalog, *ref.namespace, ref.name))


def load_iceberg_table(spark: SparkSession, ref: TableRef) -> Any:
    """The table as Spark's catalog loads it (the procedures' ``loadSparkTable(ident).table()``)."""
    return _jvm(spark).org.apache.iceberg.spark.Spark3Util.loadIcebergTable(_jsession(spark), _quoted(ref))


def _filter(spark: SparkSession, ref: TableRef, where: str) -> Any:
    """``where`` as an Iceberg expression, resolved against the table (BaseProcedure.filterExpression)."""
    converter = _jvm(spark).org.apache.spark.sql.execution.datasources.SparkExpressionConverter
    resolved = converter.collectResolvedSparkExpression(_jsession(spark), _quoted(ref), where)
    return converter.convertToIcebergExpression(resolved)


def _tagged(spark: SparkSession, action: Any) -> Any:
    for key, value in commit_tags.session_properties(spark).items():
        action = action.snapshotProperty(key, value)
    return action


def _refresh(spark: SparkSession, ref: TableRef) -> None:
    """Spark's cached plans of the table see the new snapshot (the procedures' refreshSparkCache)."""
    spark.sql(f"REFRESH TABLE {_quoted(ref)}")


@contextlib.contextmanager
def _acting(spark: SparkSession, ref: TableRef, what: str) -> Iterator[tuple[Any, Any]]:
    """The table and Iceberg's SparkActions for one committing action, marked committing on the shared
    driver while it runs; Spark's cache of the table refreshed after it."""
    with fencing.committing(what):
        yield (
            load_iceberg_table(spark, ref),
            _jvm(spark).org.apache.iceberg.spark.actions.SparkActions.get(_jsession(spark)),
        )
        _refresh(spark, ref)


def _strategy(
    spark: SparkSession, action: JavaObject, java_table: JavaObject, strategy: str, sort_order: str | None
) -> JavaObject:
    """RewriteDataFilesProcedure.checkAndApplyStrategy: binpack, or sort by the table's order, by
    columns, or by a z-order expression (parsed by Iceberg's own SQL parser)."""
    if strategy == "binpack" and sort_order is None:
        return action.binPack()
    if sort_order is None:
        return action.sort()
    jvm = _jvm(spark)
    fields = list(jvm.org.apache.iceberg.spark.ExtendedParser.parseSortOrder(_jsession(spark), sort_order))
    zorder = [f for f in fields if f.term().getClass().getSimpleName() == "Zorder"]
    if zorder and len(zorder) != len(fields):
        raise ValueError(f"cannot mix sort columns and a zorder expression: {sort_order}")
    if strategy == "binpack":
        raise ValueError(f"the binpack strategy takes no sort order (got {sort_order!r})")
    if zorder:
        names = [ref.name() for f in zorder for ref in f.term().refs()]
        return action.zOrder(_java_strings(spark, names))  # String... columns
    builder = jvm.org.apache.iceberg.SortOrder.builderFor(java_table.schema())
    for f in fields:
        builder = builder.sortBy(f.term(), f.direction(), f.nullOrder())
    return action.sort(builder.build())


def _java_strings(spark: SparkSession, values: list[str]) -> Any:
    gateway = spark.sparkContext._gateway  # noqa: SLF001 - py4j's array constructor
    assert gateway is not None
    array = gateway.new_array(_jvm(spark).java.lang.String, len(values))
    for i, value in enumerate(values):
        array[i] = value
    return array


def rewrite_data_files(
    spark: SparkSession,
    ref: TableRef,
    strategy: str,
    sort_order: str | None,
    options: Mapping[str, str],
    where: str | None,
) -> dict[str, Any]:
    with _acting(spark, ref, "rewrite_data_files") as (table, actions):
        action = actions.rewriteDataFiles(table).options(dict(options))
        action = _strategy(spark, action, table, strategy, sort_order)
        if where is not None:
            action = action.filter(_filter(spark, ref, where))
        result = _tagged(spark, action).execute()
    return {
        "rewritten_data_files_count": int(result.rewrittenDataFilesCount()),
        "added_data_files_count": int(result.addedDataFilesCount()),
        "rewritten_bytes_count": int(result.rewrittenBytesCount()),
        "failed_data_files_count": int(result.failedDataFilesCount()),
        "removed_delete_files_count": int(result.removedDeleteFilesCount()),
    }


def rewrite_manifests(spark: SparkSession, ref: TableRef) -> dict[str, Any]:
    with _acting(spark, ref, "rewrite_manifests") as (table, actions):
        result = _tagged(spark, actions.rewriteManifests(table)).execute()
    return {
        "rewritten_manifests_count": sum(1 for _ in result.rewrittenManifests()),
        "added_manifests_count": sum(1 for _ in result.addedManifests()),
    }


def rewrite_position_delete_files(
    spark: SparkSession, ref: TableRef, options: Mapping[str, str], where: str | None
) -> dict[str, Any]:
    with _acting(spark, ref, "rewrite_position_delete_files") as (table, actions):
        action = actions.rewritePositionDeletes(table).options(dict(options))
        if where is not None:
            action = action.filter(_filter(spark, ref, where))
        result = _tagged(spark, action).execute()
    return {
        "rewritten_delete_files_count": int(result.rewrittenDeleteFilesCount()),
        "added_delete_files_count": int(result.addedDeleteFilesCount()),
        "rewritten_bytes_count": int(result.rewrittenBytesCount()),
        "added_bytes_count": int(result.addedBytesCount()),
    }


def compute_table_stats(spark: SparkSession, ref: TableRef, columns: Sequence[str]) -> dict[str, Any]:
    """ComputeTableStatsProcedure's work through its action: NDV theta sketches of ``columns`` of the
    current snapshot in one Puffin file, registered in the table metadata (``updateStatistics``: a
    metadata commit, no snapshot, so no snapshot property to carry). Empty when the table has no
    snapshot."""
    with _acting(spark, ref, "compute_table_stats") as (table, actions):
        action = actions.computeTableStats(table)
        if columns:
            action = action.columns(_java_strings(spark, list(columns)))
        stats_file = action.execute().statisticsFile()
    if stats_file is None:
        return {}
    return {
        "statistics_file": str(stats_file.path()),
        "snapshot_id": int(stats_file.snapshotId()),
        "file_size_in_bytes": int(stats_file.fileSizeInBytes()),
        "ndv": {
            int(blob.fields()[0]): int(blob.properties().get("ndv") or -1)
            for blob in stats_file.blobMetadata()
            if blob.fields().size()
        },
    }


def compute_partition_stats(spark: SparkSession, ref: TableRef) -> dict[str, Any]:
    """ComputePartitionStatsProcedure's work through its action: the current snapshot's partition
    statistics file (incremental from an earlier one), registered in the table metadata
    (``updatePartitionStatistics``, no snapshot). Empty when there is nothing to compute."""
    with _acting(spark, ref, "compute_partition_stats") as (table, actions):
        stats_file = actions.computePartitionStats(table).execute().statisticsFile()
    if stats_file is None:
        return {}
    return {
        "partition_statistics_file": str(stats_file.path()),
        "snapshot_id": int(stats_file.snapshotId()),
        "file_size_in_bytes": int(stats_file.fileSizeInBytes()),
    }
