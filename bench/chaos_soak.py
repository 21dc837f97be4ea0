"""Chaos soak (issue 31, item 5): the whole stack under writers and faults, then the product alone.

    python -m bench.chaos_soak --minutes 30          # make soak
    python -m bench.chaos_soak --minutes 3           # make soak MINUTES=3
    python -m bench.chaos_soak --minutes 3 --seed 42 # replay a plan of faults

The stack: SeaweedFS (S3 + the Iceberg REST catalog, OAuth2 and access keys) on free 127.0.0.1
ports; ``dagster-daemon run`` on the project's workspace with its dagster.yaml in a temporary
DAGSTER_HOME; three tables in ``enforce`` with no quiet period, small thresholds and a 15 s sensor,
so maintenance runs while the writers commit; the resident Spark driver's state in the soak's folder.
The writers (bench/soak_writers.py, each a process keeping a ledger): pyiceberg appends every ~1.5 s
to each table; on ``cow_deletes`` pyiceberg deletes earlier rows, on ``mor_deletes`` Spark deletes
them merge-on-read (position delete files), on ``evolving`` a column then a partition field are added.
The faults (bench/soak_faults.py) come at random times from a seeded plan for ``--minutes``; then the
writers stop and the product is left alone until every table is Healthy.

Asserted at the end (bench/soak_checks.py), exit status 1 if any fails: no row lost or duplicated
(ledgers vs pyiceberg and DuckDB), every referenced file exists, every maintenance commit in the
audit, no run queued or in progress, every table Healthy within 10 minutes of the last fault, no
process left behind. The fault log and the figures are printed as Markdown (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench import soak_checks as checks
from bench.soak_faults import FaultRecord, Injector, plan_faults
from bench.soak_lake import CATALOG, KEY, NAMESPACE, SENSOR_INTERVAL, TABLES, create_tables, write_settings
from bench.soak_report import Verdict, WriterLine, console, report, run_figures, say
from bench.soak_stack import ROOT, Daemon, Reaper, Weed, descendants, kill_group, reap_orphans, stop_popen
from bench.soak_writers import WRITERS, ledger_path, read_ledger, start_writer, table_ledgers
from icelake_assets.demo.s3_lake import lake_environment

HEAL_LIMIT_SECONDS = 600.0  # every table Healthy this long after the last fault (issue 31)
# Past the limit the soak goes on watching this long, to tell "late" from "never".
HEAL_OVERTIME_SECONDS = 900.0
QUIET_CHECKS = 2  # healed: healthy and nothing in flight at this many polls in a row ...
POLL_SECONDS = SENSOR_INTERVAL  # ... one sensor interval apart (the reconciling tick in between)
RUNS_GRACE_SECONDS = 300.0  # then how long runs still in flight may take to end
WARM_UP_SECONDS = 300.0  # the faults start once a first maintenance run started (at most this late)


@dataclass
class Soak:
    """Everything the soak started and learned, for the checks and the report."""

    seed: int
    minutes: float
    folder: Path
    t0: float = field(default_factory=time.monotonic)
    faults: list[FaultRecord] = field(default_factory=list)
    events: list[str] = field(default_factory=list)  # what happened without a fault (a crash by itself)
    writers: dict[str, subprocess.Popen] = field(default_factory=dict)
    chaos_end: float = 0.0
    last_fault: float = 0.0
    healed_at: float | None = None  # seconds after the soak's start
    load: dict[str, str] = field(default_factory=dict)

    def clock(self) -> float:
        return time.monotonic() - self.t0


def watch(soak: Soak, weed: Weed, daemon: Daemon) -> None:
    """Between faults: a server that died by itself is an event (and restarted)."""
    for name, proc in (("dagster-daemon", daemon.proc), ("SeaweedFS", weed.proc)):
        if proc is not None and proc.poll() is not None:
            soak.events.append(
                f"{soak.clock():.0f} s: {name} exited by itself ({proc.returncode}); restarted"
            )
            say(soak.t0, soak.events[-1])
            (daemon if name == "dagster-daemon" else weed).start()
    for name, proc in soak.writers.items():
        if proc.poll() is not None and not any(name in e for e in soak.events):
            soak.events.append(f"{soak.clock():.0f} s: writer {name} exited ({proc.returncode})")
            say(soak.t0, soak.events[-1])


def warm_up(soak: Soak, instance) -> None:
    """The faults start once the loop turns: a first maintenance run started (the code server's first
    load takes a minute or more on a busy machine), or after WARM_UP_SECONDS."""
    from dagster import DagsterRunStatus, RunsFilter

    from icelake_assets.orchestration.runs.model import TABLE_TAG

    deadline = soak.clock() + WARM_UP_SECONDS
    while soak.clock() < deadline:
        started = instance.get_runs(RunsFilter(statuses=[DagsterRunStatus.STARTED]))
        if any(TABLE_TAG in r.tags for r in started):
            say(soak.t0, "a first maintenance run started")
            return
        time.sleep(2)
    say(soak.t0, f"no maintenance run started within {WARM_UP_SECONDS:.0f} s: the faults start anyway")


def chaos(soak: Soak, weed: Weed, daemon: Daemon, injector: Injector, seconds: float) -> None:
    start = soak.clock()
    injector.until = start + seconds
    plan = plan_faults(random.Random(soak.seed), seconds)
    say(soak.t0, f"chaos for {seconds:.0f} s: {len(plan)} faults planned")
    for fault in plan:
        if soak.clock() >= start + seconds:  # earlier faults waited for their targets until the end
            soak.faults.append(FaultRecord(soak.clock(), fault.kind, None, "not injected: the phase ended"))
            continue
        while soak.clock() < start + fault.at:
            watch(soak, weed, daemon)
            time.sleep(1)
        record = injector.inject(fault.kind)
        soak.faults.append(record)
        if record.target is not None:
            soak.last_fault = soak.clock()
        say(soak.t0, f"fault {fault.kind}: PID {record.target} ({record.detail})")
    while soak.clock() < start + seconds:
        watch(soak, weed, daemon)
        time.sleep(1)


def stop_writers(soak: Soak) -> None:
    for proc in soak.writers.values():
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)  # each ends between two commits
    deadline = time.monotonic() + 90
    for proc in soak.writers.values():
        try:
            proc.wait(max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_group(proc.pid)
            proc.wait()


def lake_state(settings, instance) -> tuple[list[checks.HealthCheck], list[str]]:
    """Every table's health and the runs queued or in progress."""
    from dagster import RunsFilter

    from icelake_assets.catalog.connection import TableRef, open_catalog
    from icelake_assets.catalog.known_tables import known_tables
    from icelake_assets.private_api import NOT_FINISHED_STATUSES

    catalog = open_catalog(settings, CATALOG)
    known = known_tables(settings)
    health = [
        checks.check_health(settings, catalog, TableRef(CATALOG, (NAMESPACE,), t), known) for t in TABLES
    ]
    runs = instance.get_runs(RunsFilter(statuses=list(NOT_FINISHED_STATUSES)))
    return health, [
        f"{r.run_id[:8]} {r.status.value} {r.tags.get('icelake/table', r.job_name)}" for r in runs
    ]


