"""One table's fault stays that table's (issue 19), with real faults on a real lake, real Spark and a
real Dagster instance: ``ns.inner``'s metadata.json is truncated (it lives inside ``ns.outer``'s
folder), ``ns.locked``'s data folder refuses new files (``chattr +i``: root ignores file modes), so
does one partition folder of ``ns.parts``, and their neighbours ``ns.good`` and ``ns.outer`` are
maintained in the same run.

- the unreadable table does not stop the others: ``good`` is compacted and its orphans removed;
  ``outer``, which may share its folder with the unreadable table, is compacted but not cleaned,
  with that reason (never cleaned blind);
- ``locked``: the pre-flight (issue 20) refuses its run before expiry commits anything;
- ``parts``: the denied rewrite fails with its root cause (no "o59.sql"), is not retried, is not
  "ineffective";
- the run's failure counts against ``locked`` only (backoff per table, with its cause).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from dagster import AssetKey, DagsterEventType, DagsterInstance
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo.lake import age_all_files, local_path, plant_orphans
from icelake_assets.orchestration.project import MAINTENANCE_JOB, build_definitions, execute_maintenance
from icelake_assets.orchestration.runs.model import pools_by_key, table_runs
from icelake_assets.orchestration.runs.pools import pool_index
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "s", StringType()))
COMMITS = 25  # over the test threshold of 20 files
POOLS = 64  # automation.maintenance_pools, the default


def _immutable(path: Path, on: bool) -> bool:
    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", "+i" if on else "-i", str(path)], capture_output=True)
    return done.returncode == 0


def _fill(table, first: int) -> None:
    for i in range(COMMITS):
        table.append(pa.table({"id": pa.array([first + i], pa.int64()), "s": pa.array([f"r{i}"])}))


def _pools(name: str) -> dict[str, int]:
    return {s: pool_index(TableRef(name, ("ns",), s), POOLS) for s in ("good", "outer", "locked", "parts")}


def _apart(name: str) -> bool:
    """The healthy tables share no table group (pool) with a failing one."""
    pools = _pools(name)
    return not {pools["good"], pools["outer"]} & {pools["locked"], pools["parts"]}


def _together(name: str) -> bool:
    pools = _pools(name)
    return pools["outer"] == pools["locked"] and pools["good"] not in (pools["locked"], pools["parts"])


def build_lake(tmp_path_factory, accept):
    settings = new_lake(
        tmp_path_factory,
        {**TEST_THRESHOLDS, "orphans": {"max_count": 0, "recovery_window_hours": 0}},
        accept=accept,
    )
    name = catalog_name(settings)
    cat = open_catalog(settings, name, create=True)
    cat.create_namespace("ns")
    tables = {short: cat.create_table(("ns", short), SCHEMA) for short in ("good", "outer", "locked")}
    tables["parts"] = cat.create_table(
        ("ns", "parts"),
        SCHEMA,
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "s")),
    )
    tables["inner"] = cat.create_table(
        ("ns", "inner"), SCHEMA, location=f"{tables['outer'].metadata.location.rstrip('/')}/inner"
    )
    for i, (short, table) in enumerate(tables.items()):
        if short == "parts":  # one file per partition per commit: 25 files in each of a and b
            for c in range(COMMITS):
                rows = {"id": pa.array([i * 1000 + 2 * c, i * 1000 + 2 * c + 1], pa.int64())}
                table.append(pa.table({**rows, "s": pa.array(["a", "b"])}))
        else:
            _fill(table, i * 1000)
        table.refresh()
    planted = {short: plant_orphans(tables[short], 3, age_days=5) for short in ("good", "outer")}
    for short in ("good", "outer", "locked", "parts"):
        age_all_files(tables[short], 5)
    inner_metadata = local_path(tables["inner"].metadata_location)
    inner_metadata.write_bytes(inner_metadata.read_bytes()[:40])  # a truncated metadata.json
    data = local_path(tables["locked"].metadata.location) / "data"
    partition = local_path(tables["parts"].metadata.location) / "data" / "s=a"
    snapshots = {short: len(tables[short].metadata.snapshots) for short in ("locked", "parts")}
    if not _immutable(data, True) or not _immutable(partition, True):
        _immutable(data, False)
        pytest.skip("chattr +i is not available here: the read-only data folder cannot be planted")
    try:
        defs = build_definitions(settings)
        instance = DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster_home")))
        runs = execute_maintenance(defs, instance)
    finally:
        _immutable(data, False)
        _immutable(partition, False)
    refs = {short: TableRef(name, ("ns",), short) for short in tables}
    return {
        "settings": settings,
        "tables": tables,
        "refs": refs,
        "planted": planted,
        "instance": instance,
        "runs": runs,
        "snapshots": snapshots,
    }


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    # Table groups hash table names into pools: with no failing group-mate, as a lake's names fall
    # most of the time (see test_a_failing_group_mate_... below for the other case).
    return build_lake(tmp_path_factory, _apart)


def _materialization(lake, short: str) -> dict:
    records = lake["instance"].fetch_materializations(AssetKey(lake["refs"][short].asset_key_path), limit=5)
    assert records.records, f"{short} was not maintained"
    return {k: v.value for k, v in records.records[0].asset_materialization.metadata.items()}


def _data_files(table) -> int:
    table.refresh()
    return len(table.inspect.files())


def test_the_unreadable_table_does_not_stop_its_neighbours(lake):
    good = _materialization(lake, "good")
    assert _data_files(lake["tables"]["good"]) == 1 and _data_files(lake["tables"]["outer"]) == 1
    assert good["orphans/removed"] == 3
    assert not any(Path(p).exists() for p in lake["planted"]["good"])


def test_a_table_that_may_overlap_the_unreadable_one_is_not_cleaned_and_says_why(lake):
    outer = _materialization(lake, "outer")
    assert all(Path(p).exists() for p in lake["planted"]["outer"])
    # the orphan check of the post-run checks says the same (the run's own scan is its result)
    checks = [
        e
        for r in lake["runs"]
        for e in r.get_asset_check_evaluations()
        if e.asset_key == AssetKey(lake["refs"]["outer"].asset_key_path) and e.check_name == "orphan_files"
    ]
    assert checks and all("not removed now" in e.description for e in checks)
    why = outer["why/orphans"]
    assert "listing of other tables is incomplete" in why and str(lake["refs"]["inner"]) in why
    assert "inner" in why.split("may live at", 1)[1]


def _run_of(lake, short: str):
    """The whole-table maintenance run that maintained ``short``: the partitioned table has its own job."""
    own_job = short == "parts"
    return next(r for r in lake["runs"] if (r.dagster_run.job_name != MAINTENANCE_JOB) == own_job)


def test_the_preflight_refuses_a_table_spark_cannot_write_before_any_commit(lake):
    run = _run_of(lake, "locked")
    assert not run.success
    table = lake["tables"]["locked"]
    table.refresh()
    assert len(table.metadata.snapshots) == lake["snapshots"]["locked"]  # expiry committed nothing
    records = AuditLog.from_settings(lake["settings"]).records(table=str(lake["refs"]["locked"]))
    expire = next(r for r in records if r.op == "expire_snapshots" and r.run_id == run.run_id)
    assert expire.decision == "failed" and "pre-flight refused the run before any commit" in expire.reason
    assert "Operation not permitted" in expire.reason


def test_a_denied_rewrite_fails_with_its_root_cause_and_is_not_retried(lake):
    run = _run_of(lake, "parts")
    assert not run.success
    retried = [e for e in run.all_events if e.event_type == DagsterEventType.STEP_UP_FOR_RETRY]
    assert retried == []  # the same plan under the same permissions fails the same way
    failures = [e for e in run.all_events if e.event_type == DagsterEventType.STEP_FAILURE]
    message = " ".join(e.event_specific_data.error.message for e in failures)
    assert str(lake["refs"]["parts"]) in message and "Operation not permitted" in message
    assert "o59" not in message and "An error occurred while calling" not in message
    records = AuditLog.from_settings(lake["settings"]).records(table=str(lake["refs"]["parts"]))
    rewrite = next(r for r in records if r.op == "rewrite_data_files" and r.run_id == run.run_id)
    assert "Operation not permitted" in rewrite.results["error"]
    assert rewrite.results["error_kind"] == "access_denied"
    validation = next(r for r in records if r.kind == "validation" and r.run_id == run.run_id)
    effects = {e["op"]: e["effect"] for e in validation.results["effects"]["ops"]}
    assert effects["rewrite_data_files"] == "failed"  # not "ineffective": no 24 h hold
    assert run.dagster_run.tags.get("icelake/outcome") != "ineffective"


def test_the_failed_run_backs_off_only_the_table_that_failed(lake):
    names = ("good", "outer", "locked", "parts")
    refs = [lake["refs"][s] for s in names]
    runs = table_runs(lake["instance"], pools_by_key(refs, lake["settings"].automation.maintenance_pools))
    by_name = {s: runs[AssetKey(lake["refs"][s].asset_key_path)] for s in names}
    assert by_name["good"].failures_in_a_row == 0 and by_name["outer"].failures_in_a_row == 0
    for short in ("locked", "parts"):
        failed = by_name[short]
        assert failed.failures_in_a_row == 1 and failed.retry_at() is not None
        assert failed.last_failure_kind == "access_denied"
        reason = failed.failure_reason() or ""
        assert "access denied" in reason and "Operation not permitted" in reason


@pytest.mark.xfail(
    strict=True,
    reason="known defect, left open: when a table shares its table group (pool, hence run) with a table "
    "whose maintenance fails, the group's check op is skipped with the failed step, so the healthy "
    "table gets no post-run checks in that run (its maintenance itself is done and validated)",
)
def test_a_failing_group_mate_leaves_the_post_run_orphan_check_in_place(tmp_path_factory):
    lake = build_lake(tmp_path_factory, _together)
    checks = [
        e
        for r in lake["runs"]
        for e in r.get_asset_check_evaluations()
        if e.asset_key == AssetKey(lake["refs"]["outer"].asset_key_path) and e.check_name == "orphan_files"
    ]
    assert checks
