"""processes.py: what counts as a running process, and a PID reused by another process."""

from __future__ import annotations

import os
import subprocess
import time

import psutil

from icelake_assets.planning.stale_runs import Lease
from icelake_assets.processes import pid_alive, process_start, same_process


def _zombie() -> subprocess.Popen:
    child = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return child


def test_a_zombie_is_not_alive():
    """A killed driver its parent never reaped is a zombie: kill(pid, 0) still answers for it."""
    child = _zombie()
    try:
        os.kill(child.pid, 0)  # what the old check asked: it answers
        assert not pid_alive(child.pid)
        assert not same_process(child.pid, None)
    finally:
        child.wait()
    assert not pid_alive(child.pid)  # reaped: gone
    assert pid_alive(os.getpid())


def test_a_start_time_tells_a_reused_pid_apart():
    me = os.getpid()
    started = process_start(me)
    assert started is not None and abs(started - psutil.Process(me).create_time()) < 0.01
    assert same_process(me, started)
    assert same_process(me, None)
    assert not same_process(me, started + 1)  # the same PID, another process


def test_a_lease_keeps_its_start_time_and_an_earlier_version_s_is_not_misread():
    lease = Lease("h", 7, 12.5, started=1767225600.25)
    assert Lease.loads(lease.dumps()) == lease
    # Before, "started" held clock ticks since boot: read as a start time it would fail a live run.
    old = '{"host": "h", "pid": 7, "renewed_at": 12.5, "released": false, "started": 4242}'
    assert Lease.loads(old) == Lease("h", 7, 12.5)
