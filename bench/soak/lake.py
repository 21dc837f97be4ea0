"""The chaos soak's lake (bench/soak/chaos_soak.py): its settings on the soak's SeaweedFS, and four
tables in ``enforce`` with no quiet period and thresholds small enough that the writers trip them
within a minute or two, so maintenance runs while they commit. ``daily`` is partitioned by
``day(ts)``: Dagster daily partitions, which the soak's backfills (bench/soak/backfill.py) target."""

from __future__ import annotations

from pathlib import Path

import yaml
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from bench.soak.stack import ROOT, Weed
from icelake_assets.demo.s3_lake import catalog_properties

# Two names: with a namespace named like its catalog, Iceberg's procedures read the product's table
# argument `soak`.`t` as catalog soak, table t, and every maintenance run fails (found by the first
# soaks: BENCHMARKS.md, "Chaos soak").
CATALOG, NAMESPACE = "soak", "chaos"
SENSOR_INTERVAL = 15
KEY = "soak-admin"
POLICY = {
    "mode": "enforce",
    "guards": {"quiet_period_minutes": 0},
    "sensor": {"interval_seconds": SENSOR_INTERVAL},
    "small_files": {"max_files_per_partition": 8, "min_input_files": 2},
    "snapshots": {"max_count": 15, "min_keep": 3, "min_age_hours": 0},
    "manifests": {"max_count": 8},
}
MOR = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read"}


TABLES = ("mor_deletes", "cow_deletes", "evolving", "daily")
DAILY = "daily"  # partitioned by day(ts)
TIME_COLUMN = "ts"


def write_settings(folder: Path, weed: Weed) -> Path:
    data = yaml.safe_load((ROOT / "icelake.yaml").read_text())
    data["catalogs"] = {CATALOG: catalog_properties(weed.server)}
    data["policies"] = {"catalogs": {CATALOG: POLICY}}
    data["automation"] = {
        **data.get("automation", {}),
        "sensor_default_status": "running",
        "schedules_default_status": "stopped",  # the checks' schedules would only take run slots
    }
    data["metrics"] = {"textfile_dir": str(folder / "metrics")}
    path = folder / "icelake.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def create_tables(settings) -> None:
    from icelake_assets.catalog.connection import open_catalog

    catalog = open_catalog(settings, CATALOG)
    catalog.create_namespace_if_not_exists(NAMESPACE)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "payload", StringType(), required=False),
        NestedField(3, "written_ms", LongType(), required=False),
    )
    dated = Schema(*schema.fields, NestedField(4, TIME_COLUMN, TimestampType(), required=False))
    by_day = PartitionSpec(
        PartitionField(source_id=4, field_id=1000, transform=DayTransform(), name="ts_day")
    )
    for name in TABLES:
        props = {"format-version": "2", **(MOR if name == "mor_deletes" else {})}
        if name == DAILY:
            catalog.create_table((NAMESPACE, name), schema=dated, partition_spec=by_day, properties=props)
        else:
            catalog.create_table((NAMESPACE, name), schema=schema, properties=props)


def table_loader(settings):
    """A soak table by its name (``catalog.namespace.table``), from a catalog opened for the call (the
    catalog may have restarted since the last one)."""
    from icelake_assets.catalog.connection import open_catalog

    return lambda name: open_catalog(settings, CATALOG).load_table((NAMESPACE, name.rsplit(".", 1)[-1]))
