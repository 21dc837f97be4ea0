"""A Spark driver kept across runs (``spark.session: shared``): runs attach to it instead of each
starting a JVM of its own.

Every Dagster run is a process of its own; a classic PySpark session starts its driver JVM in that
process and loads the Iceberg runtime again, which costs a tiny table's run most of its time. Here the
first run that needs Spark starts one *resident* process (``python -m
icelake_assets.maintenance.resident_driver``) that holds a SparkSession for the given configuration;
every later run connects to that JVM's py4j gateway (the mechanism PySpark itself uses for
``PYSPARK_GATEWAY_PORT``) and works in a session of its own (``SparkSession.newSession``: its own SQL
configuration, temporary views and catalog instances; one SparkContext).

Isolation: each attached process holds a *lease* (a file naming its PID and job group) while it lives;
its Spark jobs run in that job group. When a leaseholder dies (a killed run worker), the resident
cancels its job group. Cancelling stops only the jobs running at that moment: a procedure the dead
run had called goes on in the JVM (a partial-progress rewrite submits its next file groups as new
jobs and commits the finished ones). So a run marks its lease *committing* around every call that
may commit (:func:`committing`); when a leaseholder dies while committing, the resident stops itself
and its JVM at once (SIGKILL of its process group) before that work can commit again. Runs attached
at that moment fail and are retried; the next run starts a new resident. The resident exits by
itself after ``idle`` seconds with no lease and no active job (or on SIGTERM to its PID); its JVM
exits with it (PySpark's gateway server ends when its parent's pipe closes).

State lives in ``<base>/<digest of the configuration>/``: ``driver.json`` (PID, gateway port and
auth token; mode 0600 in a 0700 folder), ``leases/``, ``driver.log``. The configuration, which may
carry catalog credentials, reaches the resident on its stdin, never on disk; a different
configuration gets a different resident.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from icelake_assets.processes import pid_alive
from icelake_assets.types import IcelakeError

# The resident process itself (resident_driver.py), started by the first run that needs it.
DRIVER_MODULE = "icelake_assets.maintenance.resident_driver"
STATE_FILE = "driver.json"
LOG_FILE = "driver.log"
LEASES = "leases"
BASE_ENV = "ICELAKE_SPARK_STATE_DIR"
START_TIMEOUT_S = 180.0
POLL_S = 0.5


class ResidentSparkError(IcelakeError, RuntimeError):
    """The resident Spark driver could not be started or reached."""


class ResidentDriverKilledError(ResidentSparkError):
    """The resident driver was killed by a signal while it started: an outage (causes.py), not a bad
    configuration, which makes it exit with a status of its own."""


@dataclass(frozen=True)
class ResidentDriver:
    """A live resident driver, as its state file describes it."""

    folder: Path
    pid: int
    port: int
    secret: str
    started: float
    app_id: str


@dataclass(frozen=True)
class Attachment:
    """What a run learned when it attached (shown with the run's Spark metadata)."""

    driver: ResidentDriver
    started_driver: bool  # this run started the resident (paid the JVM start)
    seconds: float  # from asking to holding a session
    job_group: str

    def describe(self) -> str:
        how = "started the shared driver" if self.started_driver else "attached to the shared driver"
        return (
            f"{how} {self.driver.app_id} (PID {self.driver.pid}) in {self.seconds:.1f} s; "
            f"this run's jobs are in job group {self.job_group}"
        )


def default_base() -> Path:
    """``$ICELAKE_SPARK_STATE_DIR``, else ``$DAGSTER_HOME/icelake/spark``, else the user's cache."""
    configured = os.environ.get(BASE_ENV, "").strip()
    if configured:
        return Path(configured)
    home = os.environ.get("DAGSTER_HOME")
    if home:
        return Path(home) / "icelake" / "spark"
    return Path.home() / ".cache" / "icelake_assets" / "spark"


def driver_folder(conf: Mapping[str, str], base: Path | None = None) -> Path:
    """One folder per configuration (hashed: values may be secrets)."""
    digest = hashlib.sha256(json.dumps(dict(sorted(conf.items()))).encode()).hexdigest()[:16]
    return (base or default_base()) / digest


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One process at a time starts, attaches to or retires the folder's driver."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(folder / "lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_driver(folder: Path) -> ResidentDriver | None:
    """The folder's driver when its process lives (a stale state file is removed)."""
    path = folder / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not pid_alive(int(data["pid"])):
        path.unlink(missing_ok=True)
        return None
    return ResidentDriver(
        folder,
        int(data["pid"]),
        int(data["port"]),
        str(data["secret"]),
        float(data["started"]),
        str(data["app_id"]),
    )


def _listens(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2.0):
            return True
    except OSError:
        return False


def usable_driver(folder: Path) -> ResidentDriver | None:
    """The folder's driver when its gateway answers. A state file whose PID lives but whose gateway
    refuses (the driver was killed and its PID reused, or its JVM died alone) is removed, so a new
    driver starts: else every run would fail connecting to it, for good (seen in the chaos soak)."""
    driver = read_driver(folder)
    if driver is not None and not _listens(driver.port):
        (folder / STATE_FILE).unlink(missing_ok=True)
        return None
    return driver


def _log_tail(folder: Path, lines: int = 30) -> str:
    try:
        return "\n".join((folder / LOG_FILE).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _start(folder: Path, conf: Mapping[str, str], idle_seconds: float) -> ResidentDriver:
    log = open(folder / LOG_FILE, "ab")  # noqa: SIM115 - handed to the child, closed below
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", DRIVER_MODULE, str(folder), "--idle", str(idle_seconds)],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # outlives the run that started it; stopped by its PID
            close_fds=True,
        )
    finally:
        log.close()
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(dict(conf)).encode())
    proc.stdin.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        driver = read_driver(folder)
        if driver is not None and driver.pid == proc.pid:
            return driver
        if proc.poll() is not None:
            killed = proc.returncode < 0
            raise (ResidentDriverKilledError if killed else ResidentSparkError)(
                f"the resident Spark driver exited while starting (exit {proc.returncode}); "
                f"{folder / LOG_FILE}:\n{_log_tail(folder)}"
            )
        time.sleep(POLL_S)
    proc.kill()
    raise ResidentSparkError(
        f"the resident Spark driver did not start within {START_TIMEOUT_S:.0f} s; "
        f"{folder / LOG_FILE}:\n{_log_tail(folder)}"
    )


