"""Sensor benchmark: one tick of the maintenance sensor over many small tables (issue 4).

    python -m bench.scale.sensor_bench                  # 1,000 tables (10 namespaces x 100)
    python -m bench.scale.sensor_bench --tables 200 --repeat 1 --profile

The lake (pyiceberg, real parquet files, SQLite SQL catalog) is generated once and cached under
``bench/results/sensor_lake_<N>/pristine``; every run works on a copy at ``.../run`` (hard links for
the immutable Iceberg files, a real copy of the catalog database), so the commits a run makes never
reach the cache and the copy keeps the absolute paths the metadata holds.

Tables: ``ns00``..``ns08`` are unpartitioned, ``ns09`` is partitioned by ``day(ts)`` (two days). A
healthy table has 3 appends (3 files per partition); every 10th table is degraded with 6 appends,
over the bench's small-file threshold (``max_files_per_partition: 5``), so a tick launches one run
per degraded table (a partitioned one: one run over the range of its offending days).

Measured in one process, like the sensor tests (``build_sensor_context`` with a persistent
``DagsterInstance.local_temp``, ``defs.get_sensor_def(MAINTENANCE_SENSOR).evaluate_tick``):

1. building the definitions (discovery of every table) and Dagster's resolution of the repository,
   both done once when a code server loads, not part of a tick;
2. a cold tick: empty cursor, the process-wide manifest cache and its on-disk level both cleared
   (``--repeat`` cold ticks; the first of the process is reported, and the median of all);
3. an unchanged tick: the cursor of the cold tick, nothing committed since;
4. a tick after one new commit to each of 10 tables (5 healthy, 5 degraded);
5. a restart tick: empty cursor and empty memory cache, warm disk cache (a new code-server process);
6. a cold tick with the disk level switched off (``ICELAKE_HEALTH_CACHE=off``): what that level costs;
7. with ``--profile``: one more cold tick under cProfile (top functions printed, .pstats saved).

Every tick's result is checked (observations, launched tables, run requests); a difference is
printed and the exit status is 1, since the timings would then measure something else. CPU time
and time in the cyclic GC are reported next to wall time: the cores are often shared.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import os
import platform
import pstats
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from dagster import DagsterInstance, RepositoryDefinition, build_sensor_context

import icelake_assets.orchestration.resources as resources_module
from bench.common.report import exit_on_problems
from bench.scale.sensor_lake import (
    RESULTS,
    BenchTable,
    _catalog,
    batch,
    layout,
    prepare_lake,
    write_settings,
)
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.runs.run_tags import named_tables
from icelake_assets.orchestration.sensors.maintenance import MAINTENANCE_SENSOR, TickCursor
from icelake_assets.settings import Settings

CHANGED_TABLES = 10
GOALS = {"cold": 10.0, "unchanged": 2.0}  # issue 4, seconds


# -- measuring ----------------------------------------------------------------------------------


@dataclass
class Tick:
    label: str
    seconds: float
    cpu_seconds: float  # this process's CPU time; the rest of ``seconds`` is waiting (fsync, other processes)
    run_requests: int
    observations: int
    cursor: str
    caches: str
    manifests_read: int
    manifest_lists_read: int
    disk_hits: int
    gc_seconds: float
    launched_tables: set[str]
    observed_tables: set[str]


class GcClock:
    """Time spent in Python's cyclic garbage collector (finalizers included) while it is running."""

    def __init__(self) -> None:
        self.seconds, self._started = 0.0, 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._started


GC_CLOCK = GcClock()


def clear_caches(disk_path: Path, memory: bool = True, disk: bool = True) -> None:
    if disk:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{disk_path}{suffix}").unlink(missing_ok=True)
    if memory:
        resources_module._MANIFEST_CACHE = None


