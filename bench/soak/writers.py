"""The chaos soak's writers (bench/soak/chaos_soak.py) and their ledgers.

Each writer is a process of its own committing to one table while maintenance runs and faults hit
the stack: pyiceberg appends every ~1.5 s, and per role pyiceberg deletes of earlier rows
(copy-on-write), a column and then a partition field added, or Spark ``DELETE`` on a merge-on-read
table (position delete files). On the day-partitioned table each append goes to one of the last
three days (UTC), the first three to each of them in turn, so the Dagster partitions the code server
builds at its first load start two days back.

The ledger is an append-only file of JSON lines: before a commit a ``try`` line with the ids it
carries, after it one outcome line. ``ok`` is written only once the commit returned; ``fail`` only
for errors that guarantee the commit did not land (a commit conflict, a failed validation); any
other error is ``unknown``, and so is a ``try`` with no outcome (the writer died in between). So
the check is exact: committed ids are present exactly once, deleted ids absent, unknown ones either.

    python -m bench.soak.writers ROLE --settings S --table NS.T --ledger FILE --seed N [...]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROWS_PER_APPEND = 20
APPEND_SECONDS = 1.5
DELETE_EVERY = 4  # the deleting writer deletes on every 4th step
DELETE_ROWS = 5
SPARK_DELETE_SECONDS = 8.0
ID_SPAN = 10**9  # writer i writes ids [i * ID_SPAN, (i + 1) * ID_SPAN): never two writers' ids alike
PARTITION_COLUMN = "grp"
TIME_COLUMN = "ts"  # the day-partitioned table's (bench/soak/lake.py)
DAYS = 3
ROOT = Path(__file__).resolve().parents[2]
ROLES = ("append", "append_delete", "append_evolve", "spark_delete")


# -- the ledger --------------------------------------------------------------------------------------


class Ledger:
    """The writer's side: one JSON line per event, flushed at once (the file outlives a kill -9)."""

    def __init__(self, path: Path) -> None:
        self._out = open(path, "a", buffering=1)  # noqa: SIM115 - the writer's whole life
        self._n = 0

    def attempt(
        self, op: str, ids: list[int] | None = None, what: str = "", values: list[int] | None = None
    ) -> int:
        """``values``: what each id carries in a column the checks need (bench/soak/retention.py)."""
        self._n += 1
        entry: dict[str, Any] = {"n": self._n, "op": op, "state": "try", "ids": ids or [], "what": what}
        if values is not None:
            entry["values"] = values
        self._write(entry)
        return self._n

    def outcome(self, n: int, state: str, ids: list[int] | None = None, detail: str = "") -> None:
        self._write({"n": n, "state": state, "ids": ids or [], "detail": detail[:300]})

    def _write(self, entry: dict[str, Any]) -> None:
        self._out.write(json.dumps({"t": round(time.time(), 3), **entry}) + "\n")
        self._out.flush()


@dataclass(frozen=True)
class LedgerState:
    """What one or more ledgers say about a table's ids."""

    appended: frozenset[int] = frozenset()  # committed appends (the commit returned)
    deleted: frozenset[int] = frozenset()  # committed deletes
    maybe_appended: frozenset[int] = frozenset()  # appends of unknown outcome
    maybe_deleted: frozenset[int] = frozenset()  # deletes of unknown outcome
    failed_appends: frozenset[int] = frozenset()  # appends that surely did not land
    actions: Counter = field(default_factory=Counter)  # (op, outcome) -> count
    torn_lines: int = 0  # an unreadable line (a writer killed mid-write): its batch stays unknown

    def merged(self, other: LedgerState) -> LedgerState:
        return LedgerState(
            self.appended | other.appended,
            self.deleted | other.deleted,
            self.maybe_appended | other.maybe_appended,
            self.maybe_deleted | other.maybe_deleted,
            self.failed_appends | other.failed_appends,
            self.actions + other.actions,
            self.torn_lines + other.torn_lines,
        )