def heal(soak: Soak, settings, instance) -> tuple[list[checks.HealthCheck], list[str]]:
    """The product alone, polled until every table is Healthy with no run in flight at QUIET_CHECKS
    polls in a row (``soak.healed_at``: the first of them), or HEAL_OVERTIME_SECONDS past the limit
    (then the runs still in flight get RUNS_GRACE_SECONDS to end)."""
    cap = max(soak.last_fault, soak.chaos_end) + HEAL_LIMIT_SECONDS + HEAL_OVERTIME_SECONDS
    quiet, health, in_flight, said = 0, [], [], ""
    while soak.clock() < cap:
        try:
            health, in_flight = lake_state(settings, instance)
        except Exception as err:  # the catalog may be restarting: the next poll sees it
            say(soak.t0, f"heal: lake not readable: {err}")
            time.sleep(POLL_SECONDS)
            continue
        if all(h.ok for h in health) and not in_flight:
            quiet += 1
            soak.healed_at = soak.healed_at if quiet > 1 else soak.clock()
            if quiet >= QUIET_CHECKS:
                return health, in_flight
        else:
            quiet, soak.healed_at = 0, None
        state = f"{sum(h.ok for h in health)}/{len(health)} Healthy, runs in flight: {in_flight or 'none'}"
        if state != said:
            say(
                soak.t0,
                f"heal: {state}; "
                + "; ".join(f"{h.table}: {h.failing[0][:70]}" for h in health if h.failing),
            )
            said = state
        time.sleep(POLL_SECONDS)
    deadline = soak.clock() + RUNS_GRACE_SECONDS
    while in_flight and soak.clock() < deadline:
        time.sleep(POLL_SECONDS)
        health, in_flight = lake_state(settings, instance)
    return health, in_flight


