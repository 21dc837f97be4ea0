"""A run worker's time to its first op (issue 24, item 2), for bench/scale/definitions_bench.py.

    python -m bench.scale.run_worker MODULE JOB ASSET_KEY_PATH DAGSTER_HOME

Creates one run of ``JOB`` selecting the asset ``ASSET_KEY_PATH`` (a JSON list) and its checks, as
the code server would (the repository loaded here, its reconstruction metadata stored with the
run's execution plan), then starts the run worker Dagster's launchers start,
``dagster api execute_run``, in a fresh process, and waits for the run's first STEP_START event.
The worker is then stopped (the op's own work is not what is measured) and the run marked
canceled. Prints ``RESULT {json}``: seconds from the worker's start to its first op, and the
worker's own "Started process" event (interpreter and imports) on the way."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from dagster import AssetKey, DagsterEventType, DagsterInstance, DagsterRunStatus
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.execution.api import create_execution_plan
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import serialize_value

from bench.scale.load_child import load_repository

TIMEOUT_S = 900.0


def _event_time(instance: DagsterInstance, run_id: str, kind: DagsterEventType) -> float | None:
    records = instance.get_records_for_run(run_id, of_type=kind, limit=1).records
    return records[0].event_log_entry.timestamp if records else None


def prepare_run(
    module: str, job_name: str, key_path: list[str], instance: DagsterInstance
) -> tuple[str, list[str]]:
    """A run of ``job_name`` selecting one asset and its checks, created as a code server creates one
    (reconstruction metadata included); returns its id and the run worker's command line."""
    repo_def = load_repository(module)  # as the code server loads it: with its reconstruction metadata
    recon_repo = ReconstructableRepository.for_module(
        module, "defs", working_directory=os.getcwd()
    ).with_repository_load_data(repo_def.repository_load_data)
    key = AssetKey(key_path)
    job_def = repo_def.get_job(job_name)
    checks = {c for c in job_def.asset_layer.asset_graph.asset_check_keys if c.asset_key == key}
    recon_job = recon_repo.get_reconstructable_job(job_name).get_subset(
        asset_selection={key}, asset_check_selection=checks
    )
    subset = repo_def.get_maybe_subset_job_def(job_name, asset_selection={key}, asset_check_selection=checks)
    plan = create_execution_plan(subset, repository_load_data=repo_def.repository_load_data)
    run = instance.create_run_for_job(
        job_def=subset,
        execution_plan=plan,
        asset_selection={key},
        job_code_origin=recon_job.get_python_origin(),
        repository_load_data=repo_def.repository_load_data,
        status=DagsterRunStatus.STARTING,
    )
    args = ExecuteRunArgs(recon_job.get_python_origin(), run.run_id, instance.get_ref())
    return run.run_id, [sys.executable, "-m", "dagster", "api", "execute_run", serialize_value(args)]


def time_to_first_op(module: str, job_name: str, key_path: list[str], home: str) -> dict[str, float]:
    with DagsterInstance.from_config(home) as instance, tempfile.TemporaryFile() as log:
        run_id, command = prepare_run(module, job_name, key_path, instance)
        started_wall = time.time()
        started = time.perf_counter()
        # Its own process group: a JVM the first op may have started goes with it.
        worker = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            first_op = None
            while first_op is None:
                if time.perf_counter() - started > TIMEOUT_S:
                    raise SystemExit(f"no op started within {TIMEOUT_S:.0f}s")
                if worker.poll() is not None:
                    log.seek(0)
                    said = log.read().decode(errors="replace")[-3000:]
                    raise SystemExit(f"the run worker ended before its first op:\n{said}")
                first_op = _event_time(instance, run_id, DagsterEventType.STEP_START)
                time.sleep(0.05)
            process = _event_time(instance, run_id, DagsterEventType.ENGINE_EVENT)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
            instance.report_run_canceled(instance.get_run_by_id(run_id))
    return {
        "first_op": first_op - started_wall,
        "process_started": (process - started_wall) if process else float("nan"),
    }


if __name__ == "__main__":
    module, job, key_json, home = sys.argv[1:5]
    print("RESULT " + json.dumps(time_to_first_op(module, job, json.loads(key_json), home)), flush=True)
