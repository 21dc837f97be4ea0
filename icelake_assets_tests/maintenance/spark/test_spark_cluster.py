"""A table's full maintenance through Dagster on a real Spark standalone cluster (master + one worker
on 127.0.0.1), set by `spark.master` in the lake's settings alone. The cluster authenticates
(spark.authenticate, issue 55 item 4): the product's driver brings the same secret from the environment
(`spark.auth_secret: ${ICELAKE_SPARK_SECRET}`); a driver without it, or with another, is refused.

The test process keeps one local Spark session for the whole suite (getOrCreate reuses it), so the
run happens in a Python child process with its own driver JVM attached to the cluster."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icelake_assets.catalog.connection import TableRef
from icelake_assets.settings import Settings, load_settings
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name
from icelake_assets_tests.servers import ServerUnavailable, spark_standalone_cluster

ROOT = Path(__file__).resolve().parents[3]
FILES = 25  # > max_files_per_partition (20): compaction; > snapshots.max_count (20): expiry
SECRET_ENV = "ICELAKE_SPARK_SECRET"


@pytest.fixture(scope="module")
def cluster():
    try:
        with spark_standalone_cluster(cores=1, memory="1g", secret=secrets.token_hex(24)) as c:
            yield c
    except ServerUnavailable as err:
        pytest.skip(f"no Spark standalone cluster on this machine: {err}")


def _materialize_in_child(config_path: str, table: str, out: str) -> None:
    """Runs in the child process: materialize the table's asset, then its checks, as the UI would."""
    from dagster import AssetKey, DagsterInstance
    from pyspark.sql import SparkSession

    from icelake_assets.orchestration.project import build_definitions

    settings = load_settings(config_path)
    defs = build_definitions(settings)
    key = AssetKey(TableRef.parse(table).asset_key_path)
    job = defs.resolve_implicit_global_asset_job_def()
    started = time.monotonic()
    with DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(instance=instance, asset_selection=[key], raise_on_error=False)
        # What the run left in Dagster's storage: its config, tags, job snapshot and event log.
        run = instance.get_run_by_id(result.run_id)
        assert run is not None and run.job_snapshot_id is not None
        stored = {
            "run config": json.dumps(run.run_config, default=str),
            "tags": json.dumps(run.tags),
            "job snapshot": repr(instance.get_job_snapshot(run.job_snapshot_id)),
            "event log": "\n".join(repr(e) for e in instance.all_logs(result.run_id)),
        }
    secret = os.environ[SECRET_ENV]
    md = {
        k: getattr(v, "value", None)
        for e in result.get_asset_materialization_events()
        for k, v in e.materialization.metadata.items()
    }
    session = SparkSession.getActiveSession()
    Path(out).write_text(
        json.dumps(
            {
                "success": result.success,
                "checks": {e.check_name: e.passed for e in result.get_asset_check_evaluations()},
                "metadata": {k: v for k, v in md.items() if isinstance(v, (int, float, str))},
                "master": session.sparkContext.master if session else None,
                "app_id": session.sparkContext.applicationId if session else None,
                "authenticate": session.sparkContext.getConf().get("spark.authenticate") if session else None,
                "secret_in": sorted(k for k, text in stored.items() if secret in text),
                "run_seconds": round(time.monotonic() - started, 1),
            }
        )
    )


def _connect_in_child(config_path: str, app_name: str) -> None:
    """Runs in the child process: a driver configured as the product configures it, and a query."""
    from pyspark.sql import SparkSession

    from icelake_assets.maintenance.spark.session import spark_config

    builder = SparkSession.builder
    for key, value in spark_config(load_settings(config_path), app_name=app_name).items():
        builder = builder.config(key, value)
    print("rows:", builder.getOrCreate().range(10).count(), file=sys.stderr, flush=True)


def _cluster_spark(master: str, **auth) -> dict:
    return {
        "master": master,
        **auth,
        "config": {
            # Executors connect back to the driver: keep everything on the loopback interface.
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "768m",
            "spark.cores.max": "1",
            "spark.driver.memory": "1g",
        },
    }


def _degraded_table(make_lake, master: str) -> tuple[Settings, TableRef, int]:
    from icelake_assets.catalog.connection import open_catalog
    from icelake_assets_tests.orchestration.sensors.test_maintenance import SCHEMA, _batch

    spark = _cluster_spark(master, auth_secret=f"${{{SECRET_ENV}}}")
    policy = {"mode": "enforce", "guards": {"quiet_period_minutes": 0}}
    settings = make_lake(thresholds={**TEST_THRESHOLDS, **policy}, extra={"spark": spark})
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), SCHEMA)
    for i in range(FILES):
        table.append(_batch(i * 10, 10))
    return settings, TableRef(catalog_name(settings), ("ns",), "t"), table.scan().to_arrow().num_rows


