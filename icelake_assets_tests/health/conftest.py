"""Tables whose health truth is known by construction, written with pyiceberg into a real SQLite catalog."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DoubleType, LongType, NestedField, StringType, TimestampType

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.demo.lake import local_path
from icelake_assets_tests.conftest import catalog_name, new_lake

START = np.datetime64("2024-03-01T00:00:00", "us")
US_PER_DAY = 86_400 * 1_000_000
SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestampType()),
    NestedField(3, "vendor", StringType()),
    NestedField(4, "v", DoubleType()),
)
BY_DAY = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
_names = itertools.count()


def batch(ids, days, vendor: str = "a") -> pa.Table:
    """Rows with the given ids; row i falls on day ``days[i]`` (an int or a sequence)."""
    ids = np.asarray(list(ids), dtype=np.int64)
    days = np.broadcast_to(np.asarray(days, dtype=np.int64), ids.shape)
    ts = START + (days * US_PER_DAY + (ids % 86_400) * 1_000_000).astype("timedelta64[us]")
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us")),
            "vendor": pa.array([vendor] * len(ids), pa.string()),
            "v": pa.array(ids * 1.5, pa.float64()),
        }
    )


def files_on_disk(table: Table) -> dict[str, int]:
    """Every data file under the table's data folder with its size: the truth from storage, not manifests."""
    root = local_path(table.metadata.location) / "data"
    return {str(p): p.stat().st_size for p in root.rglob("*.parquet")} if root.exists() else {}


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    return new_lake(tmp_path_factory)


@pytest.fixture(scope="module")
def catalog(lake) -> Catalog:
    cat = open_catalog(lake, catalog_name(lake), create=True)
    cat.create_namespace("health")
    return cat


@pytest.fixture
def new_table(catalog):
    """``new_table(spec=..., properties=...)`` creates a fresh, uniquely named table."""

    def make(
        spec: PartitionSpec = BY_DAY, properties: dict[str, str] | None = None, schema: Schema = SCHEMA
    ) -> Table:
        return catalog.create_table(
            ("health", f"t{next(_names)}_{os.getpid()}"),
            schema=schema,
            partition_spec=spec,
            properties=properties or {},
        )

    return make


def data_dir(table: Table) -> Path:
    return local_path(table.metadata.location) / "data"
