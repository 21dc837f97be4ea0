"""The chaos soak's stack (bench/soak/chaos_soak.py): SeaweedFS (S3 + the Iceberg REST catalog, OAuth2 and
access keys) that can be killed and started again on the same data folder and ports, the Dagster
daemon on the project's workspace, and the /proc reading that finds what the soak started.

icelake_assets/demo/seaweedfs.py picks new ports at every start (a context manager for one life);
a restart after ``kill -9`` must come back where the lake's settings point, so the ports are chosen
once here and the same ``weed mini`` command line is run again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import yaml

from bench.soak.checks import Outcome
from icelake_assets.demo.local_servers import free_port, free_port_pair, stop_process_group, wait_until_ready
from icelake_assets.demo.seaweedfs import SERVICE_PORTS, SeaweedFS, mini_args, weed_binary
from icelake_assets.processes import live_process

ROOT = Path(__file__).resolve().parents[2]


# -- processes -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Proc:
    pid: int
    pgid: int
    cmdline: str


def read_proc(pid: int) -> Proc | None:
    """A live process (None: gone, or a zombie)."""
    proc = live_process(pid)
    try:
        return None if proc is None else Proc(pid, os.getpgid(pid), " ".join(proc.cmdline()))
    except (psutil.Error, OSError):
        return None


def descendants(root: int) -> dict[int, Proc]:
    """Live (not zombie) descendants of ``root``."""
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return {}
    return {c.pid: p for c in children if (p := read_proc(c.pid)) is not None}


def group_members(pgid: int) -> list[Proc]:
    """The live processes of process group ``pgid``."""
    return [p for pid in psutil.pids() if (p := read_proc(pid)) is not None and p.pgid == pgid]


def reap_orphans(keep: set[int]) -> None:
    """The soak is a child subreaper (orphans of what it started are reparented to it, so none
    escapes the final check): collect the exited ones, but not the children ``keep`` (Popen's own)."""
    for child in psutil.Process().children():
        if child.pid in keep:
            continue
        try:
            if child.status() == psutil.STATUS_ZOMBIE:
                os.waitpid(child.pid, os.WNOHANG)
        except (psutil.Error, ChildProcessError):
            pass


class Reaper(threading.Thread):
    """Reaps the soak's orphans every half second, as init would. Left unreaped, a killed resident
    driver stays a zombie, which still answers ``kill(pid, 0)``: the runs would take it for alive."""

    def __init__(self, keep: Callable[[], set[int]]) -> None:
        super().__init__(name="soak-reaper", daemon=True)
        self._keep = keep
        self._done = threading.Event()

    def run(self) -> None:
        while not self._done.wait(0.5):
            reap_orphans(self._keep())

    def stop(self) -> None:
        self._done.set()
        self.join(5)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_popen(proc: subprocess.Popen | None, timeout: float = 30) -> None:
    """SIGTERM to the process group the child leads, then SIGKILL."""
    if proc is not None:
        stop_process_group(proc, timeout)


# -- SeaweedFS ---------------------------------------------------------------------------------------


@dataclass
class Weed:
    """``weed mini`` on fixed ports and a fixed data folder: killed and started again in place."""

    folder: Path
    credentials: tuple[str, str]
    s3_port: int = field(default_factory=free_port)
    catalog_port: int = field(default_factory=free_port)
    # The other services' http/grpc pairs (weed derives some gRPC ports as http + 10000).
    pairs: dict[str, tuple[int, int]] = field(
        default_factory=lambda: {name: free_port_pair(10000) for name in SERVICE_PORTS}
    )
    s3_grpc: int = field(default_factory=free_port)
    proc: subprocess.Popen | None = None
    starts: int = 0

    @property
    def server(self) -> SeaweedFS:
        return SeaweedFS(
            f"http://127.0.0.1:{self.s3_port}",
            f"http://127.0.0.1:{self.catalog_port}",
            self.folder,
            self.credentials,
        )

    def _args(self) -> list[str]:
        ports = {**self.pairs, "s3.port": (self.s3_port, self.s3_grpc)}
        return mini_args(weed_binary(), self.folder, self.catalog_port, ports)

    def start(self, timeout: float = 120) -> int:
        (self.folder / "data").mkdir(parents=True, exist_ok=True)
        for sock in ("filer.sock", "s3.sock"):  # a killed server leaves its sockets behind
            (self.folder / sock).unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "S3_BUCKET"}
        env.update({"AWS_ACCESS_KEY_ID": self.credentials[0], "AWS_SECRET_ACCESS_KEY": self.credentials[1]})
        log = self.folder / "weed.log"
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                self._args(),
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                start_new_session=True,
            )
        self.starts += 1
        wait_until_ready(
            "SeaweedFS (S3 and the Iceberg REST catalog)", self._ready, timeout, [self.proc], [log]
        )
        return self.proc.pid

    def _ready(self) -> bool:
        """S3 answers and the catalog lists the table bucket's namespaces with an OAuth2 token."""
        try:
            urllib.request.urlopen(self.server.s3_endpoint, timeout=2).close()
        except urllib.error.HTTPError:
            pass  # 403 without credentials: up
        except OSError:
            return False
        form = urllib.parse.urlencode(
            {
                "grant_type": "client_credentials",
                "client_id": self.credentials[0],
                "client_secret": self.credentials[1],
            }
        ).encode()
        try:
            with urllib.request.urlopen(self.server.token_url, data=form, timeout=2) as resp:
                token = json.load(resp)["access_token"]
            url = f"{self.server.catalog_uri}/v1/{self.server.table_bucket}/namespaces"
            request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(request, timeout=2) as resp:
                return resp.status == 200
        except (OSError, ValueError, KeyError):
            return False

    def kill(self) -> int:
        """``kill -9`` of the server's process group; its PID."""
        assert self.proc is not None
        pid = self.proc.pid
        kill_group(pid)
        self.proc.wait()
        return pid

    def stop(self) -> None:
        stop_popen(self.proc)


