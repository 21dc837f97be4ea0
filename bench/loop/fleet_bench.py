"""Fleet benchmark (issue 24, item 3a; issue 42): small degraded tables healed by the sensor through
Dagster vs the raw Iceberg procedures over the same tables in one Spark session.

    python -m bench.loop.fleet_bench --skip-per-run                 # 20 tables (goal ≤ 1.5x raw)
    python -m bench.loop.fleet_bench --tables 200 --skip-per-run    # 200 tables (goal ≤ 1.3x raw)
    python -m bench.loop.fleet_bench --tables 20 --skip-per-run --one-run-per-table   # and without packing

Each measurement starts from its own freshly built lake (same tables, same seed): every table has
``--files`` small data files from as many commits (so as many snapshots and manifests) and 3 planted
orphans, all 5 days old; the demo catalog enforces the shipped policies with the test thresholds (20
files, 20 snapshots keeping 5, 10 manifests).

1. **raw**: one Python process, one SparkSession with the product's Spark configuration, and for each
   table in turn Iceberg's own procedures: ``expire_snapshots`` (retain 5), ``remove_orphan_files``
   (older than 3 days), ``rewrite_data_files``, ``rewrite_manifests``. Timed from the process's start
   (JVM included): the work itself, with nothing around it.
2. **sensor, shared driver** (the product's default): ``dagster-daemon run`` with the shipped
   ``dagster.yaml`` (run queue, pools, 2 runs at once), the sensor every 10 s, its code locations
   served as ``make run`` serves them (bench/loop/code_servers.py; ``--daemon-code-servers``: by the
   daemon itself, which replaces them every minute); timed from the code servers' start to the end
   of the last run, once no maintenance op would act on any table. Small tables
   share runs (planning/packing.py: spread over the 2 runs at once, at most 20 tables a run); each
   run is its own process (pre-flight, validation with row counts and cross-engine proof, audit,
   post-run checks) attached to the one resident Spark driver.
3. ``--one-run-per-table``: the same with ``automation.packed_run_max_tables: 1`` (before issue 42);
   ``--pinned-checks each summary``: the same with ``automation.checks_per_table`` pinned (the
   default, ``auto``, carries every check up to 100 tables and the health summary above;
   docs/scaling.md); ``--sensor-threads``: the daemon's sensors in threads.
4. **sensor, a driver per run** (``spark.session: per_run``, the earlier model): the same, each run
   starting its own JVM. ``--skip-per-run`` leaves it out.
5. ``--raw-samples N``: the raw baseline N times (before and after the sensor cases), its mean the
   ratios' base; ``--timeline``: every run, sensor tick and idle run slot.

``--storage postgres``: the Dagster instance's storage in PostgreSQL (the repo's dagster.postgres.yaml
appended to dagster.yaml, as a deployment at scale runs it; a throwaway server on 127.0.0.1, a fresh
database per measurement) instead of the shipped SQLite files.

Goals (issue 42): sensor (shared driver, packed) / raw ≤ 1.5 for 20 tables, ≤ 1.3 for 200.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import yaml

from bench.common.postgres import instance_env
from bench.loop.fleet_runs import print_timeline, run_phases, sensor_ticks
from bench.loop.loop_bench import sensor, timed_script, unhealed, write_settings
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.demo.lake import age_all_files, append, plant_orphans
from icelake_assets.settings import Settings, load_settings
from icelake_assets_tests.servers import PostgresServer, postgres_server

GOALS = {20: 1.5, 200: 1.3}  # tables -> sensor / raw (issue 42)
THRESHOLDS = {
    "small_files": {"max_files_per_partition": 20},
    "snapshots": {"max_count": 20, "min_keep": 5, "min_age_hours": 0},
    "manifests": {"max_count": 10},
}
RAW = """
import json, sys
from pyspark.sql import SparkSession
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.partitions.quoting import sql_string
from icelake_assets.settings import load_settings
settings = load_settings(sys.argv[1])
builder = SparkSession.builder
for k, v in spark_config(settings).items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
from datetime import datetime, timedelta, timezone
now = datetime.now(timezone.utc)
# CALL takes literals only; the session's time zone is UTC (spark_config).
stamp = lambda t: "TIMESTAMP " + sql_string(t.strftime("%Y-%m-%d %H:%M:%S"))
for name in json.loads(sys.argv[2]):
    t = sql_string(name)
    spark.sql(f"CALL demo.system.expire_snapshots(table => {t}, older_than => {stamp(now)}, "
              "retain_last => 5)").collect()
    spark.sql(f"CALL demo.system.remove_orphan_files(table => {t}, "
              f"older_than => {stamp(now - timedelta(days=3))})").collect()
    spark.sql(f"CALL demo.system.rewrite_data_files(table => {t})").collect()
    spark.sql(f"CALL demo.system.rewrite_manifests(table => {t})").collect()
