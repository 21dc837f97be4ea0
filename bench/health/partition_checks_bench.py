"""Health per partition at scale (issue 51 item 5): what the checks per partition cost a table of 3,650
daily partitions, and what they add to a definitions load of 100 partitioned tables.

    python -m bench.health.partition_checks_bench                        # 3,650 days, 100 tables
    python -m bench.health.partition_checks_bench --days 365 --load-repeat 1   # a quick run

Reports, through the product's own path (the health sensor's tick, ``evaluate_tick`` with a real
SQLite ``DagsterInstance``; its run-less table-level evaluations written as the daemon writes them;
the run of ``icelake_partition_checks`` it asks for, executed in process):

* the first report: the partitions the tick asks for, the run's check evaluations, seconds (tick +
  run) and the bytes the instance's event log (``history/runs/*.db``) grew by;
* a tick with nothing changed: must ask for nothing and write no check event;
* a tick after one partition gained a file: must ask for that partition alone, whose run writes at
  most its three evaluations (the table-level checks are reported again too: the table changed);
* definitions loads of 100 day-partitioned tables, ``automation.partition_checks: on`` vs ``off``,
  interleaved, each in a fresh process as Dagster's code server loads a location
  (``python -m bench.scale.load_child``: the load, then the snapshot the webserver gets); goal: the
  median of on within 10 % of off's.

The lake: one table of TRIPS_SPEC (day partitions) up to yesterday, a file per day written by one
pyiceberg append; then ``--degraded`` days spread over the range get DEGRADED_FILES more files each
(over ``max_files_per_partition: 5``), clones of the day's file (health_bench's ``append_files``). The 100 tables of the loads
take 30 of its days each. Exit status 1 when a figure does not measure what it says (a goal missed is
only reported)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml
from dagster import DagsterInstance, build_sensor_context
from pyiceberg.manifest import DataFile

from bench.common.report import exit_on_problems
from bench.health.health_bench import append_files
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.lake import START, TRIPS_SCHEMA, TRIPS_SPEC, local_path, trips_batch
from icelake_assets.orchestration.checks.partition_checks import PARTITION_CHECK_NAMES
from icelake_assets.orchestration.checks.partition_report_job import PARTITION_REPORT_JOB, REPORT_OP
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.sensors.health import HEALTH_SENSOR
from icelake_assets.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
CATALOG = "pcbench"
DEGRADED_FILES = 6  # more files in a degraded day: 7 in all, over the threshold of 5
LOAD_DAYS = 30  # days of each of the loads' tables
LOAD_GOAL = 1.10  # on / off, definitions load + snapshot
CHECKS = set(PARTITION_CHECK_NAMES.values())


def write_settings(folder: Path, partition_checks: str) -> Settings:
    """The bench's icelake.yaml over the catalog in ``folder``: a file, since the sensor's resource
    and the fresh load processes read it."""
    (folder / "warehouse").mkdir(parents=True, exist_ok=True)
    sql = {
        "type": "sql",
        "uri": f"sqlite:///{folder / 'catalog.db'}",
        "warehouse": (folder / "warehouse").as_uri(),
    }
    data = {
        "catalogs": {CATALOG: sql},
        "thresholds": {"small_files": {"max_files_per_partition": 5}},
        "automation": {"partition_checks": partition_checks},
    }
    path = folder / f"icelake_{partition_checks}.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_settings(path)


def degraded_days(days: int, degraded: int) -> list[int]:
    return sorted({round(i * (days - 1) / max(1, degraded - 1)) for i in range(degraded)})


def days_batch(days: int) -> pa.Table:
    """One trip a day for ``days`` days ending yesterday: Dagster's daily partitions of the table end
    at the day the definitions load, so each of its days is one of the asset's partitions."""
    rows = trips_batch(np.random.default_rng(7), 0, days, days)
    first = np.datetime64(datetime.now(UTC).date(), "D") - days
    shift = pa.scalar((first - START.astype("datetime64[D]")).astype("timedelta64[us]"))
    for i, name in enumerate(rows.column_names):
        if name in ("pickup_at", "dropoff_at"):
            rows = rows.set_column(i, name, pc.add(rows[name], shift))
    return rows


