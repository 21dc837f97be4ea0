"""Object storage benchmark (issue 20): the same work on SeaweedFS (S3 + Iceberg REST catalog) and on
local disk (SQLite catalog), in one run, one process, ratios S3 / local.

    flock /tmp/icelake-spark.lock .venv/bin/python -m bench.health.object_store_bench
    ... --files 20000 --orphans 100000 --maint-files 2000 --repeat 3

(a) health of an N-file table (30 day partitions, 20 commits, cloned DataFiles over real objects):
    cold (a new manifest cache) with 1 and 4 reader threads, re-evaluation without a new commit, and
    Spark's `files` GROUP BY with a warm JVM (S3A from the catalog properties alone);
(b) the orphan scan of a table whose data folder holds ``--orphans`` extra objects (S3 listing pages of
    1,000; LastModified as age: the scan is asked "as of" 4 days later so they count as old);
(c) Iceberg's rewrite_data_files + rewrite_manifests of an ``--maint-files``-file table, in one Spark
    session holding both catalogs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from bench.health.health_bench import _CLONED, COMMITS, PARTITIONS, timed
from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.demo import s3_lake
from icelake_assets.demo.lake import TRIPS_SCHEMA, TRIPS_SPEC, trips_batch
from icelake_assets.demo.seaweedfs import seaweedfs_server
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.orphans import scan_orphans
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.planning.health import evaluate
from icelake_assets.settings import Settings

LOCAL, S3 = "local", "s3"
THREADS = 16  # uploads and deletes in flight


def _templates(table: Table) -> list[tuple[bytes, DataFile]]:
    """One 10-row parquet file per day partition: its bytes and the statistics pyiceberg derives."""
    rng = np.random.default_rng(7)
    out = []
    for day in range(PARTITIONS):
        rows = trips_batch(rng, day * 10, 10, 1)
        shift = pa.scalar(np.timedelta64(day, "D").astype("timedelta64[us]"))
        rows = rows.set_column(1, "pickup_at", pc.add(rows["pickup_at"], shift))
        rows = rows.set_column(2, "dropoff_at", pc.add(rows["dropoff_at"], shift))
        path = f"{table.metadata.location.rstrip('/')}/data/templates/day-{day:03d}.parquet"
        with table.io.new_output(path).create(overwrite=True) as out_file:
            pq.write_table(rows, out_file)
        with table.io.new_input(path).open() as f:
            data = f.read()
        out.append((data, parquet_file_to_data_file(table.io, table.metadata, path)))
    return out


def _put_many(table: Table, paths_and_bytes: list[tuple[str, bytes]]) -> None:
    def put(item: tuple[str, bytes]) -> None:
        with table.io.new_output(item[0]).create(overwrite=True) as out:
            out.write(item[1])

    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(put, paths_and_bytes))


def build_table(settings: Settings, catalog: str, name: str, files: int) -> tuple[TableRef, float]:
    """A table of ``files`` small real files in 30 day partitions by 20 fast-append commits."""
    cat = open_catalog(settings, catalog, create=True)
    cat.create_namespace_if_not_exists("bench")
    ref = TableRef(catalog, ("bench",), name)
    if cat.table_exists(ref.identifier):
        cat.purge_table(ref.identifier)
    table = cat.create_table(ref.identifier, schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
    started = time.perf_counter()
    templates = _templates(table)
    data = f"{table.metadata.location.rstrip('/')}/data"
    per_commit = max(1, files // COMMITS)
    for c in range(COMMITS):
        batch = []
        for i in range(per_commit):
            source, template = templates[i % len(templates)]
            batch.append((f"{data}/c{c:03d}-{i:07d}-{uuid.uuid4().hex[:8]}.parquet", source, template))
        _put_many(table, [(p, b) for p, b, _ in batch])
        with table.transaction() as tx, tx.update_snapshot().fast_append() as append:
            for path, _, template in batch:
                clone = DataFile.from_args(**{k: getattr(template, k) for k in _CLONED}, file_path=path)
                clone.spec_id = table.metadata.default_spec_id
                append.append_data_file(clone)
    return ref, time.perf_counter() - started


def measure_health(settings: Settings, ref: TableRef, repeat: int, spark) -> dict[str, float]:
    cat = open_catalog(settings, ref.catalog)
    table = load_table(cat, ref)
    policy = settings.thresholds

    def cold(threads: int | None) -> object:
        return evaluate(compute_table_stats(table, policy, ManifestCache(read_threads=threads)), policy)

    r: dict[str, float] = {}
    r["cold_1"], health = timed(lambda: cold(1), repeat)
    r["cold_4"], _ = timed(lambda: cold(4), repeat)
    cache = ManifestCache()
    compute_table_stats(table, policy, cache)
    r["again"], _ = timed(lambda: compute_table_stats(load_table(cat, ref), policy, cache), repeat)
    from icelake_assets.maintenance.spark.procedures import table_identifier

    query = f"SELECT partition, count(*), sum(file_size_in_bytes) FROM {table_identifier(ref)}.files GROUP BY partition"
    spark.sql(query).collect()  # warm
    r["spark"], rows = timed(lambda: spark.sql(query).collect(), repeat)
    assert sum(row[1] for row in rows) == health.stats.data_files  # type: ignore[attr-defined]
    r["files"] = health.stats.data_files  # type: ignore[attr-defined]
    return r


def measure_orphans(settings: Settings, ref: TableRef, orphans: int, repeat: int) -> tuple[float, int]:
    table = load_table(open_catalog(settings, ref.catalog), ref)
    data = f"{table.metadata.location.rstrip('/')}/data/stray"
    _put_many(table, [(f"{data}/orphan-{i:07d}.parquet", b"x") for i in range(orphans)])
    later = time.time() + 4 * 86400
    seconds, scan = timed(lambda: scan_orphans(table, str(ref), 72, now=later), repeat)
    return seconds, len(scan.orphans)  # type: ignore[attr-defined]


def measure_maintenance(spark, ref: TableRef) -> dict[str, float]:
    from icelake_assets.maintenance.spark import procedures

    started = time.perf_counter()
    procedures.rewrite_data_files(spark, ref, options={"min-input-files": "2"})
    mid = time.perf_counter()
    procedures.rewrite_manifests(spark, ref)
    return {"rewrite_data_files": mid - started, "rewrite_manifests": time.perf_counter() - mid}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--orphans", type=int, default=100_000)
    parser.add_argument("--maint-files", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="icelake-objstore-bench-"))
    key, secret = "bench-admin", uuid.uuid4().hex
    try:
        with seaweedfs_server((key, secret), folder=root / "seaweedfs") as server:
            os.environ.update(s3_lake.lake_environment(key, secret, root / "unused.yaml"))
            os.environ.pop("ICELAKE_CONFIG", None)
            (root / "warehouse").mkdir()
            settings = Settings(
                catalogs={
                    LOCAL: {
                        "type": "sql",
                        "uri": f"sqlite:///{root / 'catalog.db'}",
                        "warehouse": (root / "warehouse").as_uri(),
                    },
                    S3: {
                        k: os.path.expandvars(v) if isinstance(v, str) else v
                        for k, v in _resolved(server, key, secret).items()
                    },
                }
            )
            report(settings, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _resolved(server, key: str, secret: str) -> dict:
    props = s3_lake.catalog_properties(server)
    props["s3.access-key-id"], props["s3.secret-access-key"] = key, secret
    props["auth"] = {
        "type": "oauth2",
        "oauth2": {"client_id": key, "client_secret": secret, "token_url": server.token_url},
    }
    return props


def report(settings: Settings, args: argparse.Namespace) -> None:
    from icelake_assets.maintenance.spark.session import spark_config
    from icelake_assets.orchestration.resources import IcebergSparkResource

    print(f"load before: {os.getloadavg()[0]:.2f}", flush=True)
    built = {}
    refs = {}
    for cat in (LOCAL, S3):
        refs[cat], built[cat] = build_table(settings, cat, "health", args.files)
        print(f"built {refs[cat]} ({args.files:,} files) in {built[cat]:.1f} s", flush=True)
    maint = {cat: build_table(settings, cat, "maint", args.maint_files)[0] for cat in (LOCAL, S3)}
    # pyiceberg commits first: Spark's JDBC catalog then holds the SQLite file for its lifetime.
    orphans = {cat: measure_orphans(settings, refs[cat], args.orphans, args.repeat) for cat in (LOCAL, S3)}
    spark = IcebergSparkResource(
        spark_config=spark_config(settings, app_name="object_store_bench")
    ).spark_session
    health = {cat: measure_health(settings, refs[cat], args.repeat, spark) for cat in (LOCAL, S3)}
    maintenance = {cat: measure_maintenance(spark, maint[cat]) for cat in (LOCAL, S3)}
    print(f"load after: {os.getloadavg()[0]:.2f}\n")

    def row(label: str, local: float, s3: float, unit: str = "ms") -> str:
        k = 1000 if unit == "ms" else 1
        return f"| {label} | {local * k:,.1f} {unit} | {s3 * k:,.1f} {unit} | {s3 / local:.2f} |"

    lines = [
        "| measurement | local disk (SQLite) | SeaweedFS (S3 + REST) | S3 / local |",
        "|---|---|---|---|",
    ]
    lines.append(row(f"build {args.files:,}-file table (upload + 20 commits)", built[LOCAL], built[S3], "s"))
    h_l, h_s = health[LOCAL], health[S3]
    lines.append(row("cold health, 1 reader thread", h_l["cold_1"], h_s["cold_1"]))
    lines.append(row("cold health, 4 reader threads", h_l["cold_4"], h_s["cold_4"]))
    lines.append(row("re-evaluation, no new commit (catalog load incl.)", h_l["again"], h_s["again"]))
    lines.append(row("Spark `files` GROUP BY (JVM warm)", h_l["spark"], h_s["spark"]))
    lines.append(
        f"| cold health (1 thread) / Spark GROUP BY | {h_l['cold_1'] / h_l['spark']:.2f} | "
        f"{h_s['cold_1'] / h_s['spark']:.2f} | |"
    )
    (o_l, n_l), (o_s, n_s) = orphans[LOCAL], orphans[S3]
    lines.append(row(f"orphan scan, {args.orphans:,} extra objects (found {n_l:,} / {n_s:,})", o_l, o_s, "s"))
    lines.append(
        f"| orphan scan, objects listed per second | {(args.orphans + args.files) / o_l:,.0f} | {(args.orphans + args.files) / o_s:,.0f} | |"
    )
    for op in ("rewrite_data_files", "rewrite_manifests"):
        lines.append(
            row(f"{op}, {args.maint_files:,}-file table", maintenance[LOCAL][op], maintenance[S3][op], "s")
        )
    print("\n".join(lines))
    spark.stop()


if __name__ == "__main__":
    main()
