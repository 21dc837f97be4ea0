"""The chaos soak's retention table (bench/soak/chaos_soak.py; issue 50, item 9): row expiry under the
writers and the faults, bounded by what was approved.

``chaos.retention`` holds a long ``epoch_ms`` column with ``retention: {column: epoch_ms, keep_days:
KEEP_DAYS, unit: milliseconds, since: newest}`` (a table layer of the soak's settings). It is
partitioned by ``bucket(BUCKETS, id)`` with partial progress from two file groups on, so its
rewrites commit group by group (what the ``terminate`` fault wants to land inside). Its writer (a
process of its own, ``python -m bench.soak.retention write``) appends ROWS_PER_APPEND rows every
~APPEND_SECONDS dated uniformly over the last SPREAD_DAYS (a third of them past the cut-off) and keeps
the ledger of bench/soak/writers.py with each row's value; sometimes (at its FUTURE_STEP-th append, then
at random) a row dated 2099-01-01, and at its SENTINEL_STEP-th (then at random) a row holding Long.MAX,
the "end of time" sentinel.

The first expiry of a table waits for an operator (planning/data_retention.py approval_needed): the
soak approves it once at the start (:class:`Approver`), as the tests do, with a run of the table's
maintenance launched with ``icelake/approved=true`` (``icelake approve``'s tags), executed in process
by a worker of its own against the soak's instance. Every later expiry must be bounded by that one.

Asserted at the end (bench/soak/retention_checks.py): 0 rows lost outside what the policy expires,
every far-future and sentinel row still there and named by the ``data_retention`` finding.

    python -m bench.soak.retention write --settings S --ledger FILE --seed N
    python -m bench.soak.retention approve
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import yaml

from bench.soak.lake import CATALOG, NAMESPACE
from bench.soak.stack import ROOT
from bench.soak.writers import ID_SPAN, Ledger, Stop, describe, outcome_of

TABLE = "retention"
COLUMN = "epoch_ms"
KEEP_DAYS = 2
SPREAD_DAYS = 3.0  # values uniform over the last 3 days: a third of each append is past the cut-off
BUCKETS = 8
DAY_MS = 86_400_000
FAR_FUTURE_MS = int(datetime(2099, 1, 1, tzinfo=UTC).timestamp() * 1000)  # a clock bug, a test row
LONG_MAX = 2**63 - 1  # "end of time"
FUTURE_STEP, SENTINEL_STEP = 4, 8  # the writer's appends that surely carry one (then at random)
FUTURE_CHANCE = 0.02  # per append, for each of the two
ROWS_PER_APPEND = 20
APPEND_SECONDS = 2.0
WRITER_INDEX = 5  # its id range (bench/soak/writers.py ID_SPAN): never another writer's ids
WRITER_NAME = "retention_writer"
APPROVAL_WAIT_SECONDS = 300.0  # for the table to await approval (its first rows past the cut-off)
# An operator approving during chaos tries again after a failure (the soak of 2026-12-02 06:00: three
# approved runs failed on a store or driver down at that moment, and the table was never expired).
APPROVAL_TRIES = 12
APPROVAL_RETRY_SECONDS = 30.0
APPROVED_BY = "chaos soak"

POLICY = {
    "retention": {"column": COLUMN, "keep_days": KEEP_DAYS, "unit": "milliseconds", "since": "newest"},
    # Partial progress from 2 file groups (one per bucket), one commit per group.
    "small_files": {"partial_progress_min_groups": 1, "partial_progress_max_commits": 2 * BUCKETS},
}


def full_name() -> str:
    return f"{CATALOG}.{NAMESPACE}.{TABLE}"


def add_policy(settings_path: Path) -> None:
    """The table's layer in the soak's settings (bench/soak/lake.py wrote the rest)."""
    data = yaml.safe_load(settings_path.read_text())
    data["policies"].setdefault("tables", {})[f"{NAMESPACE}.{TABLE}"] = POLICY
    settings_path.write_text(yaml.safe_dump(data, sort_keys=False))


def create_table(settings) -> None:
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import BucketTransform
    from pyiceberg.types import LongType, NestedField, StringType

    from icelake_assets.catalog.connection import open_catalog

    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "payload", StringType(), required=False),
        NestedField(3, COLUMN, LongType(), required=False),
    )
    spec = PartitionSpec(
        PartitionField(source_id=1, field_id=1000, transform=BucketTransform(BUCKETS), name="id_bucket")
    )
    open_catalog(settings, CATALOG).create_table(
        (NAMESPACE, TABLE), schema=schema, partition_spec=spec, properties={"format-version": "2"}
    )


# -- the writer --------------------------------------------------------------------------------------


def row_values(rng: random.Random, step: int, now_ms: int, count: int) -> list[int]:
    """An append's ``epoch_ms`` values: uniform over the last SPREAD_DAYS, the last one sometimes
    replaced by 2099-01-01 or Long.MAX (surely at the FUTURE_STEP-th and SENTINEL_STEP-th append)."""
    values = [now_ms - int(rng.uniform(0, SPREAD_DAYS) * DAY_MS) for _ in range(count)]
    if step == FUTURE_STEP or rng.random() < FUTURE_CHANCE:
        values[-1] = FAR_FUTURE_MS
    elif step == SENTINEL_STEP or rng.random() < FUTURE_CHANCE:
        values[-1] = LONG_MAX
    return values


def writer(args: argparse.Namespace) -> None:
    import pyarrow as pa

    from icelake_assets.catalog.connection import open_catalog
    from icelake_assets.settings import load_settings

    settings = load_settings(args.settings)
    ledger, stop, rng = Ledger(args.ledger), Stop(), random.Random(args.seed)
    next_id, step, table = WRITER_INDEX * ID_SPAN, 0, None
    while not stop.requested:
        step += 1
        n = None
        try:
            if table is None:  # (again) after an error: a restarted catalog wants a new token
                table = open_catalog(settings, CATALOG).load_table((NAMESPACE, TABLE))
            else:
                table.refresh()
            ids = list(range(next_id, next_id + ROWS_PER_APPEND))
            next_id += ROWS_PER_APPEND  # never reused, whatever the outcome
            values = row_values(rng, step, int(time.time() * 1000), len(ids))
            n = ledger.attempt("append", ids, values=values)
            rows = pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "payload": pa.array([f"row-{i}" for i in ids], pa.string()),
                    COLUMN: pa.array(values, pa.int64()),
                }
            )
            table.append(rows)
            ledger.outcome(n, "ok", ids)
        except Exception as err:  # the stack is being hit: record, reconnect, go on
            if n is not None:
                ledger.outcome(n, outcome_of(err), detail=describe(err))
            print(f"{time.strftime('%H:%M:%S')} step {step}: {describe(err)}", flush=True)
            table = None
        stop.sleep(APPEND_SECONDS * rng.uniform(0.7, 1.3))


def ledger_file(folder: Path) -> Path:
    return folder / "ledgers" / f"{WRITER_NAME}.jsonl"


def start_writer(folder: Path, settings: Path, env: dict, seed: int) -> subprocess.Popen:
    args = [
        sys.executable,
        "-m",
        "bench.soak.retention",
        "write",
        f"--settings={settings}",
        f"--ledger={ledger_file(folder)}",
        f"--seed={seed + WRITER_INDEX}",
    ]
    with open(folder / "ledgers" / f"{WRITER_NAME}.log", "ab") as log:
        return subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def ledger_values(path: Path) -> dict[int, int]:
    """id -> ``epoch_ms`` of every row the writer tried to append (whatever the outcome)."""
    out: dict[int, int] = {}
    if not path.exists():
        return out
    for line in path.read_text().splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn line: its batch stays unknown
        if entry.get("state") == "try" and "values" in entry:
            out.update(zip((int(i) for i in entry["ids"]), (int(v) for v in entry["values"]), strict=True))
    return out


# -- the approval at the start ---------------------------------------------------------------------


@dataclass
class Approval:
    """The soak's one approval of the table's first expiry."""

    soak_at: float = 0.0
    run_id: str | None = None
    status: str = "not launched"
    expire_data: str = ""  # the run's ``why/expire_data``
    failure: str = ""  # a failed run's failing steps, each with its error and causes (run_failure)
    tries: int = 0
    detail: str = ""

    @property
    def acted(self) -> bool:
        return self.status == "SUCCESS" and self.expire_data.startswith("acted")

    @property
    def reason(self) -> str:
        """What the report says of it: its expire_data decision, a failed run's cause, or why none ran."""
        failed = f"failed: {self.failure}" if self.failure else ""
        return "; ".join(x for x in (self.expire_data, failed) if x) or self.detail


