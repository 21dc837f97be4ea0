"""The demo lake: Iceberg tables degraded the way production degrades them, built with pyiceberg only.

* ``taxi.trips``   - partitioned by day(pickup_at) and fed by micro-batches: every commit writes one
  tiny file per day it touches, so small files and manifests pile up (compaction, manifest rewrite).
* ``events.clicks`` - hundreds of tiny appends, one snapshot each (snapshot expiry).
* ``sales.orders``  - a few healthy appends plus parquet files in its data folder that no snapshot
  references, backdated so they are old enough to be removed (orphan file removal).

All data is drawn from seeded generators, so file, row and snapshot counts are known by construction.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyiceberg.catalog import Catalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table, Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import update_table_metadata
from pyiceberg.transforms import DayTransform
from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType, TimestampType

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.orphans import referenced_files
from icelake_assets.settings import Settings

DEMO_SEED = 20240101
# Fixed origin so that partitions (and thus file counts) do not depend on the day the demo is built.
START = np.datetime64("2024-01-01T00:00:00", "us")
US_PER_DAY = 86_400 * 1_000_000
ORDERS_COMMITS = (
    4  # Healthy appends before the orphans: well under the 100 metadata files Iceberg keeps in its log.
)
ORDERS_ROWS_PER_COMMIT = 250


@dataclass(frozen=True)
class DemoScale:
    """Sizes of the demo lake; ``taxi.trips`` gets ``commits * min(days, rows_per_commit)`` data files."""

    days: int
    commits: int
    rows_per_commit: int
    click_snapshots: int
    orphan_files: int

    def __post_init__(self) -> None:
        for name in ("days", "commits", "rows_per_commit", "click_snapshots"):
            if getattr(self, name) < 1:
                raise ValueError(f"DemoScale.{name} must be at least 1, got {getattr(self, name)}")
        if self.orphan_files < 0:
            raise ValueError(f"DemoScale.orphan_files must be >= 0, got {self.orphan_files}")

    @property
    def trip_files(self) -> int:
        return self.commits * min(self.days, self.rows_per_commit)

    @property
    def trip_rows(self) -> int:
        return self.commits * self.rows_per_commit


SCALES: dict[str, DemoScale] = {
    "test": DemoScale(days=6, commits=30, rows_per_commit=60, click_snapshots=60, orphan_files=3),
    "demo": DemoScale(days=30, commits=120, rows_per_commit=600, click_snapshots=300, orphan_files=20),
}

TRIPS = ("taxi", "trips")
CLICKS = ("events", "clicks")
ORDERS = ("sales", "orders")
DEMO_TABLES = (TRIPS, CLICKS, ORDERS)

# Optional columns throughout: pyarrow columns are nullable, and pyiceberg refuses to write them to required fields.
TRIPS_SCHEMA = Schema(
    NestedField(1, "trip_id", LongType()),
    NestedField(2, "pickup_at", TimestampType()),
    NestedField(3, "dropoff_at", TimestampType()),
    NestedField(4, "vendor", StringType()),
    NestedField(5, "passenger_count", IntegerType()),
    NestedField(6, "distance_km", DoubleType()),
    NestedField(7, "fare", DoubleType()),
    NestedField(8, "tip", DoubleType()),
    NestedField(9, "payment_type", StringType()),
)
TRIPS_SPEC = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="pickup_at_day")
)

CLICKS_SCHEMA = Schema(
    NestedField(1, "click_id", LongType()),
    NestedField(2, "clicked_at", TimestampType()),
    NestedField(3, "user_id", LongType()),
    NestedField(4, "page", StringType()),
)

ORDERS_SCHEMA = Schema(
    NestedField(1, "order_id", LongType()),
    NestedField(2, "ordered_at", TimestampType()),
    NestedField(3, "customer_id", LongType()),
    NestedField(4, "region", StringType()),
    NestedField(5, "amount", DoubleType()),
)

VENDORS = np.array(["CMT", "VTS", "DDS"])
PAYMENTS = np.array(["card", "cash", "app", "dispute"])
PAGES = np.array(["/", "/search", "/product", "/cart", "/checkout"])
REGIONS = np.array(["emea", "amer", "apac"])


def resolve_scale(scale: str | DemoScale) -> DemoScale:
    if isinstance(scale, DemoScale):
        return scale
    try:
        return SCALES[scale]
    except KeyError:
        raise ValueError(f"unknown demo scale {scale!r} (choose from {', '.join(SCALES)})") from None


def local_path(location: str) -> Path:
    """Local folder of a table location (``file://`` URI or plain path); other schemes are not local."""
    parsed = urlparse(location)
    if parsed.scheme not in ("", "file"):
        raise ValueError(f"{location} is not on the local filesystem")
    return Path(unquote(parsed.path) if parsed.scheme else location)


def _next_id(table: Table) -> int:
    """First unused id, so repeated appends to the same table never reuse ids."""
    snap = table.current_snapshot()
    return int(snap.summary["total-records"] or 0) if snap and snap.summary else 0


def _timestamps(rng: np.random.Generator, day_index: np.ndarray) -> np.ndarray:
    return START + (day_index * US_PER_DAY + rng.integers(0, US_PER_DAY, len(day_index))).astype(
        "timedelta64[us]"
    )


def trips_batch(rng: np.random.Generator, first_id: int, rows: int, days: int) -> pa.Table:
    """One micro-batch: rows spread round-robin over ``days`` days, so it touches ``min(days, rows)`` partitions."""
    pickup = _timestamps(rng, np.arange(rows) % days)
    dropoff = pickup + rng.integers(120, 3_600, rows).astype("timedelta64[s]").astype("timedelta64[us]")
    distance = np.round(rng.gamma(2.0, 2.5, rows), 2)
    fare = np.round(3.0 + distance * 1.7 + rng.normal(0, 1, rows).clip(-2, 2), 2)
    return pa.table(
        {
            "trip_id": pa.array(np.arange(first_id, first_id + rows), pa.int64()),
            "pickup_at": pa.array(pickup, pa.timestamp("us")),
            "dropoff_at": pa.array(dropoff, pa.timestamp("us")),
            "vendor": pa.array(rng.choice(VENDORS, rows), pa.string()),
            "passenger_count": pa.array(rng.integers(1, 7, rows), pa.int32()),
            "distance_km": pa.array(distance, pa.float64()),
            "fare": pa.array(fare, pa.float64()),
            "tip": pa.array(np.round(fare * rng.choice([0.0, 0.1, 0.15, 0.2], rows), 2), pa.float64()),
            "payment_type": pa.array(rng.choice(PAYMENTS, rows), pa.string()),
        }
    )


def clicks_batch(rng: np.random.Generator, first_id: int, rows: int) -> pa.Table:
    return pa.table(
        {
            "click_id": pa.array(np.arange(first_id, first_id + rows), pa.int64()),
            "clicked_at": pa.array(_timestamps(rng, np.zeros(rows, dtype=np.int64)), pa.timestamp("us")),
            "user_id": pa.array(rng.integers(1, 10_000, rows), pa.int64()),
            "page": pa.array(rng.choice(PAGES, rows), pa.string()),
        }
    )


def orders_batch(rng: np.random.Generator, first_id: int, rows: int) -> pa.Table:
    return pa.table(
        {
            "order_id": pa.array(np.arange(first_id, first_id + rows), pa.int64()),
            "ordered_at": pa.array(_timestamps(rng, rng.integers(0, 30, rows)), pa.timestamp("us")),
            "customer_id": pa.array(rng.integers(1, 5_000, rows), pa.int64()),
            "region": pa.array(rng.choice(REGIONS, rows), pa.string()),
            "amount": pa.array(np.round(rng.gamma(2.0, 40.0, rows), 2), pa.float64()),
        }
    )


class _MemoTransaction(Transaction):
    """A transaction that computes its pending metadata once per change instead of on every read.

    pyiceberg 0.12 rebuilds and deep-copies the whole table metadata each time
    ``Transaction.table_metadata`` is read (~20 times per append), which made each append cost
    O(snapshots) many times over (demo preset: 68 s instead of 44 s). The metadata models are
    frozen, so sharing one is safe.
    """

    _memo: tuple[TableMetadata, tuple[object, ...], TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        base, updates = self._table.metadata, self._updates
        if self._memo is None or self._memo[0] is not base or self._memo[1] is not updates:
            self._memo = (base, updates, update_table_metadata(base, updates))
        return self._memo[2]


def append(table: Table, df: pa.Table) -> None:
    """``table.append(df)``: one commit, one snapshot, one metadata file; only faster."""
    with _MemoTransaction(table) as tx:
        tx.append(df)


def degrade_trips(table: Table, days: int, commits: int, rows_per_commit: int, seed: int) -> int:
    """Append ``commits`` micro-batches, one commit each; returns the rows appended."""
    rng = np.random.default_rng(seed)
    first_id = _next_id(table)
    for c in range(commits):
        append(table, trips_batch(rng, first_id + c * rows_per_commit, rows_per_commit, days))
    return commits * rows_per_commit


def add_snapshots(table: Table, count: int, seed: int) -> int:
    """Make ``count`` snapshots with tiny appends (1-5 rows each); returns the rows appended."""
    rng = np.random.default_rng(seed)
    appended, first_id = 0, _next_id(table)
    for rows in rng.integers(1, 6, count).tolist():
        append(table, clicks_batch(rng, first_id + appended, rows))
        appended += rows
    return appended


def _set_mtime(path: Path, age_days: float) -> None:
    t = time.time() - age_days * 86_400
    os.utime(path, (t, t))


def plant_orphans(table: Table, count: int, age_days: float = 5.0) -> list[str]:
    """Write ``count`` valid parquet files into the data folder that no snapshot references, backdated.

    They mimic what a writer that crashed before its commit leaves behind: real data files in the
    table's schema, named like pyiceberg's own, and old enough that orphan removal may delete them.
    """
    data_dir: Path | None = None  # object storage: written through the table's FileIO, dated now
    with contextlib.suppress(ValueError):
        data_dir = local_path(table.metadata.location) / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
    # A copy of committed rows (like a retried write), or no rows in the table's schema when it is empty.
    rows = (
        table.scan(limit=10).to_arrow()
        if table.current_snapshot()
        else table.schema().as_arrow().empty_table()
    )
    planted = []
    for i in range(count):
        name = f"00000-{i}-{uuid.uuid4()}.parquet"
        if data_dir is None:
            location = f"{table.metadata.location.rstrip('/')}/data/{name}"
            with table.io.new_output(location).create(overwrite=True) as out:
                pq.write_table(rows, out)
            planted.append(location)
            continue
        path = data_dir / name
        pq.write_table(rows, path)
        _set_mtime(path, age_days)
        planted.append(str(path))
    return planted


def age_all_files(table: Table, days: float) -> None:
    """Backdate every file under the table location (data, metadata, orphans) by ``days``."""
    for path in local_path(table.metadata.location).rglob("*"):
        if path.is_file():
            _set_mtime(path, days)


def list_orphans(table: Table) -> list[str]:
    """Files under the table's data folder that no snapshot references (local tables only); unlike
    health's find_orphans, regardless of age: the files the demo planted."""
    data_dir = local_path(table.metadata.location) / "data"
    on_disk = {str(p) for p in data_dir.rglob("*") if p.is_file()} if data_dir.exists() else set()
    return sorted(on_disk - referenced_files(table))


def _prepare_local_storage(settings: Settings, catalog: str) -> None:
    """SqlCatalog neither creates the SQLite file's folder nor a file:// warehouse; do both."""
    props = settings.catalog_properties(catalog)
    uri = props.get("uri", "")
    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    warehouse = props.get("warehouse", "")
    if warehouse and urlparse(warehouse).scheme in ("", "file"):
        local_path(warehouse).mkdir(parents=True, exist_ok=True)


def _drop(cat: Catalog, identifier: tuple[str, str]) -> None:
    """Drop a table with all of its files: purge_table only deletes referenced files, not orphans."""
    if not cat.table_exists(identifier):
        return
    location = cat.load_table(identifier).metadata.location
    try:
        folder = local_path(location)
    except ValueError:
        cat.purge_table(identifier)
        return
    cat.drop_table(identifier)
    shutil.rmtree(folder, ignore_errors=True)


def build_demo_lake(
    settings: Settings, catalog: str = "demo", scale: str | DemoScale = "demo", reset: bool = False
) -> list[TableRef]:
    """Create the degraded demo tables; existing ones are kept unless ``reset``. Returns all demo table refs."""
    size = resolve_scale(scale)
    _prepare_local_storage(settings, catalog)
    cat = open_catalog(settings, catalog, create=True)
    if reset:
        for identifier in DEMO_TABLES:
            _drop(cat, identifier)
    for namespace, _ in DEMO_TABLES:
        cat.create_namespace_if_not_exists(namespace)

    if not cat.table_exists(TRIPS):
        trips = cat.create_table(TRIPS, schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
        degrade_trips(trips, size.days, size.commits, size.rows_per_commit, seed=DEMO_SEED)
    if not cat.table_exists(CLICKS):
        clicks = cat.create_table(CLICKS, schema=CLICKS_SCHEMA)
        add_snapshots(clicks, size.click_snapshots, seed=DEMO_SEED + 1)
    if not cat.table_exists(ORDERS):
        orders = cat.create_table(ORDERS, schema=ORDERS_SCHEMA)
        rng = np.random.default_rng(DEMO_SEED + 2)
        for c in range(ORDERS_COMMITS):
            append(orders, orders_batch(rng, c * ORDERS_ROWS_PER_COMMIT, ORDERS_ROWS_PER_COMMIT))
        plant_orphans(orders, size.orphan_files)
    return [TableRef(catalog, (namespace,), name) for namespace, name in DEMO_TABLES]
