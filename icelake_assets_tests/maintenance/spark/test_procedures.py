"""Quoting of procedure calls: unit rules, then real Spark on tables whose names need quoting."""

from datetime import UTC, datetime

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.maintenance.spark import procedures


def test_identifiers_and_literals_are_escaped():
    assert procedures.quote_identifier("a`b") == "`a``b`"
    assert procedures.sql_string("it's \\ ok") == "'it\\'s \\\\ ok'"
    ref = TableRef("demo", ("we`ird",), "o'brien")
    assert procedures.table_identifier(ref) == "`demo`.`we``ird`.`o'brien`"
    assert (
        procedures.sql_value(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
        == "TIMESTAMP '2026-01-02 03:04:05.000000'"
    )
    assert procedures.sql_value({"k'": "v"}) == "map('k\\'', 'v')"
    assert procedures.sql_value(True) == "true"
    with pytest.raises(TypeError):
        procedures.sql_value(1.5)
    with pytest.raises(ValueError):
        procedures.call_procedure(None, ref, "drop table x; --")


def test_procedures_run_on_a_table_whose_name_needs_quoting(make_lake, spark_for):
    settings = make_lake()
    catalog_name = next(iter(settings.catalogs))
    cat = open_catalog(settings, catalog_name, create=True)
    namespace, name = "odd ns", "o'brien`s table"
    cat.create_namespace(namespace)
    table = cat.create_table(
        (namespace, name), Schema(NestedField(1, "id", LongType()), NestedField(2, "s", StringType()))
    )
    for i in range(6):
        table.append(pa.table({"id": pa.array([i], pa.int64()), "s": pa.array(["x'; DROP TABLE t; --"])}))
    ref = TableRef(catalog_name, (namespace,), name)
    spark = spark_for(settings)

    result = procedures.rewrite_data_files(spark, ref, options={"min-input-files": "2"})
    assert result["rewritten_data_files_count"] == 6 and result["added_data_files_count"] == 1
    expired = procedures.expire_snapshots(spark, ref, datetime.now(UTC), retain_last=2)
    assert expired["deleted_manifest_lists_count"] >= 1
    table.refresh()
    assert len(table.metadata.snapshots) == 2
    assert procedures.count_rows(spark, ref) == 6
    assert procedures.rewrite_manifests(spark, ref)["rewritten_manifests_count"] >= 1


def test_every_maintenance_commit_names_its_run_op_and_attempt(make_lake, spark_for):
    """The actions behind the procedures, with the session's snapshot properties: a sort by columns,
    a z-order and a manifest rewrite each commit a snapshot naming the run (found by pyiceberg)."""
    from icelake_assets.maintenance.spark import commit_tags

    settings = make_lake()
    catalog_name = next(iter(settings.catalogs))
    cat = open_catalog(settings, catalog_name, create=True)
    cat.create_namespace("tags")
    table = cat.create_table(
        ("tags", "t"), Schema(NestedField(1, "id", LongType()), NestedField(2, "s b", StringType()))
    )
    for i in range(4):
        table.append(pa.table({"id": pa.array([9 - i, i], pa.int64()), "s b": pa.array(["b", "a"])}))
    ref = TableRef(catalog_name, ("tags",), "t")
    spark = spark_for(settings).newSession()  # a run's own session: its tags stay its own
    every = {"min-input-files": "2", "rewrite-all": "true"}

    commit_tags.tag_session(spark, "run-abc", "rewrite_data_files", 1)
    sorted_ = procedures.rewrite_data_files(spark, ref, "sort", "`id`, `s b`", every)
    commit_tags.tag_session(spark, "run-abc", "rewrite_data_files", 2)
    zordered = procedures.rewrite_data_files(spark, ref, "sort", "zorder(`id`, `s b`)", every)
    commit_tags.tag_session(spark, "run-abc", "rewrite_manifests", 1)
    procedures.rewrite_manifests(spark, ref)
    assert sorted_["rewritten_data_files_count"] == 4 and zordered["rewritten_data_files_count"] == 1
    with pytest.raises(Exception, match="binpack"):
        procedures.rewrite_data_files(spark, ref, "binpack", "`id`", every)

    table.refresh()
    tagged = [
        (
            s.summary.operation.value,
            s.summary.get(commit_tags.RUN_ID),
            s.summary.get(commit_tags.OP),
            s.summary.get(commit_tags.ATTEMPT),
        )
        for s in table.metadata.snapshots
        if s.summary is not None and s.summary.get(commit_tags.RUN_ID)
    ]
    assert tagged == [
        ("replace", "run-abc", "rewrite_data_files", "1"),
        ("replace", "run-abc", "rewrite_data_files", "2"),
        ("replace", "run-abc", "rewrite_manifests", "1"),
    ]
    rows = spark.sql(f"SELECT id FROM {procedures.table_identifier(ref)} ORDER BY id").collect()
    assert [r.id for r in rows] == sorted([9, 0, 8, 1, 7, 2, 6, 3])
    assert commit_tags.session_properties(spark_for(settings)) == {}  # other sessions untouched
