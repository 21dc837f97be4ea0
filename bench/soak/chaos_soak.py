"""Chaos soak (issue 31, item 5): the whole stack under writers and faults, then the product alone.

    python -m bench.soak.chaos_soak --minutes 30          # make soak
    python -m bench.soak.chaos_soak --minutes 3           # make soak MINUTES=3
    python -m bench.soak.chaos_soak --minutes 3 --seed 42 # replay a plan of faults
    python -m bench.soak.chaos_soak --minutes 3 --storage sqlite --backfill-every 0  # the soak before issue 38

The stack, as users deploy it: SeaweedFS (S3 + the Iceberg REST catalog, OAuth2 and access keys) on
free 127.0.0.1 ports; the Dagster instance's storage in PostgreSQL (the repo's dagster.postgres.yaml;
bench/common/postgres.py; ``--storage sqlite``: SQLite files in DAGSTER_HOME); ``dagster-daemon run`` on
the project's workspace (two code locations: the lake's, and the recovery sensor's) with its
dagster.yaml in a temporary DAGSTER_HOME; four tables in ``enforce`` with no quiet period, small
thresholds and a 15 s sensor, so maintenance runs while the writers commit; the resident Spark
driver's state in the soak's folder. The writers (bench/soak/writers.py, each a process keeping a
ledger): pyiceberg appends every ~1.5 s to each table; on ``cow_deletes`` pyiceberg deletes earlier
rows, on ``mor_deletes`` Spark deletes them merge-on-read (position delete files), on ``evolving`` a
column then a partition field are added; ``daily`` is partitioned by day; ``retention`` (bench/
soak/retention.py) expires rows by a long epoch-ms column (``since: newest``), its writer sometimes
writing a row dated 2099 and a Long.MAX sentinel, its first expiry approved once at the start, its
rewrites committing with partial progress. Beside the sensor's runs,
partition backfills of ``daily`` on the multiprocess executor, every other one in a PID namespace of
its own (bench/soak/backfill.py, ``--backfill-every``). The faults (bench/soak/faults.py: kill -9 of a
run worker, of the daemon's group, of SeaweedFS, of the Spark driver, of PostgreSQL; a run terminated
through the API, via the daemon's code server, inside a partial-progress rewrite; SIGSTOP of a run
worker, SIGCONT past its lease: bench/soak/pause.py) come at random times from a seeded plan for
``--minutes``; then the writers stop and the product is left alone until every table is Healthy.

Asserted at the end (bench/soak/checks.py, bench/soak/run_checks.py), exit status 1 if any fails: no
row lost or duplicated (ledgers vs pyiceberg and DuckDB), every referenced file exists, every
maintenance commit in the audit, no run queued or in progress, every table Healthy within 10 minutes
of the last fault (the retention table's far-future finding expected), no run judged dead that
succeeded, no backfill failed by the recovery while its worker lived, every terminated run CANCELED
with no step retried and no commit 2 s after its Terminate, no commit of a paused run 60 s (+ 2 s)
after its pause, the retention table's first expiry approved and 0 of its rows lost outside what the
policy expires (its far-future and sentinel rows kept and named by the data_retention finding), no
process left behind. The fault log and the figures are printed as Markdown (BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from bench.common.postgres import Postgres
from bench.soak import (
    checks,
    pause as soak_pause,
    retention as soak_retention,
    run_checks,
)
from bench.soak.backfill import Backfiller, start_backfiller
from bench.soak.chaos import Soak, chaos, stop_writers
from bench.soak.faults import Injector
from bench.soak.lake import (
    CATALOG,
    KEY,
    NAMESPACE,
    TABLES,
    create_tables,
    table_loader,
    write_settings,
)
from bench.soak.phases import HEAL_LIMIT_SECONDS, first_appends, heal, health_details, warm_up
from bench.soak.report import Verdict, WriterLine, console, report, run_figures, say
from bench.soak.retention_checks import check_retention, retention_finding, retention_outcomes
from bench.soak.stack import ROOT, Daemon, Reaper, Weed, kill_group, leftovers, stop_popen
from bench.soak.writers import WRITERS, ledger_path, read_ledger, start_writer, table_ledgers
from icelake_assets.demo.s3_lake import lake_environment

BACKFILL_END_SECONDS = 420.0  # a backfill in flight when the chaos ends may take this long to end


def retention_checks(soak: Soak, catalog, settings, weed: Weed, approver) -> tuple[checks.Outcome, ...]:
    """The retention table's rows against its writer's ledger and the policy (bench/soak/retention.py)."""
    approval = approver.approval if approver is not None else soak_retention.Approval()
    try:
        table = catalog.load_table((NAMESPACE, soak_retention.TABLE))
        counts = {
            "pyiceberg": checks.pyiceberg_counts(table),
            "duckdb": checks.duckdb_counts(table, weed.server.s3_endpoint, *weed.credentials),
        }
        finding = retention_finding(settings, catalog)
        found = check_retention(soak.folder, table, counts, finding)
    except Exception as err:
        return retention_outcomes(None, approval, f"{type(err).__name__}: {err}")
    soak.retention = dataclasses.asdict(found)
    return retention_outcomes(found, approval)


def final_checks(
    soak: Soak, settings, weed: Weed, instance, health, in_flight, backfiller, injector, approver
) -> Verdict:
    from icelake_assets.audit.store import AuditLog
    from icelake_assets.catalog.connection import open_catalog

    catalog = open_catalog(settings, CATALOG)
    ledgers = table_ledgers(soak.folder)
    records = AuditLog.from_settings(settings).records()
    runs = run_figures(instance)
    rows, files, audits = [], [], []
    for name in (*TABLES, soak_retention.TABLE):
        table = catalog.load_table((NAMESPACE, name))
        full = f"{CATALOG}.{NAMESPACE}.{name}"
        if name in TABLES:  # the retention table's rows: retention_checks (what the policy expires)
            rows.append(checks.check_ids(full, "pyiceberg", ledgers[name], checks.pyiceberg_counts(table)))
            counts = checks.duckdb_counts(table, weed.server.s3_endpoint, *weed.credentials)
            rows.append(checks.check_ids(full, "duckdb", ledgers[name], counts))
        files.append(checks.check_files(full, table))
        audits.append(checks.check_audit(full, table, records, runs.windows))
    healed_in = None if soak.healed_at is None else soak.healed_at - soak.last_fault
    outcomes: tuple[checks.Outcome, ...] = (
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
    backfills = run_checks.check_backfills(instance, backfiller.backfills if backfiller else ())
    terminations = run_checks.check_terminations(
        instance, injector.terminator.terminations, table_loader(settings)
    )
    errors = backfiller.errors if backfiller else ()
    outcomes += run_checks.run_outcomes(instance, backfills, terminations, errors)
    pauses = soak_pause.check_pauses(instance, injector.pauser.pauses, table_loader(settings))
    outcomes += soak_pause.pause_outcomes(pauses)
    outcomes += retention_checks(soak, catalog, settings, weed, approver)
    return Verdict(
        outcomes,
        tuple(rows),
        tuple(audits),
        tuple(health),
        runs.counts,
        Counter(f"{r.kind}/{r.decision}" for r in records if r.table_name.startswith(f"{CATALOG}.")),
        healed_in,
        None if soak.healed_at is None else soak.healed_at - soak.chaos_end,
        tuple(backfills),
        tuple(terminations),
        tuple(pauses),
    )


def interrupted(*_: object) -> None:
    raise KeyboardInterrupt("SIGTERM")  # the soak stops what it started before it exits


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run(args: argparse.Namespace) -> int:
    from dagster import DagsterInstance

    from icelake_assets.maintenance.spark.resident_spark import BASE_ENV, stop_all
    from icelake_assets.settings import load_settings

    signal.signal(signal.SIGTERM, interrupted)
    # dagster-postgres says so on the root logger at every retry while the postgres fault lasts.
    logging.getLogger().addFilter(lambda r: "Retrying failed database connection" not in r.getMessage())
    # Orphans of what the soak starts (a resident driver whose run died) are reparented here.
    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    folder = Path(tempfile.mkdtemp(prefix="chaos-soak-"))
    (folder / "ledgers").mkdir()
    soak = Soak(args.seed, args.minutes, folder)
    soak.load["before"] = uptime()
    say(soak.t0, f"seed {soak.seed}; folder {folder}; {soak.load['before']}")
    secret = f"soak-{random.Random(args.seed).getrandbits(64):016x}"
    weed = Weed(folder / "seaweedfs", (KEY, secret))
    postgres = Postgres() if args.storage == "postgres" else None
    daemon: Daemon | None = None
    injector: Injector | None = None
    backfiller: Backfiller | None = None
    approver: soak_retention.Approver | None = None
    spark_state = folder / "spark"

    def ours() -> set[int]:  # the children Popen waits for itself
        procs = [*soak.writers.values(), weed.proc, daemon.proc if daemon else None]
        pids = {p.pid for p in procs if p is not None} | (approver.pids() if approver else set())
        return pids | (postgres.busy if postgres else set()) | (backfiller.pids() if backfiller else set())

    reaper = Reaper(ours)
    reaper.start()
    verdict: Verdict | None = None
    try:
        if postgres is not None:
            server = postgres.start()
            soak.postgres = postgres
            say(
                soak.t0,
                f"PostgreSQL on {server.host}:{server.port} ({postgres.data}): the instance's storage",
            )
        weed.start()
        settings_path = write_settings(folder, weed)
        soak_retention.add_policy(settings_path)
        env = {
            **lake_environment(KEY, secret, settings_path),
            "PYTHONPATH": str(ROOT),
            BASE_ENV: str(spark_state),
            "DAGSTER_HOME": str(folder / "dagster_home"),  # never the project's own (the Makefile's)
            **(postgres.env() if postgres else {}),
        }
        os.environ.update(env)
        settings = load_settings(settings_path)
        create_tables(settings)
        soak_retention.create_table(settings)
        chaos_s = args.minutes * 60
        for w in WRITERS:
            soak.writers[w.name] = start_writer(
                w, folder, settings_path, CATALOG, NAMESPACE, env, args.seed, chaos_s
            )
        soak.writers[soak_retention.WRITER_NAME] = soak_retention.start_writer(
            folder, settings_path, env, args.seed
        )
        first_appends(soak)
        daemon = Daemon.prepare(folder / "dagster_home", env, postgres=postgres is not None)
        instance = DagsterInstance.from_config(str(daemon.home))
        instance.get_runs(limit=1)  # the storage's tables, before the daemon's processes race to make them
        daemon.start()
        say(soak.t0, f"SeaweedFS S3 {weed.server.s3_endpoint}, catalog {weed.server.catalog_uri}; daemon up")
        approver = soak_retention.Approver(settings, env, folder, soak.clock, lambda m: say(soak.t0, m))
        approver.start()  # the retention table's first expiry, approved once
        warm_up(soak, instance)
        injector = Injector(
            weed,
            daemon,
            spark_state,
            random.Random(args.seed + 1),
            soak.clock,
            postgres,
            table_loader(settings),
        )
        backfiller = start_backfiller(soak, args.backfill_every, args.seed, daemon.home, env)
        chaos(soak, weed, daemon, injector, chaos_s)
        if backfiller is not None:
            say(soak.t0, "chaos over: no new backfill; waiting for the one in flight")
            backfiller.finish(BACKFILL_END_SECONDS)
        stop_writers(soak)
        soak.chaos_end = soak.clock()
        say(soak.t0, "writers stopped: the product alone")
        health, in_flight = heal(soak, settings, instance)
        injector.terminator.stop()
        injector.pauser.stop()
        daemon.stop()
        verdict = final_checks(
            soak, settings, weed, instance, health, in_flight, backfiller, injector, approver
        )
        run_checks.dump_runs(instance, folder / "runs.jsonl")
    except (Exception, KeyboardInterrupt) as err:  # broken or stopped: still stop all, report what it saw
        import traceback

        traceback.print_exc()
        broke = checks.Outcome("the soak ran to its end", False, (f"{type(err).__name__}: {err}",))
    finally:
        if backfiller is not None:
            backfiller.finish(0)
        for proc in soak.writers.values():
            stop_popen(proc)
        if injector is not None:
            injector.pauser.stop()  # a paused worker resumed before its group is stopped
        if approver is not None and approver.proc is not None and approver.proc.poll() is None:
            kill_group(approver.proc.pid)  # an approval still running when the soak broke
        if daemon is not None:
            daemon.stop()
        if injector is not None:
            injector.terminator.stop()
        stop_all(spark_state)  # the resident driver outlives its runs by design: stopped by its PID
        weed.stop()
        if postgres is not None:
            postgres.stop()
        reaper.stop()
        processes = leftovers()
        soak.load["after"] = uptime()
    verdict = Verdict((broke,)) if verdict is None else verdict
    verdict = dataclasses.replace(verdict, outcomes=(*verdict.outcomes, processes))
    command = " ".join(["python -m bench.soak.chaos_soak", *sys.argv[1:]])
    header = [
        f"\n## Chaos soak: {command}\n",
        f"seed {soak.seed}; {soak.minutes:g} min of writers and faults; wall time {soak.clock() / 60:.1f} min; "
        f"instance storage {args.storage}; backfills every {args.backfill_every:g} s",
        f"load before: {soak.load['before']}",
        f"load after:  {soak.load['after']}\n",
    ]
    writers = [WriterLine(w.name, w.table, read_ledger(ledger_path(folder, w)).actions) for w in WRITERS]
    retention_ledger = read_ledger(soak_retention.ledger_file(folder))
    writers.append(WriterLine(soak_retention.WRITER_NAME, soak_retention.TABLE, retention_ledger.actions))
    ok = report(header, soak.faults, soak.events, writers, verdict)
    summary = {
        "seed": soak.seed,
        "minutes": soak.minutes,
        "faults": [dataclasses.asdict(f) for f in soak.faults],
        "events": soak.events,
        "storage": args.storage,
        "backfills": [dataclasses.asdict(b.backfill) | {"status": b.status} for b in verdict.backfills],
        "terminations": [
            dataclasses.asdict(t.termination) | {"status": t.status} for t in verdict.terminations
        ],
        "pauses": [dataclasses.asdict(p.pause) | {"status": p.status} for p in verdict.pauses],
        "retention": soak.retention
        | {"approval": dataclasses.asdict(approver.approval) if approver is not None else None},
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
    parser.add_argument(
        "--storage",
        choices=("postgres", "sqlite"),
        default="postgres",
        help="the Dagster instance's storage: PostgreSQL (dagster.postgres.yaml, killed by the postgres "
        "fault; the default) or SQLite files in DAGSTER_HOME",
    )
    parser.add_argument(
        "--backfill-every",
        type=float,
        default=90.0,
        help="seconds between partition backfills on the multiprocess executor (default 90; 0: none)",
    )
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(2**31)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
