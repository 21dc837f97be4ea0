"""Big-table benchmark (issue 24, item 3c): one table of 20,000 small files compacted by one real
Dagster maintenance run vs Iceberg's own procedures called raw, each trial a fresh process.

    python -m bench.loop.big_table_bench                                  # 20,000 files, 40 days, 4 pairs
    python -m bench.loop.big_table_bench --files 2000 --days 20 --pairs 1  # a quick check (about 1 minute)
    python -m bench.loop.big_table_bench --cross-engine                   # validation's cross-engine proof on

The table (id, day, payload; partitioned by day) is written once by Spark with
``icelake_assets.demo.many_files`` (``--files`` files of 5 rows in ``--days`` day partitions) and
kept as a pristine copy: the SQLite catalog copied, the immutable Iceberg files hard-linked. Every
trial starts from its own fresh copy at the same path (metadata holds absolute paths). Settings are
compaction_bench's (enforce, no quiet period, a day with > 20 files is compacted, partial progress
past 10 groups with at most 10 commits) with ``spark.session: per_run``; each trial's manifest cache
and table inventory live in its copy, so nothing carries over from one trial to the next.

``--pairs`` alternating pairs (product, raw, product, raw, ...), each timed from its process's start
(the JVM's start included):

* **product**: ``execute_maintenance(build_definitions(load_settings(path)),
  DagsterInstance.ephemeral())`` as a user's run (loop_bench's manual run): expire_snapshots,
  remove_orphan_files, rewrite_data_files, rewrite_manifests, validate (row counts, health, audit; the
  cross-engine proof only with ``--cross-engine``: the shipped policy has it off), then the post-run
  asset checks. A few product functions are wrapped with timers (observation only, microseconds) so
  each step of the event log splits into Spark start, pre-flight, procedures, stats, validation, audit;
* **raw**: one SparkSession with the product's ``spark_config``, ``CALL rewrite_data_files`` with the
  options and ``where`` the product's plan gives this table, then ``CALL rewrite_manifests``.

Both sides must end with the same data files per partition (one per day) and the pristine row count,
and the product's recorded rewrite options must be the raw side's; otherwise the exit status is 1.
Printed: each trial's seconds, the medians, product / raw (goal ≤ 1.10), and where the product's
extra time goes (medians over the trials).
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
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import yaml
from pyiceberg.expressions import EqualTo

from bench.common.lake_copy import link_or_copy
from bench.loop.big_table_scripts import PRODUCT, RAW, WRITE
from bench.loop.compaction_bench import THRESHOLDS
from bench.loop.loop_bench import timed_script
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.planning.rewrite import plan_rewrite
from icelake_assets.policies import policy_for
from icelake_assets.settings import Settings, load_settings

GOAL_RATIO = 1.10
REF = TableRef("bench", ("ns",), "many")


@dataclass(frozen=True)
class EndState:
    """What a trial left: rows and data files per partition (from metadata), and manifests."""

    rows: int
    files: dict[str, int]
    manifests: int

    def describe(self) -> str:
        counts = sorted(set(self.files.values()))
        return f"{self.rows} rows, {len(self.files)} partitions of {counts} files, {self.manifests} manifests"


@dataclass(frozen=True)
class RewriteCall:
    """The rewrite_data_files call the product plans for the table, made verbatim by the raw side."""

    catalog: str
    table: str  # the product's quoted identifier without the catalog, as its CALL passes it
    options: dict[str, str]
    where: str | None


@dataclass(frozen=True)
class Trial:
    side: str  # product | raw
    seconds: float
    parts: dict[str, float]  # where the time went (step / part -> seconds), in order
    end: EndState
    call: dict | None  # the product's recorded rewrite options and where (None on the raw side)


@dataclass(frozen=True)
class Lake:
    """The trial lake (at one path) and its pristine copy."""

    root: Path
    settings: Settings

    @property
    def live(self) -> Path:
        return self.root / "lake"

    @property
    def pristine(self) -> Path:
        return self.root / "pristine"


def write_settings(root: Path, cross_engine: bool) -> Settings:
    lake = root / "lake"
    data = {
        "catalogs": {
            REF.catalog: {
                "type": "sql",
                "uri": f"sqlite:///{lake}/catalog.db",
                "warehouse": f"{lake}/warehouse",
            }
        },
        "thresholds": {**THRESHOLDS, "loop": {"cross_engine_check": cross_engine}},
        "spark": {"session": "per_run"},  # each trial starts its own JVM, as the raw side does
        "metrics": {"textfile_dir": str(lake / "metrics")},
    }
    path = root / "icelake.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_settings(path)


def build_lake(root: Path, files: int, days: int, cross_engine: bool) -> tuple[Lake, float]:
    """The table written once, then kept as the pristine copy; returns the seconds the write took."""
    settings = write_settings(root, cross_engine)
    lake = Lake(root, settings)
    (lake.live / "warehouse").mkdir(parents=True)
    seconds = timed_script(WRITE, str(settings.source), str(files), str(days), what="writing the table")
    shutil.copytree(lake.live, lake.pristine, copy_function=link_or_copy)
    return lake, seconds


def restore(lake: Lake) -> None:
    """A fresh copy of the pristine state at the trial path; the trial's caches go with the old one."""
    shutil.rmtree(lake.live)
    shutil.copytree(lake.pristine, lake.live, copy_function=link_or_copy)
    os.environ["ICELAKE_HEALTH_CACHE"] = str(lake.live / "health.sqlite")
    os.environ["ICELAKE_INVENTORY"] = str(lake.live / "inventory.json")


