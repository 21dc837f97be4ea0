"""A day-partitioned table of many small files written by Spark in one commit (tests, benchmarks).

``repartition(tasks)`` spreads every day over every task, and a fanout write (no shuffle by
partition) makes each task write one file per day: ``tasks x days`` files, cheaply."""

from __future__ import annotations

from pyspark.sql import SparkSession, functions as F

from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.spark.procedures import table_identifier


def write_many_files(
    spark: SparkSession, ref: TableRef, files: int, days: int, rows_per_file: int = 5
) -> None:
    """Create ``ref`` (id, day, payload; partitioned by day) holding ``files`` small files."""
    if files % days:
        raise ValueError(f"files ({files}) must be a multiple of days ({days})")
    tasks = files // days
    name = table_identifier(ref)
    spark.sql(
        f"CREATE TABLE {name} (id BIGINT, day DATE, payload STRING) USING iceberg PARTITIONED BY (day) "
        "TBLPROPERTIES ('write.distribution-mode'='none', 'format-version'='2')"
    )
    rows = files * rows_per_file
    df = (
        spark.range(rows)
        .withColumn("day", F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % days).cast("int")))
        .withColumn("payload", F.sha2(F.col("id").cast("string"), 256))
        .repartition(tasks)
    )
    df.writeTo(name).option("fanout-enabled", "true").append()