# -- the Dagster daemon ------------------------------------------------------------------------------


@dataclass
class Daemon:
    """``dagster-daemon run -w workspace.yaml`` with the project's dagster.yaml in ``home``, in a
    session of its own: its code server and the runs it launches share its process group."""

    home: Path
    env: dict[str, str]
    proc: subprocess.Popen | None = None
    starts: int = 0

    @classmethod
    def prepare(cls, home: Path, env: Mapping[str, str], postgres: bool = False) -> Daemon:
        """``postgres``: the instance's storage in PostgreSQL, as the repo documents it (dagster.yaml,
        then dagster.postgres.yaml; its DAGSTER_PG_* variables in ``env``), else SQLite in ``home``."""
        home.mkdir(parents=True, exist_ok=True)
        text = (ROOT / "dagster.yaml").read_text()
        if postgres:
            text += "\n" + (ROOT / "dagster.postgres.yaml").read_text()
        (home / "dagster.yaml").write_text(yaml.safe_dump(yaml.safe_load(text)))
        return cls(home, {**env, "DAGSTER_HOME": str(home)})

    def start(self) -> int:
        daemon_bin = Path(sys.executable).parent / "dagster-daemon"
        with open(self.home / "daemon.log", "ab") as log:
            self.proc = subprocess.Popen(
                [str(daemon_bin), "run", "-w", "workspace.yaml"],
                cwd=ROOT,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.starts += 1
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill_group(self) -> tuple[int, int]:
        """``kill -9`` of the daemon's whole process group (daemon, code server, the runs it launched),
        as when the host dies; (its PID, how many processes the group held)."""
        assert self.proc is not None
        pid = self.proc.pid
        members = group_members(pid)
        kill_group(pid)
        self.proc.wait()
        return pid, len(members)

    def stop(self) -> None:
        stop_popen(self.proc)


def wait_for(what: str, check, timeout: float, every: float = 1.0):
    """Poll ``check`` until it returns a true value (returned), else raise after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(every)


def leftovers() -> Outcome:
    """Anything still running under the soak (a child subreaper: orphans come back to it) is left
    behind: named, then killed."""
    deadline = time.monotonic() + 20
    while True:
        reap_orphans(set())
        left = descendants(os.getpid())
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for proc in left.values():
        kill_group(proc.pgid)
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return Outcome(
        "processes: none left behind",
        not left,
        tuple(f"PID {p.pid} (group {p.pgid}): {p.cmdline[:160]}" for p in left.values()),
    )