def build_lake(settings: Settings, days: int, degraded: int) -> tuple[TableRef, list[tuple[Path, DataFile]]]:
    """The table of ``days`` partitions (``degraded`` of them degraded) written by one pyiceberg append
    (a file per day); its files by day, the templates more files are cloned from (health_bench's
    ``append_files``: a fast append of links, no parquet written)."""
    ref = TableRef(CATALOG, ("bench",), "daily")
    catalog = open_catalog(settings, CATALOG, create=True)
    catalog.create_namespace("bench")
    table = catalog.create_table(ref.identifier, schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
    started = time.perf_counter()
    table.append(days_batch(days))
    files = sorted((t.file for t in table.scan().plan_files()), key=lambda f: f.partition[0])
    if len(files) != days:
        raise RuntimeError(f"{ref}: {len(files)} files written for {days} days")
    templates = [(local_path(f.file_path), f) for f in files]
    bad = [templates[d] for d in degraded_days(days, degraded)]
    for n in range(DEGRADED_FILES):  # as a streaming writer would: a commit per micro-batch
        append_files(catalog.load_table(ref.identifier), bad, len(bad), f"late{n}")
    print(
        f"built {ref}: {days} days, {degraded} degraded, in {time.perf_counter() - started:.1f}s", flush=True
    )
    return ref, templates


class EventLog:
    """The instance's SQLite event log: its size (every shard), and its asset events by type, from the
    index shard (SQLite keeps a run's events in the run's shard and its asset events there again)."""

    def __init__(self, instance: DagsterInstance) -> None:
        self.folder = Path(instance.event_log_storage._base_dir)  # type: ignore[attr-defined]

    def bytes(self) -> int:
        return sum(p.stat().st_size for p in self.folder.glob("*.db*"))

    def events(self) -> Counter[str]:
        with closing(sqlite3.connect(self.folder / "index.db")) as conn:
            rows = conn.execute("SELECT dagster_event_type, count(*) FROM event_logs GROUP BY 1").fetchall()
        return Counter({str(kind): n for kind, n in rows})


def tick(defs, settings: Settings, instance: DagsterInstance, cursor: str | None):
    """One health-sensor tick; its run-less evaluations written as the daemon writes them."""
    context = build_sensor_context(
        instance=instance,
        cursor=cursor,
        definitions=defs,
        resources={"icelake": IcelakeResource(config_path=settings.source)},
    )
    result = defs.get_sensor_def(HEALTH_SENSOR).evaluate_tick(context)
    for event in result.asset_events:
        instance.report_runless_asset_event(event)
    return result


def step(
    label: str, defs, settings: Settings, instance: DagsterInstance, cursor: str | None
) -> dict[str, Any]:
    """A tick and the report run it asks for (the daemon launches it): what they asked, wrote, took."""
    log = EventLog(instance)
    size, events = log.bytes(), log.events()
    started = time.perf_counter()
    result = tick(defs, settings, instance, cursor)
    ticked = time.perf_counter() - started
    asked: dict[str, list[str]] = {}
    evaluations: list = []
    for request in result.run_requests or []:
        asked = request.run_config["ops"][REPORT_OP]["config"]["tables"]
        # The sensor's request as the daemon launches it; only the console log is quieter (the events
        # stored are the same): 3 DEBUG lines a partition would slow a 3,650-day run.
        config = {**request.run_config, "loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        run = defs.resolve_job_def(PARTITION_REPORT_JOB).execute_in_process(
            instance=instance, run_config=config, tags=request.tags
        )
        evaluations += run.get_asset_check_evaluations()
    added = log.events() - events
    return {
        "label": label,
        "cursor": result.cursor,
        "asked": sum(len(keys) for keys in asked.values()),
        "table_level": len(result.asset_events),
        "evaluations": len(evaluations),
        "partitions": sorted({e.partition for e in evaluations}),
        "check_events": added["ASSET_CHECK_EVALUATION"],
        "tick_s": ticked,
        "seconds": time.perf_counter() - started,
        "bytes": log.bytes() - size,
    }


def measure_reports(
    folder: Path, days: int, degraded: int
) -> tuple[list[dict[str, Any]], list[str], list[tuple[Path, DataFile]]]:
    settings = write_settings(folder, "on")
    ref, templates = build_lake(settings, days, degraded)
    defs = build_definitions(settings)
    problems = []
    (folder / "dagster").mkdir()
    with DagsterInstance.local_temp(str(folder / "dagster")) as instance:
        first = step("first report", defs, settings, instance, None)
        unchanged = step("unchanged tick", defs, settings, instance, first["cursor"])
        day = degraded_days(days, degraded)[0] + 1  # a healthy day next to a degraded one
        append_files(open_catalog(settings, CATALOG).load_table(ref.identifier), [templates[day]], 1, "one")
        one = step("one partition changed", defs, settings, instance, unchanged["cursor"])
    if (first["asked"], first["evaluations"]) != (days, 3 * days):
        problems.append(
            f"first report: {first['asked']} partitions asked, {first['evaluations']} evaluations"
        )
    if first["check_events"] != first["evaluations"] + first["table_level"]:
        problems.append(f"first report: {first['check_events']} check events in the instance")
    if unchanged["asked"] or unchanged["check_events"] or unchanged["table_level"]:
        problems.append(f"unchanged tick wrote {unchanged['check_events']} check events")
    if one["asked"] != 1 or one["evaluations"] > len(CHECKS) or len(one["partitions"]) != 1:
        problems.append(f"one partition changed: asked {one['asked']}, partitions {one['partitions']}")
    return [first, unchanged, one], problems, templates


def build_load_lake(folder: Path, tables: int, templates: list[tuple[Path, DataFile]]) -> None:
    """``tables`` day-partitioned tables of LOAD_DAYS files each (links to the report lake's templates)."""
    settings = write_settings(folder, "off")
    catalog = open_catalog(settings, CATALOG, create=True)
    catalog.create_namespace("loads")
    started = time.perf_counter()
    for i in range(tables):
        table = catalog.create_table(("loads", f"t{i:03d}"), schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
        (local_path(table.metadata.location) / "data").mkdir(parents=True)
        append_files(table, templates[:LOAD_DAYS], LOAD_DAYS, "base")
    print(f"built {tables} tables for the loads in {time.perf_counter() - started:.1f}s", flush=True)


def load(config: Path, home: Path) -> dict[str, Any]:
    """One fresh-process load of the product's definitions (bench/scale/load_child.py, by module name:
    a room imports no other room)."""
    env = {**os.environ, "ICELAKE_CONFIG": str(config), "DAGSTER_HOME": str(home)}
    proc = subprocess.run(
        [sys.executable, "-m", "bench.scale.load_child", "load"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    found = [line.removeprefix("RESULT ") for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not found:
        raise RuntimeError(f"load with {config.name} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(found[-1])


def measure_loads(
    folder: Path, tables: int, repeat: int, templates: list[tuple[Path, DataFile]]
) -> tuple[dict[str, Any], list[str]]:
    build_load_lake(folder, tables, templates)
    write_settings(folder, "on")
    homes = {mode: folder / f"home_{mode}" for mode in ("off", "on")}
    for home in homes.values():
        home.mkdir()
    samples: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for i in range(repeat + 1):  # the first of each mode writes its table inventory: not counted
        for mode in ("off", "on") if i % 2 else ("on", "off"):
            result = load(folder / f"icelake_{mode}.yaml", homes[mode])
            if i:
                samples[mode].append(result)
    out: dict[str, Any] = {"tables": tables, "repeat": repeat}
    for mode, runs in samples.items():
        out[mode] = {
            phase: statistics.median(r[phase] for r in runs) for phase in ("load", "snapshot", "serialize")
        }
        out[mode]["total"] = sum(out[mode].values())
        out[mode]["checks"] = runs[0]["asset_checks"]
    out["ratio"] = out["on"]["total"] / out["off"]["total"]
    problems = []
    if out["on"]["checks"] - out["off"]["checks"] != tables * len(CHECKS):
        problems.append(f"loads: {out['on']['checks']} checks on vs {out['off']['checks']} off")
    return out, problems


def markdown(steps: list[dict[str, Any]], loads: dict[str, Any]) -> str:
    lines = [
        "| step | partitions asked | partition check evaluations | table-level evaluations | check events "
        "| seconds (tick) | event log bytes added |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in steps:
        lines.append(
            f"| {s['label']} | {s['asked']:,} | {s['evaluations']:,} | {s['table_level']} | {s['check_events']:,} "
            f"| {s['seconds']:.1f} ({s['tick_s']:.1f}) | {s['bytes']:,} |"
        )
    lines += [
        "",
        f"| definitions of {loads['tables']} partitioned tables | checks | load s | snapshot + serialize s "
        "| total s |",
        "|---|---|---|---|---|",
    ]
    for mode in ("off", "on"):
        m = loads[mode]
        lines.append(
            f"| partition_checks: {mode} | {m['checks']} | {m['load']:.2f} | "
            f"{m['snapshot'] + m['serialize']:.2f} | {m['total']:.2f} |"
        )
    verdict = "met" if loads["ratio"] <= LOAD_GOAL else "missed"
    lines.append(
        f"\non / off: **{loads['ratio']:.3f}** (goal <= {LOAD_GOAL}: {verdict}; median of {loads['repeat']})"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=3650, help="daily partitions of the table (3650)")
    parser.add_argument("--degraded", type=int, default=10, help="degraded days (10)")
    parser.add_argument("--tables", type=int, default=100, help="partitioned tables of the loads (100)")
    parser.add_argument("--load-repeat", type=int, default=3, help="timed loads per mode (3)")
    args = parser.parse_args()
    print(f"{platform.node()}: {os.cpu_count()} cores; load {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="partition_checks_bench_") as tmp:
        steps, problems, templates = measure_reports(Path(tmp) / "report", args.days, args.degraded)
        loads, load_problems = measure_loads(Path(tmp) / "loads", args.tables, args.load_repeat, templates)
    print()
    print(markdown(steps, loads))
    print(f"\nload average after: {os.getloadavg()}")
    exit_on_problems(problems + load_problems)


if __name__ == "__main__":
    main()
