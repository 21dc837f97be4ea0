"""The benches' fresh processes: ``python -m MODULE ARGS`` printing one ``RESULT {json}`` line
(bench/scale/load_child.py, bench/scale/run_worker.py, bench/scale/shape_spec.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARK = "RESULT "


def run_module(args: list[str], env: dict[str, str], timeout: float) -> tuple[float, dict[str, Any]]:
    """Runs ``python -m ARGS`` from the checkout; the process's wall seconds and its result."""
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", *args], env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )
    wall = time.perf_counter() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(args[:2])} failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, json.loads(lines[-1][len(MARK) :])
