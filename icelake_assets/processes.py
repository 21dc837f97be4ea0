"""Processes of this host, read through psutil: whether one still runs, and when it started.

A run's lease and the resident driver's state file name a PID. A PID alone is not enough to say the
process lives: a killed process its parent never reaped stays a zombie that answers ``kill(pid, 0)``
(seen in the chaos soak: every run then connected to a dead driver), and a PID is reused by a later
process once its owner is gone. So "alive" means present and not a zombie, and a recorded start time
tells the original process from a later one with its PID.
"""

from __future__ import annotations

import psutil

# Start times are compared with this tolerance: psutil derives them from boot time plus clock ticks
# (1/100 s), and a lease stores them rounded.
START_TOLERANCE_SECONDS = 0.05


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


def process_start(pid: int) -> float | None:
    """When a process started (epoch seconds, rounded to 1/100 s); None when it is gone or unreadable."""
    try:
        return round(psutil.Process(pid).create_time(), 2)
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def same_process(pid: int, started: float | None) -> bool:
    """``pid`` runs and is the process that started at ``started`` (None: the PID alone decides)."""
    if not pid_alive(pid):
        return False
    if started is None:
        return True
    now = process_start(pid)
    return now is None or abs(now - started) <= START_TOLERANCE_SECONDS
