"""processes.py: what counts as a running process, and a PID reused by another process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import psutil
import pytest

from icelake_assets.processes import host_identity, pid_alive, same_process, start_ticks


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


def test_start_ticks_tell_a_reused_pid_apart_and_ignore_the_wall_clock():
    me = os.getpid()
    ticks = start_ticks(me)
    assert ticks is not None and ticks > 0
    assert same_process(me, ticks)
    assert same_process(me, None)
    assert not same_process(me, ticks + 1)  # the same PID, another process
    # psutil's start time is boot time plus these ticks: they agree to the tick.
    hz = os.sysconf("SC_CLK_TCK")
    assert abs(psutil.boot_time() + ticks / hz - psutil.Process(me).create_time()) < 2 / hz + 1


def test_the_host_identity_names_the_pid_namespace():
    """A process in a PID namespace of its own (a container with host networking) has the host's name
    but another identity: its PIDs mean nothing here."""
    import shutil

    mine = host_identity()
    assert mine.startswith(socket.gethostname() + "/") and "pid:[" in mine
    if shutil.which("unshare") is None or os.geteuid() != 0:
        pytest.skip("unshare needs root here")
    code = "from icelake_assets.processes import host_identity; print(host_identity())"
    out = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert out.split("/")[:2] == mine.split("/")[:2] and out != mine