def parse_ledger(lines: Iterable[str]) -> LedgerState:
    """A ledger's lines as sets of ids. A ``try`` without an outcome is unknown."""
    tried: dict[int, dict[str, Any]] = {}
    outcome: dict[int, str] = {}
    torn = 0
    for line in lines:
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            n, state = int(entry["n"]), str(entry["state"])
        except (ValueError, KeyError, TypeError):
            torn += 1
            continue
        if state == "try":
            tried[n] = entry
        else:
            outcome[n] = state
    sets: dict[tuple[str, str], set[int]] = {}
    actions: Counter = Counter()
    for n, entry in tried.items():
        state = outcome.get(n, "unknown")
        actions[(entry["op"], state)] += 1
        sets.setdefault((entry["op"], state), set()).update(int(i) for i in entry["ids"])
    get = lambda op, state: frozenset(sets.get((op, state), ()))  # noqa: E731
    return LedgerState(
        appended=get("append", "ok"),
        deleted=get("delete", "ok"),
        maybe_appended=get("append", "unknown"),
        maybe_deleted=get("delete", "unknown"),
        failed_appends=get("append", "fail"),
        actions=actions,
        torn_lines=torn,
    )


def read_ledger(path: Path) -> LedgerState:
    return parse_ledger(path.read_text().splitlines()) if path.exists() else LedgerState()


# -- writers -----------------------------------------------------------------------------------------

# Errors after which the commit surely did not land (pyiceberg cleans its files up after exactly
# these; Iceberg's Java SnapshotProducer likewise): a conflict whose retries ran out, a validation.
SURE_FAILURES = frozenset({"CommitFailedException", "ValidationException"})
# py4j's error text: "An error occurred while calling o42.sql.\n: org.apache...ValidationException: ..."
_JAVA_ERROR = re.compile(r"^: ([\w.$]+)", re.MULTILINE)


def outcome_of(err: BaseException) -> str:
    """``fail`` when the error guarantees the commit did not land, else ``unknown``."""
    names = {c.__name__ for c in type(err).__mro__}
    java = _JAVA_ERROR.search(str(err))
    if java is not None:  # Spark: the outermost Java exception decides
        names = {java.group(1).rsplit(".", 1)[-1]}
    return "fail" if names & SURE_FAILURES else "unknown"


def describe(err: BaseException) -> str:
    """One line: the Java exception of a Spark error, else the Python one."""
    java = re.search(r"^: (.+)$", str(err), re.MULTILINE)
    text = java.group(1) if java else f"{type(err).__name__}: {str(err).strip()}"
    return text.splitlines()[0][:300] if text.strip() else type(err).__name__


class Stop:
    """SIGTERM ends the writer between two commits (the one in flight completes and is recorded)."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._set)
        signal.signal(signal.SIGINT, self._set)

    def _set(self, *_: object) -> None:
        self.requested = True

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.requested and time.monotonic() < end:
            time.sleep(min(0.1, max(0.0, end - time.monotonic())))


def _rows(ids: list[int], with_group: bool, days_back: int | None = None):
    """``days_back``: the rows' ``ts``, that many days before now (the day-partitioned table)."""
    import pyarrow as pa

    columns: dict[str, Any] = {
        "id": pa.array(ids, pa.int64()),
        "payload": pa.array([f"row-{i}" for i in ids], pa.string()),
        "written_ms": pa.array([int(time.time() * 1000)] * len(ids), pa.int64()),
    }
    if with_group:
        columns[PARTITION_COLUMN] = pa.array([i % 4 for i in ids], pa.int32())
    if days_back is not None:
        ts = datetime.now(UTC).replace(tzinfo=None) - timedelta(days=days_back)
        columns[TIME_COLUMN] = pa.array([ts] * len(ids), pa.timestamp("us"))
    return pa.table(columns)


