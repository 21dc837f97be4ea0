"""The sensor benchmark's lake (bench/scale/sensor_bench.py; scale_bench's and definitions_bench's
too): many small tables written with pyiceberg into a SQLite SQL catalog, generated once and cached
under ``bench/results/<name>/pristine``, copied for each run to ``.../run`` (hard links for the
immutable Iceberg files, a real copy of the catalog database), and the bench's settings over it.

Tables: ``ns00``..``ns08`` are unpartitioned, ``ns09`` is partitioned by ``day(ts)`` (two days). A
healthy table has HEALTHY_APPENDS appends (as many files per partition); every DEGRADED_EVERY-th table
is degraded with DEGRADED_APPENDS appends, over the bench's small-file threshold
(``max_files_per_partition: 5``)."""

from __future__ import annotations

import json
import multiprocessing
import random
import shutil
import sqlite3
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import closing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import yaml
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import CommitFailedException
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from bench.common.lake_copy import link_or_copy
from icelake_assets.settings import Settings, load_settings

CATALOG = "sensorbench"
NAMESPACES = 10
HEALTHY_APPENDS = 3
DEGRADED_APPENDS = 6
MAX_FILES_PER_PARTITION = 5  # healthy 3 files per partition, degraded 6: over the threshold
DEGRADED_EVERY = 10  # every 10th table of a namespace is degraded (about 10 %)
LAKE_VERSION = 1  # bump when the generated layout changes: cached lakes of another version are rebuilt
RESULTS = Path(__file__).resolve().parents[1] / "results"
T = TypeVar("T")

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False), NestedField(2, "payload", StringType(), required=False)
)
PART_SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "ts", TimestamptzType(), required=False),
    NestedField(3, "payload", StringType(), required=False),
)
PART_SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))
DAYS = (datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC))


@dataclass(frozen=True)
class BenchTable:
    namespace: str
    name: str
    partitioned: bool
    degraded: bool

    @property
    def identifier(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def key(self) -> str:  # TableRef's str(): the sensor's cursor and asset events use it
        return f"{CATALOG}.{self.namespace}.{self.name}"

    def runs_when_launched(self) -> int:
        """Run requests the sensor should make when it launches this table: one (a partitioned table's
        offending days go into one run over their range)."""
        return 1


def layout(tables: int) -> list[BenchTable]:
    namespaces = max(1, min(NAMESPACES, tables))
    out = []
    for i in range(tables):
        ns, index = i % namespaces, i // namespaces
        partitioned = namespaces > 1 and ns == namespaces - 1
        out.append(BenchTable(f"ns{ns:02d}", f"t{index:03d}", partitioned, index % DEGRADED_EVERY == 0))
    return sorted(out, key=lambda t: t.identifier)


def batch(table: BenchTable, seq: int) -> pa.Table:
    """Ten rows; a partitioned table's rows cover both days (one file per day per append)."""
    ids = pa.array(range(seq * 10, seq * 10 + 10), pa.int64())
    payload = pa.array([f"{table.name}-{seq}-{i}" for i in range(10)])
    if not table.partitioned:
        return pa.table({"id": ids, "payload": payload})
    ts = [DAYS[i % len(DAYS)] + timedelta(minutes=seq * 10 + i) for i in range(10)]
    return pa.table({"id": ids, "ts": pa.array(ts, pa.timestamp("us", tz="UTC")), "payload": payload})


def _catalog(lake: Path, busy_timeout_ms: int = 0) -> SqlCatalog:
    cat = SqlCatalog(CATALOG, uri=f"sqlite:///{lake / 'catalog.db'}", warehouse=(lake / "warehouse").as_uri())
    if busy_timeout_ms:  # parallel generation: writers wait for each other's lock instead of failing
        event.listen(
            cat.engine,
            "connect",
            lambda conn, _record: conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}"),
        )
    return cat


def _retry(what: str, action: Callable[[], T]) -> T:
    """SQLite answers "database is locked" at once when a read transaction cannot become a write one
    (the busy timeout does not help there): back off and try again."""
    for attempt in range(60):
        try:
            return action()
        except OperationalError as e:
            if "locked" not in str(e) and "busy" not in str(e):
                raise
            time.sleep(0.05 * (1 + attempt % 10) * (1 + random.random()))
    raise RuntimeError(f"{what}: the catalog database stayed locked after 60 attempts")