def end_state(settings: Settings) -> EndState:
    table = load_table(open_catalog(settings, REF.catalog), REF)
    stats = compute_table_stats(table, policy_for(settings, REF, table.properties))
    files = {label: p.data_files for label, p in stats.partitions.items() if p.data_files}
    return EndState(stats.records, files, stats.manifests)


def planned_call(settings: Settings) -> RewriteCall:
    """The options of the product's plan for the pristine table. Every day is flagged, so the product's
    whole-table rewrite names no partition (no ``where``); anything else would need its where too."""
    table = load_table(open_catalog(settings, REF.catalog), REF)
    policy = policy_for(settings, REF, table.properties)
    stats = compute_table_stats(table, policy)
    rp = plan_rewrite(stats, policy)
    if set(rp.partitions) != set(stats.partitions):
        raise SystemExit(
            f"not every partition is a candidate ({len(rp.partitions)} of {len(stats.partitions)})"
        )
    return RewriteCall(REF.catalog, table_identifier(REF, with_catalog=False), dict(rp.options), None)


def recorded_call(settings: Settings) -> dict:
    """The options and where the product's rewrite op recorded in its audit trail."""
    audit = AuditLog.from_settings(settings).table(create=False)
    assert audit is not None, "the product run wrote no audit trail"
    rows = audit.scan(row_filter=EqualTo("op", "rewrite_data_files")).to_arrow().to_pylist()
    results = json.loads(rows[-1]["results"]) if rows else {}
    return {"options": results.get("options"), "where": results.get("where")}


def _self_times(spans: list[list]) -> list[tuple[str, float, float, float]]:
    """Each timed call with its own time: its duration less that of the timed calls directly inside."""
    out = []
    for label, start, end in spans:
        inner = [(s, e) for _, s, e in spans if start <= s and e <= end and (s, e) != (start, end)]
        direct = [
            (s, e) for s, e in inner if not any(a <= s and e <= b and (a, b) != (s, e) for a, b in inner)
        ]
        out.append((label, start, end, (end - start) - sum(e - s for s, e in direct)))
    return out


