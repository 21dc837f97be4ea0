"""Sweep benchmark (issue 42, part 3): the metadata locations of N tables of a REST catalog, read one
table after the other vs by ``automation.catalog_concurrency`` workers, behind a proxy that holds
every request 30 ms (a catalog that far away).

    python -m bench.health.sweep_bench                       # 2,000 tables, 30 ms, concurrency 8 and 32
    python -m bench.health.sweep_bench --tables 200 --delay-ms 30 --concurrency 8

SeaweedFS (`weed mini`: S3 + the Iceberg REST catalog, open mode) runs on free ports; the tables
(one tiny append each, 100 per namespace) are created by pyiceberg in parallel, by at most
``--create-workers`` clients. Both sweeps go through ``catalog/locations.py``'s ``metadata_locations``
(concurrency 1 is the sequential read the sensor did before), from a catalog opened through the proxy;
their answers must be equal (else exit status 1). The ratio is measured in the same run; a sweep fits
a tick when it takes less than the largest tick budget (``automation.tick_budget_seconds`` <= 55 s).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from urllib.parse import urlsplit

import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.catalog.rest import SNAPSHOT_LOADING_MODE
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import LongType, NestedField

from bench.health.latency_proxy import latency_proxy
from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.locations import TableLoader, bounded_map, load_tables, metadata_locations
from icelake_assets.demo.seaweedfs import SeaweedFS, seaweedfs_server

TICK_BUDGET_MAX = 55.0  # automation.tick_budget_seconds' upper bound
SCHEMA = Schema(NestedField(1, "id", LongType(), required=False))
PER_NAMESPACE = 100


def open_rest(server: SeaweedFS, uri: str | None = None) -> Catalog:
    return load_catalog(
        "lake",
        type="rest",
        uri=uri or server.catalog_uri,
        warehouse=server.warehouse,
        auth={"type": "noop"},
        **{"s3.endpoint": server.s3_endpoint, "s3.region": "us-east-1", "s3.anonymous": "true"},
    )


def create_tables(server: SeaweedFS, n: int, workers: int) -> list[TableRef]:
    refs = [TableRef("lake", (f"ns{i // PER_NAMESPACE:03d}",), f"t{i:05d}") for i in range(n)]
    first = open_rest(server)
    for namespace in sorted({r.namespace for r in refs}):
        first.create_namespace(namespace)
    local = threading.local()

    def create(ref: TableRef) -> None:
        if not hasattr(local, "catalog"):
            local.catalog = open_rest(server)
        table = local.catalog.create_table(ref.identifier, SCHEMA)
        table.append(pa.table({"id": pa.array([1], pa.int64())}))

    bounded_map(create, refs, workers)
    return refs


def history_loads(server: SeaweedFS, uri: str, appends: int, repeat: int = 20) -> None:
    """One table of ``appends`` snapshots loaded ``repeat`` times through the proxy, whole and with
    ``snapshot-loading-mode: refs`` (what a sweep's workers ask for): snapshots received, time."""
    catalog = open_rest(server)
    table = catalog.create_table("ns000.history", SCHEMA)
    for i in range(appends):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    for mode in ("all", "refs"):
        client = open_rest(server, uri)
        client.properties[SNAPSHOT_LOADING_MODE] = mode
        started = time.perf_counter()
        for _ in range(repeat):
            loaded = client.load_table("ns000.history")
        took = (time.perf_counter() - started) / repeat
        print(
            f"  a table of {appends} snapshots, snapshots={mode}: {len(loaded.metadata.snapshots)} "
            f"snapshot(s) received, {1000 * took:.1f} ms per load"
        )


def chunked_loads(catalog: Catalog, refs: list[TableRef], concurrency: int) -> dict[TableRef, Table]:
    """As the maintenance sensor loads its changed tables (sensors/prefetch.py): 2 x concurrency at a
    time, one loader (threads and clients) for the whole tick."""
    loader, found, chunk = TableLoader(catalog, concurrency), {}, 2 * concurrency
    try:
        for at in range(0, len(refs), chunk):
            found.update(loader.load(refs[at : at + chunk]))
    finally:
        loader.close()
    return found


def sweep(
    catalog: Catalog, refs: list[TableRef], concurrency: int
) -> tuple[float, dict[TableRef, str | None]]:
    started = time.perf_counter()
    found = metadata_locations(catalog, refs, concurrency)
    return time.perf_counter() - started, found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=2000)
    parser.add_argument("--delay-ms", type=float, default=30.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--create-workers", type=int, default=8)
    parser.add_argument(
        "--loads", type=int, default=500, help="tables loaded whole, one by one vs concurrently"
    )
    parser.add_argument(
        "--history", type=int, default=100, help="snapshots of the table loaded whole vs refs"
    )
    args = parser.parse_args(argv)
    # Anonymous S3 uploads cannot carry the checksum header pyarrow's AWS SDK would add.
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        del os.environ[key]
    os.environ["AWS_REQUEST_CHECKSUM_CALCULATION"] = "when_required"
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
    with seaweedfs_server() as server:
        started = time.perf_counter()
        refs = create_tables(server, args.tables, args.create_workers)
        print(f"created {len(refs)} tables (one append each) in {time.perf_counter() - started:.1f} s")
        target = urlsplit(server.catalog_uri)
        with latency_proxy(target.hostname or "127.0.0.1", target.port or 80, args.delay_ms / 1000) as port:
            catalog = open_rest(server, f"http://127.0.0.1:{port}")
            seq_s, expected = sweep(catalog, refs, 1)
            missing = sum(1 for v in expected.values() if v is None)
            print(
                f"sequential sweep behind {args.delay_ms:.0f} ms: {seq_s:.1f} s "
                f"({1000 * seq_s / len(refs):.1f} ms/table, {missing} missing), "
                f"fits a {TICK_BUDGET_MAX:.0f} s tick: {'yes' if seq_s <= TICK_BUDGET_MAX else 'no'}"
            )
            failed = missing > 0
            for concurrency in args.concurrency:
                took, found = sweep(catalog, refs, concurrency)
                same = found == expected
                failed |= not same
                print(
                    f"concurrency {concurrency:>2}: {took:.1f} s ({1000 * took / len(refs):.1f} ms/table), "
                    f"{seq_s / took:.1f}x faster, same locations: {same}, "
                    f"fits a {TICK_BUDGET_MAX:.0f} s tick: {'yes' if took <= TICK_BUDGET_MAX else 'no'}; "
                    f"10,000 tables: ~{took / len(refs) * 10000:.0f} s"
                )
            changed = refs[: args.loads]  # a cold tick loads every table whole, ahead of its loop
            concurrency = args.concurrency[0]
            started = time.perf_counter()
            one_by_one = load_tables(catalog, changed, 1)
            seq_loads = time.perf_counter() - started
            started = time.perf_counter()
            ahead = chunked_loads(catalog, changed, concurrency)
            took = time.perf_counter() - started
            same = {r: t.metadata for r, t in ahead.items()} == {r: t.metadata for r, t in one_by_one.items()}
            failed |= not same or len(ahead) != len(changed)
            print(
                f"{len(changed)} tables loaded whole (a cold tick's loads): one by one {seq_loads:.1f} s, "
                f"{concurrency} workers in chunks of {2 * concurrency} (the sensor's prefetch) {took:.1f} s "
                f"({seq_loads / took:.1f}x), same metadata: {same}"
            )
            history_loads(server, f"http://127.0.0.1:{port}", args.history)
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