def _evolve(table, elapsed: float, args: argparse.Namespace, ledger: Ledger) -> bool:
    """The evolving writer's schema and spec changes, each once, when their time came; True if one
    was attempted this step."""
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import IntegerType

    has_column = PARTITION_COLUMN in table.schema().column_names
    if not has_column and elapsed >= args.column_after:
        n = ledger.attempt("evolve", what=f"add column {PARTITION_COLUMN}")
        with table.update_schema() as update:
            update.add_column(PARTITION_COLUMN, IntegerType())
        ledger.outcome(n, "ok")
        return True
    partitioned = any(f.name == PARTITION_COLUMN for f in table.spec().fields)
    if has_column and not partitioned and elapsed >= args.partition_after:
        n = ledger.attempt("evolve", what=f"add partition field identity({PARTITION_COLUMN})")
        with table.update_spec() as update:
            update.add_field(PARTITION_COLUMN, IdentityTransform(), PARTITION_COLUMN)
        ledger.outcome(n, "ok")
        return True
    return False


def pyiceberg_writer(args: argparse.Namespace) -> None:
    from pyiceberg.expressions import In

    from icelake_assets.catalog.connection import open_catalog
    from icelake_assets.settings import load_settings

    settings = load_settings(args.settings)
    ledger, stop, rng = Ledger(args.ledger), Stop(), random.Random(args.seed)
    next_id = args.writer * ID_SPAN
    live: list[int] = []  # committed, not deleted (nor possibly deleted): what deletes pick from
    table, step, started, appends = None, 0, time.monotonic(), 0
    while not stop.requested:
        step += 1
        n = None
        try:
            if table is None:  # (again) after an error: a restarted catalog wants a new token
                table = open_catalog(settings, args.catalog).load_table(args.table)
            else:
                table.refresh()
            if args.role == "append_evolve" and _evolve(table, time.monotonic() - started, args, ledger):
                continue
            if args.role == "append_delete" and step % DELETE_EVERY == 0 and len(live) > 4 * DELETE_ROWS:
                ids = sorted(rng.sample(live, DELETE_ROWS))
                live = [i for i in live if i not in set(ids)]
                n = ledger.attempt("delete", ids)
                table.delete(In("id", ids))
                ledger.outcome(n, "ok", ids)
            else:
                ids = list(range(next_id, next_id + ROWS_PER_APPEND))
                next_id += ROWS_PER_APPEND  # never reused, whatever the outcome
                names = table.schema().column_names
                days_back = None
                if TIME_COLUMN in names:  # the first appends fill each day, oldest first
                    days_back = DAYS - 1 - appends if appends < DAYS else rng.choice((0, 0, 1, 2))
                n = ledger.attempt("append", ids)
                table.append(_rows(ids, PARTITION_COLUMN in names, days_back))
                ledger.outcome(n, "ok", ids)
                appends += 1
                live.extend(ids)
        except Exception as err:  # the stack is being hit: record, reconnect, go on
            if n is not None:
                ledger.outcome(n, outcome_of(err), detail=describe(err))
            print(f"{time.strftime('%H:%M:%S')} step {step}: {describe(err)}", flush=True)
            table = None
        stop.sleep(APPEND_SECONDS * rng.uniform(0.7, 1.3))