class Approver(threading.Thread):
    """Waits for the table's plan to await approval (its first rows past the cut-off), then runs the
    approved maintenance in a worker of its own (``python -m bench.soak.retention approve``), again if
    its expire_data did not act, at most APPROVAL_TRIES times."""

    def __init__(self, settings, env: dict, folder: Path, clock: Callable[[], float], say) -> None:
        super().__init__(name="soak-approver", daemon=True)
        self.settings, self.env, self.folder, self.clock, self.say = settings, env, folder, clock, say
        self.approval = Approval()
        self.proc: subprocess.Popen | None = None

    def pids(self) -> set[int]:
        return {self.proc.pid} if self.proc is not None else set()

    def _awaiting(self) -> bool:
        from icelake_assets.catalog.connection import TableRef
        from icelake_assets.operate.plan import plan_table

        try:
            return plan_table(self.settings, TableRef(CATALOG, (NAMESPACE,), TABLE)).awaiting_approval
        except Exception:
            return False

    def run(self) -> None:
        a = self.approval
        deadline = time.monotonic() + APPROVAL_WAIT_SECONDS
        while not self._awaiting():
            if time.monotonic() > deadline:
                a.detail = f"the table awaited no approval within {APPROVAL_WAIT_SECONDS:.0f} s"
                self.say(f"retention: {a.detail}")
                return
            time.sleep(3)
        while a.tries < APPROVAL_TRIES and not a.acted:
            a.tries += 1
            a.soak_at = self.clock()
            with open(self.folder / "ledgers" / "retention_approval.log", "ab") as log:
                self.proc = subprocess.Popen(
                    [sys.executable, "-m", "bench.soak.retention", "approve"],
                    cwd=ROOT,
                    env=self.env,
                    stdout=subprocess.PIPE,
                    stderr=log,
                    start_new_session=True,
                )
                out, _ = self.proc.communicate()
            lines = [x for x in out.decode(errors="replace").splitlines() if x.startswith("RESULT ")]
            result = json.loads(lines[-1][len("RESULT ") :]) if lines else {}
            a.run_id = result.get("run_id")
            a.status = result.get("status", f"worker exited {self.proc.returncode}")
            a.expire_data = result.get("expire_data", "")
            a.failure = result.get("failure", "")
            failed = f"; failed: {a.failure[:300]}" if a.failure else ""
            self.say(
                f"retention: approved run {(a.run_id or '-')[:8]} {a.status}; expire_data: {a.expire_data[:120]}"
                + failed
            )
            if not a.acted:
                time.sleep(APPROVAL_RETRY_SECONDS)


