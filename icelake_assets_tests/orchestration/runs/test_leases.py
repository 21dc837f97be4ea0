"""A self-fence that cannot hang (issue 50): the run lease's deadline is judged by a timer that makes
no storage call, and fencing checks it again at each commit, so a worker paused past its lease
(SIGSTOP, a frozen VM) commits nothing when it resumes. A real Dagster instance; the hanging storage
is the one thing faked (a PostgreSQL statement that never returns cannot be provoked on demand)."""

from __future__ import annotations

import threading
import time

import pytest
from dagster import DagsterInstance, DagsterRunStatus, job

from icelake_assets.maintenance.spark import fencing
from icelake_assets.orchestration.runs import leases
from icelake_assets.orchestration.runs.leases import RunLease


@job
def _a_job():
    pass


def test_the_self_fence_fires_while_a_storage_call_hangs(tmp_path, monkeypatch):
    monkeypatch.setattr(leases, "SELF_FENCE_SECONDS", 1.5)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        run = instance.create_run_for_job(_a_job, status=DagsterRunStatus.STARTED)
        fenced = threading.Event()
        seen: list[str] = []
        lease = RunLease(
            instance,
            run.run_id,
            renew_seconds=0.2,
            watch_seconds=0.2,
            on_fenced=lambda reason, canceled: (seen.append(reason), fenced.set()),
        ).start()
        hang = threading.Event()
        # From now on the storage hangs: every read of the run and every renewal blocks.
        monkeypatch.setattr(instance, "get_run_by_id", lambda run_id: hang.wait(3600) and None)
        monkeypatch.setattr(leases, "_write", lambda *a: hang.wait(3600))
        try:
            # The old loop judged the deadline after its storage calls: it never got there.
            assert fenced.wait(10), "no self-fence while the storage hung"
            assert "could not be renewed" in seen[0]
        finally:
            hang.set()
            lease.release()


def test_a_worker_resumed_past_its_lease_commits_nothing(monkeypatch):
    """What a SIGSTOP/SIGCONT past the lease leaves: the last renewal long ago on this process's
    clock, the renewal thread not yet run. The commit check itself fences the run."""
    fencing.arm("paused-run")
    try:
        fencing.lease_renewed()
        with fencing.acting():
            fencing.check("append")  # renewed just now: it may commit
            clock = time.monotonic() + leases.SELF_FENCE_SECONDS + 5  # paused 65 s
            monkeypatch.setattr(fencing.time, "monotonic", lambda: clock)
            with pytest.raises(fencing.RunFencedError, match="its lease was not renewed for 6[5-9] s"):
                fencing.check("append")
            with pytest.raises(fencing.RunFencedError):
                with fencing.committing("rewrite_data_files"):
                    pytest.fail("a paused worker began to commit")
        assert fencing.fenced() is not None and not fencing.was_canceled()
    finally:
        fencing.arm("after the test")


def test_a_run_without_a_lease_is_never_judged_by_one():
    """The CLI and tests use the ops without a run lease: no deadline applies."""
    fencing.arm("no-lease-run")
    try:
        with fencing.acting():
            fencing.check("append")
        assert fencing.lease_expired() is None
    finally:
        fencing.arm("after the test")
