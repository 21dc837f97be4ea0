"""The chaos soak's partition backfills (bench/soak/chaos_soak.py): beside the maintenance sensor's runs, a
steady actor materializes one day of the day-partitioned soak table at a time, on the multiprocess
executor, the way a user's project does (bench/soak/project.py: the product embedded, Dagster's
default executor), against the soak's DAGSTER_HOME.

Each backfill is a run worker process of its own (``execute_job``, as ``dagster job execute`` is):
the orchestrating parent, then one process per step. Every other one runs in a PID namespace of its
own sharing the host's name (``unshare --pid --fork --mount-proc``, a container with host networking)
where the machine allows it: the recovery can then not ask about its PIDs and judges its lease by
the renewals it sees. Such a worker keeps its resident Spark driver's state in a folder of its own
(a container's file system is its own), so the driver ends with its namespace. The soak never kills these processes: a backfill run the recovery fails
while its worker lives is a false verdict (bench/soak/run_checks.py).

    python -m bench.soak.backfill --asset '["soak","chaos","daily"]' --partition 2026-01-02 --label b3
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
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BACKFILL_TAG = "soak/backfill"  # the label of the soak's backfill, on its run
PARTITION_TAG = "dagster/partition"
UNSHARE = ("unshare", "--pid", "--fork", "--mount-proc")
BUSY_WAIT_SECONDS = 60.0  # a backfill waits this long for the table's other run to end, then starts anyway
DAYS = 3  # the day-partitioned table holds today and the two days before (bench/soak/writers.py)


def partition_keys(now: datetime | None = None) -> list[str]:
    """The daily partitions the writers fill (UTC days)."""
    today = (now or datetime.now(UTC)).date()
    return [(today - timedelta(days=k)).isoformat() for k in range(DAYS)]


def unshare_unavailable() -> str | None:
    """Why a worker cannot run in a PID namespace of its own here (None: it can)."""
    try:
        done = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"{' '.join(UNSHARE)} true: {err}"
    if done.returncode != 0:
        return f"{' '.join(UNSHARE)} true exited {done.returncode}: {done.stderr.strip()[:200]}"
    return None


@dataclass
class Backfill:
    """One backfill the soak launched, as the soak saw its worker."""

    label: str
    partition: str
    namespace: str  # "host", or "own PID namespace" (unshare)
    pid: int
    soak_at: float  # seconds after the soak's start
    started: float  # epoch seconds
    ended: float | None = None  # epoch seconds when the soak saw the worker exit (1 s polls)
    returncode: int | None = None
    run_id: str | None = None
    log: str = ""  # the worker's output

    @property
    def killed(self) -> bool:
        """The worker died by a signal (never the soak's: nothing here kills it before the end)."""
        rc = self.returncode
        return rc is not None and (rc < 0 or rc > 128)


class Backfiller(threading.Thread):
    """Launches a backfill every ``every`` seconds (± 30 %), one at a time, until :meth:`finish`."""

    def __init__(
        self,
        home: Path,
        env: dict[str, str],
        folder: Path,
        asset_path: list[str],
        table_name: str,
        every: float,
        own_namespace: bool,
        rng: random.Random,
        clock: Callable[[], float],
        say: Callable[[str], None],
    ) -> None:
        super().__init__(name="soak-backfiller", daemon=True)
        self.home, self.env, self.folder = home, {**env, "DAGSTER_HOME": str(home)}, folder
        self.asset_path, self.table_name, self.every = asset_path, table_name, every
        self.own_namespace, self.rng, self.clock, self.say = own_namespace, rng, clock, say
        self.backfills: list[Backfill] = []
        self.errors: list[str] = []
        self._procs: dict[str, subprocess.Popen] = {}
        self._closing = threading.Event()
        self._done = threading.Event()
        (folder / "backfills").mkdir(exist_ok=True)

    def pids(self) -> set[int]:
        """The workers the soak's reaper must leave to Popen."""
        return {p.pid for p in list(self._procs.values())}

    def run(self) -> None:
        from dagster import DagsterInstance

        instance = DagsterInstance.from_config(str(self.home))
        next_at = time.monotonic() + self.every * self.rng.uniform(0.3, 0.7)
        busy_since: float | None = None
        while not self._done.is_set():
            try:
                self._poll(instance)
                idle = not any(b.ended is None for b in self.backfills)
                if idle and not self._closing.is_set() and time.monotonic() >= next_at:
                    busy = self._table_busy(instance)
                    busy_since = (busy_since or time.monotonic()) if busy else None
                    if not busy or time.monotonic() - busy_since > BUSY_WAIT_SECONDS:
                        self._launch(busy)
                        busy_since = None
                        next_at = time.monotonic() + self.every * self.rng.uniform(0.7, 1.3)
            except Exception as err:  # PostgreSQL or the catalog restarting: the next poll sees it
                self.errors.append(f"{self.clock():.0f} s: {type(err).__name__}: {str(err)[:200]}")
            self._done.wait(1)

    def _table_busy(self, instance) -> bool:
        """Another run maintains the table now (the sensor's): a user would start the backfill anyway,
        the soak waits a little so that most backfills run whole."""
        from dagster import AssetKey, RunsFilter

        from icelake_assets.orchestration.runs.model import TABLE_TAG
        from icelake_assets.private_api import NOT_FINISHED_STATUSES

        key = AssetKey(self.asset_path)
        runs = instance.get_runs(RunsFilter(statuses=list(NOT_FINISHED_STATUSES)))
        return any(r.tags.get(TABLE_TAG) == self.table_name or key in (r.asset_selection or ()) for r in runs)

    def _launch(self, busy: bool) -> None:
        label = f"b{len(self.backfills) + 1}"
        partition = self.rng.choice(partition_keys())
        own = self.own_namespace and len(self.backfills) % 2 == 1  # every other one
        args = [
            sys.executable,
            "-m",
            "bench.soak.backfill",
            f"--asset={json.dumps(self.asset_path)}",
            f"--partition={partition}",
            f"--label={label}",
        ]
        env = self.env
        if own:  # a container has a file system of its own: its own resident Spark driver, gone with it
            from icelake_assets.maintenance.spark.resident_spark import BASE_ENV

            env = {**env, BASE_ENV: str(self.folder / "backfills" / f"spark-{label}")}
        log_path = self.folder / "backfills" / f"{label}.log"
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [*UNSHARE, *args] if own else args,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs[label] = proc
        namespace = "own PID namespace" if own else "host"
        self.backfills.append(
            Backfill(label, partition, namespace, proc.pid, self.clock(), time.time(), log=str(log_path))
        )
        self.say(
            f"backfill {label}: {self.table_name} partition {partition}, multiprocess executor, {namespace}, "
            f"PID {proc.pid}" + (" (the table's other run still in flight)" if busy else "")
        )

    def _poll(self, instance) -> None:
        from dagster import RunsFilter

        for b in self.backfills:
            proc = self._procs[b.label]
            if b.ended is None and proc.poll() is not None:
                b.ended, b.returncode = time.time(), proc.returncode
                self.say(f"backfill {b.label}: its worker exited ({b.returncode})")
            if b.run_id is None:
                runs = instance.get_runs(RunsFilter(tags={BACKFILL_TAG: b.label}), limit=1)
                b.run_id = runs[0].run_id if runs else None

    def finish(self, timeout: float) -> None:
        """No new backfill; the one in flight may end within ``timeout`` s, else its process group is
        killed (and said: it would be a run the product left in flight)."""
        self._closing.set()
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in self._procs.values()) and time.monotonic() < deadline:
            time.sleep(1)
        for label, proc in self._procs.items():
            if proc.poll() is None:
                self.errors.append(f"backfill {label}: still running {timeout:.0f} s after the chaos: killed")
                from bench.soak.stack import kill_group

                kill_group(proc.pid)
                proc.wait(30)
        time.sleep(1.5)  # the last poll sees the exits
        self._done.set()
        self.join(30)


