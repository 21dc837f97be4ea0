"""Processes of this host, read through psutil: whether one still runs, and when it started.

A run's lease and the resident driver's state file name a PID. A PID alone is not enough to say the
process lives: a killed process its parent never reaped stays a zombie that answers ``kill(pid, 0)``
(seen in the chaos soak: every run then connected to a dead driver), and a PID is reused by a later
process once its owner is gone. So "alive" means present and not a zombie, and a recorded start time
tells the original process from a later one with its PID.

A process's start is read in clock ticks since boot (``/proc/<pid>/stat``), an exact integer that
stepping the wall clock does not move (psutil's ``create_time`` is boot time plus those ticks, and the
boot time it derives follows the clock). A PID means something only on its own host, boot and PID
namespace: :func:`host_identity` names all three (containers with host networking share the node's
hostname but not its PIDs).
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path

import psutil


@functools.cache
def host_identity() -> str:
    """Where a PID means this process's PIDs: ``hostname/boot id/PID namespace``. Two processes with
    the same identity can ask each other's PIDs; with another identity they cannot (another machine,
    a reboot, or a container with its own PID namespace on the same node)."""
    return f"{socket.gethostname()}/{_read('/proc/sys/kernel/random/boot_id')}/{_pid_namespace()}"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return "?"


def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return "?"


def start_ticks(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot (field 22 of ``/proc/<pid>/stat``): exact, and
    immune to a stepped clock. None when it is gone or unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields start after its last ")".
    fields = stat[stat.rfind(")") + 2 :].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def same_process(pid: int, ticks: int | None) -> bool:
    """``pid`` runs and is the process that started at ``ticks`` (None: the PID alone decides)."""
    if not pid_alive(pid):
        return False
    if ticks is None:
        return True
    now = start_ticks(pid)
    return now is None or now == ticks


def live_process(pid: int) -> psutil.Process | None:
    """The process ``pid`` while it runs (None: gone, or a zombie that only waits to be reaped)."""
    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc
    except psutil.Error:
        return None


def pid_alive(pid: int) -> bool:
    """A running process: not gone, and not a zombie. A process of another user counts as running."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.ZombieProcess:
        return False
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
