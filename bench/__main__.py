"""`make bench`: every benchmark in turn, each in its own process (each parses its own arguments and
measures against a baseline taken in the same run). Results and commands: BENCHMARKS.md."""

import subprocess
import sys

BENCHES = (
    "bench.health_bench",
    "bench.sensor_bench",
    "bench.loop_bench",
    "bench.compaction_bench",
    "bench.scale_bench",  # 10,000 tables: generates its lake once (about 5 minutes), cached
    "bench.definitions_bench",  # scale_bench's lakes: loads and run workers vs bare Dagster (~10 min)
    # 20 small tables healed by the sensor vs raw procedures, packed and one run per table (~10 min)
    "bench.fleet_bench --skip-per-run --one-run-per-table",
    # 200 small tables, the default checks and every check, raw twice (~30 min)
    "bench.fleet_bench --tables 200 --skip-per-run --pinned-checks each --raw-samples 2",
    "bench.fleet_mix_bench",  # 2 large + 100 small tables: the small ones' wait bound (~15 minutes)
    "bench.big_table_bench",  # 20,000 files: the product vs raw procedures, 4 pairs (~25 minutes)
    "bench.query_bench",  # query latency before/after maintenance, Spark and DuckDB (~3 minutes)
    "bench.object_store_bench",  # SeaweedFS vs local disk: about 10 minutes (100,000 objects uploaded)
    "bench.orphan_rules_bench",  # the orphan scan's rules, 200 and 2,000 tables: every other vs near ones (~2 min)
    "bench.sweep_bench",  # 2,000 REST tables' metadata locations behind 30 ms, sequential vs concurrent (~4 min)
)

if __name__ == "__main__":
    # An entry is a module and its arguments.
    failed = [b for b in BENCHES if subprocess.call([sys.executable, "-m", *b.split()]) != 0]
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")
