"""The shared Spark driver's health probe, version digest and fencing (resident_spark.py,
resident_probe.py, resident_driver.py): real resident drivers, runs as separate processes.

The tests share one folder (a plain Spark configuration, no catalog: the driver starts in seconds) and
run in order: the fenced run leaves the first driver up, the wedge test replaces it, the fenced
committing run kills the second. Each also works alone (the first client starts a driver)."""

from __future__ import annotations

import json
import signal
import threading
import time

import psutil
import pytest

from icelake_assets.maintenance.spark import resident_lease, resident_spark
from icelake_assets.maintenance.spark.resident_probe import PROBE_TIMEOUT_S, probe
from icelake_assets.maintenance.spark.resident_spark import (
    RunFencedError,
    committing,
    driver_folder,
    fence_lease,
    lease_fenced,
    locked,
    read_driver,
    reset_fence,
    stop_all,
    usable_driver,
)
from icelake_assets.processes import pid_alive
from icelake_assets_tests.maintenance.spark.test_resident_spark import run_client

CONF = {
    "spark.master": "local[2]",
    "spark.app.name": "icelake_fence_test",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
# A job that would take far longer than any test: only a cancel or a dead driver ends it.
ENDLESS = "spark.range(0, 10**13, numPartitions=2).selectExpr('sum(id * id)').collect()"
# A side thread that runs ``act`` once this run's job is active (fence_lease needs no JVM).
WHEN_BUSY = """
import threading, time
from icelake_assets.maintenance.spark import resident_spark as rs
tracker = spark.sparkContext.statusTracker()
def when_busy(act):
    def run():
        deadline = time.time() + 60
        while not tracker.getActiveJobsIds() and time.time() < deadline:
            time.sleep(0.05)
        out['fenced_at'] = time.time()
        act()
    threading.Thread(target=run, daemon=True).start()
def attempt(key, body):
    began = time.time()
    try:
        body()
        out[key] = 'finished'
    except Exception as err:
        out[key] = f'{type(err).__name__}: {err}'[:300]
    out[key + '_at'], out[key + '_s'] = time.time(), time.time() - began
"""


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    base = tmp_path_factory.mktemp("fence")
    conf_file = base / "conf.json"
    conf_file.write_text(json.dumps(CONF))
    yield conf_file, base, driver_folder(CONF, base)
    stop_all(base)


def test_a_fenced_run_has_its_spark_jobs_cancelled_and_may_not_commit(shared):
    conf_file, base, folder = shared
    body = WHEN_BUSY + (
        "when_busy(lambda: rs.fence_lease('lost its run lease'))\n"
        f"attempt('running', lambda: {ENDLESS})\n"
        f"attempt('next', lambda: {ENDLESS})\n"  # submitted after the fence
        "out['fenced'] = rs.lease_fenced()\n"
        "out['lease'] = rs.attached_lease().read_text()\n"
        "out['me'] = __import__('os').getpid()\n"
        "try:\n"
        "    with rs.committing('rewrite_data_files'):\n"
        "        out['committed'] = True\n"
        "except rs.RunFencedError as err:\n"
        "    out['refused'] = str(err)\n"
    )
    result = run_client(conf_file, base, body)
    assert "cancelled part of cancelled job group" in result["running"]
    assert result["running_at"] - result["fenced_at"] < 2.5  # the resident's pass, not the job's end
    assert "cancelled" in result["next"] and result["next_s"] < 2.5
    assert result["fenced"] == "lost its run lease"
    head, *rest = result["lease"].splitlines()
    assert head == f"{result['group']} {result['pid']}" and rest == ["fenced lost its run lease"]
    assert "committed" not in result
    assert result["refused"] == "this run is fenced (lost its run lease): it may not begin rewrite_data_files"
    log = (folder / "driver.log").read_text()
    assert f"PID {result['me']} is fenced (lost its run lease): cancelling job group {result['group']}" in log
    driver = read_driver(folder)  # a fenced run that commits nothing does not stop the driver
    assert driver is not None and driver.pid == result["pid"]


def test_a_wedged_driver_is_killed_and_replaced(shared):
    conf_file, base, folder = shared
    run_client(conf_file, base, "")  # the driver is up
    old = read_driver(folder)
    assert old is not None and probe(old.port, old.secret) is None
    jvms = [p for p in psutil.Process(old.pid).children(recursive=True) if p.name() == "java"]
    assert jvms, "the resident's JVM is not its child"
    try:
        for jvm in jvms:
            jvm.send_signal(signal.SIGSTOP)  # wedged: its gateway accepts connections, never answers
        threads = threading.active_count()
        began = time.monotonic()
        with locked(folder):  # as attach does
            assert usable_driver(folder) is None
        assert PROBE_TIMEOUT_S - 0.5 < time.monotonic() - began < PROBE_TIMEOUT_S + 3
        # The probe leaves no thread (one an earlier test left may end meanwhile: fewer is fine).
        assert threading.active_count() <= threads
        mine = psutil.Process().net_connections("tcp")
        assert not [c for c in mine if c.raddr and c.raddr.port == old.port]  # nor a connection
        assert not pid_alive(old.pid) and not [j for j in jvms if pid_alive(j.pid)]
        assert not (folder / "driver.json").exists()
        log = (folder / "driver.log").read_text()
        assert (
            f"found driver {old.app_id} (PID {old.pid}) is unusable: its gateway (port {old.port}) accepted "
            f"a connection but did not answer within {PROBE_TIMEOUT_S:g} s; killed it and its JVM"
        ) in log
        new = run_client(conf_file, base, "out['x'] = spark.sql('SELECT 1').collect()[0][0]")
        assert new["started"] and new["pid"] != old.pid and new["x"] == 1
    finally:  # should the driver not have been killed
        for jvm in jvms:
            if pid_alive(jvm.pid):
                jvm.send_signal(signal.SIGCONT)
                jvm.kill()
        if pid_alive(old.pid):
            psutil.Process(old.pid).kill()


def test_a_fenced_run_committing_stops_the_driver_at_once(shared):
    conf_file, base, folder = shared
    body = WHEN_BUSY + (
        "when_busy(lambda: rs.fence_lease('another run took the table'))\n"
        "def commit():\n"
        "    with rs.committing('rewrite_data_files'):\n"
        f"        {ENDLESS}\n"
        "attempt('job', commit)\n"
        "out['me'] = __import__('os').getpid()\n"
    )
    result = run_client(conf_file, base, body)
    assert result["job"] != "finished"
    assert result["job_at"] - result["fenced_at"] < 2.5
    assert not pid_alive(result["pid"])  # the resident, its JVM with it
    assert read_driver(folder) is None
    log = (folder / "driver.log").read_text()
    assert (
        f"PID {result['me']} is fenced (another run took the table) while committing rewrite_data_files: "
        "stopping the driver and its JVM"
    ) in log


def test_an_interrupt_while_committing_leaves_the_lease_committing_and_fenced(tmp_path, monkeypatch):
    """A terminate's interrupt inside a commit fences the run; the lease said "committing + fenced"
    for microseconds, then "fenced" alone (the block's exit rewrote it), so the resident only
    cancelled the job group and the procedure went on committing the file groups it had finished
    (issue 50: commits 5-11 s after the terminate). The mark now stays until the fence is reset, so
    the resident stops the JVM (test_a_fenced_run_committing_stops_the_driver_at_once) even while the
    interrupted process lives on."""
    from icelake_assets.maintenance.spark import fencing
    from icelake_assets.private_api import DagsterExecutionInterruptedError

    lease = tmp_path / "leases" / "me"
    lease.parent.mkdir()
    monkeypatch.setattr(resident_lease, "_LEASE", lease)
    monkeypatch.setattr(resident_lease, "_HEAD", "icelake-1-2 3")
    fencing.arm("the-run")
    try:
        with pytest.raises(DagsterExecutionInterruptedError):
            with fencing.acting(), fencing.committing("rewrite_data_files"):
                raise DagsterExecutionInterruptedError()  # Dagster's SIGINT handler, mid-procedure
        lines = lease.read_text().splitlines()
        assert "committing rewrite_data_files" in lines and any(x.startswith("fenced ") for x in lines)
        fencing.arm("the next run")  # a new run in this process: nothing of it is committing
        assert lease.read_text().splitlines() == ["icelake-1-2 3"]
    finally:
        fencing.arm("after the test")


def test_committing_is_refused_once_fenced_without_a_resident(monkeypatch):
    monkeypatch.setattr(resident_lease, "_FENCED", None)  # this process's state, restored after
    assert resident_lease._LEASE is None and lease_fenced() is None
    with committing("expire_snapshots"):
        pass
    fence_lease("its run lease\nwas lost")
    fence_lease("a later reason")  # the first stays
    assert lease_fenced() == "its run lease was lost"
    with pytest.raises(RunFencedError, match=r"fenced \(its run lease was lost\): it may not begin expire"):
        with committing("expire_snapshots"):
            pytest.fail("a fenced run began to commit")
    reset_fence()  # a new run in this process
    assert lease_fenced() is None
    with committing("expire_snapshots"):
        pass


def test_the_driver_folder_changes_with_the_code_version(tmp_path, monkeypatch):
    conf = {"spark.master": "local[1]"}
    before = driver_folder(conf, tmp_path)
    source = tmp_path / "resident_driver.py"
    source.write_text("# one version\n")
    try:
        with monkeypatch.context() as patch:
            patch.setattr(resident_spark.metadata, "version", lambda name: "99.0.0")
            resident_spark.code_version.cache_clear()
            upgraded = driver_folder(conf, tmp_path)
            assert resident_spark.code_version().startswith("99.0.0+")
            patch.setattr(resident_spark, "RESIDENT_SOURCES", (source,))
            resident_spark.code_version.cache_clear()
            one = driver_folder(conf, tmp_path)
            source.write_text("# an edit of an editable install\n")
            assert driver_folder(conf, tmp_path) == one  # computed once per process
            resident_spark.code_version.cache_clear()
            edited = driver_folder(conf, tmp_path)
    finally:
        resident_spark.code_version.cache_clear()
    assert len({before, upgraded, one, edited}) == 4
    assert driver_folder(conf, tmp_path) == before


def test_a_holder_that_stopped_renewing_while_committing_dooms_the_driver(tmp_path):
    """A run worker paused by SIGSTOP (or whose storage hangs) cannot fence itself, and its procedure
    goes on committing in the resident's JVM: the resident judges the lease's renewals (its mtime,
    beaten by the run lease) and stops the JVM when they stopped while it commits."""
    import os

    from icelake_assets.maintenance.spark.resident_driver import _sweep_leases
    from icelake_assets.planning.stale_runs import SELF_FENCE_SECONDS

    leases = tmp_path / "leases"
    leases.mkdir()
    me, owner = str(os.getpid()), 4242
    lease = leases / me
    lease.write_text(f"group-1 {owner}\ncommitting rewrite_data_files\nrenewing\n")
    assert _sweep_leases(tmp_path, owner, set()).doomed == []  # renewed just now
    old = time.time() - SELF_FENCE_SECONDS - 5
    os.utime(lease, (old, old))
    [doomed] = _sweep_leases(tmp_path, owner, set()).doomed
    assert doomed.startswith(f"PID {me} stopped renewing its run lease (6") and "rewrite_data_files" in doomed
    # A lease no run lease beats (the CLI, a test) is judged by its holder's life alone.
    lease.write_text(f"group-1 {owner}\ncommitting rewrite_data_files\n")
    os.utime(lease, (old, old))
    assert _sweep_leases(tmp_path, owner, set()).doomed == []