def _run_child(code: str, timeout: float) -> tuple[int, str]:
    """``python -c code`` in a process group of its own: on timeout its driver JVM dies with it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"the cluster run took over {timeout:.0f} s:\n{err[-5000:]}")
    return proc.returncode, err


# Seconds on an idle 2-core machine (see the README); the limits leave room for a loaded one.
@pytest.mark.timeout(360)
def test_full_maintenance_of_a_degraded_table_runs_on_a_standalone_cluster(
    make_lake, cluster, tmp_path, monkeypatch
):
    monkeypatch.setenv(SECRET_ENV, cluster.secret)  # the child inherits it, as a run worker would
    settings, ref, rows = _degraded_table(make_lake, cluster.master_url)
    out = tmp_path / "result.json"
    code = (
        f"from {__name__} import _materialize_in_child as m; "
        f"m({settings.source!r}, {str(ref)!r}, {str(out)!r})"
    )
    started = time.monotonic()
    returncode, stderr = _run_child(code, timeout=300)
    assert returncode == 0 and out.exists(), stderr[-5000:]
    result = json.loads(out.read_text())
    print(
        f"cluster run: child process {time.monotonic() - started:.1f} s, Dagster run {result['run_seconds']} s"
    )

    assert result["success"], stderr[-5000:]
    assert result["master"] == cluster.master_url
    # The authenticating cluster accepted the product's driver; the secret stayed out of the run's storage.
    assert result["authenticate"] == "true" and result["secret_in"] == []
    md = result["metadata"]
    assert set(md["ops/acted"].split(", ")) >= {"expire_snapshots", "rewrite_data_files", "rewrite_manifests"}
    assert md["files/rewritten"] == FILES
    assert md["files/after"] == 1
    assert md["rows/before"] == md["rows/after"] == rows
    assert result["checks"] and all(result["checks"].values()), result["checks"]

    # The work ran on the cluster: the master saw the application, the worker ran its executor's tasks.
    apps = {a["id"]: a for a in cluster.state()["completedapps"] + cluster.state()["activeapps"]}
    assert result["app_id"] in apps
    executors = [p.read_text(errors="replace") for p in cluster.work_dir.glob(f"{result['app_id']}/*/stderr")]
    assert executors and any("Finished task" in s for s in executors)
    # Nothing was installed on the worker: spark.jars shipped the Iceberg runtime and the JDBC drivers.
    fetched = "".join(executors)
    for jar in ("iceberg-spark-runtime-3.5_2.12", "sqlite-jdbc", "postgresql"):
        assert re.search(rf"Fetching spark://\S+/jars/\S*{jar}\S*\.jar", fetched), jar

    # ... and out of every file the run, the cluster and its executors wrote (but the cluster's own
    # 0600 properties file and the jars shipped), Spark's logs included.
    written = [*cluster.work_dir.parent.rglob("*"), *Path(settings.source).parent.rglob("*")]
    assert cluster.secret
    leaked = [
        p
        for p in written
        if p.is_file()
        and p.suffix not in (".properties", ".jar")
        and cluster.secret.encode() in p.read_bytes()
    ]
    assert leaked == []


REFUSAL = "Failed to connect to master"


@pytest.mark.timeout(240)
def test_a_driver_without_the_clusters_secret_is_refused(make_lake, cluster, tmp_path, monkeypatch):
    """A driver that opted out of authentication, and one with another secret: the master turns both
    away at their first message (Spark retries a refused registration for a minute, so the children are
    stopped once they logged the refusal) and never lists their applications."""
    monkeypatch.setenv(SECRET_ENV, secrets.token_hex(24))  # not the cluster's
    drivers = {
        "icelake-unauthenticated": _cluster_spark(cluster.master_url, authenticate=False),
        "icelake-wrong-secret": _cluster_spark(cluster.master_url, auth_secret=f"${{{SECRET_ENV}}}"),
    }
    children = {}
    for app, spark in drivers.items():
        settings = make_lake(extra={"spark": spark})
        code = f"from {__name__} import _connect_in_child as c; c({settings.source!r}, {app!r})"
        log = tmp_path / f"{app}.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", code], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        children[app] = (proc, log)
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            texts = {app: log.read_text(errors="replace") for app, (_, log) in children.items()}
            if all(REFUSAL in t or "rows:" in t for t in texts.values()):
                break
            time.sleep(1)
    finally:
        for proc, _ in children.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    logs = {app: log.read_text(errors="replace") for app, (_, log) in children.items()}
    for app, text in logs.items():
        assert REFUSAL in text and "rows:" not in text, f"{app}:\n{text[-5000:]}"
        causes = [line for line in text.splitlines() if "Exception" in line or "Caused by" in line]
        print(f"{app}: refused:", *causes[:3], sep="\n  ")
    state = cluster.state()
    names = {a["name"] for a in state["activeapps"] + state["completedapps"]}
    assert not names & set(drivers), names
