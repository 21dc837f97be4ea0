"""Orphan removal through a real Dagster run (issue 10, item 1): Spark's JDBC catalog nests ``a.b.c``
inside ``a.b``'s location; maintaining every table must leave ``a.b.c`` whole and readable, remove
only true orphans, and say in the check, the materialization and the audit why a table was skipped."""

from pathlib import Path

import pytest
from dagster import DagsterInstance

from icelake_assets.audit.store import AuditLog
from icelake_assets.demo.lake import local_path
from icelake_assets.maintenance.spark import procedures
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.project import ORPHANS_JOB, build_definitions, execute_maintenance
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets_tests.conftest import TEST_THRESHOLDS, build_nested_lake, new_lake


def _files(table) -> set[str]:
    return {str(p) for p in local_path(table.metadata.location).rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    settings = new_lake(
        tmp_path_factory, {**TEST_THRESHOLDS, "orphans": {"max_count": 0, "recovery_window_hours": 0}}
    )
    spark = IcebergSparkResource(spark_config=spark_config(settings)).spark_session
    lake = build_nested_lake(settings, spark, gc_disabled=("g",))
    before = {short: _files(t) for short, t in lake["tables"].items()}
    defs = build_definitions(settings)
    instance = DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster_home")))
    checks = defs.resolve_job_def(ORPHANS_JOB).execute_in_process(instance=instance)
    maintenance = execute_maintenance(defs, instance)
    return {
        **lake,
        "settings": settings,
        "spark": spark,
        "before": before,
        "checks": checks,
        "maintenance": maintenance,
    }


def _check(run, short: str):
    name = run["refs"][short].name
    return next(e for e in run["checks"].get_asset_check_evaluations() if e.asset_key.path[-1] == name)


def _materialization(run, short: str):
    key = run["refs"][short].asset_key_path
    return next(
        e.materialization.metadata
        for r in run["maintenance"]
        for e in r.get_asset_materialization_events()
        if e.asset_key.path == key
    )


def test_the_orphan_check_counts_neither_hidden_files_nor_another_tables_files(run):
    d, b = _check(run, "d").metadata, _check(run, "b").metadata
    assert d["orphan_files"].value == 3 and d["hidden_files"].value > 0  # Spark's .crc files
    assert b["orphan_files"].value == 3 and b["cleanup_refused"].value == 1
    assert "never removed automatically" in _check(run, "b").description
    assert str(run["refs"]["c"]) in _check(run, "b").description


def test_maintenance_leaves_the_nested_table_whole_and_readable(run):
    assert all(r.success for r in run["maintenance"])
    c = run["tables"]["c"]
    assert _files(c) == run["before"]["c"]
    assert procedures.count_rows(run["spark"], run["refs"]["c"]) == 4
    c.refresh()
    assert c.scan().to_arrow().num_rows == 4
    assert all(Path(p).exists() for p in run["planted"]["b"])  # a.b is refused as a whole


def test_true_orphans_go_and_gc_disabled_tables_stay(run):
    assert _files(run["tables"]["d"]) == run["before"]["d"] - set(run["planted"]["d"])
    assert _materialization(run, "d")["orphans/removed"].value == 3
    assert _files(run["tables"]["g"]) == run["before"]["g"]
    assert "gc.enabled=false" in _materialization(run, "g")["why/orphans"].value


def test_the_audit_says_why_a_table_was_not_cleaned(run):
    ref = run["refs"]["b"]
    [record] = [
        r
        for r in AuditLog.from_settings(run["settings"]).records(table=str(ref))
        if r.op == "remove_orphan_files"
    ]
    assert record.decision == "skipped" and "never cleaned" in record.reason
    assert str(run["refs"]["c"]) in record.reason
    assert record.results["refused"] and record.results["orphans_found"] == 3


def test_the_checks_after_maintenance_reuse_the_runs_own_listing(run):
    """Work done once: the orphan check that follows a maintenance run in the same run reads what the
    run's remove_orphan_files listed and left, instead of listing storage a second time."""
    post = {
        e.asset_key.path[-1]: e
        for r in run["maintenance"]
        for e in r.get_asset_check_evaluations()
        if e.check_name == "orphan_files"
    }
    d, b = post[run["refs"]["d"].name], post[run["refs"]["b"].name]
    assert d.passed and b.passed is False  # d's three orphans are gone; a.b is refused as a whole
    for evaluation in (d, b):
        assert evaluation.metadata["listing"].value.startswith("this run's remove_orphan_files listing")
    assert "never removed automatically" in b.description