def _steps(events: list[list]) -> list[tuple[str, float, float]]:
    """(step, start, end) from the event log, in order; a retried step appears once per attempt."""
    started: dict[str, float] = {}
    steps = []
    for kind, key, at, _ in events:
        if kind == "STEP_START":
            started[key] = at
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE", "STEP_UP_FOR_RETRY") and key in started:
            # Ops read `<graph>.<op>`; the post-run asset checks `<table asset>__<check>`.
            name = (
                key.rsplit(".", 1)[-1] if "." in key else f"post-run asset checks ({key.rsplit('__', 1)[-1]})"
            )
            steps.append((name, started.pop(key), at))
    return sorted(steps, key=lambda s: s[1])


def product_parts(record: dict, started: float, seconds: float) -> dict[str, float]:
    """The product's time by phase and step, each step split by the timed calls inside it."""
    marks, steps, spans = record["marks"], _steps(record["events"]), _self_times(record["spans"])
    parts = {
        "process start + imports": marks["imported"] - started,
        "build_definitions (discovery)": marks["defined"] - marks["imported"],
        "run setup (instance, job, until the first step)": steps[0][1] - marks["defined"],
    }
    for name, start, end in steps:
        key = name if name not in parts else f"{name} (again)"
        parts[key] = end - start
        own: dict[str, float] = {}
        for label, s, e, self_s in spans:
            if start <= s and e <= end:
                own[label] = own.get(label, 0.0) + self_s
        for label, s in own.items():
            parts[f"{key}: {label}"] = s
        parts[f"{key}: rest (Dagster, decisions, refreshes)"] = (end - start) - sum(own.values())
    parts["run end (after the last step)"] = marks["executed"] - steps[-1][2]
    parts["process exit"] = started + seconds - marks["executed"]
    return parts


def raw_parts(marks: dict[str, float], started: float, seconds: float) -> dict[str, float]:
    return {
        "process start + imports": marks["imported"] - started,
        "Spark session start (JVM)": marks["session"] - marks["imported"],
        "CALL rewrite_data_files": marks["rewrite_data_files"] - marks["session"],
        "CALL rewrite_manifests": marks["rewrite_manifests"] - marks["rewrite_data_files"],
        "process exit": started + seconds - marks["rewrite_manifests"],
    }


def product_trial(lake: Lake) -> Trial:
    restore(lake)
    out = lake.root / "product.json"
    started = time.time()
    seconds = timed_script(PRODUCT, str(lake.settings.source), str(out), what="product run")
    parts = product_parts(json.loads(out.read_text()), started, seconds)
    return Trial("product", seconds, parts, end_state(lake.settings), recorded_call(lake.settings))


def raw_trial(lake: Lake, call: RewriteCall) -> Trial:
    restore(lake)
    out = lake.root / "raw.json"
    started = time.time()
    seconds = timed_script(
        RAW, str(lake.settings.source), json.dumps(call.__dict__), str(out), what="raw procedures"
    )
    parts = raw_parts(json.loads(out.read_text())["marks"], started, seconds)
    return Trial("raw", seconds, parts, end_state(lake.settings), None)


COMMON = (
    "process start + imports",
    "Spark session start (JVM)",
    "CALL rewrite_data_files",
    "CALL rewrite_manifests",
)


def compared(trial: Trial) -> dict[str, float]:
    """The parts both sides have (summed over the product's steps), and everything else."""
    out = {
        label: sum(v for k, v in trial.parts.items() if k == label or k.endswith(": " + label))
        for label in COMMON
    }
    out["everything else"] = trial.seconds - sum(out.values())
    return out


