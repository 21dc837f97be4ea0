"""Health benchmark: cold and incremental health evaluation against Spark and pyiceberg.

    python -m bench.health.health_bench                       # 20,000 and 100,000 files
    python -m bench.health.health_bench --files 20000 --repeat 5

For each size it builds (once, under --root) a table of N small files in 30 day-partitions written
by 20 commits, then measures in one run:

* Spark: ``SELECT partition, count(*), sum(file_size_in_bytes) FROM <t>.files GROUP BY partition``
  with a warm JVM (one untimed run first; start-up not counted);
* pyiceberg: ``table.inspect.files()``;
* cold health evaluation: a new ManifestCache (nothing cached), statistics + findings + score;
* re-evaluation with no new commit, and after one new commit (a micro-batch of one file per
  partition), both with the cache of the cold run and the table reloaded from the catalog;
* a new process whose memory is empty but whose disk cache is warm (how Dagster runs checks).

Every data file is a real parquet file (a hard link to a 10-row file of its partition), registered
with pyiceberg's fast append: 20 manifests of N/20 entries with full column statistics, like a
streaming writer's. Results are printed as a markdown table (paste into BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.io.pyarrow import parquet_file_to_data_file
from pyiceberg.manifest import DataFile
from pyiceberg.table import Table

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.demo.lake import TRIPS_SCHEMA, TRIPS_SPEC, local_path, trips_batch
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.planning.health import evaluate
from icelake_assets.settings import Settings

CATALOG = "bench"
PARTITIONS = 30
COMMITS = 20
_CLONED = (
    "content",
    "file_format",
    "partition",
    "record_count",
    "file_size_in_bytes",
    "column_sizes",
    "value_counts",
    "null_value_counts",
    "nan_value_counts",
    "lower_bounds",
    "upper_bounds",
    "split_offsets",
    "sort_order_id",
    "equality_ids",
    "key_metadata",
)


def bench_settings(root: Path) -> Settings:
    (root / "warehouse").mkdir(parents=True, exist_ok=True)
    return Settings(
        catalogs={
            CATALOG: {
                "type": "sql",
                "uri": f"sqlite:///{root / 'catalog.db'}",
                "warehouse": (root / "warehouse").as_uri(),
            }
        }
    )


def _templates(table: Table, partitions: int) -> list[tuple[Path, DataFile]]:
    """One 10-row parquet file per day partition, with the statistics pyiceberg derives from it."""
    folder = local_path(table.metadata.location) / "data" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    out = []
    for day in range(partitions):
        rows = trips_batch(rng, day * 10, 10, 1)
        shift = pa.scalar(np.timedelta64(day, "D").astype("timedelta64[us]"))
        rows = rows.set_column(1, "pickup_at", pc.add(rows["pickup_at"], shift))
        rows = rows.set_column(2, "dropoff_at", pc.add(rows["dropoff_at"], shift))
        path = folder / f"day-{day:03d}.parquet"
        pq.write_table(rows, path)
        out.append((path, parquet_file_to_data_file(table.io, table.metadata, str(path))))
    return out


def append_files(table: Table, templates: list[tuple[Path, DataFile]], count: int, tag: str) -> None:
    """One commit of ``count`` new files spread round-robin over the partitions."""
    data = local_path(table.metadata.location) / "data"
    with table.transaction() as tx:
        with tx.update_snapshot().fast_append() as append:
            for i in range(count):
                source, template = templates[i % len(templates)]
                path = data / f"{tag}-{i:07d}-{uuid.uuid4().hex[:8]}.parquet"
                os.link(source, path)
                clone = DataFile.from_args(**{k: getattr(template, k) for k in _CLONED}, file_path=str(path))
                clone.spec_id = table.metadata.default_spec_id
                append.append_data_file(clone)


def build_table(settings: Settings, files: int, rebuild: bool) -> TableRef:
    ref = TableRef(CATALOG, ("bench",), f"files_{files}")
    cat = open_catalog(settings, CATALOG, create=True)
    cat.create_namespace_if_not_exists("bench")
    if cat.table_exists(ref.identifier):
        if (
            not rebuild
            and compute_table_stats(cat.load_table(ref.identifier), settings.thresholds).data_files == files
        ):
            return ref
        location = cat.load_table(ref.identifier).metadata.location
        cat.drop_table(ref.identifier)
        shutil.rmtree(local_path(location), ignore_errors=True)
    table = cat.create_table(ref.identifier, schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
    templates = _templates(table, PARTITIONS)
    started = time.perf_counter()
    for c in range(COMMITS):
        append_files(table, templates, files // COMMITS, f"c{c:03d}")
    print(
        f"built {ref}: {files} files, {COMMITS} commits in {time.perf_counter() - started:.1f}s", flush=True
    )
    return ref


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Median wall time in seconds over ``repeat`` runs, and the last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def measure_incremental(settings: Settings, ref: TableRef, repeat: int) -> dict[str, float | int]:
    """Re-evaluation without and with a new commit, and a new process on a warm disk cache."""
    cat = open_catalog(settings, CATALOG)
    policy = settings.thresholds
    table = load_table(cat, ref)
    r: dict[str, float | int] = {}
    cache = ManifestCache()
    before = compute_table_stats(table, policy, cache).data_files
    r["no_commit_s"], health = timed(
        lambda: evaluate(compute_table_stats(load_table(cat, ref), policy, cache), policy), repeat
    )
    assert health.stats.manifests_read == 0
    r["no_commit_stats_only_s"], _ = timed(
        lambda: evaluate(compute_table_stats(table, policy, cache), policy), repeat
    )

    # One new commit (a micro-batch: one small file per partition), evaluated once: it is new only once.
    templates = [
        (p, parquet_file_to_data_file(table.io, table.metadata, str(p)))
        for p in sorted((local_path(table.metadata.location) / "data" / "templates").glob("*.parquet"))
    ]
    append_files(table, templates, PARTITIONS, f"new-{uuid.uuid4().hex[:6]}")
    started = time.perf_counter()
    after = evaluate(compute_table_stats(load_table(cat, ref), policy, cache), policy)
    r["one_new_commit_s"] = time.perf_counter() - started
    r["one_new_commit_manifests_read"] = after.stats.manifests_read
    assert after.stats.data_files == before + PARTITIONS

    root = Path(settings.catalogs[CATALOG]["uri"].removeprefix("sqlite:///")).parent
    disk = root / f"health-{uuid.uuid4().hex}.sqlite"
    compute_table_stats(load_table(cat, ref), policy, ManifestCache(path=disk))
    started = time.perf_counter()
    fresh = ManifestCache(path=disk)  # a new process: empty memory, warm disk
    again = compute_table_stats(load_table(cat, ref), policy, fresh)
    r["new_process_warm_disk_s"] = time.perf_counter() - started
    assert fresh.reads == 0 and again.data_files == after.stats.data_files
    disk.unlink(missing_ok=True)
    return r


def measure_cold(settings: Settings, ref: TableRef, repeat: int, spark) -> dict[str, float | int]:
    """Cold health evaluation, Spark's files GROUP BY and pyiceberg's readers, on the same table state."""
    cat = open_catalog(settings, CATALOG)
    policy = settings.thresholds
    table = load_table(cat, ref)
    r: dict[str, float | int] = {"files": compute_table_stats(table, policy).data_files}

    def cold(threads: int | None = None):
        return evaluate(compute_table_stats(table, policy, ManifestCache(read_threads=threads)), policy)

    r["cold_health_s"], health = timed(cold, repeat)
    assert health.stats.data_files == r["files"] and health.stats.manifests_read == health.stats.manifests
    r["cold_health_4_threads_s"], _ = timed(lambda: cold(4), repeat)
    r["catalog_load_s"], _ = timed(lambda: load_table(cat, ref), repeat)
    r["pyiceberg_inspect_files_s"], files = timed(lambda: table.inspect.files(), repeat)
    assert files.num_rows == r["files"]
    r["pyiceberg_fetch_manifest_entry_s"], _ = timed(
        lambda: sum(
            len(m.fetch_manifest_entry(table.io)) for m in table.current_snapshot().manifests(table.io)
        ),
        repeat,
    )
    if spark is not None:
        from icelake_assets.maintenance.spark.procedures import table_identifier

        query = (
            f"SELECT partition, count(*), sum(file_size_in_bytes) FROM {table_identifier(ref)}.files "
            "GROUP BY partition"
        )
        spark.sql(query).collect()  # warm: JIT, catalog cache
        r["spark_files_group_by_s"], rows = timed(lambda: spark.sql(query).collect(), repeat)
        assert len(rows) == PARTITIONS and sum(row[1] for row in rows) == r["files"]
    return r


def reader_ablation(settings: Settings, ref: TableRef, repeat: int) -> list[tuple[str, float]]:
    """The manifest reader's steps one by one (fastest of ``repeat`` runs over all current manifests)."""
    import gc

    from pyiceberg.avro.decoder import new_decoder
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.avro.resolver import ReadSchemaResolver
    from pyiceberg.schema import visit_with_partner

    from icelake_assets.health import manifests as m

    table = load_table(open_catalog(settings, CATALOG), ref)
    current = table.current_snapshot().manifests(table.io)
    projection = m._PROJECTIONS[False]

    class Projected(AvroFile):  # projection only: pyiceberg's resolver and one decoder per block
        resolver = ReadSchemaResolver

        def __enter__(self):
            with self.input_file.open() as f:
                self.decoder = new_decoder(f.read())
            self.header = self._read_header()
            self.schema = self.header.get_schema()
            self.reader = visit_with_partner(
                self.schema,
                self.read_schema,
                self.resolver(self.read_types, self.read_enums),
                m._ProjectingAccessor(),
            )
            return self

    class MapsRead(Projected):
        resolver = m._Resolver

    def iterate(cls) -> int:
        n = 0
        for manifest in current:
            with cls(table.io.new_input(manifest.manifest_path), projection) as reader:
                n += sum(1 for _ in reader)
        return n

    def ours(shared: bool = True) -> int:
        n = 0
        for manifest in current:
            if not shared:
                m._READERS.clear()
            with m._ProjectedAvroFile(table.io.new_input(manifest.manifest_path), projection) as reader:
                n += sum(1 for _ in reader.entries())
        return n

    def best(fn: Callable[[], object], gc_paused: bool = False) -> float:
        times = []
        for _ in range(repeat):
            if gc_paused:
                gc.disable()
            started = time.perf_counter()
            fn()
            times.append(time.perf_counter() - started)
            gc.enable()
        return min(times)

    return [
        (
            "pyiceberg `fetch_manifest_entry`",
            best(lambda: [x.fetch_manifest_entry(table.io) for x in current]),
        ),
        ("projected read schema (content, partition, records, size)", best(lambda: iterate(Projected))),
        ("+ skipped maps read through the Cython int-map path", best(lambda: iterate(MapsRead))),
        ("+ one decoder for all blocks of a file, reader not shared", best(lambda: ours(shared=False))),
        ("+ reader shared by manifests of one schema", best(ours)),
        ("+ cyclic GC paused (what `ManifestCache` does)", best(ours, gc_paused=True)),
    ]


