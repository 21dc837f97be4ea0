"""Definitions load and a run worker's time to its first op: the product vs bare Dagster (issue 24, b).

    python -m bench.scale.definitions_bench                        # 1,000 and 10,000 tables, 3 runs each
    python -m bench.scale.definitions_bench --tables 1000 --repeat 1

Over scale_bench's cached lakes (``bench/results/scale_lake_<N>``, generated when missing; settings as
scale_bench's, nine checks per table), three code locations, each loaded in fresh processes the way
Dagster's code server loads one (bench/scale/load_child.py: ``LoadedRepositories``, then the snapshot the
webserver gets, ``RepositorySnap.from_def`` + serialize), interleaved so drift hits all alike:

* **product**: ``icelake_assets.definitions`` with a cached table inventory (a first load, in its
  own process, writes it and the product's spec: ``python -m bench.scale.shape_spec``);
* **bare, same shape**: ``bench.scale.bare_shapes`` rebuilding exactly the product's asset graph, check
  ops and jobs with trivial ops (``$BARE_SHAPE``: the spec bench/scale/shape_spec.py read from the
  product's repository; ``$BARE_KIND=same``);
* **bare, minimal**: the same tables as one ``@multi_asset`` per table group with one check per
  table and no job: Dagster's floor (``$BARE_KIND=minimal``).

Then, for each, a run worker's time to its first op (bench/scale/run_worker.py, in a fresh process with a
fresh DAGSTER_HOME): one run selecting one unpartitioned table and its checks (product and bare
same shape: ``icelake_maintenance``; minimal: the implicit asset job), ``dagster api execute_run``
started, seconds until its first STEP_START; ``ICELAKE_SPARK_SESSION=per_run`` (the killed worker
leaves no shared driver). Reported: median load without ``import dagster`` and snapshot seconds,
the ratios product / bare (goal <= 1.3 at 10,000 tables) and product / minimal, and the time to the
first op (goal <= 10 s at 10,000 tables).

Checked (exit 1 on a difference; a missed goal is only reported): the bare same-shape repository,
built in this process, reads back to the product's spec (same groups, ops, partitions, check ops,
jobs and each job's asset and check keys); every fresh-process load of each module has the
expected asset, check and job counts; the minimal shape has the product's tables, one check each.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common.report import exit_on_problems
from bench.scale.children import run_module
from bench.scale.load_child import MODULE
from bench.scale.shape_spec import KeyPath, ShapeSpec, spec_of

ROOT = Path(__file__).resolve().parents[2]
BARE_MODULE = "bench.scale.bare_shapes"
LOAD_RATIO_GOAL = 1.3  # product / bare same shape, at 10,000 tables
FIRST_OP_GOAL = 10.0  # seconds, product, at 10,000 tables
GOAL_TABLES = 10_000


@dataclass(frozen=True)
class Case:
    """One code location: its module, the environment it adds, and what a load of it must show."""

    label: str
    module: str
    env: dict[str, str]
    job: str  # the run worker's job
    assets: int
    checks: int
    jobs: tuple[str, ...]


@dataclass(frozen=True)
class Load:
    import_dagster: float
    load: float  # module -> RepositoryDefinition, without import dagster
    snapshot: float  # RepositorySnap.from_def + serialize
    snapshot_bytes: int


@dataclass(frozen=True)
class FirstOp:
    first_op: float  # seconds from the worker's start to its first STEP_START
    process_started: float  # ... to its "Started process" event (interpreter and imports)


@dataclass
class Measured:
    case: Case
    loads: list[Load] = field(default_factory=list)
    first_ops: list[FirstOp] = field(default_factory=list)

    @property
    def load(self) -> float:
        return statistics.median(x.load for x in self.loads)

    @property
    def snapshot(self) -> float:
        return statistics.median(x.snapshot for x in self.loads)

    @property
    def first_op(self) -> float:
        return statistics.median(x.first_op for x in self.first_ops)


# -- setup -----------------------------------------------------------------------------------------


def lake_for(tables: int) -> Path:
    """scale_bench's working copy of the lake of ``tables`` tables (generated or copied when missing)."""
    from bench.scale.scale_bench import HEALTHY_APPENDS, WORKERS
    from bench.scale.sensor_lake import RESULTS, layout, prepare_lake

    root = RESULTS / f"scale_lake_{tables}"
    if (root / "run" / "catalog.db").exists():
        return (root / "run").resolve()
    root.mkdir(parents=True, exist_ok=True)
    lake, _ = prepare_lake(root, layout(tables), False, HEALTHY_APPENDS, WORKERS)
    return lake.resolve()


def environment(folder: Path, lake: Path) -> dict[str, str]:
    """scale_bench's settings and caches in ``folder``, for every child."""
    from bench.scale.scale_bench import ORPHAN_SCAN_HOURS, TICK_BUDGET
    from bench.scale.sensor_lake import write_settings

    settings = write_settings(folder, lake, TICK_BUDGET, ORPHAN_SCAN_HOURS, {"checks_per_table": "each"})
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "ICELAKE_CONFIG": str(settings.source),
        "ICELAKE_INVENTORY": str(folder / "tables.json"),
        "ICELAKE_HEALTH_CACHE": str(folder / "health.sqlite"),
        "ICELAKE_SPARK_SESSION": "per_run",  # a killed run worker must leave no shared driver behind
    }


