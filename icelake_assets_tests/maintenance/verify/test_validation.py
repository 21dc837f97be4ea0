"""Validation compares live rows (deletes applied) with live rows: merge-on-read tables with position
deletes, equality deletes and a format-version 3 table (deletion vectors) are compacted through a
real Dagster run on real Spark, pass validation and are not rolled back."""

import pytest
from dagster import DagsterInstance

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark.procedures import count_rows, table_identifier
from icelake_assets.maintenance.verify import validation
from icelake_assets.maintenance.verify.validation import rollback_if_safe, validate_row_counts
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets_tests.conftest import catalog_name

MOR = {"write.delete.mode": "merge-on-read", "write.update.mode": "merge-on-read"}
COMMITS = 24  # one small file each: over the test lake's 20 files per partition


def _spark_table(spark, settings, name: str, props: dict[str, str], id_type: str = "BIGINT") -> TableRef:
    """A table written by Spark in COMMITS small commits of 5 rows each (ids 0..COMMITS*5-1)."""
    ref = TableRef(catalog_name(settings), ("ns",), name)
    open_catalog(settings, ref.catalog, create=True).create_namespace_if_not_exists("ns")
    tblprops = ", ".join(f"'{k}'='{v}'" for k, v in props.items())
    spark.sql(
        f"CREATE TABLE {table_identifier(ref)} (id {id_type}, v STRING) USING iceberg "
        f"TBLPROPERTIES ({tblprops})"
    )
    for c in range(COMMITS):
        values = ", ".join(f"({c * 5 + i}, 'v{c * 5 + i}')" for i in range(5))
        spark.sql(f"INSERT INTO {table_identifier(ref)} VALUES {values}")
    return ref


def _write_equality_deletes(spark, ref: TableRef, ids: list[int]) -> None:
    """An equality-delete file on ``id`` committed with Iceberg's own Java writers (what Flink does):
    Spark SQL and pyiceberg 0.12 cannot write one."""
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, f"{ref}")
    schema = table.schema()
    field_ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    field_ids[0] = schema.findField("id").fieldId()
    delete_schema = schema.select(jvm.java.util.Collections.singletonList("id"))
    factory = jvm.org.apache.iceberg.data.GenericAppenderFactory(
        schema, table.spec(), field_ids, delete_schema, None
    )
    path = table.locationProvider().newDataLocation("eq-deletes-00001.parquet")
    out = jvm.org.apache.iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
        table.io().newOutputFile(path)
    )
    writer = factory.newEqDeleteWriter(out, jvm.org.apache.iceberg.FileFormat.PARQUET, None)
    record = jvm.org.apache.iceberg.data.GenericRecord.create(delete_schema)
    for value in ids:
        writer.write(record.copy("id", value))
    writer.close()
    table.newRowDelta().addDeletes(writer.toDeleteFile()).commit()
    spark.sql(f"REFRESH TABLE {table_identifier(ref)}")


def _compact_through_dagster(settings, ref: TableRef):
    table = load_table(open_catalog(settings, ref.catalog), ref)
    before = table.current_snapshot()
    results = execute_maintenance(build_definitions(settings), DagsterInstance.ephemeral())
    failures = [
        str(e.event_specific_data.error)
        for r in results
        for e in r.all_events
        if e.event_type_value == "STEP_FAILURE"
    ]
    assert all(r.success for r in results), failures
    table.refresh()
    md = next(
        e.materialization.metadata
        for r in results
        for e in r.get_asset_materialization_events()
        if e.asset_key.path[-1] == ref.name
    )
    return table, before, md