def approve_main() -> int:
    """The approval's worker: the table's maintenance, approved (``icelake approve``'s tags), executed
    in process against $DAGSTER_HOME's instance, as the tests approve a run."""
    from dagster import DagsterInstance

    from icelake_assets.catalog.connection import TableRef
    from icelake_assets.orchestration.names import table_asset_key
    from icelake_assets.orchestration.project import build_definitions
    from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG, TRIGGER_TAG
    from icelake_assets.planning.approval import APPROVED_BY_TAG
    from icelake_assets.planning.guards import APPROVAL_TAG
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.loader import CONFIG_ENV_VAR

    settings = load_settings(os.environ[CONFIG_ENV_VAR])
    ref = TableRef(CATALOG, (NAMESPACE,), TABLE)
    tags = {TABLE_TAG: str(ref), TRIGGER_TAG: "manual", APPROVAL_TAG: "true", APPROVED_BY_TAG: APPROVED_BY}
    job = build_definitions(settings).resolve_implicit_global_asset_job_def()
    with DagsterInstance.get() as instance:
        result = job.execute_in_process(
            instance=instance, asset_selection=[table_asset_key(ref)], tags=tags, raise_on_error=False
        )
        run = instance.get_run_by_id(result.run_id)
        failure = "" if result.success else run_failure(instance, result.run_id)
    why = ""
    for event in result.get_asset_materialization_events():
        value = event.materialization.metadata.get("why/expire_data")
        why = str(value.value) if value is not None else why
    out = {"run_id": result.run_id, "status": run.status.value if run else "?", "expire_data": why}
    out["failure"] = failure  # a failed run materializes nothing: no why/expire_data to read
    print("RESULT " + json.dumps(out), flush=True)
    return 0 if result.success else 1


def run_failure(instance, run_id: str) -> str:
    """Why a run failed, from its event log: each failed step with its error and that error's causes
    (``error <- cause``), else the run's own failure message ("": none recorded)."""
    from dagster import DagsterEventType

    steps = []
    for record in instance.get_records_for_run(run_id, of_type=DagsterEventType.STEP_FAILURE).records:
        entry = record.event_log_entry
        error = entry.dagster_event.step_failure_data.error if entry.dagster_event is not None else None
        chain = []
        while error is not None:
            chain.append(error.message.strip())
            error = error.cause
        steps.append(f"{entry.step_key}: {' <- '.join(chain) or entry.message}")
    if steps:
        return "; ".join(steps)
    ended = instance.get_records_for_run(run_id, of_type=DagsterEventType.RUN_FAILURE).records
    return ended[-1].event_log_entry.message if ended else ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("write", "approve"))
    parser.add_argument("--settings")
    parser.add_argument("--ledger", type=Path)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.what == "approve":
        return approve_main()
    writer(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
