"""Crash recovery: a maintenance run killed with SIGKILL in the middle of its rewrite leaves the table
at its last committed snapshot with every row; the next run heals it; the files the killed run wrote
are orphans, found once they are old enough. An op that raises still leaves an audit record."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

from dagster import DagsterInstance

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.health.orphans import find_orphans
from icelake_assets.maintenance.ops import chain
from icelake_assets.orchestration.project import MAINTENANCE_JOB, build_definitions
from icelake_assets_tests.orchestration.sensors.test_maintenance import _lake

ROOT = Path(__file__).resolve().parents[2]
# The maintenance job over every unpartitioned table, in a process of its own (as a run worker).
CHILD = """
import sys
from dagster import DagsterInstance
from icelake_assets.orchestration.project import MAINTENANCE_JOB, build_definitions
from icelake_assets.settings import load_settings
defs = build_definitions(load_settings(sys.argv[1]))
defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(instance=DagsterInstance.ephemeral())
"""
# Only the rewrite acts first (25 snapshots stay under the count): its commit is the run's first write.
THRESHOLDS = {"snapshots": {"max_count": 100, "min_keep": 5}}


def _data_files(table) -> set[str]:
    return {str(p) for p in Path(table.location().removeprefix("file:")).joinpath("data").rglob("*.parquet")}


def test_a_run_killed_mid_rewrite_leaves_the_table_intact_and_the_next_run_heals_it(make_lake):
    settings, ref, table = _lake(make_lake, **THRESHOLDS)
    before, rows = table.current_snapshot().snapshot_id, table.scan().to_arrow().num_rows
    written_before = _data_files(table)
    catalog_db = Path(settings.source).parent / "lake" / "catalog.db"
    # Holding the catalog's write lock (readers still read) parks the rewrite's commit after it has
    # written its new files: the kill lands between the writes and the commit, every time.
    lock = sqlite3.connect(catalog_db, isolation_level=None)
    lock.execute("BEGIN IMMEDIATE")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, settings.source],
        cwd=ROOT,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 90
        while not (_data_files(table) - written_before):
            assert child.poll() is None, "the maintenance run ended before its rewrite wrote anything"
            assert time.monotonic() < deadline, "the rewrite wrote no file in 90 s"
            time.sleep(0.2)
        time.sleep(1.0)
        killed_files = _data_files(table) - written_before
        os.killpg(child.pid, signal.SIGKILL)  # the run worker and its Spark JVM
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        lock.execute("ROLLBACK")
        lock.close()

    cat = open_catalog(settings, ref.catalog)
    table = cat.load_table(ref.identifier)
    assert table.current_snapshot().snapshot_id == before  # the last committed snapshot ...
    assert table.scan().to_arrow().num_rows == rows  # ... with every row

    result = (
        build_definitions(settings)
        .resolve_job_def(MAINTENANCE_JOB)
        .execute_in_process(instance=DagsterInstance.ephemeral())
    )
    assert result.success
    table = cat.load_table(ref.identifier)
    assert len(list(table.scan().plan_files())) == 1 and table.scan().to_arrow().num_rows == rows

    # The killed run's files are referenced by nothing: orphans once older than the policy's age.
    assert not {o.path for o in find_orphans(table, 72)} & killed_files  # too young to touch
    later = time.time() + 4 * 86400
    assert killed_files <= {o.path for o in find_orphans(table, 72, now=later)}


def test_an_op_that_raises_still_leaves_its_audit_record(make_lake, monkeypatch):
    settings, ref, _ = _lake(make_lake, files=1)

    def dead_jvm(*args, **kwargs):
        raise ConnectionRefusedError("py4j: the Java gateway died")

    # The op's work, as its descriptor holds it when definitions build.
    ops = tuple(
        replace(o, work=dead_jvm) if o.name == "rewrite_manifests" else o for o in chain.MAINTENANCE_OPS
    )
    monkeypatch.setattr(chain, "MAINTENANCE_OPS", ops)
    result = (
        build_definitions(settings)
        .resolve_job_def(MAINTENANCE_JOB)
        .execute_in_process(instance=DagsterInstance.ephemeral(), raise_on_error=False)
    )
    assert not result.success
    [record] = [r for r in AuditLog.from_settings(settings).records(table=str(ref)) if r.kind == "op"]
    assert (record.op, record.decision) == ("rewrite_manifests", "failed")
    assert (
        "ConnectionRefusedError: py4j: the Java gateway died" in record.reason
        and record.run_id == result.run_id
    )
