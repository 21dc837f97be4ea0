"""Query latency users feel, before and after the product's maintenance (issue 33, item 3).

    python -m bench.loop.query_bench                  # the demo lake (3,600 small trip files)
    python -m bench.loop.query_bench --scale test --repeat 3

Builds the degraded demo lake in a temporary folder, z-orders ``taxi.trips`` by (fare, distance_km)
(its policy says so), and times a fixed set of queries users run on it in Spark and in DuckDB (its
iceberg extension, offline) before and after one maintenance run of every table through Dagster
(the product's ops, in this process): a filter on the partition column, a range on a z-ordered
column, a point lookup, an aggregate, and a join of two tables. Each query runs once to warm up,
then ``--repeat`` times; the median is kept. Prints a Markdown table with the ratio before/after
per query and engine, and each engine's geometric mean. Exits 1 when a query's answer changed.
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from dagster import DagsterInstance

from bench.loop.loop_bench import write_settings
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.maintenance.verify.cross_engine import extension_path
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.settings import Settings, load_settings

TABLES = {"trips": ("taxi", "trips"), "clicks": ("events", "clicks"), "orders": ("sales", "orders")}
# The trips' z-order: a range on fare then skips most files once the table is clustered.
ZORDER = ("fare", "distance_km")

# name -> SQL over {trips}, {clicks}, {orders} (each engine substitutes its own table reference).
QUERIES: dict[str, str] = {
    "partition filter (one day)": (
        "SELECT count(*) AS n, round(avg(fare), 4) AS fare FROM {trips} "
        "WHERE pickup_at >= TIMESTAMP '2024-01-05 00:00:00' AND pickup_at < TIMESTAMP '2024-01-06 00:00:00'"
    ),
    "z-ordered column range": (
        "SELECT count(*) AS n, round(sum(distance_km), 4) AS km FROM {trips} WHERE fare BETWEEN 40 AND 41"
    ),
    "point lookup": "SELECT trip_id, vendor, fare FROM {trips} WHERE trip_id = 4242",
    "aggregate": (
        "SELECT vendor, payment_type, count(*) AS n, round(sum(fare), 2) AS fare FROM {trips} "
        "GROUP BY vendor, payment_type ORDER BY vendor, payment_type"
    ),
    "join of two tables": (
        "SELECT o.region, count(*) AS n FROM {clicks} c JOIN {orders} o ON c.user_id = o.customer_id "
        "GROUP BY o.region ORDER BY o.region"
    ),
}


@dataclass(frozen=True)
class Timing:
    query: str
    engine: str
    median_s: float
    answer: tuple[Any, ...]


def _settings(folder: Path) -> Settings:
    folder.mkdir(parents=True)
    settings = write_settings(folder)
    data = yaml.safe_load(Path(settings.source).read_text())
    data.setdefault("policies", {}).setdefault("tables", {})["demo.taxi.trips"] = {
        "small_files": {"strategy": "zorder", "zorder_columns": list(ZORDER)}
    }
    Path(settings.source).write_text(yaml.safe_dump(data))
    return load_settings(settings.source)


def _median(run: Callable[[], tuple[Any, ...]], repeat: int) -> tuple[float, tuple[Any, ...]]:
    answer = run()  # warm-up: caches, JIT, the engine's first planning
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        again = run()
        times.append(time.perf_counter() - started)
        if again != answer:
            raise SystemExit(f"a query answered differently run to run: {answer} / {again}")
    return statistics.median(times), answer


def _spark_runner(spark: Any, refs: dict[str, TableRef]) -> Callable[[str], Callable[[], tuple[Any, ...]]]:
    names = {k: table_identifier(r) for k, r in refs.items()}

    def runner(sql: str) -> Callable[[], tuple[Any, ...]]:
        text = sql.format(**names)
        return lambda: tuple(tuple(r) for r in spark.sql(text).collect())

    return runner


def _duckdb_runner(
    settings: Settings, refs: dict[str, TableRef]
) -> Callable[[str], Callable[[], tuple[Any, ...]]]:
    import duckdb

    con = duckdb.connect()
    for package in ("duckdb_extension_avro", "duckdb_extension_iceberg"):
        con.execute(f"LOAD '{extension_path(package)}'")
    catalog = open_catalog(settings, "demo")
    # The current metadata of each table, read now (after maintenance: the new one).
    scans = {
        k: "iceberg_scan('"
        + catalog.load_table(r.identifier).metadata_location.removeprefix("file://")
        + "')"
        for k, r in refs.items()
    }

    def runner(sql: str) -> Callable[[], tuple[Any, ...]]:
        text = sql.format(**scans)
        return lambda: tuple(tuple(r) for r in con.execute(text).fetchall())

    return runner


def _normalise(answer: tuple[Any, ...]) -> tuple[Any, ...]:
    """Engines return floats and decimals differently: compare rounded numbers."""
    return tuple(
        tuple(round(float(v), 2) if isinstance(v, (float, int)) else v for v in row) for row in answer
    )


def measure(settings: Settings, spark: Any, repeat: int) -> list[Timing]:
    refs = {k: TableRef("demo", (ns,), name) for k, (ns, name) in TABLES.items()}
    out = []
    engines = {"spark": _spark_runner(spark, refs), "duckdb": _duckdb_runner(settings, refs)}
    for engine, runner in engines.items():
        for name, sql in QUERIES.items():
            seconds, answer = _median(runner(sql), repeat)
            out.append(Timing(name, engine, seconds, _normalise(answer)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scale", default="demo", help="demo lake preset (demo, test)")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per query and engine (median)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="query_bench_"))
    try:
        settings = _settings(root / "lake")
        started = time.perf_counter()
        build_demo_lake(settings, catalog="demo", scale=args.scale, reset=True)
        print(f"demo lake ({args.scale}) built in {time.perf_counter() - started:.0f} s", flush=True)
        spark = IcebergSparkResource(spark_config=spark_config(settings)).spark_session
        before = measure(settings, spark, args.repeat)
        started = time.perf_counter()
        results = execute_maintenance(build_definitions(settings), DagsterInstance.ephemeral())
        maintained = time.perf_counter() - started
        if not all(r.success for r in results):
            sys.exit("a maintenance run failed")
        spark.catalog.clearCache()
        after = measure(settings, spark, args.repeat)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"\nmaintenance: {len(results)} runs in {maintained:.0f} s; median of {args.repeat} runs each\n")
    print("| query | engine | before (s) | after (s) | before / after |\n|---|---|---|---|---|")
    ratios: dict[str, list[float]] = {}
    changed = []
    for b, a in zip(before, after, strict=True):
        ratio = b.median_s / a.median_s if a.median_s > 0 else math.inf
        ratios.setdefault(b.engine, []).append(ratio)
        print(f"| {b.query} | {b.engine} | {b.median_s:.3f} | {a.median_s:.3f} | {ratio:.2f}x |")
        if b.answer != a.answer:
            changed.append(f"{b.query} ({b.engine}): {b.answer} -> {a.answer}")
    for engine, values in ratios.items():
        geo = math.exp(sum(math.log(v) for v in values) / len(values))
        print(f"| **geometric mean** | {engine} | | | **{geo:.2f}x** |")
    if changed:
        print("\nANSWERS CHANGED:\n" + "\n".join(changed))
        sys.exit(1)


if __name__ == "__main__":
    main()
