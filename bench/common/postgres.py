"""The chaos soak's PostgreSQL (bench/soak/chaos_soak.py, ``--storage postgres``, the default): the Dagster
instance's storage as users deploy it, the repo's dagster.postgres.yaml appended to dagster.yaml.

The server is the tests' throwaway one (icelake_assets_tests/servers.py ``postgres_server``: initdb
into a temporary folder, trust authentication, a free 127.0.0.1 port, run as an unprivileged user
when the soak is root), imported, not copied. The ``postgres`` fault kills its postmaster
(``kill -9``) and starts it again a few seconds later on the same data folder and port with
``pg_ctl restart``, which reads the command line the postmaster recorded in ``postmaster.opts``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from contextlib import ExitStack
from pathlib import Path

import psutil

from icelake_assets.processes import pid_alive
from icelake_assets_tests.servers import PostgresServer, _pg_bin, _run_as, _server_user, postgres_server

DATABASE = "dagster"  # the instance's database on the server (created at start)
PASSWORD = "unused-by-trust-auth"


def instance_env(server: PostgresServer, database: str) -> dict[str, str]:
    """dagster.postgres.yaml's variables for ``database`` on ``server``."""
    return {
        "DAGSTER_PG_HOST": server.host,
        "DAGSTER_PG_PORT": str(server.port),
        "DAGSTER_PG_DB": database,
        "DAGSTER_PG_USER": server.user,
        "DAGSTER_PG_PASSWORD": PASSWORD,
    }


class Postgres:
    """A PostgreSQL server for the Dagster instance that can be killed and started again in place."""

    def __init__(self) -> None:
        self._stack = ExitStack()
        self.server: PostgresServer | None = None
        self.data: Path | None = None
        self.starts = 0
        self.busy: set[int] = set()  # pg_ctl processes running now (the soak's reaper leaves them)

    def start(self, timeout: float = 60) -> PostgresServer:
        self.server = self._stack.enter_context(postgres_server(timeout))
        self.starts = 1
        self.data = Path(self._query("SHOW data_directory"))
        self.server.create_database(DATABASE)
        return self.server

    def env(self) -> dict[str, str]:
        """dagster.postgres.yaml's variables."""
        assert self.server is not None
        return instance_env(self.server, DATABASE)

    def _query(self, sql: str) -> str:
        import psycopg2

        assert self.server is not None
        conn = psycopg2.connect(
            host=self.server.host,
            port=self.server.port,
            user=self.server.user,
            dbname=self.server.database,
            connect_timeout=3,
        )
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return str(cur.fetchone()[0])
        finally:
            conn.close()

    def ready(self) -> bool:
        try:
            return self._query("SELECT 1") == "1"
        except Exception:
            return False

    def postmaster(self) -> int | None:
        """The postmaster's PID (first line of postmaster.pid) while it runs."""
        assert self.data is not None
        try:
            pid = int((self.data / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid_alive(pid) else None

    def kill(self, timeout: float = 15) -> tuple[int, int, int]:
        """``kill -9`` of the postmaster; (its PID, its backends and workers then, how many of them the
        soak had to kill itself because they outlived it past ``timeout``). They exit by themselves on
        the postmaster's death; while one is attached to the shared memory no new postmaster starts."""
        pid = self.postmaster()
        if pid is None:
            raise RuntimeError("PostgreSQL is not running: no postmaster to kill")
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.Error:
            children = []
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        # Gone and reaped (a zombie's PID still answers kill 0: pg_ctl would take it for running).
        while psutil.pid_exists(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        while any(pid_alive(c.pid) for c in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        killed = 0
        for child in children:
            if pid_alive(child.pid):
                killed += 1
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
        return pid, len(children), killed

    def restart(self, timeout: float = 90) -> int:
        """``pg_ctl restart`` on the same data folder, port and options (postmaster.opts) until the server
        answers; the new postmaster's PID."""
        assert self.data is not None
        log = self.data.parent / "server.log"
        args = [str(_pg_bin() / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-w", "-t", "30", "restart"]
        deadline = time.monotonic() + timeout
        said = ""
        while time.monotonic() < deadline:
            proc = subprocess.Popen(
                args,
                cwd=self.data.parent,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                **_run_as(_server_user()),
            )
            self.busy.add(proc.pid)
            try:
                said = proc.communicate(timeout=60)[0].decode(errors="replace")
            except subprocess.TimeoutExpired:
                proc.kill()
                said = proc.communicate()[0].decode(errors="replace")
            finally:
                self.busy.discard(proc.pid)
            if self.ready():
                self.starts += 1
                return self.postmaster() or -1
            time.sleep(1)  # e.g. a backend of the killed server still holds the shared memory
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"PostgreSQL did not come back within {timeout:.0f} s: {said.strip()}\n{tail}")

    def stop(self) -> None:
        """Stops the server (``pg_ctl stop -m immediate``) and removes its folder."""
        self._stack.close()