def _generate_tables(lake: Path, tables: list[BenchTable], healthy_appends: int, worker: int) -> int:
    """One worker's share of the tables. Each table is checked after the fact (its snapshot count),
    so a commit that failed on a locked database is retried, never doubled."""
    started = time.perf_counter()
    cat = _catalog(lake, busy_timeout_ms=30_000)
    for n, t in enumerate(tables, 1):

        def create(t: BenchTable = t) -> Table:
            if cat.table_exists(t.identifier):  # a retried create whose first attempt committed
                return cat.load_table(t.identifier)
            if t.partitioned:
                return cat.create_table(t.identifier, PART_SCHEMA, partition_spec=PART_SPEC)
            return cat.create_table(t.identifier, SCHEMA)

        iceberg = _retry(f"create {t.key}", create)
        appends = DEGRADED_APPENDS if t.degraded else healthy_appends
        while (done := len(iceberg.snapshots())) < appends:
            try:
                iceberg.append(batch(t, done))
            except (OperationalError, CommitFailedException) as e:
                if isinstance(e, OperationalError) and "locked" not in str(e) and "busy" not in str(e):
                    raise
                time.sleep(0.05 * (1 + random.random()))
                iceberg = _retry(f"reload {t.key}", partial(cat.load_table, t.identifier))
        if n % 100 == 0 or n == len(tables):
            print(
                f"  worker {worker}: {n}/{len(tables)} tables in {time.perf_counter() - started:.0f}s",
                flush=True,
            )
    cat.engine.dispose()
    return len(tables)


def _journal_mode(lake: Path, mode: str) -> None:
    with closing(sqlite3.connect(lake / "catalog.db")) as conn:
        got = conn.execute(f"PRAGMA journal_mode = {mode}").fetchone()[0]
    if got.upper() != mode:
        raise RuntimeError(f"{lake / 'catalog.db'}: journal mode {got}, expected {mode}")


def generate(
    lake: Path, tables: list[BenchTable], healthy_appends: int = HEALTHY_APPENDS, workers: int = 1
) -> float:
    """Build the lake with pyiceberg appends; returns the seconds it took. With ``workers`` > 1, that
    many processes write disjoint namespaces into the one SQLite catalog (WAL mode while they run)."""
    shutil.rmtree(lake, ignore_errors=True)
    (lake / "warehouse").mkdir(parents=True)
    started = time.perf_counter()
    cat = _catalog(lake)
    namespaces = sorted({t.namespace for t in tables})
    for ns in namespaces:
        cat.create_namespace(ns)
    workers = max(1, min(workers, len(namespaces)))
    if workers == 1:
        _generate_tables(lake, tables, healthy_appends, 1)
    else:
        cat.engine.dispose()
        _journal_mode(lake, "WAL")
        shares = [[t for t in tables if namespaces.index(t.namespace) % workers == w] for w in range(workers)]
        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(workers, mp_context=context) as pool:
            args = ([lake] * workers, shares, [healthy_appends] * workers, range(1, workers + 1))
            done = list(pool.map(_generate_tables, *args))
        if sum(done) != len(tables):
            raise RuntimeError(f"generation: {sum(done)} tables written, {len(tables)} expected")
        _journal_mode(lake, "DELETE")  # back to one file (checkpointed): as a one-worker lake
    cat.engine.dispose()
    return time.perf_counter() - started


def prepare_lake(
    root: Path,
    tables: list[BenchTable],
    rebuild: bool,
    healthy_appends: int = HEALTHY_APPENDS,
    workers: int = 1,
) -> tuple[Path, float | None]:
    """The run's working copy of the cached lake (generated first when missing or stale)."""
    pristine, run = root / "pristine", root / "run"
    marker = root / "lake.json"
    wanted = {
        "version": LAKE_VERSION,
        "tables": len(tables),
        "healthy_appends": healthy_appends,
        "pristine": str(pristine),
        "run": str(run),
    }
    generated = None
    if rebuild or not marker.exists() or json.loads(marker.read_text()) != wanted:
        marker.unlink(missing_ok=True)
        print(f"generating {len(tables)} tables under {run} ...", flush=True)
        # generated in place: metadata holds absolute paths
        generated = generate(run, tables, healthy_appends, workers)
        shutil.rmtree(pristine, ignore_errors=True)
        shutil.copytree(run, pristine, copy_function=link_or_copy)
        marker.write_text(json.dumps(wanted))
    else:
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(pristine, run, copy_function=link_or_copy)
    return run, generated


def write_settings(
    folder: Path,
    lake: Path,
    tick_budget_seconds: float = 55,
    orphan_scan_hours: float | None = None,
    automation: dict | None = None,
) -> Settings:
    data = {
        "catalogs": {
            CATALOG: {
                "type": "sql",
                "uri": f"sqlite:///{lake / 'catalog.db'}",
                "warehouse": (lake / "warehouse").as_uri(),
            }
        },
        "thresholds": {
            "mode": "enforce",
            "guards": {"quiet_period_minutes": 0},
            "small_files": {"max_files_per_partition": MAX_FILES_PER_PARTITION},
        },
        "automation": {
            "tick_budget_seconds": tick_budget_seconds,
            **({"orphan_scan_hours": orphan_scan_hours} if orphan_scan_hours is not None else {}),
            **(automation or {}),
        },
        "metrics": {"textfile_dir": str(folder / "metrics")},
    }
    path = folder / "icelake.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_settings(path)
