"""The project's code locations served the way ``make run`` serves them, for the benchmarks' daemon.

``make run`` runs ``dagster dev``, which starts one ``dagster code-server start`` per location of
workspace.yaml and points the webserver and the daemon at them: the code servers load the lake's
definitions once and keep them. A bare ``dagster-daemon run -w workspace.yaml`` instead manages its
own code servers and replaces them every 60 s (Dagster's ``RELOAD_WORKSPACE_INTERVAL``): each time,
both locations import the project and build a 200-table lake's definitions again (measured by
py-spy during bench.loop.fleet_bench: a code server started about once a minute per location). The
benchmarks time the product as ``make run`` runs it; ``managed=True`` measures the other way.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import yaml

from icelake_assets.demo.local_servers import stop_process_group, wait_until_ready

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 300.0


def _locations() -> list[dict]:
    return [
        entry["python_module"] for entry in yaml.safe_load((ROOT / "workspace.yaml").read_text())["load_from"]
    ]


def _serving(socket: Path) -> bool:
    if not socket.exists():
        return False
    dagster = Path(sys.executable).parent / "dagster"
    check = subprocess.run(
        [str(dagster), "api", "grpc-health-check", "--socket", str(socket)], capture_output=True
    )
    return check.returncode == 0


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
        for socket, _, _, name in entries:
            wait_until_ready(
                f"the code server of {name}",
                lambda socket=socket: _serving(socket),
                STARTUP_SECONDS,
                processes,
                [log for _, _, log, _ in entries],
            )
        target = home / "workspace.yaml"
        servers = [{"grpc_server": {"socket": str(s), "location_name": n}} for s, _, _, n in entries]
        target.write_text(yaml.safe_dump({"load_from": servers}))
        yield target
    finally:
        for process in processes:  # each server's process group: the server and the runs it launched
            stop_process_group(process, timeout=30)
