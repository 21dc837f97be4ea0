"""Terminate stops a maintenance run (issue 38): a real run worker (`dagster api execute_run`) of a real
table's maintenance, terminated as the UI's Terminate does it (`instance.run_launcher.terminate`) the
moment its rewrite starts, ends CANCELED and commits nothing after, on the shared Spark driver and on
a driver of its own. On the old code the run went on to the end and ended SUCCESS."""

import os
import subprocess
import time
from pathlib import Path

import pytest
from dagster import DagsterEventType, DagsterInstance, DagsterRunStatus

from bench.scale.run_worker import prepare_run
from icelake_assets import definitions
from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.maintenance.spark import resident_spark
from icelake_assets.maintenance.spark.commit_tags import run_of
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.project import MAINTENANCE_JOB
from icelake_assets.planning.stale_runs import WATCH_SECONDS
from icelake_assets.settings.schema import SPARK_SESSION_ENV
from icelake_assets_tests.orchestration.sensors.test_maintenance import _lake

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.integration
# A commit whose check passed just before the worker saw the terminate may still land.
IN_FLIGHT_SECONDS = WATCH_SECONDS + 2.0


def _step_started(instance: DagsterInstance, run_id: str, op: str) -> bool:
    records = instance.get_records_for_run(run_id, of_type=DagsterEventType.STEP_START).records
    return any(op in (r.event_log_entry.step_key or "") for r in records)


@pytest.mark.parametrize("session", ["shared", "per_run"])
def test_a_run_terminated_mid_rewrite_ends_canceled_with_no_commit_after(
    session, make_lake, tmp_path, monkeypatch
):
    settings, ref, _ = _lake(make_lake, files=40)
    monkeypatch.setenv("ICELAKE_CONFIG", settings.source)
    monkeypatch.setattr(definitions, "_BUILT", {})
    spark_dir = tmp_path / "spark"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "ICELAKE_SPARK_STATE_DIR": str(spark_dir),
        SPARK_SESSION_ENV: session,
    }
    try:
        (tmp_path / "home").mkdir()
        with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
            key = list(table_asset_key(ref).path)
            run_id, command = prepare_run("icelake_assets.definitions", MAINTENANCE_JOB, key, instance)
            worker = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
            deadline = time.monotonic() + 300
            while not _step_started(instance, run_id, "rewrite_data_files"):
                assert worker.poll() is None, "the run ended before its rewrite"
                assert time.monotonic() < deadline
                time.sleep(0.05)
            instance.run_launcher.terminate(run_id)  # as the UI's Terminate button
            asked = time.time()
            assert worker.wait(timeout=180) is not None
            run = instance.get_run_by_id(run_id)
            assert run.status == DagsterRunStatus.CANCELED, run.status
        table = load_table(open_catalog(settings, ref.catalog), ref)
        late = [
            s.snapshot_id
            for s in table.snapshots()
            if run_of(s.summary.additional_properties if s.summary else None) == run_id
            and s.timestamp_ms / 1000 > asked + IN_FLIGHT_SECONDS
        ]
        assert late == [], f"commits of the terminated run after the terminate: {late}"
    finally:
        resident_spark.stop_all(spark_dir)
