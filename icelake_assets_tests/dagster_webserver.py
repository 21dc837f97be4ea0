"""A real `dagster-webserver` (no daemon) on a free port of 127.0.0.1, serving the shipped workspace
for a lake's settings with a DAGSTER_HOME of its own: the path `icelake approve`, `icelake backfill`
and the MCP write tools take. Runs it launches stay queued (no daemon dequeues them)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from icelake_assets.settings import Settings
from icelake_assets_tests.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
LOADED = """{ workspaceOrError { ... on Workspace { locationEntries { locationOrLoadError { __typename
  ... on PythonError { message } } } } } }"""


def _locations(url: str) -> list[dict | None]:
    """Each workspace entry's location or load error (None while it loads)."""
    try:
        body = requests.post(f"{url}/graphql", json={"query": LOADED}, timeout=30).json()
        return [e["locationOrLoadError"] for e in body["data"]["workspaceOrError"]["locationEntries"]]
    except (requests.RequestException, ValueError, KeyError, TypeError):
        return []


@contextmanager
def dagster_webserver(settings: Settings, folder: Path, timeout: float = 240) -> Iterator[tuple[str, Path]]:
    """(its URL, its DAGSTER_HOME) once every code location of the workspace loaded; a location that
    fails to load fails the caller with its error. Stopped with its process group (code servers too)."""
    home = folder / "dagster_home"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    port = free_port()
    env = {
        **os.environ,
        "ICELAKE_CONFIG": settings.source,
        "DAGSTER_HOME": str(home),
        "ICELAKE_HEALTH_CACHE": str(folder / "health.sqlite"),
        "PYTHONPATH": str(ROOT),
    }
    log_path = folder / "webserver.log"
    log = open(log_path, "wb")
    command = [str(Path(sys.executable).parent / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port)]
    proc = subprocess.Popen(
        [*command, "-w", str(ROOT / "workspace.yaml")],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: teardown stops it and its code servers
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-3000:]
            locations = _locations(url)
            kinds = [loc["__typename"] if loc else None for loc in locations]
            assert "PythonError" not in kinds, locations
            if kinds and set(kinds) == {"RepositoryLocation"}:  # every location loaded
                break
            time.sleep(1)
        yield url, home
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()
