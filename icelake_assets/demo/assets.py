"""The demo's own pipeline around ``taxi.trips``: a writer asset that appends micro-batches with
pyiceberg (each commit adds one tiny file per day it touches: the small files maintenance fixes) and
a consumer asset that aggregates the maintained table with Spark. They exist when the settings name
their keys in a table's lineage (see orchestration/assets/lineage.py), as the demo's icelake.yaml does;
the demo package registers them there (demo/__init__.py)."""

import time

from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    Config,
    Failure,
    MaterializeResult,
    MetadataValue,
    asset,
)
from pydantic import Field

from icelake_assets.catalog.connection import TableRef
from icelake_assets.demo.lake import TRIPS_SCHEMA, degrade_trips
from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.orchestration.assets.lineage import LineageBuilders
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcebergSparkResource, IcelakeResource

WRITER_KEY = AssetKey(["icelake_demo", "trips_writer"])
CONSUMER_KEY = AssetKey(["icelake_demo", "daily_revenue"])
GROUP = "icelake_demo"


class WriterConfig(Config):
    batches: int = Field(5, ge=1, le=1000, description="micro-batches, one commit each")
    rows_per_batch: int = Field(60, ge=1, description="rows per micro-batch, round-robin over the days")
    days: int = Field(6, ge=1, description="days (partitions) each micro-batch touches")


def build_demo_writer(ref: TableRef, key: AssetKey = WRITER_KEY) -> AssetsDefinition:
    @asset(
        key=key,
        group_name=GROUP,
        kinds={"iceberg", "python"},
        description=f"Demo writer: appends micro-batches of taxi trips to `{ref}` with pyiceberg, one "
        "commit per batch. Each commit writes one tiny file per day it touches, which is how "
        "streaming writers degrade a table.",
    )
    def trips_writer(
        context: AssetExecutionContext, config: WriterConfig, icelake: IcelakeResource
    ) -> MaterializeResult:
        table = icelake.load_table(ref)
        if [f.name for f in table.schema().fields] != [f.name for f in TRIPS_SCHEMA.fields]:
            raise Failure(
                description=f"{ref} does not have the demo's taxi trips schema: the demo writer "
                f"only writes to a table created by `icelake demo-lake`"
            )
        started = time.perf_counter()
        # A fresh seed per run: new trips, new files (ids continue from the table's record count).
        seed = time.time_ns() % 2**32
        rows = degrade_trips(table, config.days, config.batches, config.rows_per_batch, seed=seed)
        snapshot = table.current_snapshot()
        summary = snapshot.summary if snapshot is not None else None
        assert summary is not None, "an append always leaves a snapshot with a summary"
        context.log.info(f"{ref}: appended {rows} rows in {config.batches} commits")
        return MaterializeResult(
            metadata={
                "rows_appended": MetadataValue.int(rows),
                "commits": MetadataValue.int(config.batches),
                "table_data_files": MetadataValue.int(int(summary["total-data-files"] or 0)),
                "duration_s": MetadataValue.float(round(time.perf_counter() - started, 2)),
            }
        )

    return trips_writer


def build_demo_consumer(ref: TableRef, key: AssetKey = CONSUMER_KEY) -> AssetsDefinition:
    @asset(
        key=key,
        group_name=GROUP,
        kinds={"spark"},
        deps=[table_asset_key(ref)],
        description=f"Demo consumer: trips and revenue per day, aggregated with Spark from `{ref}`. "
        "It reads one file per small file: its duration drops after compaction.",
    )
    def daily_revenue(
        context: AssetExecutionContext, icelake_spark: IcebergSparkResource
    ) -> MaterializeResult:
        spark = icelake_spark.spark_session
        started = time.perf_counter()
        rows = spark.sql(
            "SELECT CAST(pickup_at AS DATE) AS day, COUNT(*) AS trips, ROUND(SUM(fare), 2) AS revenue "
            f"FROM {table_identifier(ref)} GROUP BY 1 ORDER BY 1"
        ).collect()
        duration = time.perf_counter() - started
        lines = [
            "| day | trips | revenue |",
            "|---|---:|---:|",
            *(f"| {r['day']} | {r['trips']} | {r['revenue']:.2f} |" for r in rows[:31]),
        ]
        context.log.info(f"{ref}: {len(rows)} days aggregated in {duration:.2f}s")
        return MaterializeResult(
            metadata={
                "days": MetadataValue.int(len(rows)),
                "trips": MetadataValue.int(sum(int(r["trips"]) for r in rows)),
                "revenue": MetadataValue.float(float(sum(r["revenue"] or 0 for r in rows))),
                "query_s": MetadataValue.float(round(duration, 2)),
                "per_day": MetadataValue.md("\n".join(lines)),
            }
        )

    return daily_revenue


# By role: the writer only makes sense upstream of its table, the consumer downstream.
DEMO_LINEAGE = LineageBuilders(
    producers={WRITER_KEY: build_demo_writer}, consumers={CONSUMER_KEY: build_demo_consumer}
)
