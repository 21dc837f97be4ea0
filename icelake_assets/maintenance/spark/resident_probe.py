"""Whether a shared Spark driver (resident_spark.py) answers, by a real call on its py4j gateway, and
stopping one that does not.

A TCP connect is not enough: a wedged JVM (stopped, or stuck so that its gateway threads never run)
still accepts connections (the kernel completes them), and a run attaching to it waits on its first
call until the run's max_runtime, every shared run alike. The probe connects a py4j client of its own
with the driver's port and auth token and a socket timeout, calls ``System.currentTimeMillis()``, and
closes the connection: no callback server (no thread) and no memory management (no later call that
would open a connection again)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from pathlib import Path

import psutil

from icelake_assets.processes import pid_alive

# How long a driver has to answer the probe. A healthy gateway answers in milliseconds, even under
# load (each connection has a Java thread of its own); a few seconds spare a driver in a long GC pause,
# and an attach waits at most this long before it replaces a wedged driver.
PROBE_TIMEOUT_S = 5.0
# The resident's own module, as its command line names it (a reused PID is not stopped).
DRIVER_MODULE = "icelake_assets.maintenance.spark.resident_driver"


def probe(port: int, secret: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the gateway answers a real call within ``timeout`` seconds; else what went wrong."""
    from py4j.java_gateway import GatewayParameters, JavaGateway

    params = GatewayParameters(
        port=port,
        auth_token=secret,
        read_timeout=timeout,  # also the connect's timeout (py4j sets it on the socket)
        enable_memory_management=False,
    )
    # py4j logs a failed connection at ERROR with its traceback: the caller says what happened.
    quiet = logging.getLogger("py4j")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    gateway = JavaGateway(gateway_parameters=params)
    began = time.monotonic()
    try:
        gateway.jvm.System.currentTimeMillis()
        return None
    except Exception as err:  # noqa: BLE001 - any failure means the driver cannot serve a run
        if time.monotonic() - began >= timeout * 0.9:
            return f"its gateway (port {port}) accepted a connection but did not answer within {timeout:g} s"
        return f"its gateway (port {port}) failed a call: {type(err).__name__}: {err}"
    finally:
        gateway.close(keep_callback_server=True)  # the pooled connection (py4j closes a failed one)
        quiet.setLevel(level)


def is_resident(pid: int) -> bool:
    """Whether ``pid`` runs the resident driver module (not a process that reused its PID)."""
    try:
        return DRIVER_MODULE in psutil.Process(pid).cmdline()
    except psutil.Error:
        return False


def kill_resident(pid: int, wait_s: float = 5.0) -> bool:
    """SIGKILL the resident ``pid`` and its JVM, and wait (at most ``wait_s``) until they are gone: its
    process group when it leads one (resident_spark starts it with ``start_new_session``), else the JVM
    (its child) and then it. False when ``pid`` is not a resident driver (gone, or reused)."""
    if not is_resident(pid):
        return False
    with contextlib.suppress(psutil.Error, OSError):  # gone meanwhile
        family = [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
        if os.getpgid(pid) == pid:
            os.killpg(pid, signal.SIGKILL)
        else:
            for each in reversed(family):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(each, signal.SIGKILL)
        deadline = time.monotonic() + wait_s
        while any(pid_alive(each) for each in family) and time.monotonic() < deadline:
            time.sleep(0.05)
    return True


def retire(pid: int, problem: str, log: Path) -> None:
    """A driver failed the probe: kill it (when ``pid`` is still a resident driver) and say so in its
    log and this process's (the caller removed its state file, so the next attach starts a new one)."""
    done = "killed it and its JVM" if kill_resident(pid) else "dropped its state file"
    line = f"PID {os.getpid()} found {problem}; {done}: a new driver starts"
    logging.getLogger(__name__).warning("shared Spark driver: %s", line)
    with contextlib.suppress(OSError), open(log, "a") as handle:
        handle.write(f"{time.strftime('%H:%M:%S')} {line}\n")
