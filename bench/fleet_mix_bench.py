"""Fleet mix benchmark (issue 42): 2 large and 100 small degraded tables healed by the sensor through
Dagster; no small table may wait longer than its bound while the large ones take run slots.

    python -m bench.fleet_mix_bench                       # 2 large + 100 small, bound 10 minutes
    python -m bench.fleet_mix_bench --small 40 --bound-minutes 5

The lake (the shipped demo catalog's policy, the test thresholds of bench.fleet_bench): every small
table has ``--files`` small files from as many commits, every large table ``--large-files`` files of
``--large-rows`` rows; 3 planted orphans each, all 5 days old. ``packing.max_files`` is set to
``--large-files`` / 2 for the bench, so the large tables are over it (a run of their own) and the
small ones within it (shared runs). ``automation.max_wait_minutes`` is the bound.

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
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml

from bench.fleet_bench import THRESHOLDS
from bench.loop_bench import sensor, write_settings
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.demo.lake import age_all_files, append, plant_orphans
from icelake_assets.settings import Settings, load_settings


def mix_lake(
    root: Path, small: int, files: int, large: int, large_files: int, large_rows: int, bound: float
) -> tuple[Settings, list[str], list[str]]:
    folder = root / "mix"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    settings = write_settings(folder)
    data = yaml.safe_load(Path(settings.source or "").read_text())
    data["thresholds"] = {
        **data.get("thresholds", {}),
        **THRESHOLDS,
        "packing": {"max_files": large_files // 2},
    }
    data["automation"] = {**data.get("automation", {}), "max_wait_minutes": bound}
    Path(settings.source or "").write_text(yaml.safe_dump(data))
    settings = load_settings(settings.source)
    catalog = open_catalog(settings, "demo", create=True)
    catalog.create_namespace_if_not_exists("fleet")
    schema = pa.schema([("id", pa.int64()), ("payload", pa.string())])
    rng = np.random.default_rng(42)
    names: dict[str, list[str]] = {"small": [], "large": []}
    plan = [("large", i, large_files, large_rows) for i in range(large)]
    plan += [("small", i, files, 100) for i in range(small)]
    for kind, i, commits, rows in plan:
        name = f"{kind}{i:03d}"
        table = catalog.create_table(("fleet", name), schema=schema)
        for commit in range(commits):
            ids = np.arange(commit * rows, (commit + 1) * rows, dtype=np.int64)
            words = rng.choice(["a", "bb", "ccc"], size=rows).astype(str)
            append(table, pa.table({"id": ids, "payload": words}, schema=schema))
        age_all_files(table, 5)
        plant_orphans(table, 3, age_days=5)
        names[kind].append(f"demo.fleet.{name}")
    return settings, names["large"], names["small"]


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
    command = " ".join([".venv/bin/python -m bench.fleet_mix_bench", *sys.argv[1:]])
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
