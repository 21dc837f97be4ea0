"""No run of a table starts its work while a stopped run of it may still commit (issue 50): a
terminated run still CANCELING, or one FAILED/CANCELED less than FENCE_GRACE_SECONDS ago. Checked by
the table's first op, so every path that starts maintenance (here: Materialize through
execute_in_process, as a queued run, an approval or a backfill run would) waits or refuses."""

from __future__ import annotations

import os
import socket
import subprocess
import time

from dagster import DagsterRunStatus, instance_for_test

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.orchestration.assets import commit_gate
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.runs import model as run_model
from icelake_assets.orchestration.runs.concurrency import stopped_run_may_commit
from icelake_assets.orchestration.runs.leases import lease_key
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG
from icelake_assets.planning.stale_runs import FENCE_GRACE_SECONDS, Lease
from icelake_assets.processes import host_identity, start_ticks
from icelake_assets_tests.orchestration.runs.test_model import _lake_of, _queue, _start


def _lease(instance, run_id: str, pid: int, released: bool = False) -> None:
    """The run's lease as its worker (``pid``, on this host) writes it (orchestration/runs/leases.py)."""
    lease = Lease(socket.gethostname(), pid, time.time(), released, host_identity(), start_ticks(pid), 1, pid)
    instance.run_storage.set_cursor_values({lease_key(run_id): lease.dumps()})


def _stopped(instance, defs, ref, status: DagsterRunStatus, pid: int | None = None, released=False) -> str:
    """A run of the table that started, then was terminated (CANCELING) or ended with ``status``; its
    worker ``pid`` (default: this live process) holds its lease."""
    run = _queue(instance, defs, ref, {TABLE_TAG: str(ref)})
    _start(instance, run.run_id)
    _lease(instance, run.run_id, os.getpid() if pid is None else pid, released)
    if status == DagsterRunStatus.CANCELING:
        instance.report_run_canceling(instance.get_run_by_id(run.run_id))
    elif status == DagsterRunStatus.CANCELED:
        instance.report_run_canceled(instance.get_run_by_id(run.run_id))
    else:
        instance.report_run_failed(instance.get_run_by_id(run.run_id))
    return run.run_id


def test_a_run_stopped_within_the_grace_is_found_until_the_grace_ends(make_lake, tmp_path):
    settings, refs = _lake_of(make_lake, ["other"])
    ref, other = refs["t"], refs["other"]
    defs = build_definitions(settings)
    key = table_asset_key(ref)
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        assert stopped_run_may_commit(instance, "me", key, "p") is None
        failed = _stopped(instance, defs, ref, DagsterRunStatus.FAILURE)
        _stopped(instance, defs, other, DagsterRunStatus.CANCELING)  # another table's: not ours
        found = stopped_run_may_commit(instance, "me", key, "p")
        assert found is not None and found[0] == failed and 0 < found[1] <= FENCE_GRACE_SECONDS
        later = time.time() + FENCE_GRACE_SECONDS + 1
        assert stopped_run_may_commit(instance, "me", key, "p", now=later) is None
        assert stopped_run_may_commit(instance, failed, key, "p") is None  # its own run


def test_a_run_whose_worker_ended_holds_nothing(make_lake, tmp_path):
    """A run that failed by its own error released its lease; a worker that died left it unreleased
    but its PID is gone: neither can commit, nothing waits for them."""
    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    dead = subprocess.Popen(["true"])
    dead.wait()
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        _stopped(instance, defs, ref, DagsterRunStatus.FAILURE, released=True)
        _stopped(instance, defs, ref, DagsterRunStatus.CANCELING, pid=dead.pid)
        assert stopped_run_may_commit(instance, "me", table_asset_key(ref), "p") is None


def test_a_canceling_run_holds_the_tables_next_run_which_stops_before_any_commit(
    make_lake, tmp_path, monkeypatch
):
    """The issue: a queued run, an approval or Materialize started while the terminated run's shared
    driver still committed. The later run waits, then refuses naming the run (nothing committed)."""
    settings, refs = _lake_of(make_lake, [])
    ref = refs["t"]
    defs = build_definitions(settings)
    monkeypatch.setattr(commit_gate, "STOPPED_RUN_WAIT_SECONDS", 3.0)
    with instance_for_test(temp_dir=str(tmp_path)) as instance:
        canceling = _stopped(instance, defs, ref, DagsterRunStatus.CANCELING)
        started = time.monotonic()
        result = defs.resolve_job_def("icelake_maintenance").execute_in_process(
            instance=instance, asset_selection=[table_asset_key(ref)], raise_on_error=False
        )
        assert not result.success and time.monotonic() - started >= 2.0  # it waited first
        [failure] = [e for e in result.all_events if e.is_step_failure]
        said = failure.step_failure_data.user_failure_data.description
        assert said == (
            f"{ref}: run {canceling} of this table is being canceled and may still commit; "
            "this run stops before any commit"
        )
        assert instance.get_run_by_id(result.run_id).tags[run_model.FAILURE_KIND_TAG] == "concurrent_run"
        table = open_catalog(settings, ref.catalog).load_table(ref.identifier)
        assert len(table.inspect.snapshots()) == 25  # nothing committed
