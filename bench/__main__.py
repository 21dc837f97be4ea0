"""`make bench`: every benchmark in turn, each in its own process (each parses its own arguments and
measures against a baseline taken in the same run). Results and commands: BENCHMARKS.md.

    python -m bench                      # every benchmark below (make bench)
    python -m bench --list               # their names and modules, nothing run (also -h, --help)
    python -m bench NAME [ARGS ...]      # one, by name: python -m bench fleet_bench --tables 200
"""

import subprocess
import sys

# Every benchmark by name (a module's last part): its module in its room.
MODULES = {
    module.rsplit(".", 1)[-1]: module
    for module in (
        "bench.health.health_bench",
        "bench.health.object_store_bench",
        "bench.health.orphan_rules_bench",
        "bench.health.orphan_scan_bench",
        "bench.health.partition_checks_bench",
        "bench.health.sweep_bench",
        "bench.loop.big_table_bench",
        "bench.loop.compaction_bench",
        "bench.loop.fleet_bench",
        "bench.loop.fleet_mix_bench",
        "bench.loop.layout_bench",
        "bench.loop.loop_bench",
        "bench.loop.query_bench",
        "bench.scale.definitions_bench",
        "bench.scale.definitions_builds_bench",
        "bench.scale.scale_bench",
        "bench.scale.sensor_bench",
        "bench.soak.chaos_soak",  # make soak; not part of make bench
    )
}

BENCHES = (
    "health_bench",
    # 3,650 daily partitions: checks per partition reported, unchanged, one changed; loads on vs off (~5 min)
    "partition_checks_bench",
    "sensor_bench",
    "loop_bench",
    "compaction_bench",
    "scale_bench",  # 10,000 tables: generates its lake once (about 5 minutes), cached
    "definitions_bench",  # scale_bench's lakes: loads and run workers vs bare Dagster (~10 min)
    # 20 small tables healed by the sensor vs raw procedures, packed and one run per table (~10 min)
    "fleet_bench --skip-per-run --one-run-per-table",
    # 200 small tables, the default checks and every check, raw twice (~30 min)
    "fleet_bench --tables 200 --skip-per-run --pinned-checks each --raw-samples 2",
    "fleet_mix_bench",  # 2 large + 100 small tables: the small ones' wait bound (~15 minutes)
    "big_table_bench",  # 20,000 files: the product vs raw procedures, 4 pairs (~25 minutes)
    "query_bench",  # query latency before/after maintenance, Spark and DuckDB (~3 minutes)
    # 3,000,000 rows: the sort key chosen from Spark's scan reports vs arrival order and a guess (~8 min)
    "layout_bench",
    "object_store_bench",  # SeaweedFS vs local disk: about 10 minutes (100,000 objects uploaded)
    "orphan_rules_bench",  # the orphan scan's rules, 200 and 2,000 tables: every other vs near ones (~2 min)
    "sweep_bench",  # 2,000 REST tables' metadata locations behind 30 ms, sequential vs concurrent (~4 min)
)


def command(name: str, args: list[str]) -> list[str]:
    """The command that runs benchmark ``name`` with ``args``."""
    return [sys.executable, "-m", MODULES[name], *args]


if __name__ == "__main__":
    if sys.argv[1:2] in (["--list"], ["-h"], ["--help"]):
        print(__doc__)
        in_make_bench = {entry.split()[0] for entry in BENCHES}
        for name, module in MODULES.items():
            print(f"  {name:26} python -m {module}{'  (make bench)' if name in in_make_bench else ''}")
        sys.exit(0)
    if sys.argv[1:]:
        if sys.argv[1] not in MODULES:
            sys.exit(f"no benchmark {sys.argv[1]!r}: python -m bench --list names them")
        sys.exit(subprocess.call(command(sys.argv[1], sys.argv[2:])))
    # An entry is a benchmark's name and its arguments.
    failed = [b for b in BENCHES if subprocess.call(command(b.split()[0], b.split()[1:])) != 0]
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")
