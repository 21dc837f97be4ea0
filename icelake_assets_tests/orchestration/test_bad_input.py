"""Bad input gets a clear error naming the cause, and nothing is half-written."""

import re

import pyarrow as pa
import pytest
from dagster import DagsterInstance
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.cli import main as cli_main
from icelake_assets.maintenance.verify import validation
from icelake_assets.orchestration.checks.asset_checks import OVERVIEW_KEY
from icelake_assets.orchestration.project import MAINTENANCE_JOB, build_definitions
from icelake_assets.settings import load_settings
from icelake_assets_tests.conftest import catalog_name, write_settings

SCHEMA = Schema(NestedField(1, "id", LongType()))


def _table_with_files(settings, name: str, files: int):
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace_if_not_exists("ns")
    table = cat.create_table(("ns", name), SCHEMA)
    for i in range(files):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    return table


def test_a_missing_catalog_database_is_named_and_the_code_location_still_loads(tmp_path):
    settings = load_settings(write_settings(tmp_path, "gone"))
    defs = build_definitions(settings)
    defs.get_repository_def()
    description = defs.resolve_assets_def(OVERVIEW_KEY).descriptions_by_key[OVERVIEW_KEY]
    assert re.search(r"catalog 'gone'.*SQLite database .*catalog.db does not exist", description)


def test_an_unreachable_catalog_database_is_named(tmp_path):
    (tmp_path / "lake").mkdir()
    (tmp_path / "lake" / "catalog.db").write_bytes(b"this is not a sqlite database" * 100)
    settings = load_settings(write_settings(tmp_path, "broken"))
    description = (
        build_definitions(settings).resolve_assets_def(OVERVIEW_KEY).descriptions_by_key[OVERVIEW_KEY]
    )
    assert "catalog 'broken'" in description


def test_cli_names_unknown_catalogs_and_bad_table_names(make_lake, capsys):
    settings = make_lake()
    _table_with_files(settings, "t", 1)
    assert cli_main(["--config", settings.source, "health", "nope.ns.t"]) == 2
    assert "unknown catalog 'nope'" in capsys.readouterr().err
    assert cli_main(["--config", settings.source, "health", "a;drop"]) == 2
    assert "invalid table name 'a;drop'" in capsys.readouterr().err
    assert cli_main(["--config", settings.source, "health", f"{catalog_name(settings)}.ns.missing"]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_table_dropped_after_discovery_fails_its_run_by_name(make_lake):
    settings = make_lake()
    _table_with_files(settings, "kept", 2)
    _table_with_files(settings, "dropped", 2)
    defs = build_definitions(settings)
    open_catalog(settings, catalog_name(settings)).drop_table(("ns", "dropped"))
    result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
        instance=DagsterInstance.ephemeral(), raise_on_error=False
    )
    assert not result.success
    failures = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    # Step keys name the table group; the error names the table.
    assert failures and all("ns.dropped does not exist" in str(e.event_specific_data.error) for e in failures)
    kept = [e.asset_key.path[-1] for e in result.get_asset_materialization_events()]
    assert kept == ["kept"]


def test_a_validation_mismatch_rolls_back_to_the_before_snapshot(make_lake, monkeypatch):
    settings = make_lake()
    table = _table_with_files(settings, "small", 25)  # 25 files > 20: the rewrite acts
    before = table.current_snapshot().snapshot_id
    real = validation.count_rows
    # Injected: scans of any snapshot but the before-snapshot count one row too many.
    monkeypatch.setattr(
        validation,
        "count_rows",
        lambda spark, ref, snap=None: real(spark, ref, snap) + (0 if snap == before else 1),
    )
    defs = build_definitions(settings)
    result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
        instance=DagsterInstance.ephemeral(), raise_on_error=False
    )
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert failure.step_key.endswith(".validate")
    message = str(failure.event_specific_data.error)
    assert "summary says 25 rows but a scan counts 26" in message
    assert f"Rolled back automatically: rolled back to snapshot {before}" in message
    table.refresh()
    assert table.current_snapshot().snapshot_id == before
    assert table.scan().to_arrow().num_rows == 25
    records = AuditLog.from_settings(settings).records(table=f"{catalog_name(settings)}.ns.small")
    assert [(r.kind, r.decision) for r in records if r.kind in ("validation", "rollback")] == [
        ("validation", "failed"),
        ("rollback", "rolled_back"),
    ]


def test_a_validation_that_loses_the_spark_driver_fails_as_an_outage_naming_the_table(make_lake, monkeypatch):
    """The chaos soak: the shared driver was killed while a run validated its rewrite; the run failed
    naming no cause, and its table waited the 600 s failure backoff instead of an outage's minute."""
    settings = make_lake()
    _table_with_files(settings, "small", 25)

    def driver_gone(spark, ref, snap=None):
        raise RuntimeError("java.lang.IllegalStateException: Cannot call methods on a stopped SparkContext.")

    monkeypatch.setattr(validation, "count_rows", driver_gone)
    defs = build_definitions(settings)
    instance = DagsterInstance.ephemeral()
    result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert failure.step_key.endswith(".validate")
    name = f"{catalog_name(settings)}.ns.small"
    assert f"{name} validate failed: IllegalStateException" in str(failure.event_specific_data.error)
    tags = instance.get_run_by_id(result.run_id).tags
    assert tags["icelake/failure_kind"] == "outage" and tags["icelake/failure_table"] == name


def test_table_names_are_validated():
    assert TableRef.parse("ns.t", default_catalog="c") == TableRef("c", ("ns",), "t")
    # Iceberg allows any string as a name ("c.ns.t;drop" is a legal table): only the shape is checked.
    assert TableRef.parse("c.ns.t;drop x") == TableRef("c", ("ns",), "t;drop x")
    for bad in ("t", "c..t", "c.ns.", "c.ns.t\n", "c.ns.t\x00"):
        with pytest.raises(ValueError, match="invalid table name"):
            TableRef.parse(bad, default_catalog=None)


def test_in_a_run_of_several_tables_of_one_group_a_dropped_table_fails_alone(make_lake):
    """One pool: every table shares one maintenance graph, and one run maintains them one after the
    other; the dropped table fails the run by name, the others are maintained and materialized."""
    settings = make_lake(extra={"automation": {"maintenance_pools": 1}})
    for name in ("a", "dropped", "z"):
        _table_with_files(settings, name, 2)
    defs = build_definitions(settings)
    graphs = {a.node_def.name for a in defs.assets if a.node_def.name.startswith("maintain")}
    assert graphs == {"maintain_000"}
    open_catalog(settings, catalog_name(settings)).drop_table(("ns", "dropped"))
    result = defs.resolve_job_def(MAINTENANCE_JOB).execute_in_process(
        instance=DagsterInstance.ephemeral(), raise_on_error=False
    )
    assert not result.success
    kept = sorted(e.asset_key.path[-1] for e in result.get_asset_materialization_events())
    assert kept == ["a", "z"]
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert failure.step_key.endswith(".validate")
    assert "ns.dropped does not exist" in str(failure.event_specific_data.error)