def tick(
    label: str,
    settings: Settings,
    defs,
    instance: DagsterInstance,
    cursor: str | None,
    caches: str,
    profiler: cProfile.Profile | None = None,
) -> Tick:
    # A cleared cache is created inside the tick, as in a new process (its disk file included).
    cache = resources_module._MANIFEST_CACHE
    before = (cache.reads, cache.list_reads, cache.disk_hits) if cache is not None else (0, 0, 0)
    gc_before = GC_CLOCK.seconds
    sensor = defs.get_sensor_def(MAINTENANCE_SENSOR)
    started, cpu = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.enable()
    # A new resource per tick, as Dagster builds one per evaluation: settings load and catalog open count.
    # ``defs``: a Definitions, or the RepositoryDefinition a code server resolved (scale_bench).
    where = {"repository_def": defs} if isinstance(defs, RepositoryDefinition) else {"definitions": defs}
    context = build_sensor_context(
        instance=instance,
        cursor=cursor,
        resources={"icelake": IcelakeResource(config_path=settings.source)},
        **where,
    )
    result = sensor.evaluate_tick(context)
    if profiler is not None:
        profiler.disable()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    if result.cursor is None:
        raise RuntimeError(
            f"{label}: the sensor returned no cursor ({result.skip_message or 'no skip message'})"
        )
    cache = resources_module.manifest_cache()
    return Tick(
        label=label,
        seconds=seconds,
        cpu_seconds=cpu,
        run_requests=len(result.run_requests),
        observations=len(result.asset_events),
        cursor=result.cursor,
        caches=caches,
        manifests_read=cache.reads - before[0],
        manifest_lists_read=cache.list_reads - before[1],
        disk_hits=cache.disk_hits - before[2],
        gc_seconds=GC_CLOCK.seconds - gc_before,
        launched_tables={t for r in result.run_requests for t in named_tables(r.tags) or ()},
        observed_tables={".".join(e.asset_key.path) for e in result.asset_events},
    )


def commit_to(lake: Path, tables: list[BenchTable]) -> None:
    cat = _catalog(lake)
    for t in tables:
        cat.load_table(t.identifier).append(batch(t, 100))
    cat.engine.dispose()