def spark_deleter(args: argparse.Namespace) -> None:
    """Spark ``DELETE`` on a merge-on-read table: position delete files, while the table's appender
    and maintenance commit. Deletes ids its appender's ledger says were committed."""
    from pyspark.sql import SparkSession

    from icelake_assets.maintenance.spark.session import spark_config
    from icelake_assets.settings import load_settings

    settings = load_settings(args.settings)
    conf = {
        **spark_config(settings, app_name="chaos-soak-deleter"),
        "spark.master": "local[1]",
        "spark.driver.memory": "1g",
    }
    builder = SparkSession.builder
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    ledger, stop, rng = Ledger(args.ledger), Stop(), random.Random(args.seed)
    name = f"{args.catalog}.{args.table}"
    gone: set[int] = set()
    while not stop.requested:
        stop.sleep(SPARK_DELETE_SECONDS * rng.uniform(0.7, 1.3))
        if stop.requested:
            break
        committed = sorted(read_ledger(Path(args.source_ledger)).appended - gone)
        if len(committed) <= 4 * DELETE_ROWS:
            continue
        ids = sorted(rng.sample(committed, DELETE_ROWS))
        gone.update(ids)
        n = ledger.attempt("delete", ids)
        try:
            spark.sql(f"DELETE FROM {name} WHERE id IN ({', '.join(map(str, ids))})").collect()
            ledger.outcome(n, "ok", ids)
        except Exception as err:
            ledger.outcome(n, outcome_of(err), detail=describe(err))
            print(f"{time.strftime('%H:%M:%S')} delete: {describe(err)}", flush=True)
            # A session of its own has its own catalog instances: a new token after a restart.
            spark = spark.newSession()
    spark.stop()


# -- the soak's side: which writers, started how ---------------------------------------------------


@dataclass(frozen=True)
class Writer:
    name: str
    role: str
    table: str  # its table's name in the soak's namespace
    index: int  # its id range


WRITERS = (
    Writer("appender", "append", "mor_deletes", 0),
    Writer("cow_deleter", "append_delete", "cow_deletes", 1),
    Writer("evolver", "append_evolve", "evolving", 2),
    Writer("spark_deleter", "spark_delete", "mor_deletes", 3),
    Writer("daily_appender", "append", "daily", 4),
)


def ledger_path(folder: Path, w: Writer) -> Path:
    return folder / "ledgers" / f"{w.name}.jsonl"


def start_writer(
    w: Writer,
    folder: Path,
    settings: Path,
    catalog: str,
    namespace: str,
    env: dict,
    seed: int,
    seconds: float,
) -> subprocess.Popen:
    """The writer in a session of its own (``seconds``: the writing phase; the evolving writer adds its
    column at 30 % of it, its partition field at 50 %)."""
    args = [
        sys.executable,
        "-m",
        "bench.soak.writers",
        w.role,
        f"--settings={settings}",
        f"--catalog={catalog}",
        f"--table={namespace}.{w.table}",
        f"--ledger={ledger_path(folder, w)}",
        f"--writer={w.index}",
        f"--seed={seed + w.index}",
        f"--column-after={0.3 * seconds:.0f}",
        f"--partition-after={0.5 * seconds:.0f}",
    ]
    if w.role == "spark_delete":
        source = next(x for x in WRITERS if x.table == w.table and x.role == "append")
        args.append(f"--source-ledger={ledger_path(folder, source)}")
    with open(folder / "ledgers" / f"{w.name}.log", "ab") as log:
        return subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )


def table_ledgers(folder: Path) -> dict[str, LedgerState]:
    """Each table's ledgers merged (a table may have two writers)."""
    out: dict[str, LedgerState] = {}
    for w in WRITERS:
        out[w.table] = out.get(w.table, LedgerState()).merged(read_ledger(ledger_path(folder, w)))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=ROLES)
    parser.add_argument("--settings", required=True)
    parser.add_argument("--catalog", required=True)
    parser.add_argument("--table", required=True, help="namespace.table")
    parser.add_argument("--ledger", type=Path, required=True)
    parser.add_argument("--writer", type=int, default=0, help="its index: the id range it writes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--column-after", type=float, default=60.0, help="append_evolve: seconds")
    parser.add_argument("--partition-after", type=float, default=120.0, help="append_evolve: seconds")
    parser.add_argument("--source-ledger", help="spark_delete: the appender's ledger")
    args = parser.parse_args(argv)
    (spark_deleter if args.role == "spark_delete" else pyiceberg_writer)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
