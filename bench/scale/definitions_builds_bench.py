"""How many times a code-server load builds the definitions, and what that costs (issue 24, item 2).

    python -m bench.scale.definitions_builds_bench [--tables 1000] [--baseline 2450e23] [--pairs 3]

Loads the code location the way Dagster's code server does (bench/scale/load_child.py: ``LoadedRepositories``)
in fresh processes, alternating this checkout's ``icelake_assets/definitions.py`` with the one of
``--baseline`` (read with ``git show`` into a temp module), over scale_bench's cached lake with a
cached table inventory. Prints the builds each load made (``load_definitions`` calls) and the median
load time of each, with the ratio current / baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import importlib, json, sys, time
sys.path.insert(0, {tmp!r})
import dagster  # noqa: F401  (outside the clock, as load_child's baseline)
started = time.perf_counter()
module = importlib.import_module({module!r})
calls = []
real = module.load_definitions
module.load_definitions = lambda ctx: calls.append(str(ctx.load_type).rsplit(".", 1)[-1]) or real(ctx)
from bench.scale.load_child import load_repository
repo = load_repository({module!r})
print("RESULT " + json.dumps({{"builds": calls, "seconds": time.perf_counter() - started,
    "assets": len(repo.asset_graph.get_all_asset_keys())}}))
"""


def load(module: str, tmp: str, env: dict[str, str]) -> dict:
    code = CHILD.format(tmp=tmp, module=module)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True)
    lines = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
    if out.returncode or not lines:
        raise SystemExit(f"{module} failed:\n{out.stderr[-2000:]}")
    return json.loads(lines[-1][7:])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--baseline", default="2450e23", help="commit whose definitions.py is the baseline")
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()
    from bench.scale.scale_bench import ORPHAN_SCAN_HOURS, TICK_BUDGET
    from bench.scale.sensor_lake import write_settings

    lake = ROOT / "bench" / "results" / f"scale_lake_{args.tables}" / "run"
    if not (lake / "catalog.db").exists():
        raise SystemExit(
            f"no lake at {lake}: run `python -m bench.scale.scale_bench --tables {args.tables} --no-ui` once"
        )
    with tempfile.TemporaryDirectory() as tmp:
        old = subprocess.run(
            ["git", "show", f"{args.baseline}:icelake_assets/definitions.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        Path(tmp, "baseline_definitions.py").write_text(old)
        settings = write_settings(Path(tmp), lake.resolve(), TICK_BUDGET, ORPHAN_SCAN_HOURS)
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "ICELAKE_CONFIG": str(settings.source),
            "ICELAKE_INVENTORY": str(Path(tmp, "tables.json")),
            "ICELAKE_HEALTH_CACHE": str(Path(tmp, "health.sqlite")),
        }
        load("icelake_assets.definitions", tmp, env)  # writes the inventory: every timed load is cached
        results: dict[str, list[dict]] = {"baseline_definitions": [], "icelake_assets.definitions": []}
        for _ in range(args.pairs):
            for module in results:
                results[module].append(load(module, tmp, env))
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {args.tables} tables")
    medians = {}
    for module, runs in results.items():
        medians[module] = statistics.median(r["seconds"] for r in runs)
        builds = {",".join(r["builds"]) for r in runs}
        print(f"{module}: median {medians[module]:.2f}s over {len(runs)} loads; builds per load: {builds}")
    ratio = medians["icelake_assets.definitions"] / medians["baseline_definitions"]
    print(f"current / baseline: {ratio:.2f}x")


if __name__ == "__main__":
    main()