@pytest.mark.parametrize("kind", ["position_deletes", "deletion_vectors", "equality_deletes"])
def test_a_table_with_deletes_is_compacted_and_validated_without_rollback(make_lake, spark_for, kind):
    settings = make_lake()
    spark = spark_for(settings)
    props = {**MOR, "format-version": "3" if kind == "deletion_vectors" else "2"}
    ref = _spark_table(
        spark, settings, kind, props, id_type="INT" if kind == "equality_deletes" else "BIGINT"
    )
    if kind == "equality_deletes":
        _write_equality_deletes(spark, ref, list(range(0, COMMITS * 5, 3)) + [10_000])  # one matches nothing
    else:
        spark.sql(f"DELETE FROM {table_identifier(ref)} WHERE id % 3 = 0")
    live = COMMITS * 5 - len(range(0, COMMITS * 5, 3))
    table = load_table(open_catalog(settings, ref.catalog), ref)
    summary = table.current_snapshot().summary
    # The snapshot's total-records counts the deleted rows: the old validation compared it with a scan.
    assert int(summary["total-records"]) == COMMITS * 5 and count_rows(spark, ref) == live
    assert (
        int(summary["total-equality-deletes" if kind == "equality_deletes" else "total-position-deletes"]) > 0
    )

    table, before, md = _compact_through_dagster(settings, ref)

    assert "rewrite_data_files" in md["ops/acted"].value
    assert md["rows/before"].value == md["rows/after"].value == live
    assert md["rows/spark_counted"].value >= 1  # the before-snapshot has delete files
    current = table.current_snapshot()
    assert current.snapshot_id != before.snapshot_id and current.summary.operation.value == "replace"
    # The deletes were applied: the data files hold exactly the live rows.
    assert count_rows(spark, ref) == live and int(current.summary["total-records"]) == live
    if kind == "deletion_vectors":  # DVs are scoped to their data file and leave with it
        assert compute_table_stats(table, settings.thresholds).position_delete_files == 0
        # Had validation failed: no automatic rollback of a v3 table (pyiceberg cannot write v3).
        refused = rollback_if_safe(table, before.snapshot_id)
        assert not refused.rolled_back and "format-version 3" in refused.reason
    records = AuditLog.from_settings(settings).records(table=str(ref))
    assert [r.decision for r in records if r.kind == "validation"] == ["passed"]
    assert not [r for r in records if r.kind == "rollback"]


def test_writer_deletes_count_as_writer_rows_and_a_rewrite_changing_live_rows_is_named(
    make_lake, spark_for, monkeypatch
):
    """Commits since the before-snapshot: a rewrite that keeps the delete files (rewrite_manifests),
    then a writer's merge-on-read DELETE. Summaries see no change at all (total-records counts
    deleted rows); live counts see the writer's -24 rows, and a rewrite losing one row is caught."""
    settings = make_lake()
    spark = spark_for(settings)
    ref = _spark_table(spark, settings, "lossy", {**MOR, "format-version": "2"})
    spark.sql(f"DELETE FROM {table_identifier(ref)} WHERE id % 5 = 0")  # one row of every file
    table = load_table(open_catalog(settings, ref.catalog), ref)
    before = table.current_snapshot().snapshot_id
    spark.sql(f"CALL `{ref.catalog}`.system.rewrite_manifests(table => 'ns.lossy')")
    table.refresh()
    rewrite = table.current_snapshot().snapshot_id
    spark.sql(f"DELETE FROM {table_identifier(ref)} WHERE id % 5 = 1")

    result = validate_row_counts(spark, ref, table, before)
    assert result.ok and (result.rows_before, result.writer_rows_since, result.rows_after) == (96, -24, 72)
    assert result.rewrite_snapshots == 1 and result.spark_counted_snapshots == 3

    real = validation.count_rows
    # Injected: the rewrite's snapshot reads one row short.
    monkeypatch.setattr(
        validation, "count_rows", lambda s, r, snap=None: real(s, r, snap) - (1 if snap == rewrite else 0)
    )
    result = validate_row_counts(spark, ref, table, before)
    assert not result.ok and result.rewrite_changes == [[rewrite, rewrite, -1]]
    assert f"rewrite commit(s) {rewrite} changed the live rows by -1" in result.mismatch(ref)

    # No rewrite of ours ran: nothing to compare, no JVM needed; data rows reported, flagged as such.
    current = table.current_snapshot().snapshot_id
    idle = validate_row_counts(None, ref, table, current, real_counts=False)
    assert idle.ok and idle.estimated and idle.rows_after == COMMITS * 5 and idle.spark_counted_snapshots == 0
