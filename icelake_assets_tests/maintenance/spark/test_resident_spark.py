"""The shared Spark driver (maintenance/spark/resident_spark.py): real JVMs, runs as separate processes.

Each "run" here is a fresh Python process that attaches as a Dagster run worker does; the pytest
process never attaches (it keeps its own driver). Every resident started here is stopped by its PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.maintenance.spark.resident_spark import (
    ResidentSparkError,
    attach,
    driver_folder,
    read_driver,
    stop_all,
)
from icelake_assets.maintenance.spark.session import spark_config

CLIENT = """
import json, sys, time
from pathlib import Path
from icelake_assets.maintenance.spark.resident_spark import attach
conf = json.loads(Path(sys.argv[1]).read_text())
spark, att = attach(conf, float(sys.argv[3]), Path(sys.argv[2]))
out = {"app_id": att.driver.app_id, "pid": att.driver.pid, "started": att.started_driver,
       "group": att.job_group, "attach_s": att.seconds}
print("ATTACHED", flush=True)
exec(sys.argv[4])
print("RESULT " + json.dumps(out), flush=True)
"""


@pytest.fixture
def lake(make_lake, tmp_path):
    settings = make_lake()
    name = next(iter(settings.catalogs))
    open_catalog(settings, name, create=True)
    conf_file = tmp_path / "conf.json"
    conf_file.write_text(json.dumps(spark_config(settings)))
    base = tmp_path / "spark"
    yield settings, name, conf_file, base
    stop_all(base)


def run_client(conf_file: Path, base: Path, body: str, idle: float = 60.0) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CLIENT, str(conf_file), str(base), str(idle), body],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])


def test_runs_in_separate_processes_share_one_driver_each_in_a_session_of_its_own(lake):
    settings, name, conf_file, base = lake
    first = run_client(
        conf_file,
        base,
        f"spark.sql('CREATE NAMESPACE `{name}`.`db`')\n"
        f"spark.sql('CREATE TABLE `{name}`.`db`.`t` (id bigint) USING iceberg')\n"
        f"spark.sql('INSERT INTO `{name}`.`db`.`t` VALUES (1)')\n"
        "spark.sql('SET spark.sql.shuffle.partitions=7')\n"
        "spark.range(3).createOrReplaceTempView('mine')\n",
    )
    # A writer outside Spark commits between the runs: the next run must see it (no stale catalog).
    table = load_table(open_catalog(settings, name), TableRef(name, ("db",), "t"))
    table.append(pa.table({"id": pa.array([2], pa.int64())}))
    second = run_client(
        conf_file,
        base,
        f"out['rows'] = spark.sql('SELECT count(*) FROM `{name}`.`db`.`t`').collect()[0][0]\n"
        "out['views'] = [r.viewName for r in spark.sql('SHOW VIEWS').collect()]\n"
        "out['partitions'] = spark.conf.get('spark.sql.shuffle.partitions')\n"
        "try:\n"
        "    spark.sql('SELECT * FROM no_such_table').collect()\n"
        "except Exception as err:\n"
        "    out['error'] = type(err).__name__\n"
        "out['after_error'] = spark.sql('SELECT 40 + 2').collect()[0][0]\n",
    )
    assert first["started"] and not second["started"]
    assert (first["app_id"], first["pid"]) == (second["app_id"], second["pid"])
    assert second["rows"] == 2  # Spark's insert and pyiceberg's append
    assert "mine" not in second["views"]  # the first run's temporary view stayed in its session
    assert second["partitions"] == "4"  # the product's setting, not the first run's SET
    assert second["error"] == "AnalysisException" and second["after_error"] == 42
    assert read_driver(driver_folder(json.loads(conf_file.read_text()), base)) is not None


def test_a_killed_run_has_its_spark_jobs_cancelled_and_the_driver_serves_the_next(lake):
    _, _, conf_file, base = lake
    run_client(conf_file, base, "")  # the driver is up
    # A run whose job would take hours is killed, as a run worker can be.
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CLIENT,
            str(conf_file),
            str(base),
            "60",
            "spark.range(0, 10**13, numPartitions=2).selectExpr('sum(id * id)').collect()",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ATTACHED"
    watch = (
        "import time\n"
        "tracker = spark.sparkContext.statusTracker()\n"
        "deadline = time.time() + 120\n"
        "while not tracker.getActiveJobsIds() and time.time() < deadline: time.sleep(0.2)\n"
        "out['busy'] = list(tracker.getActiveJobsIds())\n"
        "print('BUSY', flush=True)\n"
        "open(sys.argv[1] + '.busy', 'w').close()\n"
        "while not __import__('os').path.exists(sys.argv[1] + '.killed') and time.time() < deadline:"
        " time.sleep(0.2)\n"
        "while tracker.getActiveJobsIds() and time.time() < deadline: time.sleep(0.2)\n"
        "out['left'] = list(tracker.getActiveJobsIds())\n"
    )
    watcher = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(conf_file), str(base), "60", watch],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    busy = Path(str(conf_file) + ".busy")
    deadline = time.monotonic() + 150
    while not busy.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert busy.exists(), "the long job never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    Path(str(conf_file) + ".killed").touch()
    out, err = watcher.communicate(timeout=200)
    assert watcher.returncode == 0, out[-2000:] + err[-2000:]
    result = json.loads(next(x for x in out.splitlines() if x.startswith("RESULT "))[len("RESULT ") :])
    assert result["busy"] and result["left"] == []
    log = (driver_folder(json.loads(conf_file.read_text()), base) / "driver.log").read_text()
    assert f"PID {proc.pid} is gone: cancelled job group icelake-{proc.pid}-" in log
    assert run_client(conf_file, base, "out['x'] = spark.sql('SELECT 1').collect()[0][0]")["x"] == 1


def test_an_idle_driver_exits_by_itself(lake):
    _, _, conf_file, base = lake
    first = run_client(conf_file, base, "", idle=1.0)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            os.kill(first["pid"], 0)
        except ProcessLookupError:
            break
        time.sleep(0.5)
    else:
        pytest.fail("the idle resident driver did not exit")
    assert read_driver(driver_folder(json.loads(conf_file.read_text()), base)) is None
    assert run_client(conf_file, base, "")["started"]  # the next run starts a new one


def test_a_driver_that_cannot_start_says_why(tmp_path):
    conf = {"spark.master": "local[1]", "spark.driver.memory": "lots", "spark.ui.enabled": "false"}
    code = (
        "import json, sys\nfrom pathlib import Path\n"
        "from icelake_assets.maintenance.spark.resident_spark import attach\n"
        "attach(json.loads(sys.argv[1]), 5, Path(sys.argv[2]))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(conf), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "ResidentSparkError: the resident Spark driver exited while starting" in proc.stderr
    assert "lots" in proc.stderr  # the JVM's own complaint, from the driver's log
    assert stop_all(tmp_path) == 0


def test_each_configuration_has_its_own_driver_and_a_stale_state_file_is_ignored(tmp_path):
    a = driver_folder({"spark.master": "local[1]"}, tmp_path)
    b = driver_folder({"spark.master": "local[2]"}, tmp_path)
    assert a != b and a == driver_folder({"spark.master": "local[1]"}, tmp_path)
    a.mkdir(parents=True)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    state = {"pid": int(dead.stdout), "port": 1, "secret": "s", "started": 0, "app_id": "x"}
    (a / "driver.json").write_text(json.dumps(state))
    assert read_driver(a) is None and not (a / "driver.json").exists()


def test_a_process_with_its_own_spark_does_not_attach(spark_for, make_lake, tmp_path):
    spark_for(make_lake())  # this process's own driver
    with pytest.raises(ResidentSparkError, match="already has a SparkContext"):
        attach({"spark.master": "local[1]"}, 5, tmp_path)


# A run's rewrite, partial progress committing each file group as it finishes, one group at a time.
REWRITE = """
from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.spark import commit_tags
from icelake_assets.maintenance.spark import procedures
ref = TableRef(sys.argv[5], ("db",), "parts")
commit_tags.tag_session(spark, "run-killed", "rewrite_data_files", 1)
print("REWRITING", flush=True)
procedures.rewrite_data_files(spark, ref, options={
    "min-input-files": "2", "partial-progress.enabled": "true", "partial-progress.max-commits": "100",
    "max-concurrent-file-group-rewrites": "1"})
