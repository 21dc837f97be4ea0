"""The project's code locations served the way ``make run`` serves them, for the benchmarks' daemon.

``make run`` runs ``dagster dev``, which starts one ``dagster code-server start`` per location of
workspace.yaml and points the webserver and the daemon at them: the code servers load the lake's
definitions once and keep them. A bare ``dagster-daemon run -w workspace.yaml`` instead manages its
own code servers and replaces them every 60 s (Dagster's ``RELOAD_WORKSPACE_INTERVAL``): each time,
both locations import the project and build a 200-table lake's definitions again (measured by
py-spy during bench.fleet_bench: a code server started about once a minute per location). The
benchmarks time the product as ``make run`` runs it; ``managed=True`` measures the other way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
STARTUP_SECONDS = 300.0


def _locations() -> list[dict]:
    return [
        entry["python_module"] for entry in yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    ]


def _wait_until_serving(socket: Path, process: subprocess.Popen, log: Path) -> None:
    dagster = Path(sys.executable).parent / "dagster"
    deadline = time.monotonic() + STARTUP_SECONDS
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the code server at {socket} exited ({process.returncode}); see {log}")
        if socket.exists():
            check = subprocess.run(
                [str(dagster), "api", "grpc-health-check", "--socket", str(socket)], capture_output=True
            )
            if check.returncode == 0:
                return
        time.sleep(0.5)
    raise SystemExit(f"the code server at {socket} did not serve within {STARTUP_SECONDS:.0f}s; see {log}")


def stop(processes: list[subprocess.Popen]) -> None:
    """Stops each code server's process group (its server and the runs it launched), by PID."""
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextmanager
def workspace(home: Path, env: Mapping[str, str], managed: bool = False) -> Iterator[Path]:
    """The workspace file the daemon loads: the shipped one (``managed``: the daemon's own code
    servers), or one naming a ``dagster code-server start`` per location, started here on a Unix
    socket under ``home`` and stopped on exit."""
    if managed:
        yield ROOT / "workspace.yaml"
        return
    processes: list[subprocess.Popen] = []
    entries = []
    try:
        for i, location in enumerate(_locations()):
            name = location["module_name"]
            socket = home / f"code-server-{i}.sock"
            log = home / f"code-server-{i}.log"
            process = subprocess.Popen(
                [
                    str(Path(sys.executable).parent / "dagster"),
                    *("code-server", "start", "--socket", str(socket), "-m", name),
                    *("-d", str(ROOT / location.get("working_directory", ".")), "--location-name", name),
                ],
                cwd=ROOT,
                env=dict(env),
                stdout=log.open("w"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            processes.append(process)
            entries.append((socket, process, log, name))
        for socket, process, log, _ in entries:
            _wait_until_serving(socket, process, log)
        target = home / "workspace.yaml"
        servers = [{"grpc_server": {"socket": str(s), "location_name": n}} for s, _, _, n in entries]
        target.write_text(yaml.safe_dump({"load_from": servers}))
        yield target
    finally:
        stop(processes)