"""


def fleet_settings(
    root: Path, name: str, session: str, automation: dict | None = None, thresholds: dict | None = None
) -> Settings:
    """A fresh lake folder's settings: the bench's test thresholds (and ``thresholds``), the Spark
    session model, ``automation`` over the shipped automation settings."""
    folder = root / name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    settings = write_settings(folder)
    data = yaml.safe_load(Path(settings.source or "").read_text())
    data["thresholds"] = {**data.get("thresholds", {}), **THRESHOLDS, **(thresholds or {})}
    data["spark"] = {**data.get("spark", {}), "session": session}
    # The shipped orphan scan interval (24 h; a table never scanned is scanned on its first look):
    # loop_bench's 0.001 h lists every table's storage on every tick, a load that grows with the fleet.
    data["automation"] = {**data.get("automation", {}), "orphan_scan_hours": 24.0, **(automation or {})}
    Path(settings.source or "").write_text(yaml.safe_dump(data))
    return load_settings(settings.source)


def degraded_tables(settings: Settings, shapes: list[tuple[str, int, int]], seed: int) -> list[str]:
    """Tables ``fleet.<name>`` of ``commits`` files of ``rows`` rows each (one commit a file), every
    file 5 days old, 3 planted orphans each; ``shapes``: (name, commits, rows). Their names."""
    catalog = open_catalog(settings, "demo", create=True)
    catalog.create_namespace_if_not_exists("fleet")
    schema = pa.schema([("id", pa.int64()), ("payload", pa.string())])
    rng = np.random.default_rng(seed)
    for name, commits, rows in shapes:
        table = catalog.create_table(("fleet", name), schema=schema)
        for commit in range(commits):
            ids = np.arange(commit * rows, (commit + 1) * rows, dtype=np.int64)
            words = rng.choice(["a", "bb", "ccc"], size=rows).astype(str)
            append(table, pa.table({"id": ids, "payload": words}, schema=schema))
        age_all_files(table, 5)
        plant_orphans(table, 3, age_days=5)
    return [f"fleet.{name}" for name, _, _ in shapes]


def fleet_lake(
    root: Path, name: str, tables: int, files: int, session: str, automation: dict | None = None
) -> tuple[Settings, list[str]]:
    settings = fleet_settings(root, name, session, automation)
    return settings, degraded_tables(settings, [(f"t{i:03d}", files, 100) for i in range(tables)], 24)


def raw(settings: Settings, names: list[str]) -> float:
    return timed_script(RAW, str(settings.source), json.dumps(names), what="raw procedures")


def through_sensor(
    root: Path,
    name: str,
    tables: int,
    files: int,
    session: str,
    timeout: float,
    max_runs: int | None = None,
    automation: dict | None = None,
    postgres: PostgresServer | None = None,
    managed_code_servers: bool = False,
    instance_extra: dict | None = None,
) -> dict:
    settings, _ = fleet_lake(root, name, tables, files, session, automation)
    home = root / f"{name}_home"
    env = _instance_env(postgres, name)
    result = sensor(settings, home, timeout, max_runs, env, managed_code_servers, instance_extra)
    return {
        **result,
        "ticks": sensor_ticks(home),
        "phases": run_phases(home),
        "before_first_launch": min(t[0] for t in result["timeline"]),
    }


@dataclass(frozen=True)
class Case:
    """One sensor measurement: its label, Spark session model, and what it changes from the shipped
    settings (``automation``) and dagster.yaml (``max_runs``, ``instance_extra``)."""

    label: str
    session: str = "shared"
    max_runs: int | None = None
    automation: dict | None = None
    instance_extra: dict | None = None


def _instance_env(postgres: PostgresServer | None, name: str) -> dict[str, str] | None:
    """The variables of a fresh database ``name`` on ``postgres`` (None: the shipped SQLite)."""
    return None if postgres is None else instance_env(postgres, postgres.create_database(name))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--files", type=int, default=30, help="small files (and commits) per table")
    parser.add_argument("--timeout", type=float, default=2400.0)
    parser.add_argument("--skip-per-run", action="store_true", help="leave out the driver-per-run model")
    parser.add_argument(
        "--one-run-per-table",
        action="store_true",
        help="also measure the shared driver without packing (automation.packed_run_max_tables: 1)",
    )
    parser.add_argument(
        "--max-runs",
        type=int,
        nargs="*",
        default=[],
        help="also measure the shared driver with these caps on runs in flight (dagster.yaml ships 2)",
    )
    parser.add_argument(
        "--storage",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="the Dagster instance's storage: the shipped SQLite files or PostgreSQL (dagster.postgres.yaml)",
    )
    parser.add_argument(
        "--pinned-checks",
        nargs="*",
        choices=["each", "summary"],
        default=[],
        help="also measure with automation.checks_per_table pinned to these (the default, auto, carries "
        "every check up to 100 tables and the summary above)",
    )
    parser.add_argument(
        "--daemon-code-servers",
        action="store_true",
        help="the daemon manages the code servers itself (replaced every minute) instead of "
        "make run's code servers (bench/loop/code_servers.py)",
    )
    parser.add_argument(
        "--sensor-threads",
        action="store_true",
        help="also measure with the daemon's sensors in threads (dagster.yaml sensors: use_threads)",
    )
    parser.add_argument(
        "--raw-samples",
        type=int,
        default=1,
        help="measure the raw baseline this many times (the first before the sensor, the others after), "
        "each on a fresh lake, and take the mean: single samples spread by about 12 percent",
    )
    parser.add_argument(
        "--timeline", action="store_true", help="print each run and sensor tick, and the idle run slots"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    results: list[tuple[str, dict]] = []
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="fleet-bench-"))
        postgres = stack.enter_context(postgres_server()) if args.storage == "postgres" else None
        root = Path(tmp)
        raw_samples: list[float] = []
        left: list = []

        def measure_raw() -> None:
            # Each sample on a fresh lake of its own; the first before the sensor cases, the others after.
            settings, names = fleet_lake(root, f"raw{len(raw_samples)}", args.tables, args.files, "per_run")
            raw_samples.append(raw(settings, names))
            left.extend(unhealed(settings))
            print(f"raw: {raw_samples[-1]:.1f}s; left after: {left}", flush=True)

        measure_raw()
        alone = {"packed_run_max_tables": 1}
        shared = "shared driver, small tables share runs"
        cases = [Case(f"{shared} (default: 2 runs in flight)")]
        if args.one_run_per_table:
            cases.append(
                Case("shared driver, one run per table (packed_run_max_tables: 1)", automation=alone)
            )
        cases += [Case(f"shared driver, {n} runs in flight", max_runs=n) for n in args.max_runs]
        cases += [
            Case(f"{shared}, checks_per_table: {c}", automation={"checks_per_table": c})
            for c in args.pinned_checks
        ]
        if args.sensor_threads:
            threads = {"sensors": {"use_threads": True, "num_workers": 4}}
            cases.append(Case(f"{shared}, sensors in threads", instance_extra=threads))
        if not args.skip_per_run:
            cases.append(
                Case("a driver per run, one run per table (2 runs in flight)", "per_run", automation=alone)
            )
        for i, case in enumerate(cases):
            result = through_sensor(
                root,
                f"case{i}",
                args.tables,
                args.files,
                case.session,
                args.timeout,
                case.max_runs,
                case.automation,
                postgres,
                args.daemon_code_servers,
                case.instance_extra,
            )
            print(f"sensor, {case.label}: {result['total']:.1f}s; {result['phases'].row()}", flush=True)
            if args.timeline:
                print_timeline(result, case.max_runs or 2)
            results.append((case.label, result))
        while len(raw_samples) < args.raw_samples:
            measure_raw()
    raw_s = statistics.fmean(raw_samples)
    command = " ".join([".venv/bin/python -m bench.loop.fleet_bench", *sys.argv[1:]])
    print(
        f"\nmachine: {os.cpu_count()} cores, Python {platform.python_version()}, load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} at the end; command: {command}\n"
    )
    servers = "the daemon's own (replaced every minute)" if args.daemon_code_servers else "as make run's"
    print(
        f"{args.tables} tables x {args.files} small files, 3 orphans each; Dagster storage: {args.storage}; "
        f"code servers: {servers}\n"
    )
    goal = GOALS.get(args.tables, GOALS[20] if args.tables < 200 else GOALS[200])
    print(
        f"| measurement | seconds | runs | ratio to raw (goal ≤ {goal}) | first launch at | per run (means) |"
    )
    print("|---|---:|---:|---:|---:|---|")
    samples = ", ".join(f"{x:.1f}" for x in raw_samples)
    print(
        f"| raw procedures, one process, one Spark session (JVM start included)"
        f"{f'; mean of {samples}' if len(raw_samples) > 1 else ''} | {raw_s:.1f} | - | 1.00 | | |"
    )
    for label, r in results:
        print(
            f"| sensor through Dagster, {label} | {r['total']:.1f} | {r['runs']} ({r['failed']} failed) "
            f"| **{r['total'] / raw_s:.2f}** | {r['before_first_launch']:.1f} | {r['phases'].row()} |"
        )
    print(f"\ngoal: sensor (shared driver, small tables sharing runs) / raw ≤ {goal}")
    if left:
        sys.exit(f"the raw procedures left work undone: {left}")


if __name__ == "__main__":
    main()