"""


def test_a_run_killed_mid_rewrite_commits_nothing_after_its_death(lake):
    """Cancelling a dead run's job group stops only its running job: Iceberg's partial-progress rewrite
    goes on with its next file groups as new jobs and commits them. The resident stops itself (and its
    JVM) the moment a run dies while committing, so nothing commits after the kill; the next run
    starts a new driver."""
    settings, name, conf_file, base = lake
    # 24 partitions of 12 files each: 24 file groups, each its own commit.
    run_client(
        conf_file,
        base,
        f"spark.sql('CREATE NAMESPACE `{name}`.`db`')\n"
        f"spark.sql('CREATE TABLE `{name}`.`db`.`parts` (id bigint, p int, s string) USING iceberg PARTITIONED BY (p)')\n"
        "for i in range(12):\n"
        f"    spark.range(i * 24000, (i + 1) * 24000).selectExpr('id', 'cast(id % 24 as int) as p', "
        f"'repeat(cast(id as string), 8) as s').writeTo('`{name}`.`db`.`parts`').append()\n",
    )
    table = load_table(open_catalog(settings, name), TableRef(name, ("db",), "parts"))
    rows = table.scan().to_arrow().num_rows
    start = table.current_snapshot().snapshot_id
    proc = subprocess.Popen(
        [sys.executable, "-c", CLIENT, str(conf_file), str(base), "60", REWRITE, name],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        deadline = time.monotonic() + 150
        while True:  # kill it just after one of its groups committed: others are still to come
            assert proc.poll() is None, "the rewrite ended before it was killed"
            assert time.monotonic() < deadline, "the rewrite committed nothing within 150 s"
            table.refresh()
            if table.current_snapshot().snapshot_id != start:
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    killed_ms = int(time.time() * 1000)
    time.sleep(6)  # long enough for several more groups to commit, had the rewrite gone on
    table.refresh()
    replaced = [s for s in table.metadata.snapshots if s.summary and s.summary.operation.value == "replace"]
    late = [s.snapshot_id for s in replaced if s.timestamp_ms > killed_ms]
    assert replaced and late == [], f"{len(late)} commits after the kill (of {len(replaced)})"
    assert all(s.summary.get("icelake.run-id") == "run-killed" for s in replaced)
    assert table.scan().to_arrow().num_rows == rows
    log = (driver_folder(json.loads(conf_file.read_text()), base) / "driver.log").read_text()
    assert f"PID {proc.pid} died while committing rewrite_data_files" in log
    assert run_client(conf_file, base, "out['x'] = spark.sql('SELECT 1').collect()[0][0]")["x"] == 1


def test_a_new_driver_is_not_stopped_by_the_lease_of_a_run_killed_with_an_earlier_one(lake):
    """A run killed while committing, its driver killed too (the chaos soak: both at once), left its
    lease. Its work died with that driver's JVM: the next driver removes the lease and serves. It
    stopped itself at once, failing the run that had just started it, and every run after it."""
    _, _, conf_file, base = lake
    folder = driver_folder(json.loads(conf_file.read_text()), base)
    (folder / "leases").mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    (folder / "leases" / str(dead.pid)).write_text("icelake-1-1 4194304\ncommitting expire_snapshots\n")
    body = "time.sleep(3)\nout['x'] = spark.sql('SELECT 1').collect()[0][0]"
    result = run_client(conf_file, base, body)
    assert result["started"] and result["x"] == 1
    assert not (folder / "leases" / str(dead.pid)).exists()
    assert "died while committing" not in (folder / "driver.log").read_text()


def test_a_state_file_whose_gateway_refuses_is_dropped_so_a_new_driver_starts(tmp_path):
    """The driver was killed and its PID reused (here: this live process), or its JVM died alone: the
    state file names a live PID and a dead port. Every run failed connecting to it, for good."""
    import socket

    from icelake_assets.maintenance.spark.resident_spark import STATE_FILE, usable_driver

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_port = s.getsockname()[1]  # closed again when the block ends: nothing listens there
    folder = tmp_path / "driver"
    folder.mkdir()
    state = {"pid": os.getpid(), "port": dead_port, "secret": "x", "started": 0.0, "app_id": "app"}
    (folder / STATE_FILE).write_text(json.dumps(state))
    assert read_driver(folder) is not None  # the PID alone says it lives
    assert usable_driver(folder) is None and not (folder / STATE_FILE).exists()