def medians(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    return {k: statistics.median(r.get(k, 0.0) for r in rows) for k in keys}


def problems(trials: list[Trial], pristine: EndState, call: RewriteCall) -> list[str]:
    """Why the two sides did not reach the same end state, or were not given the same call."""
    out = []
    for i, t in enumerate(trials, 1):
        if t.end.rows != pristine.rows:
            out.append(f"trial {i} ({t.side}): {t.end.rows} rows, {pristine.rows} before")
        if t.end.files != trials[0].end.files or set(t.end.files.values()) != {1}:
            out.append(f"trial {i} ({t.side}): {t.end.describe()}, trial 1: {trials[0].end.describe()}")
        if t.call is not None and t.call != {"options": call.options, "where": call.where}:
            out.append(f"trial {i}: the product called the rewrite with {t.call}, the raw side with {call}")
    return out


def print_trials(trials: list[Trial]) -> float:
    """The trials, the medians and the ratio; returns the ratio."""
    print("| trial | side | seconds | end state |\n|---:|---|---:|---|")
    for i, t in enumerate(trials, 1):
        print(f"| {i} | {t.side} | {t.seconds:.1f} | {t.end.describe()} |")
    product = statistics.median(t.seconds for t in trials if t.side == "product")
    raw = statistics.median(t.seconds for t in trials if t.side == "raw")
    ratio = product / raw
    print(f"| | **median product** | **{product:.1f}** | |\n| | **median raw** | **{raw:.1f}** | |")
    verdict = "met" if ratio <= GOAL_RATIO else "not met"
    print(f"| | **product / raw** (goal ≤ {GOAL_RATIO:.2f}) | **{ratio:.2f}** | {verdict} |\n")
    return ratio


def print_breakdown(trials: list[Trial]) -> None:
    """Where the product's extra time goes: the parts both sides share, then every step's parts."""
    product = [t for t in trials if t.side == "product"]
    raw = [t for t in trials if t.side == "raw"]
    p, r = medians([compared(t) for t in product]), medians([compared(t) for t in raw])
    print("Where the time goes (medians, seconds):\n")
    print("| part | product | raw | product − raw |\n|---|---:|---:|---:|")
    for label in p:
        print(f"| {label} | {p[label]:.2f} | {r[label]:.2f} | {p[label] - r[label]:+.2f} |")
    print(
        f"| total | {sum(p.values()):.2f} | {sum(r.values()):.2f} | {sum(p.values()) - sum(r.values()):+.2f} |"
    )
    for side, group in (("product", product), ("raw", raw)):
        print(f"\n| {side}: phase / step: part | seconds |\n|---|---:|")
        for label, seconds in medians([t.parts for t in group]).items():
            shown = f"&nbsp;&nbsp;{label.split(': ', 1)[1]}" if ": " in label else f"**{label}**"
            print(f"| {shown} | {seconds:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--days", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=4, help="alternating product / raw trials")
    parser.add_argument(
        "--cross-engine", action="store_true", help="turn on validation's cross-engine proof (off by default)"
    )
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="big-table-bench-") as tmp:
        lake, write_s = build_lake(Path(tmp), args.files, args.days, args.cross_engine)
        pristine, call = end_state(lake.settings), planned_call(lake.settings)
        print(f"written in {write_s:.1f}s: {pristine.describe()}; rewrite options {call.options}", flush=True)
        trials: list[Trial] = []
        for _ in range(args.pairs):
            for run in (lambda: product_trial(lake), lambda: raw_trial(lake, call)):
                trials.append(run())
                print(f"{trials[-1].side}: {trials[-1].seconds:.1f}s", flush=True)
    load_after = os.getloadavg()
    command = " ".join([".venv/bin/python -m bench.loop.big_table_bench", *sys.argv[1:]])
    print(
        f"\n{datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {load_before[0]:.1f} / {load_before[1]:.1f} before, {load_after[0]:.1f} / "
        f"{load_after[1]:.1f} after (1 / 5 min); command: {command}\n"
    )
    proof = "on" if args.cross_engine else "off (the shipped default; --cross-engine turns it on)"
    print(
        f"{args.files} files in {args.days} day partitions, {pristine.rows} rows; cross-engine proof {proof}\n"
    )
    print_trials(trials)
    print_breakdown(trials)
    if failed := problems(trials, pristine, call):
        sys.exit("\n".join(failed))


if __name__ == "__main__":
    main()