def product_spec(env: dict[str, str], path: Path, timeout: float) -> tuple[ShapeSpec, float]:
    """The product's shape, from one load in a fresh process (which writes the table inventory)."""
    result = child(["bench.scale.shape_spec", MODULE, str(path)], env, timeout)
    return ShapeSpec.read(path), result["seconds"]


def cases(spec: ShapeSpec, spec_path: Path) -> list[Case]:
    from icelake_assets.orchestration.assets.graph import MAINTENANCE_JOB
    from icelake_assets.private_api import IMPLICIT_ASSET_JOB_NAME

    assets = len(spec.job(IMPLICIT_ASSET_JOB_NAME).assets)
    jobs = tuple(j.name for j in spec.jobs)
    bare = {"BARE_SHAPE": str(spec_path)}
    tables = len(spec.table_keys)
    return [
        Case("product", MODULE, {}, MAINTENANCE_JOB, assets, len(spec.check_keys), jobs),
        Case(
            "bare, same shape",
            BARE_MODULE,
            {**bare, "BARE_KIND": "same"},
            MAINTENANCE_JOB,
            assets,
            len(spec.check_keys),
            jobs,
        ),
        Case(
            "bare, minimal",
            BARE_MODULE,
            {**bare, "BARE_KIND": "minimal"},
            IMPLICIT_ASSET_JOB_NAME,
            tables,
            tables,
            (IMPLICIT_ASSET_JOB_NAME,),
        ),
    ]


def first_table(spec: ShapeSpec, job: str) -> KeyPath:
    """The run's table: the first of the whole-lake maintenance job (unpartitioned tables)."""
    return min(spec.job(job).assets)


# -- checks ----------------------------------------------------------------------------------------


def differences(product: ShapeSpec, bare: ShapeSpec) -> list[str]:
    """What the bare same shape lacks or adds, part by part (empty: the same shape)."""
    out = []
    for part in ("groups", "asset_ops", "check_ops", "jobs"):
        ours, theirs = getattr(product, part), getattr(bare, part)
        if ours != theirs:
            first = next((f"{a} != {b}" for a, b in zip(ours, theirs, strict=False) if a != b), "")
            out.append(f"bare same shape: {part} differ ({len(ours)} vs {len(theirs)}): {first[:400]}")
    if len(product.check_keys) != len(bare.check_keys):
        out.append(f"bare same shape: {len(bare.check_keys)} checks, product {len(product.check_keys)}")
    return out


def check_shapes(spec: ShapeSpec) -> list[str]:
    """The bare shapes built in this process, against the product's spec."""
    from bench.scale.bare_shapes import MINIMAL_CHECK, minimal_shape, same_shape

    problems = differences(spec, spec_of(same_shape(spec).get_repository_def()))
    minimal = minimal_shape(spec).get_repository_def().asset_graph
    keys = sorted(tuple(k.path) for k in minimal.get_all_asset_keys())
    if keys != sorted(spec.table_keys):
        problems.append(f"bare minimal: {len(keys)} assets, product {len(spec.table_keys)} tables")
    checks = sorted((tuple(c.asset_key.path), c.name) for c in minimal.asset_check_keys)
    if checks != sorted((k, MINIMAL_CHECK) for k in spec.table_keys):
        problems.append(f"bare minimal: {len(checks)} checks, expected one per table")
    return problems


def check_load(case: Case, phases: dict[str, Any]) -> list[str]:
    got = (len(phases["asset_keys"]), phases["asset_checks"], tuple(phases["jobs"]))
    wanted = (case.assets, case.checks, case.jobs)
    if got == wanted:
        return []
    said = "{} assets, {} checks, jobs {}"
    return [f"load of {case.label}: {said.format(*got)}; expected {said.format(*wanted)}"]


# -- fresh processes ---------------------------------------------------------------------------------


