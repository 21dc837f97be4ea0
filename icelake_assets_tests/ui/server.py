"""`dagster dev` (webserver + daemon) against a fresh shipped demo lake with the shipped settings, in
its own process group, for the browser test. Usable by hand too: `python -m icelake_assets_tests.ui.server` prints the URL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from icelake_assets.maintenance.spark.resident_spark import stop_all

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

# The shipped demo: the settings are icelake.yaml's (the demo catalog enforces, writers quiet for 1 min,
# the sensors every 30 s), with only the demo catalog's paths moved into the test's folder and the
# maintenance sensor and the check schedules stopped: the test sees the tables degraded first, then
# starts the sensor with its toggle in the UI, as a user would. The lake is `icelake demo-lake
# --scale demo` (the one `make run` builds).
SHIPPED_SETTINGS = ROOT / "icelake.yaml"
SCALE = "demo"


def shipped_settings() -> dict[str, Any]:
    """icelake.yaml as the test runs it (see above)."""
    settings = yaml.safe_load(SHIPPED_SETTINGS.read_text())
    settings["catalogs"]["demo"].update({"uri": "sqlite:///lake/catalog.db", "warehouse": "lake/warehouse"})
    settings.setdefault("automation", {}).update(
        {"sensor_default_status": "stopped", "schedules_default_status": "stopped"}
    )
    return settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class DagsterDev:
    folder: Path
    port: int
    scale: str = SCALE  # `icelake demo-lake --scale`
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "ICELAKE_CONFIG": str(self.folder / "icelake.yaml"),
            "DAGSTER_HOME": str(self.folder / "dagster_home"),
            "ICELAKE_HEALTH_CACHE": str(self.folder / "health.sqlite"),
            "PYTHONPATH": str(ROOT),
            # The product's default: the runs share one resident Spark driver, stopped in stop().
            "ICELAKE_SPARK_SESSION": "shared",
        }

    def prepare(self) -> None:
        """Settings, a fresh demo lake (`icelake demo-lake --scale demo`) and a fresh DAGSTER_HOME."""
        (self.folder / "dagster_home").mkdir(parents=True)
        shutil.copy(ROOT / "dagster.yaml", self.folder / "dagster_home" / "dagster.yaml")
        (self.folder / "icelake.yaml").write_text(yaml.safe_dump(shipped_settings(), sort_keys=False))
        subprocess.run(
            [sys.executable, "-m", "icelake_assets.cli", "demo-lake", "--scale", self.scale],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=300,
        )

    def start(self, timeout: float = 180) -> None:
        log = open(self.folder / "dagster_dev.log", "wb")
        # Its own session (process group): teardown signals the webserver, the daemon, the code
        # servers and the run workers at once.
        self.process = subprocess.Popen(
            [str(BIN / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(self.port), "-w", "workspace.yaml"],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"dagster dev exited with {self.process.returncode}: {self.log_tail()}")
            try:
                data = self.graphql(
                    "{ workspaceOrError { ... on Workspace { locationEntries { "
                    "locationOrLoadError { __typename } } } } }"
                )
                entries = data["workspaceOrError"]["locationEntries"]
                if entries and entries[0]["locationOrLoadError"]:
                    kind = entries[0]["locationOrLoadError"]["__typename"]
                    if kind == "RepositoryLocation":
                        return
                    raise RuntimeError(f"code location failed to load: {self.log_tail()}")
            except (OSError, ValueError):
                pass
            time.sleep(1)
        raise TimeoutError(f"dagster dev not ready after {timeout}s: {self.log_tail()}")

    def graphql(self, query: str, variables: dict | None = None) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.url}/graphql", method="POST", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
        if body.get("errors"):
            raise ValueError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def log_tail(self, lines: int = 40) -> str:
        path = self.folder / "dagster_dev.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def stop(self, timeout: float = 30) -> None:
        """Dagster, then the shared Spark driver: it lives in a session of its own (it outlives the run
        that started it) and is stopped by its PID."""
        try:
            self._stop_dagster(timeout)
        finally:
            stop_all(self.folder / "dagster_home" / "icelake" / "spark")

    def _stop_dagster(self, timeout: float) -> None:
        """SIGTERM to the whole process group, SIGKILL to what is left after ``timeout``."""
        if self.process is None:
            return
        pgid = self.process.pid
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and group_alive(pgid):
            time.sleep(0.5)
        if group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
            time.sleep(1)
        self.process.wait(timeout=10)


def processes_using(folder: Path) -> list[int]:
    """Live processes whose command line or environment names ``folder`` (run workers, JVMs, ...)."""
    needle = str(folder).encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                continue
            if needle in (proc / "cmdline").read_bytes() or needle in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is left (zombies of our own child do not count)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


if __name__ == "__main__":
    import tempfile

    server = DagsterDev(Path(tempfile.mkdtemp(prefix="icelake_ui_")), free_port())
    server.prepare()
    server.start()
    print(server.url, server.folder, server.process.pid, flush=True)
