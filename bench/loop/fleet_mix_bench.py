"""Fleet mix benchmark (issue 42): 2 large and 100 small degraded tables healed by the sensor through
Dagster; no small table may wait longer than its bound while the large ones take run slots.

    python -m bench.loop.fleet_mix_bench                       # 2 large + 100 small, bound 10 minutes
    python -m bench.loop.fleet_mix_bench --small 40 --bound-minutes 5

The lake (the shipped demo catalog's policy, the test thresholds of bench.loop.fleet_bench): every small
table has ``--files`` small files from as many commits, every large table ``--large-files`` files of
``--large-rows`` rows; 3 planted orphans each, all 5 days old; orphans scanned on every tick.
``packing.max_files`` is set to ``--large-files`` / 2 for the bench, so the large tables are over it
(a run of their own) and the small ones within it (shared runs). ``automation.max_wait_minutes`` is
the bound.

``dagster-daemon run`` with the shipped ``dagster.yaml`` (2 runs at once, as many queued ahead),
the sensor every 10 s, timed from the daemon's start until no maintenance op would act on any table.
A table's wait is from the daemon's start (every finding exists then) to the start of the run that
carries it: the bound holds when the longest small table's wait is under it. The large tables rank
first (they save the most file opens per scan), so they take the first slots: the measure is how
long the small tables wait behind them and each other.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from pathlib import Path

import numpy as np

from bench.loop.fleet_bench import degraded_tables, fleet_settings
from bench.loop.loop_bench import sensor
from icelake_assets.settings import Settings


def mix_lake(
    root: Path, small: int, files: int, large: int, large_files: int, large_rows: int, bound: float
) -> tuple[Settings, list[str], list[str]]:
    # Orphans scanned on every tick (as loop_bench does): a large table's run drops its oldest
    # metadata files out of the metadata log (over write.metadata.previous-versions-max) after its
    # orphan op ran; aged 5 days by the bench, they are orphans the shipped 24 h scan would remove
    # the next day, and the bench waits until no op would act.
    automation = {"max_wait_minutes": bound, "orphan_scan_hours": 0.001}
    settings = fleet_settings(root, "mix", "shared", automation, {"packing": {"max_files": large_files // 2}})
    large_names = degraded_tables(
        settings, [(f"large{i:03d}", large_files, large_rows) for i in range(large)], 42
    )
    small_names = degraded_tables(settings, [(f"small{i:03d}", files, 100) for i in range(small)], 43)
    return settings, [f"demo.{n}" for n in large_names], [f"demo.{n}" for n in small_names]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--small", type=int, default=100)
    parser.add_argument("--files", type=int, default=25, help="small files (and commits) per small table")
    parser.add_argument("--large", type=int, default=2)
    parser.add_argument("--large-files", type=int, default=300)
    parser.add_argument("--large-rows", type=int, default=20_000, help="rows per file of a large table")
    parser.add_argument("--bound-minutes", type=float, default=10.0, help="automation.max_wait_minutes")
    parser.add_argument("--timeout", type=float, default=3600.0)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="fleet-mix-bench-") as tmp:
        root = Path(tmp)
        settings, large, small = mix_lake(
            root, args.small, args.files, args.large, args.large_files, args.large_rows, args.bound_minutes
        )
        print(f"lake built: {len(large)} large, {len(small)} small tables", flush=True)
        result = sensor(settings, root / "home", args.timeout)
    started: dict[str, float] = {}
    runs: list[tuple[float, float, list[str]]] = []
    for _created, start, end, tables, _rank in result["timeline"]:
        carried = tables.split(",")
        runs.append((start, end, carried))
        for t in carried:
            started[t] = min(started.get(t, start), start)
    waits = {t: started[t] for t in small if t in started}
    missing = [t for t in small + large if t not in started]
    large_runs = [(s, e) for s, e, carried in runs if set(carried) & set(large)]
    during_large = sum(
        1
        for s, _e, carried in runs
        if not set(carried) & set(large) and any(ls <= s < le for ls, le in large_runs)
    )
    bound_s = args.bound_minutes * 60
    worst = max(waits.values(), default=float("nan"))
    command = " ".join([".venv/bin/python -m bench.loop.fleet_mix_bench", *sys.argv[1:]])
    print(
        f"\nmachine: {os.cpu_count()} cores, Python {platform.python_version()}, load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} at the end; command: {command}\n"
    )
    print(
        f"{len(large)} large tables ({args.large_files} files x {args.large_rows} rows), {len(small)} small "
        f"({args.files} files x 100 rows), 3 orphans each; packing.max_files {args.large_files // 2}\n"
    )
    print("| measure | value |")
    print("|---|---:|")
    print(f"| healed (daemon start → last run's end) | {result['total']:.1f} s |")
    print(f"| runs (failed) | {result['runs']} ({result['failed']}) |")
    print(f"| runs of small tables started while a large table's run was running | {during_large} |")
    for name, (s, e) in zip(large, sorted(large_runs), strict=False):
        print(f"| {name}: its run | {s:.1f} s → {e:.1f} s |")
    print(
        f"| small tables: median wait to their run's start | {float(np.median(list(waits.values()))):.1f} s |"
    )
    print(f"| small tables: longest wait to their run's start | **{worst:.1f} s** |")
    print(f"| the bound (automation.max_wait_minutes) | {bound_s:.0f} s |")
    verdict = "met" if not missing and worst <= bound_s else "not met"
    print(f"\nbound: every small table's run started within {bound_s:.0f} s: **{verdict}**")
    if missing:
        sys.exit(f"tables never maintained by a run: {missing}")
    if worst > bound_s:
        sys.exit(f"a small table waited {worst:.1f} s, past its bound of {bound_s:.0f} s")


if __name__ == "__main__":
    main()
