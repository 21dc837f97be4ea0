"""Local servers the product starts for itself (the S3 demo lake) and for its tests: free ports on
127.0.0.1, readiness polling with the server's log in the error, and a stop by process group (PID).

No Dagster, no Spark: plain processes, so `make run LAKE=s3` and the tests share one implementation.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from icelake_assets.types import IcelakeError


class ServerUnavailable(IcelakeError, RuntimeError):
    """A server cannot be started on this machine (a missing binary); tests skip with this reason."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def free_port_pair(offset: int) -> tuple[int, int]:
    """Two free ports ``offset`` apart (a server that derives its gRPC port as http + offset)."""
    for _ in range(100):
        port = free_port()
        if port + offset < 65536 and _is_free(port + offset):
            return port, port + offset
    raise RuntimeError(f"no two free ports {offset} apart on 127.0.0.1")


def stop_process_group(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM then SIGKILL to the process group the server was started in (its children too)."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def wait_until_ready(
    what: str, ready: Callable[[], Any], timeout: float, procs: list[subprocess.Popen], logs: list[Path]
) -> Any:
    """Poll ``ready`` until it returns a true value (returned); a process that dies or the timeout
    raises with the tail of each log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            break
        time.sleep(0.3)
    tails = "\n".join(
        f"--- {log}\n" + log.read_text(errors="replace")[-3000:] for log in logs if log.exists()
    )
    raise RuntimeError(f"{what} did not become ready within {timeout:.0f} s\n{tails}")
