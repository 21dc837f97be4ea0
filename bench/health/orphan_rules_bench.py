"""The orphan scan's rules against the rest of the lake, for every table of a lake of N tables (what a
cold sensor tick does): comparing each table with every other table (the baseline, as the scan did
before health/neighbours.py) against the near ones found by the index. What is timed per table: the
other tables' claims inside its location (``_foreign_prefixes``) and each compared table's location
parsed (as ``_refusal`` parses it). Run: .venv/bin/python -m bench.health.orphan_rules_bench [N ...]"""

import sys
import time
from collections.abc import Sequence

from icelake_assets.health.neighbours import Neighbours
from icelake_assets.health.orphans import _foreign_prefixes
from icelake_assets.health.storage import file_key
from icelake_assets.types import KnownTable


def _rules(table: KnownTable, others: Sequence[KnownTable]) -> int:
    location = file_key(table.location)
    compared = [o for o in others if o.name != table.name]
    parsed = [file_key(o.location) for o in compared]
    return len(_foreign_prefixes(location, compared)) + len(parsed)


def measure(n: int) -> tuple[float, float]:
    lake = tuple(KnownTable(f"lake.ns.t{i}", f"file:///lake/warehouse/ns/t{i}") for i in range(n))
    started = time.perf_counter()
    every = sum(_rules(t, lake) for t in lake)
    baseline = time.perf_counter() - started
    started = time.perf_counter()
    index = Neighbours(lake)  # once per listing, as the listing carries it (IndexedTables)
    near = sum(_rules(t, index.near(file_key(t.location))) for t in lake)
    indexed = time.perf_counter() - started
    assert every >= near  # the near ones are among every table; none of them holds another here
    return baseline, indexed


if __name__ == "__main__":
    sizes = [int(a) for a in sys.argv[1:]] or [200, 2000]
    print("| tables | every other table (s) | near ones, indexed (s) | ratio |")
    print("|---:|---:|---:|---:|")
    for n in sizes:
        baseline, indexed = measure(n)
        print(f"| {n} | {baseline:.2f} | {indexed:.3f} | {baseline / indexed:.0f}x |", flush=True)