def start_backfiller(soak, every: float, seed: int, home: Path, env: dict[str, str]) -> Backfiller | None:
    """The chaos soak's backfills of its day-partitioned table every ``every`` seconds (None: 0, none),
    every other one in a PID namespace of its own where the machine allows it (else said, and all on
    the host). ``soak``: bench/soak/chaos.py's Soak."""
    from bench.soak.lake import CATALOG, DAILY, NAMESPACE
    from bench.soak.report import say
    from icelake_assets.catalog.connection import TableRef
    from icelake_assets.orchestration.names import table_asset_key

    if every <= 0:
        return None
    why = unshare_unavailable()
    if why is not None:
        say(soak.t0, f"backfills in a PID namespace of their own: skipped, {why}")
    ref = TableRef(CATALOG, (NAMESPACE,), DAILY)
    backfiller = Backfiller(
        home,
        env,
        soak.folder,
        list(table_asset_key(ref).path),
        str(ref),
        every,
        why is None,
        random.Random(seed + 2),
        soak.clock,
        lambda message: say(soak.t0, message),
    )
    backfiller.start()
    return backfiller


# -- the backfill's run worker ------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asset", required=True, help="the table's asset key path, a JSON list")
    parser.add_argument("--partition", required=True)
    parser.add_argument("--label", required=True)
    args = parser.parse_args(argv)

    from dagster import AssetKey, DagsterInstance, execute_job
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    from bench.soak import project as soak_project

    started = time.time()
    key = AssetKey(json.loads(args.asset))
    # As `dagster asset materialize -m bench.soak.project --select KEY --partition P` does it, with tags.
    repository = ReconstructableRepository.for_module(soak_project.__name__, "defs", str(ROOT))
    job_def = repository.get_definition().get_implicit_job_def_for_assets([key])
    if job_def is None or key not in job_def.asset_layer.asset_graph.get_all_asset_keys():
        # The project left the table out (its catalog could not be read): no run, as for a user.
        print(f"NO RUN: the project holds no asset {key.to_user_string()}", flush=True)
        return 2
    tags = {
        **job_def.get_tags_for_partition_key(args.partition, selected_asset_keys=[key]),
        BACKFILL_TAG: args.label,
    }
    with DagsterInstance.get() as instance:
        result = execute_job(
            repository.get_reconstructable_job(job_def.name),
            instance,
            run_config=soak_project.MULTIPROCESS_RUN_CONFIG,
            tags=tags,
            asset_selection=[key],
        )
        run = instance.get_run_by_id(result.run_id)
    out = {
        "label": args.label,
        "run_id": result.run_id,
        "status": run.status.value if run else "?",
        "pid": os.getpid(),
        "seconds": round(time.time() - started, 1),
    }
    print("RESULT " + json.dumps(out), flush=True)
    return 0 if result.success else 1


if __name__ == "__main__":
    sys.exit(main())