def child(args: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """``python -m ARGS`` in a fresh process; its ``RESULT {json}`` line."""
    return run_module(args, env, timeout)[1]


def measure_loads(measured: list[Measured], env: dict[str, str], repeat: int, timeout: float) -> list[str]:
    """``repeat`` rounds, each loading every case once (drift over the rounds hits all alike)."""
    problems = []
    for _ in range(repeat):
        for m in measured:
            phases = child(["bench.scale.load_child", "load", m.case.module], {**env, **m.case.env}, timeout)
            problems += check_load(m.case, phases)
            load = Load(
                phases["import_dagster"],
                phases["load"],
                phases["snapshot"] + phases["serialize"],
                phases["snapshot_bytes"],
            )
            m.loads.append(load)
            print(f"  load {m.case.label}: {load.load:.2f}s, snapshot {load.snapshot:.2f}s", flush=True)
    return problems


def measure_first_ops(
    measured: list[Measured], key: KeyPath, env: dict[str, str], folder: Path, repeat: int, timeout: float
) -> None:
    """The run worker's time to its first op, each time with a fresh DAGSTER_HOME."""
    for n in range(repeat):
        for i, m in enumerate(measured):
            home = folder / f"dagster_home_{n}_{i}"
            home.mkdir()
            (home / "dagster.yaml").write_text("")
            args = ["bench.scale.run_worker", m.case.module, m.case.job, json.dumps(list(key)), str(home)]
            result = child(args, {**env, **m.case.env, "DAGSTER_HOME": str(home)}, timeout)
            m.first_ops.append(FirstOp(result["first_op"], result["process_started"]))
            print(f"  first op {m.case.label}: {result['first_op']:.2f}s", flush=True)


# -- report ------------------------------------------------------------------------------------------


def verdict(value: float, goal: float, tables: int) -> str:
    met = "met" if value <= goal else "not met"
    return met if tables == GOAL_TABLES else f"{met} (the goal is set at {GOAL_TABLES:,} tables)"


def rows(tables: int, measured: list[Measured], key: KeyPath) -> list[str]:
    product, same, minimal = measured
    out = []
    for m in measured:
        c, first = m.case, m.loads[0]
        out.append(
            f"| definitions load, {c.label} (`{c.module}`) | {m.load:.2f} s | – | – | median of "
            f"{len(m.loads)}; snapshot {m.snapshot:.2f} s ({first.snapshot_bytes / 1e6:.1f} MB); "
            f"{c.assets:,} assets, {c.checks:,} checks, jobs: {len(c.jobs)}; `import dagster` "
            f"{statistics.median(x.import_dagster for x in m.loads):.2f} s besides |"
        )
    ratio = product.load / same.load
    out.append(
        f"| **load, product / bare same shape** | {ratio:.2f}× | ≤ {LOAD_RATIO_GOAL:g}× | "
        f"{verdict(ratio, LOAD_RATIO_GOAL, tables)} | snapshot {product.snapshot / same.snapshot:.2f}× |"
    )
    out.append(
        f"| load, product / bare minimal | {product.load / minimal.load:.2f}× | – | – | "
        f"snapshot {product.snapshot / minimal.snapshot:.2f}× |"
    )
    for m in measured:
        bold = "**" if m is product else ""
        goal = f"≤ {FIRST_OP_GOAL:g} s" if m is product else "–"
        met = verdict(m.first_op, FIRST_OP_GOAL, tables) if m is product else "–"
        started = statistics.median(x.process_started for x in m.first_ops)
        out.append(
            f"| {bold}run worker to first op, {m.case.label}{bold} (`{m.case.job}`, "
            f"`{'/'.join(key)}` and its checks) | {m.first_op:.2f} s | {goal} | {met} | median of "
            f"{len(m.first_ops)}; worker's process started at {started:.2f} s |"
        )
    return out


def run_tables(tables: int, repeat: int, timeout: float) -> tuple[list[str], list[str]]:
    """Every measurement at ``tables`` tables: report rows and problems."""
    lake = lake_for(tables)
    with tempfile.TemporaryDirectory(prefix="definitions-bench-") as tmp:
        folder = Path(tmp)
        env = environment(folder, lake)
        spec_path = folder / "shape.json"
        spec, first_load = product_spec(env, spec_path, timeout)
        print(f"{tables:,} tables: product loaded and its shape read in {first_load:.1f}s", flush=True)
        problems = check_shapes(spec)
        measured = [Measured(c) for c in cases(spec, spec_path)]
        problems += measure_loads(measured, env, repeat, timeout)
        key = first_table(spec, measured[0].case.job)
        measure_first_ops(measured, key, env, folder, repeat, timeout)
    header = (
        f"| **{tables:,} tables**: {len(spec.groups)} table groups, {len(spec.check_ops)} check ops, "
        f"{len(spec.jobs)} jobs | | | | |"
    )
    return [header, *rows(tables, measured, key)], problems


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, nargs="+", default=[1000, GOAL_TABLES])
    parser.add_argument("--repeat", type=int, default=3, help="fresh-process runs per measurement (median)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds allowed per child process")
    args = parser.parse_args()
    if args.repeat < 1 or min(args.tables) < 2:
        parser.error("--repeat must be at least 1 and --tables at least 2")
    load_before = os.getloadavg()[0]
    lines: list[str] = []
    problems: list[str] = []
    for tables in args.tables:
        more_lines, more_problems = run_tables(tables, args.repeat, args.timeout)
        lines += more_lines
        problems += more_problems
    command = " ".join([".venv/bin/python -m bench.scale.definitions_bench", *sys.argv[1:]])
    print(
        f"\nmachine: {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()} "
        f"{platform.machine()}; load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} "
        f"at the end; {datetime.now():%Y-%m-%d %H:%M}; command: {command}\n"
    )
    print("| measurement | value | goal | verdict | detail |")
    print("|---|---:|---:|---|---|")
    print("\n".join(lines))
    exit_on_problems(problems)


if __name__ == "__main__":
    main()