def health_details(health: list[checks.HealthCheck], healed_in: float | None) -> tuple[str, ...]:
    if healed_in is None:
        return tuple(f"{h.table}: {h.status}: {'; '.join(h.failing)}" for h in health if not h.ok)
    return (f"every table Healthy {healed_in:.0f} s after the last fault",)


def final_checks(soak: Soak, settings, weed: Weed, instance, health, in_flight) -> Verdict:
    from icelake_assets.audit.store import AuditLog
    from icelake_assets.catalog.connection import open_catalog

    catalog = open_catalog(settings, CATALOG)
    ledgers = table_ledgers(soak.folder)
    records = AuditLog.from_settings(settings).records()
    runs = run_figures(instance)
    rows, files, audits = [], [], []
    for name in TABLES:
        table = catalog.load_table((NAMESPACE, name))
        full = f"{CATALOG}.{NAMESPACE}.{name}"
        rows.append(checks.check_ids(full, "pyiceberg", ledgers[name], checks.pyiceberg_counts(table)))
        counts = checks.duckdb_counts(table, weed.server.s3_endpoint, *weed.credentials)
        rows.append(checks.check_ids(full, "duckdb", ledgers[name], counts))
        files.append(checks.check_files(full, table))
        audits.append(checks.check_audit(full, table, records, runs.windows))
    healed_in = None if soak.healed_at is None else soak.healed_at - soak.last_fault
    outcomes = (
        checks.outcome("rows: ledgers vs pyiceberg and DuckDB", rows, lambda r: f"{r.table} {r.describe()}"),
        checks.outcome("files: every referenced file exists", files, lambda f: f"{f.table}: {f.missing}"),
        checks.outcome(
            "audit: every maintenance commit spanned",
            audits,
            lambda a: f"{a.table}: {'; '.join(a.uncovered)}",
        ),
        checks.Outcome("runs: none queued or in progress after healing", not in_flight, tuple(in_flight)),
        checks.Outcome(
            f"health: every table Healthy within {HEAL_LIMIT_SECONDS / 60:.0f} min of the last fault",
            healed_in is not None and healed_in <= HEAL_LIMIT_SECONDS,
            health_details(health, healed_in),
        ),
    )
    return Verdict(
        outcomes,
        tuple(rows),
        tuple(audits),
        tuple(health),
        runs.counts,
        Counter(f"{r.kind}/{r.decision}" for r in records if r.table_name.startswith(f"{CATALOG}.")),
        healed_in,
        None if soak.healed_at is None else soak.healed_at - soak.chaos_end,
    )


def leftovers(soak: Soak) -> checks.Outcome:
    """Anything still running under the soak (a child subreaper: orphans come back to it) is left
    behind: named, then killed."""
    deadline = time.monotonic() + 20
    while True:
        reap_orphans(set())
        left = descendants(os.getpid())
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for proc in left.values():
        kill_group(proc.pgid)
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return checks.Outcome(
        "processes: none left behind",
        not left,
        tuple(f"PID {p.pid} (group {p.pgid}): {p.cmdline[:160]}" for p in left.values()),
    )