def markdown(results: list[dict[str, float | int]]) -> str:
    def ms(v: float) -> str:
        return f"{v * 1000:,.1f} ms"

    rows = [
        ("Spark `files` GROUP BY (JVM warm)", "spark_files_group_by_s"),
        ("pyiceberg `inspect.files()`", "pyiceberg_inspect_files_s"),
        ("pyiceberg `fetch_manifest_entry` (all manifests)", "pyiceberg_fetch_manifest_entry_s"),
        ("**cold health evaluation** (stats + findings + score)", "cold_health_s"),
        ("cold health evaluation, 4 reader threads", "cold_health_4_threads_s"),
        ("catalog load of the table (SQLite)", "catalog_load_s"),
        ("**re-evaluation, no new commit** (incl. catalog load)", "no_commit_s"),
        ("re-evaluation, no new commit (table already loaded)", "no_commit_stats_only_s"),
        ("**re-evaluation after one new commit** (incl. catalog load)", "one_new_commit_s"),
        ("new process, warm disk cache (incl. catalog load)", "new_process_warm_disk_s"),
    ]
    head = "| measurement | " + " | ".join(f"{r['files']:,} files" for r in results) + " |"
    lines = [head, "|---|" + "---|" * len(results)]
    for label, key in rows:
        if all(key in r for r in results):
            lines.append(f"| {label} | " + " | ".join(ms(r[key]) for r in results) + " |")
    ratios = [
        (
            "cold health / Spark GROUP BY (goal ≤ 1.0)",
            lambda r: r["cold_health_s"] / r["spark_files_group_by_s"],
        ),
        (
            "inspect.files / cold health (goal ≥ 5)",
            lambda r: r["pyiceberg_inspect_files_s"] / r["cold_health_s"],
        ),
    ]
    for label, fn in ratios:
        if all("spark_files_group_by_s" in r for r in results) or "Spark" not in label:
            lines.append(f"| {label} | " + " | ".join(f"{fn(r):.2f}" for r in results) + " |")
    lines.append(
        "| manifests read after one new commit | "
        + " | ".join(str(r["one_new_commit_manifests_read"]) for r in results)
        + " |"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, nargs="+", default=[20_000, 100_000])
    parser.add_argument("--root", type=Path, default=Path("/tmp/icelake-health-bench"))
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild the tables even if present")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark comparison")
    parser.add_argument("--ablation", action="store_true", help="only time the manifest reader's steps")
    args = parser.parse_args()
    if args.ablation:
        settings = bench_settings(args.root)
        for n in args.files:
            ref = build_table(settings, n, args.rebuild)
            print(f"\n{ref} (fastest of {args.repeat}):\n\n| reader | time |\n|---|---|")
            for label, seconds in reader_ablation(settings, ref, args.repeat):
                print(f"| {label} | {seconds * 1000:,.0f} ms |")
        return

    settings = bench_settings(args.root)
    refs = [build_table(settings, n, args.rebuild) for n in args.files]
    # Every pyiceberg commit comes first: once Spark's JDBC catalog has opened the SQLite catalog, it
    # holds a lock for the session's lifetime and pyiceberg commits fail with "database is locked".
    incremental = []
    for ref in refs:
        print(f"measuring re-evaluation of {ref} ...", flush=True)
        incremental.append(measure_incremental(settings, ref, args.repeat))
    spark = None
    if not args.no_spark:
        from icelake_assets.maintenance.spark.session import spark_config
        from icelake_assets.orchestration.resources import IcebergSparkResource

        spark = IcebergSparkResource(
            spark_config=spark_config(settings, app_name="health_bench")
        ).spark_session
        spark.sql("SELECT 1").collect()
    results = []
    for ref, inc in zip(refs, incremental, strict=False):
        print(f"measuring cold evaluation of {ref} ...", flush=True)
        results.append({**measure_cold(settings, ref, args.repeat, spark), **inc})
    print()
    print(markdown(results))


if __name__ == "__main__":
    main()
