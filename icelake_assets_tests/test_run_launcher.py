"""`make run`'s launcher (scripts/run_dagster.py) with real processes: SIGTERM or SIGINT to it stops every
process under `dagster dev` while a run is in flight. `dagster dev` alone leaves that run's processes, its
code servers (they wait for the run) and a multiprocessing resource tracker running: the case of issue 19.

The workspace is one job whose op holds the run open; no demo lake, a temporary DAGSTER_HOME."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from icelake_assets.processes import same_process, start_ticks
from icelake_assets_tests.servers import free_port

ROOT = Path(__file__).resolve().parents[1]
LAUNCHER = ROOT / "scripts" / "run_dagster.py"
GRACE_SECONDS = 10

DEFS = """
import os
import time
from pathlib import Path

import dagster


@dagster.op
def hold():
    # Tells the test the run is in flight, then keeps it there.
    Path(MARKER).write_text(str(os.getpid()))
    time.sleep(600)


@dagster.job
def hold_job():
    hold()


defs = dagster.Definitions(jobs=[hold_job])
"""

WORKSPACE = """
load_from:
  - python_file:
      relative_path: defs.py
      working_directory: .
      location_name: tiny
"""

LAUNCH_RUN = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
  }
}
"""

# (pid, start time): a PID alone could name a later process once it is reused.
ProcKey = tuple[int, float | None]


def _descendants(root: int) -> dict[ProcKey, str]:
    """Every live process under ``root``, with its command line."""
    found: dict[ProcKey, str] = {}
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return found
    for child in children:
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                found[(child.pid, start_ticks(child.pid))] = " ".join(child.cmdline())
        except psutil.Error:
            pass
    return found


def _alive(key: ProcKey) -> bool:
    return same_process(*key)


def _kill(keys) -> None:
    for key in keys:
        if _alive(key):
            try:
                os.kill(key[0], signal.SIGKILL)
            except ProcessLookupError:
                pass


def _wait_for(what: str, ready: Callable[[], object], timeout: float, proc: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = ready()
        if value:
            return value
        if proc.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"{what} not within {timeout:.0f} s\n{log.read_text(errors='replace')[-4000:]}")


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=5) as resp:
            return resp.status == 200
    except OSError:
        return False


def _launch_run(port: int) -> str | None:
    """Launches hold_job through the webserver's GraphQL API; None while the code location loads."""
    params = {
        "selector": {
            "repositoryLocationName": "tiny",
            "repositoryName": "__repository__",
            "jobName": "hold_job",
        },
        "runConfigData": {},
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": LAUNCH_RUN, "variables": {"params": params}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            result = json.load(resp)["data"]["launchRun"]
    except (OSError, KeyError, TypeError):
        return None
    return result["run"]["runId"] if result["__typename"] == "LaunchRunSuccess" else None


@pytest.mark.timeout(170)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_to_launcher_stops_every_process(tmp_path: Path, sig: signal.Signals):
    home, marker, log = tmp_path / "home", tmp_path / "run.pid", tmp_path / "launcher.log"
    home.mkdir()
    shutil.copy(ROOT / "dagster.yaml", home / "dagster.yaml")
    (tmp_path / "defs.py").write_text(f"MARKER = {str(marker)!r}\n{DEFS}")
    (tmp_path / "workspace.yaml").write_text(WORKSPACE)
    port = free_port()
    command = [sys.executable, str(LAUNCHER), "--grace", str(GRACE_SECONDS), "--"]
    command += ["-h", "127.0.0.1", "-p", str(port), "-w", "workspace.yaml"]
    with open(log, "wb") as out:
        launcher = subprocess.Popen(
            command,
            cwd=tmp_path,
            env={**os.environ, "DAGSTER_HOME": str(home)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    recorded: dict[ProcKey, str] = {}
    try:
        _wait_for("the webserver answering", lambda: _answers(port), 120, launcher, log)
        _wait_for("hold_job launched", lambda: _launch_run(port), 60, launcher, log)
        _wait_for("hold_job's op running", marker.exists, 90, launcher, log)
        recorded = _descendants(launcher.pid)
        cmdlines = "\n".join(f"  {pid} {cmd[:150]}" for (pid, _), cmd in recorded.items())
        for part in ("dagster dev", "dagster_webserver", "dagster._daemon", "dagster api grpc"):
            assert any(part in cmd for cmd in recorded.values()), f"no {part} under the launcher:\n{cmdlines}"
        assert int(marker.read_text()) in {pid for pid, _ in recorded}, cmdlines

        launcher.send_signal(sig)
        deadline = time.monotonic() + GRACE_SECONDS + 30
        while time.monotonic() < deadline and any(_alive(key) for key in recorded):
            time.sleep(0.5)
        left = "\n".join(f"  {pid} {cmd[:150]}" for (pid, s), cmd in recorded.items() if _alive((pid, s)))
        output = log.read_text(errors="replace")[-4000:]
        assert not left, f"still running after {sig.name} to the launcher:\n{left}\n{output}"
        code = launcher.wait(15)
        output = log.read_text(errors="replace")[-4000:]  # read again: its last line follows the exits
        assert code == 128 + sig, output
        assert "run_dagster: stopped" in output, output
    finally:
        # Whatever is left, by PID: what was recorded and anything under the launcher now.
        _kill({**recorded, **_descendants(launcher.pid)})
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
