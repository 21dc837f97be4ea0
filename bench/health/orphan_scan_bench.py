"""Cost of orphan removal's safety rules: listing every known table (cold / warm cache), one orphan
scan and the post-removal verification. Run: PYTHONPATH=. .venv/bin/python -m bench.health.orphan_scan_bench"""

import pathlib
import tempfile
import time

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from bench.health.health_bench import CATALOG, bench_settings
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.known_tables import _BY_METADATA, default_locations, known_tables
from icelake_assets.health.orphans import scan_orphans, verify_referenced_files

s = bench_settings(pathlib.Path(tempfile.mkdtemp(prefix="orphan_scan_bench")))
name = CATALOG  # the bench's own lake (bench/health/health_bench.py), not the tests' fixtures
cat = open_catalog(s, name, create=True)
N = 300
cat.create_namespace("ns")
for i in range(N):
    cat.create_table(("ns", f"t{i}"), Schema(NestedField(1, "id", LongType())))
t = cat.load_table(("ns", "t0"))
for i in range(200):
    t.append(pa.table({"id": pa.array([i], pa.int64())}))
for label in ("cold", "warm"):
    if label == "cold":
        _BY_METADATA.clear()
    t0 = time.perf_counter()
    k = known_tables(s, lambda n: cat)
    print(f"known_tables {label}: {len(k.tables)} tables {time.perf_counter() - t0:.2f}s")
ref = TableRef(name, ("ns",), "t0")
t0 = time.perf_counter()
scan = scan_orphans(t, str(ref), 72, k.tables, default_locations(cat, ref), unlisted=k.unlisted)
print(
    f"scan_orphans: {scan.listed_files} files listed, {len(k.tables)} known tables, {time.perf_counter() - t0:.2f}s, refused={scan.refused}"
)
t0 = time.perf_counter()
n = verify_referenced_files(t)
print(f"verify_referenced_files: {n} files {time.perf_counter() - t0:.2f}s")
