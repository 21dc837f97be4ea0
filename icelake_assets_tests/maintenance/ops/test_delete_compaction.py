"""The cheaper delete compaction through a real maintenance run on real Spark (issue 33, item 2).

A merge-on-read table of 24 data files (two partitions, not small by the policy) where four DELETEs
of a row per partition wrote 8 partition-scoped position delete files (``write.delete.granularity=
partition``, as writers before Iceberg 1.8 and many streaming writers do; Spark 3.5 with Iceberg 1.10
writes file-scoped deletes and folds a data file's earlier ones into its new file, so its deletes pile
up only across data files, where merging cannot reduce them): the delete_files check fails on the
file ratio, few rows are deleted. The run merges the
position deletes with rewrite_position_delete_files and leaves every data file where it was."""

from dagster import DagsterInstance

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark import procedures
from icelake_assets.operate.plan import plan_table
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets.planning.deletes import delete_files_finding
from icelake_assets.types import SNAPSHOT_RUN_ID
from icelake_assets_tests.conftest import catalog_name

MOR = (
    "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'format-version'='2', "
    "'write.delete.granularity'='partition'"
)


def _data_files(table) -> set[str]:
    return {f.file.file_path for f in table.scan().plan_files()}


def test_position_deletes_over_large_files_are_compacted_without_rewriting_data(
    make_lake, spark_for, tmp_path
):
    settings = make_lake(thresholds={"mode": "enforce", "guards": {"quiet_period_minutes": 0}})
    spark = spark_for(settings)
    ref = TableRef(catalog_name(settings), ("ns",), "t")
    open_catalog(settings, ref.catalog, create=True).create_namespace("ns")
    name = procedures.table_identifier(ref)
    spark.sql(
        f"CREATE TABLE {name} (id INT, region STRING) USING iceberg PARTITIONED BY (region) TBLPROPERTIES ({MOR})"
    )
    for c in range(12):  # one data file per partition each: 12 per partition, under the 20 that make "small"
        spark.sql(f"INSERT INTO {name} VALUES " + ", ".join(f"({c * 50 + i}, 'r{i % 2}')" for i in range(50)))
    for i in range(4):  # rows of the first insert: each delete file points into one of its two data files
        spark.sql(f"DELETE FROM {name} WHERE id IN ({2 * i}, {2 * i + 1})")
    table = open_catalog(settings, ref.catalog).load_table(ref.identifier)
    policy = settings.thresholds
    before = compute_table_stats(table, policy)
    assert (before.data_files, before.position_delete_files, before.delete_records) == (24, 8, 8)
    assert [p.deleted_data_files for p in before.partitions.values()] == [1, 1]  # from file_path bounds
    assert not delete_files_finding(before, policy).passed  # 8 delete files for 24 data files > 0.2
    data_before, live = _data_files(table), procedures.count_rows(spark, ref)

    # The plan names the choice and prices the delete files, not the data.
    plan = plan_table(settings, ref).to_json()
    assert plan["position_deletes"]["partitions"] == ["region=r0", "region=r1"]
    assert plan["partitions"] == [] and "rewrite_data_files" in plan["enforce"]["ops"]
    delete_bytes = plan["position_deletes"]["delete_bytes"]
    assert delete_bytes == before.delete_bytes == plan["estimate"]["position_delete_bytes"]
    assert plan["position_deletes"]["data_bytes_not_rewritten"] == before.data_bytes > delete_bytes
    assert (
        plan["estimate"]["rewrite_bytes"] == 0
        and plan["guards"]["details"]["estimated_rewrite_bytes"] == delete_bytes
    )

    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        [result] = execute_maintenance(build_definitions(settings), instance, raise_on_error=True)
    [mat] = result.get_asset_materialization_events()
    md = mat.materialization.metadata

    table.refresh()
    after = compute_table_stats(table, policy)
    assert _data_files(table) == data_before  # no data file rewritten
    assert (after.data_files, after.position_delete_files) == (24, 2)
    assert delete_files_finding(after, policy).passed
    assert procedures.count_rows(spark, ref) == live == md["rows/after"].value
    current = table.current_snapshot().summary
    assert current["removed-position-delete-files"] == "8" and current[SNAPSHOT_RUN_ID] == result.run_id
    assert md["effect/rewrite"].value.startswith("effective: position deletes compacted: 8 → 2")
    assert md["deletes/compacted"].value == 8
    assert "compacted by rewrite_position_delete_files" in md["why/rewrite"].value
    [op] = [r for r in AuditLog.from_settings(settings).records() if r.op == "rewrite_data_files"]
    compacted = op.results["position_deletes"]
    assert compacted["partitions"] == ["region=r0", "region=r1"] and compacted["commits"] == 1
    assert (
        compacted["estimated_bytes"] == delete_bytes
        and compacted["data_bytes_not_rewritten"] == before.data_bytes
    )
    assert (compacted["delete_files_before"], compacted["delete_files_after"]) == (8, 2)
    assert (
        op.results["estimated_rewrite_bytes"] == delete_bytes
        and "rewritten_data_files_count" not in op.results
    )