def pick_changed(tables: list[BenchTable], count: int) -> list[BenchTable]:
    """Half healthy, half degraded tables, spread over the namespaces."""
    healthy = [t for t in tables if not t.degraded]
    degraded = [t for t in tables if t.degraded]
    half = count // 2
    picks = degraded[:: max(1, len(degraded) // max(1, half))][:half]
    picks += healthy[:: max(1, len(healthy) // max(1, count - len(picks)))][: count - len(picks)]
    return sorted(picks, key=lambda t: t.identifier)


def check(label: str, got: object, expected: object, problems: list[str]) -> None:
    if got != expected:
        problems.append(f"{label}: got {got}, expected {expected}")


def check_runs(label: str, got: int, launched: list, problems: list[str]) -> None:
    """Packed runs carry several small tables (planning/packing.py): at least one run when any table
    launched, at most a run per table (the launched tables themselves are checked by name)."""
    most = sum(t.runs_when_launched() for t in launched)
    if not (min(1, most) <= got <= most):
        problems.append(f"{label} run requests: got {got}, expected 1..{most} for {len(launched)} tables")


def markdown(
    discovery_s: float, repository_s: float, tables: int, ticks: list[Tick], colds: list[Tick], changed: int
) -> str:
    goals = {"cold tick": GOALS["cold"], "unchanged tick": GOALS["unchanged"]}
    lines = [
        "| measurement | seconds | goal | time / goal | CPU s | GC s | run requests | observations | "
        "manifests read (lists) | disk-cache hits | caches warm before |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| build definitions (discovery of {tables:,} tables; not part of a tick) | {discovery_s:.2f} "
        "| – | – | – | – | – | – | – | – | – |",
        f"| Dagster repository resolution (once per code-server load; not part of a tick) | {repository_s:.2f} "
        "| – | – | – | – | – | – | – | – | – |",
    ]
    for t in ticks:
        goal = goals.get(t.label)
        label = {
            "after commits": f"tick after 1 new commit to {changed} tables",
            "cold tick": "**cold tick** (first of the process)",
            "unchanged tick": "**unchanged tick**",
        }.get(t.label, t.label)
        lines.append(
            f"| {label} | {t.seconds:.2f} | {f'≤ {goal:g}' if goal else '–'} | "
            f"{f'{t.seconds / goal:.2f}' if goal else '–'} | {t.cpu_seconds:.2f} | {t.gc_seconds:.2f} | "
            f"{t.run_requests} | {t.observations} | {t.manifests_read} ({t.manifest_lists_read}) | {t.disk_hits} | "
            f"{t.caches} |"
        )
        if t.label == "cold tick" and len(colds) > 1:
            times = sorted(c.seconds for c in colds)
            median = statistics.median(times)
            lines.append(
                f"| cold tick, median of {len(colds)} (min – max: {times[0]:.2f} – {times[-1]:.2f}) | {median:.2f} "
                f"| ≤ {GOALS['cold']:g} | {median / GOALS['cold']:.2f} | "
                f"{statistics.median(c.cpu_seconds for c in colds):.2f} | "
                f"{statistics.median(c.gc_seconds for c in colds):.2f} | {t.run_requests} | {t.observations} | "
                f"{t.manifests_read} ({t.manifest_lists_read}) | 0 | {t.caches} |"
            )
    return "\n".join(lines)


def print_profile(profiler: cProfile.Profile, out: Path, top: int) -> None:
    profiler.dump_stats(str(out))
    for order in ("cumulative", "tottime"):
        buf = io.StringIO()
        stats = pstats.Stats(profiler, stream=buf).strip_dirs().sort_stats(order)
        stats.print_stats(top)
        text = buf.getvalue()
        print(f"\n--- cold tick profile, top {top} by {order} ---")
        print(text[text.find("   ncalls") :].rstrip())
    print(f"\nprofile saved: {out} (python -m pstats {out})")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=1000, help="number of tables (default 1000)")
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help="cache folder of the generated lake (default bench/results/sensor_lake_<N>)",
    )
    parser.add_argument("--rebuild", action="store_true", help="generate the lake again even if cached")
    parser.add_argument("--repeat", type=int, default=3, help="cold ticks to run (each with cleared caches)")
    parser.add_argument("--profile", action="store_true", help="also profile a cold tick with cProfile")
    parser.add_argument("--top", type=int, default=30, help="functions shown per profile ordering")
    args = parser.parse_args()
    if args.tables < 2:
        parser.error("--tables must be at least 2 (one healthy and one degraded table)")
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    root = (args.root or RESULTS / f"sensor_lake_{args.tables}").resolve()
    root.mkdir(parents=True, exist_ok=True)
    tables = layout(args.tables)
    prepared = time.perf_counter()
    lake, generated = prepare_lake(root, tables, args.rebuild)
    # The copy (or generation) leaves thousands of dirty inodes: written back now, they would land
    # in the first fsync a tick makes (the health disk cache commits) and be timed as sensor cost.
    os.sync()
    print(
        f"load average before measuring: {os.getloadavg()[0]:.1f} (other processes share the cores)",
        flush=True,
    )
    prepare_s = time.perf_counter() - prepared

    with tempfile.TemporaryDirectory(prefix="sensor-bench-") as tmp:
        folder = Path(tmp)
        disk_cache = folder / "health.sqlite"
        os.environ["ICELAKE_HEALTH_CACHE"] = str(disk_cache)  # read when the process cache is created
        settings = write_settings(folder, lake)
        problems: list[str] = []
        degraded = {t.key for t in tables if t.degraded}
        every = {t.key for t in tables}

        started = time.perf_counter()
        defs = build_definitions(settings)
        discovery_s = time.perf_counter() - started
        print(f"definitions: {len(tables)} tables discovered in {discovery_s:.2f}s", flush=True)
        started = time.perf_counter()
        defs.get_repository_def()  # a code server resolves it when it loads, before any tick
        repository_s = time.perf_counter() - started

        (folder / "dagster").mkdir()
        # No global run cap: every degraded table is requested, which the checks below count (the
        # launch order under a cap is tested in icelake_assets_tests/orchestration/runs/test_model.py).
        no_cap = {"concurrency": {"runs": {"max_concurrent_runs": -1}}}
        with DagsterInstance.local_temp(str(folder / "dagster"), overrides=no_cap) as instance:
            colds = []
            for i in range(args.repeat):
                clear_caches(disk_cache)
                colds.append(
                    tick("cold tick", settings, defs, instance, None, "none (memory and disk cleared)")
                )
                print(f"cold tick {i + 1}/{args.repeat}: {colds[-1].seconds:.2f}s", flush=True)
            cold = colds[0]
            for c in colds:
                check("cold tick observations", c.observed_tables, every, problems)
                check("cold tick launched tables", c.launched_tables, degraded, problems)
                check_runs("cold tick", c.run_requests, [t for t in tables if t.degraded], problems)
                if len(TickCursor.loads(c.cursor).seen) != len(tables):
                    problems.append("cold tick: the budget stopped it before every table was evaluated")

            unchanged = tick("unchanged tick", settings, defs, instance, colds[-1].cursor, "memory + disk")
            print(f"unchanged tick: {unchanged.seconds:.2f}s", flush=True)
            check("unchanged tick observations", unchanged.observations, 0, problems)
            check("unchanged tick run requests", unchanged.run_requests, 0, problems)

            changed = pick_changed(tables, min(CHANGED_TABLES, len(tables)))
            commit_to(lake, changed)
            after = tick("after commits", settings, defs, instance, unchanged.cursor, "memory + disk")
            print(f"tick after {len(changed)} commits: {after.seconds:.2f}s", flush=True)
            check("after-commit observations", after.observed_tables, {t.key for t in changed}, problems)
            check_runs("after-commit", after.run_requests, [t for t in changed if t.degraded], problems)

            clear_caches(disk_cache, memory=True, disk=False)
            restart = tick(
                "restart tick (empty cursor, new process: memory cache empty)",
                settings,
                defs,
                instance,
                None,
                "disk only",
            )
            print(f"restart tick: {restart.seconds:.2f}s", flush=True)
            check("restart tick manifests read", restart.manifests_read, 0, problems)

            # The same cold tick with the health cache in memory only (the documented "off" switch):
            # what the disk level costs a tick.
            clear_caches(disk_cache)
            os.environ["ICELAKE_HEALTH_CACHE"] = "off"
            memory_only = tick(
                "cold tick, disk cache off (ICELAKE_HEALTH_CACHE=off)",
                settings,
                defs,
                instance,
                None,
                "none (memory cleared, no disk level)",
            )
            os.environ["ICELAKE_HEALTH_CACHE"] = str(disk_cache)
            resources_module._MANIFEST_CACHE = None
            print(f"cold tick without the disk cache: {memory_only.seconds:.2f}s", flush=True)
            check("memory-only cold tick observations", memory_only.observed_tables, every, problems)
            ticks = [cold, unchanged, after, restart, memory_only]

            if args.profile:
                clear_caches(disk_cache)
                profiler = cProfile.Profile()
                profiled = tick("cold tick (cProfile)", settings, defs, instance, None, "none", profiler)
                print_profile(profiler, root / "cold_tick.pstats", args.top)
                print(f"profiled cold tick: {profiled.seconds:.2f}s (with cProfile overhead)")

    print()
    command = " ".join([".venv/bin/python -m bench.scale.sensor_bench", *sys.argv[1:]])
    print(
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} "
        f"{platform.machine()}, load average {os.getloadavg()[0]:.1f} at the end; command: {command}"
    )
    parts = [
        f"lake: {len(tables)} tables ({sum(t.degraded for t in tables)} degraded, "
        f"{sum(t.partitioned for t in tables)} partitioned by day) under {root}"
    ]
    parts.append(
        f"generated in {generated:.1f}s" if generated is not None else f"cached, copied in {prepare_s:.1f}s"
    )
    print("; ".join(parts))
    print()
    print(markdown(discovery_s, repository_s, len(tables), ticks, colds, len(changed)))
    exit_on_problems(problems, "SENSOR ")


if __name__ == "__main__":
    main()