def interrupted(*_: object) -> None:
    raise KeyboardInterrupt("SIGTERM")  # the soak stops what it started before it exits


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run(args: argparse.Namespace) -> int:
    from dagster import DagsterInstance

    from icelake_assets.maintenance.resident_spark import BASE_ENV, stop_all
    from icelake_assets.settings import load_settings

    signal.signal(signal.SIGTERM, interrupted)
    # Orphans of what the soak starts (a resident driver whose run died) are reparented here.
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    folder = Path(tempfile.mkdtemp(prefix="chaos-soak-"))
    (folder / "ledgers").mkdir()
    soak = Soak(args.seed, args.minutes, folder)
    soak.load["before"] = uptime()
    say(soak.t0, f"seed {soak.seed}; folder {folder}; {soak.load['before']}")
    secret = f"soak-{random.Random(args.seed).getrandbits(64):016x}"
    weed = Weed(folder / "seaweedfs", (KEY, secret))
    daemon: Daemon | None = None
    spark_state = folder / "spark"

    def ours() -> set[int]:  # the children Popen waits for itself
        procs = [*soak.writers.values(), weed.proc, daemon.proc if daemon else None]
        return {p.pid for p in procs if p is not None}

    reaper = Reaper(ours)
    reaper.start()
    verdict: Verdict | None = None
    try:
        weed.start()
        settings_path = write_settings(folder, weed)
        env = {
            **lake_environment(KEY, secret, settings_path),
            "PYTHONPATH": str(ROOT),
            BASE_ENV: str(spark_state),
            "DAGSTER_HOME": str(folder / "dagster_home"),  # never the project's own (the Makefile's)
        }
        os.environ.update(env)
        settings = load_settings(settings_path)
        create_tables(settings)
        daemon = Daemon.prepare(folder / "dagster_home", env)
        daemon.start()
        instance = DagsterInstance.from_config(str(daemon.home))
        chaos_s = args.minutes * 60
        for w in WRITERS:
            soak.writers[w.name] = start_writer(
                w, folder, settings_path, CATALOG, NAMESPACE, env, args.seed, chaos_s
            )
        say(soak.t0, f"SeaweedFS S3 {weed.server.s3_endpoint}, catalog {weed.server.catalog_uri}; daemon up")
        warm_up(soak, instance)
        injector = Injector(weed, daemon, spark_state, random.Random(args.seed + 1), soak.clock)
        chaos(soak, weed, daemon, injector, chaos_s)
        stop_writers(soak)
        soak.chaos_end = soak.clock()
        say(soak.t0, "writers stopped: the product alone")
        health, in_flight = heal(soak, settings, instance)
        daemon.stop()
        verdict = final_checks(soak, settings, weed, instance, health, in_flight)
    except (Exception, KeyboardInterrupt) as err:  # broken or stopped: still stop all, report what it saw
        import traceback

        traceback.print_exc()
        broke = checks.Outcome("the soak ran to its end", False, (f"{type(err).__name__}: {err}",))
    finally:
        for proc in soak.writers.values():
            stop_popen(proc)
        if daemon is not None:
            daemon.stop()
        stop_all(spark_state)  # the resident driver outlives its runs by design: stopped by its PID
        weed.stop()
        reaper.stop()
        processes = leftovers(soak)
        soak.load["after"] = uptime()
    verdict = Verdict((broke,)) if verdict is None else verdict
    verdict = dataclasses.replace(verdict, outcomes=(*verdict.outcomes, processes))
    command = " ".join(["python -m bench.chaos_soak", *sys.argv[1:]])
    header = [
        f"\n## Chaos soak: {command}\n",
        f"seed {soak.seed}; {soak.minutes:g} min of writers and faults; wall time {soak.clock() / 60:.1f} min",
        f"load before: {soak.load['before']}",
        f"load after:  {soak.load['after']}\n",
    ]
    writers = [WriterLine(w.name, w.table, read_ledger(ledger_path(folder, w)).actions) for w in WRITERS]
    ok = report(header, soak.faults, soak.events, writers, verdict)
    summary = {
        "seed": soak.seed,
        "minutes": soak.minutes,
        "faults": [dataclasses.asdict(f) for f in soak.faults],
        "events": soak.events,
        "ok": ok,
        "load": soak.load,
        "wall_seconds": soak.clock(),
    }
    (folder / "result.json").write_text(json.dumps(summary, indent=1, default=str))
    console.print(f"\n{'PASSED' if ok else 'FAILED'}")
    if ok and not args.keep:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        console.print(f"kept for inspection: {folder}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=30.0, help="of writers and faults (default 30)")
    parser.add_argument("--seed", type=int, default=None, help="the fault plan's and writers' seed")
    parser.add_argument("--keep", action="store_true", help="keep the soak's folder even when it passes")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