def _connect(driver: ResidentDriver):  # -> pyspark.sql.SparkSession
    """This process's session on the resident JVM (PySpark's own gateway-attach path)."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    saved = {k: os.environ.get(k) for k in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")}
    os.environ["PYSPARK_GATEWAY_PORT"] = str(driver.port)
    os.environ["PYSPARK_GATEWAY_SECRET"] = driver.secret
    try:
        gateway = launch_gateway()
    finally:  # the run's own children (none use Spark) must not inherit the gateway
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    jvm = gateway.jvm
    jsc = jvm.org.apache.spark.api.java.JavaSparkContext.fromSparkContext(
        jvm.org.apache.spark.SparkContext.getOrCreate()
    )
    context = SparkContext(gateway=gateway, jsc=jsc)
    shared = jvm.org.apache.spark.sql.SparkSession.builder().getOrCreate()
    return SparkSession(context, jsparkSession=shared.newSession())


# This process's lease on a resident (set by attach): committing() marks it.
# A lease's first line: the run's job group and the PID of the resident it attached to (a lease left by
# a run of an earlier resident, killed with its JVM, names that one: its work died with it).
_LEASE: Path | None = None
_HEAD = ""
BUSY = "committing"


@contextlib.contextmanager
def committing(what: str) -> Iterator[None]:
    """Marks this process's lease as committing while the block runs (nothing without a resident):
    should the process die meanwhile, the resident stops before the work can commit again."""
    lease = _LEASE
    if lease is None:
        yield
        return
    lease.write_text(f"{_HEAD}\n{BUSY} {what}\n")
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            lease.write_text(_HEAD)


def spark_runs_here() -> bool:
    """Whether this process already has a SparkContext (its own driver or an attached one)."""
    from pyspark import SparkContext

    # PySpark has no public probe: SparkSession.getActiveSession() answers for the calling thread only.
    return SparkContext._active_spark_context is not None  # noqa: SLF001


def attach(
    conf: Mapping[str, str], idle_seconds: float, base: Path | None = None, description: str = ""
) -> tuple[object, Attachment]:
    """A session of this process on the configuration's resident driver, started if none lives.

    Refused when this process already runs a Spark driver of its own (PySpark keeps one per process)."""
    if spark_runs_here():
        raise ResidentSparkError("this process already has a SparkContext: use it instead")
    began = time.monotonic()
    folder = driver_folder(conf, base)
    group = f"icelake-{os.getpid()}-{int(time.time())}"
    with locked(folder):
        driver = usable_driver(folder)
        started = driver is None
        if driver is None:
            driver = _start(folder, conf, idle_seconds)
        leases = folder / LEASES
        leases.mkdir(exist_ok=True, mode=0o700)
        head = f"{group} {driver.pid}"
        (leases / str(os.getpid())).write_text(head)
    global _LEASE, _HEAD
    _LEASE, _HEAD = leases / str(os.getpid()), head
    atexit.register(release, folder)
    try:
        session = _connect(driver)
    except Exception as err:
        (folder / LEASES / str(os.getpid())).unlink(missing_ok=True)
        raise ResidentSparkError(
            f"cannot reach the resident Spark driver (PID {driver.pid}, port {driver.port}): {err}; "
            f"{folder / LOG_FILE}:\n{_log_tail(folder)}"
        ) from err
    session.sparkContext.setJobGroup(group, description or f"icelake_assets run (PID {os.getpid()})", True)
    return session, Attachment(driver, started, time.monotonic() - began, group)


def release(folder: Path) -> None:
    """This process is done with the driver (the resident also notices when the process is gone)."""
    (folder / LEASES / str(os.getpid())).unlink(missing_ok=True)


def stop(folder: Path, timeout_s: float = 30.0) -> bool:
    """Stop the folder's resident driver by its PID (SIGTERM, then SIGKILL); True if one was running."""
    driver = read_driver(folder)
    if driver is None:
        return False
    os.kill(driver.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(driver.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if pid_alive(driver.pid):
        os.kill(driver.pid, signal.SIGKILL)
    (folder / STATE_FILE).unlink(missing_ok=True)
    return True


def stop_all(base: Path | None = None) -> int:
    """Stop every resident driver under ``base``; how many were running."""
    root = base or default_base()
    return sum(stop(folder) for folder in sorted(root.glob("*")) if folder.is_dir()) if root.exists() else 0
