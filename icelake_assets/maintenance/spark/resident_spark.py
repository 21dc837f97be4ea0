"""A Spark driver kept across runs (``spark.session: shared``): runs attach to it instead of each
starting a JVM of its own.

A JVM per run costs a tiny table's run most of its time. The first run that needs Spark starts one
*resident* process (resident_driver.py) holding a SparkSession for the configuration; later runs
connect to its py4j gateway (as PySpark does for ``PYSPARK_GATEWAY_PORT``), each in a session of its
own (``SparkSession.newSession``: its own SQL conf, views and catalogs; one SparkContext).

Isolation: each attached process holds a *lease* (a file naming its PID and job group) while it lives;
its Spark jobs run in that job group. When a leaseholder dies (a killed run worker), the resident
cancels its job group. Cancelling stops only the jobs running at that moment: a procedure the dead
run had called goes on in the JVM (a partial-progress rewrite submits its next file groups as new
jobs and commits the finished ones). So a run marks its lease *committing* around every call that
may commit (:func:`committing`); when a leaseholder dies while committing, the resident stops itself
and its JVM at once (SIGKILL of its process group) before that work can commit again. Runs attached
at that moment fail and are retried; the next run starts a new resident. A run that must not commit
any more *fences* its lease (:func:`fence_lease`): the resident cancels its jobs on every pass and
stops as above should it be committing; :func:`committing` refuses to begin (:class:`RunFencedError`).
It exits after ``idle`` seconds with no lease and no active job, or on SIGTERM; its JVM with it.

A driver is judged by a real call on its gateway under a timeout (resident_probe.py), not a TCP
connect: a wedged JVM accepts connections but never answers; it is killed with its JVM and replaced.

State: ``<base>/<keyed digest>/`` (resident_identity.py, files 0600, folders 0700): ``driver.json``,
``leases/``, ``driver.log``. The configuration reaches the resident on its stdin, never on disk.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from icelake_assets.maintenance.spark import resident_identity as identity, resident_lease
from icelake_assets.maintenance.spark.resident_lease import (  # re-exported: the lease is part of the API
    BUSY as BUSY,
    FENCED as FENCED,
    RENEWING as RENEWING,
    ResidentSparkError as ResidentSparkError,
    RunFencedError as RunFencedError,
    attached_lease as attached_lease,
    committing as committing,
    fence_lease as fence_lease,
    heartbeat as heartbeat,
    lease_fenced as lease_fenced,
    reset_fence as reset_fence,
)
from icelake_assets.maintenance.spark.resident_probe import DRIVER_MODULE, kill_resident, probe, retire
from icelake_assets.processes import host_identity, pid_alive

STATE_FILE = "driver.json"
LOG_FILE = "driver.log"
LEASES = "leases"
BASE_ENV = "ICELAKE_SPARK_STATE_DIR"
START_TIMEOUT_S = 180.0
POLL_S = 0.5


class ResidentDriverKilledError(ResidentSparkError):
    """Killed by a signal while it started: an outage (causes.py), not a bad configuration."""


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


# The resident's own code: an editable install keeps its version across changes to these files.
RESIDENT_SOURCES = tuple(
    Path(__file__).with_name(n) for n in ("resident_driver.py", "resident_spark.py", "resident_lease.py")
)


@functools.cache
def code_version() -> str:
    """The installed product's version and a hash of the resident's sources (once per process)."""
    try:
        version = metadata.version("icelake_assets")
    except metadata.PackageNotFoundError:
        version = "unknown"
    sources = hashlib.sha256()
    for path in RESIDENT_SOURCES:
        with contextlib.suppress(OSError):
            sources.update(path.read_bytes())
    return f"{version}+{sources.hexdigest()[:12]}"


def driver_folder(conf: Mapping[str, str], base: Path | None = None) -> Path:
    """One folder per configuration (a keyed hash: values may be secrets), code version (an upgrade starts
    a new driver) and host identity (containers sharing $DAGSTER_HOME judge only PIDs they can ask)."""
    key = {"conf": dict(sorted(conf.items())), "code": code_version(), "host": host_identity()}
    return (root := base or default_base()) / identity.keyed_digest(root, key)


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """One process at a time starts, attaches to or retires the folder's driver."""
    identity.private_folder(folder)
    with identity.private_open(folder / "lock", "w") as handle:
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


def usable_driver(folder: Path) -> ResidentDriver | None:
    """The folder's driver when its gateway answers a real call in time (call under the folder lock).
    A state file whose PID lives but whose gateway refuses (the driver was killed and its PID reused,
    or its JVM died alone) is removed, so a new driver starts: else every run would fail connecting to
    it, for good (seen in the chaos soak). A driver that accepts but does not answer (a wedged JVM) is
    killed with its JVM, and its state file removed: else every shared run would wait on it."""
    driver = read_driver(folder)
    if driver is None:
        return None
    problem = probe(driver.port, driver.secret)
    if problem is None:
        return driver
    (folder / STATE_FILE).unlink(missing_ok=True)
    retire(driver.pid, f"driver {driver.app_id} (PID {driver.pid}) is unusable: {problem}", folder / LOG_FILE)
    return None


def _log_tail(folder: Path, lines: int = 30) -> str:
    try:
        return "\n".join((folder / LOG_FILE).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _start(folder: Path, conf: Mapping[str, str], idle_seconds: float) -> ResidentDriver:
    log = identity.private_open(folder / LOG_FILE, "ab")  # handed to the child, closed below
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
        resident_lease.hold(leases / str(os.getpid()), f"{group} {driver.pid}")
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
    """Stop the folder's resident driver by its PID (SIGTERM, then SIGKILL with its JVM); True if one ran."""
    driver = read_driver(folder)
    if driver is None:
        return False
    os.kill(driver.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(driver.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if pid_alive(driver.pid):
        kill_resident(driver.pid)
    (folder / STATE_FILE).unlink(missing_ok=True)
    return True


def stop_all(base: Path | None = None) -> int:
    """Stop every resident driver under ``base``; how many were running."""
    root = base or default_base()
    return sum(stop(folder) for folder in sorted(root.glob("*")) if folder.is_dir()) if root.exists() else 0
