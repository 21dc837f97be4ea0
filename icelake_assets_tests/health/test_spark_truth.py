"""Statistics of tables written by Spark (Iceberg 1.10): merge-on-read position deletes, equality
deletes written through Iceberg's Java API (Spark SQL cannot write them), a sort order and a sort
compaction, an evolved partition spec. Truth comes from the construction and from Spark's own
``files`` metadata table (Iceberg Java's reader, independent of ours)."""

from collections import Counter, defaultdict

import pytest

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.findings import Severity
from icelake_assets.health.scan_cost import measure_scan_cost
from icelake_assets.health.score import health_score
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark.procedures import rewrite_data_files, table_identifier
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.planning.deletes import delete_files_finding
from icelake_assets.planning.layout import layout_drift_finding
from icelake_assets_tests.conftest import catalog_name, new_lake
from icelake_assets_tests.health.test_stats import projected_and_full_read

ROWS = 300
DELETED = 30  # DELETE ... WHERE id % 10 = 0
UPDATED = 2  # UPDATE ... WHERE id < 3: ids 1 and 2 (0 is deleted already)
EQ_DELETED = (4, 7)  # both in partition cat = '1'


def write_equality_deletes(spark, ref: TableRef, column: str, values, partition: dict[str, str]) -> None:
    """One equality delete file through Iceberg's Java API (what Flink upserts write), committed as a row delta."""
    jvm = spark._jvm
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(
        spark._jsparkSession, table_identifier(ref)
    )
    schema = table.schema()
    field_id = schema.findField(column).fieldId()
    ids = spark.sparkContext._gateway.new_array(jvm.int, 1)
    ids[0] = field_id
    selected = jvm.java.util.HashSet()
    selected.add(jvm.java.lang.Integer.valueOf(field_id))
    delete_schema = jvm.org.apache.iceberg.types.TypeUtil.select(schema, selected)
    factory = jvm.org.apache.iceberg.data.GenericAppenderFactory(
        schema, table.spec(), ids, delete_schema, None
    )
    key = jvm.org.apache.iceberg.PartitionKey(table.spec(), schema)
    row = jvm.org.apache.iceberg.data.GenericRecord.create(schema)
    for name, value in partition.items():
        row.setField(name, value)
    key.partition(row)
    location = table.locationProvider().newDataLocation(table.spec(), key, "eq-deletes-00001.parquet")
    out = jvm.org.apache.iceberg.encryption.EncryptedFiles.plainAsEncryptedOutput(
        table.io().newOutputFile(location)
    )
    writer = factory.newEqDeleteWriter(out, jvm.org.apache.iceberg.FileFormat.PARQUET, key)
    for value in values:
        record = jvm.org.apache.iceberg.data.GenericRecord.create(delete_schema)
        record.setField(column, value)
        writer.write(record)
    writer.close()
    table.newRowDelta().addDeletes(writer.toDeleteFile()).commit()


def spark_files(spark, ref: TableRef) -> list[dict]:
    rows = spark.sql(
        f"SELECT content, spec_id, partition.cat AS cat, record_count, file_size_in_bytes, "
        f"readable_metrics.id.lower_bound AS lo, readable_metrics.id.upper_bound AS hi "
        f"FROM {table_identifier(ref)}.files"
    ).collect()
    return [r.asDict() for r in rows]


def overlapping_by_brute_force(files: list[dict]) -> int:
    """Data files whose id range overlaps another data file's in the same partition (the obvious O(n^2))."""
    data = [f for f in files if f["content"] == 0]
    hits = 0
    for f in data:
        if any(
            g is not f
            and g["cat"] == f["cat"]
            and g["spec_id"] == f["spec_id"]
            and f["lo"] < g["hi"]
            and g["lo"] < f["hi"]
            for g in data
        ):
            hits += 1
    return hits


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    settings = new_lake(tmp_path_factory)
    name = catalog_name(settings)
    open_catalog(settings, name, create=True).create_namespace("spark")
    spark = IcebergSparkResource(spark_config=spark_config(settings)).spark_session
    ref = TableRef(name, ("spark",), "mor")
    t = table_identifier(ref)
    spark.sql(
        f"CREATE TABLE {t} (id INT, cat STRING, v DOUBLE) USING iceberg PARTITIONED BY (cat) TBLPROPERTIES ("
        "'format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
        "'write.merge.mode'='merge-on-read')"
    )
    spark.sql(
        f"INSERT INTO {t} SELECT CAST(id AS INT), CAST(id % 3 AS STRING), id * 1.0 FROM range(0, {ROWS})"
    )
    spark.sql(f"DELETE FROM {t} WHERE id % 10 = 0")
    spark.sql(f"UPDATE {t} SET v = -1 WHERE id < 3")
    cat = open_catalog(settings, name)
    cache = ManifestCache()
    stages = {
        "deletes": {
            "stats": compute_table_stats(load_table(cat, ref), settings.thresholds, cache),
            "files": spark_files(spark, ref),
            "count": spark.table(t).count(),
        }
    }

    write_equality_deletes(spark, ref, "id", EQ_DELETED, {"cat": "1"})
    stages["equality"] = {
        "stats": compute_table_stats(load_table(cat, ref), settings.thresholds, cache),
        "table": load_table(cat, ref),
        "files": spark_files(spark, ref),
        "count": spark.table(t).count(),
    }

    spark.sql(f"ALTER TABLE {t} WRITE ORDERED BY id")
    # Re-inserts ids inside the ranges the first insert covers: new and old files overlap on id.
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), CAST(id % 3 AS STRING), 0.0 FROM range(50, 260, 10)")
    before_rewrite = load_table(cat, ref)
    stages["sorted"] = {
        "stats": compute_table_stats(before_rewrite, settings.thresholds, cache),
        "files": spark_files(spark, ref),
        "manifests": {
            m.manifest_path for m in before_rewrite.current_snapshot().manifests(before_rewrite.io)
        },
    }

    rewrite_data_files(spark, ref, strategy="sort", options={"rewrite-all": "true"})  # the table's sort order
    after = load_table(cat, ref)
    stages["rewritten"] = {
        "stats": compute_table_stats(after, settings.thresholds, cache),
        "fresh": compute_table_stats(after, settings.thresholds, ManifestCache()),
        "files": spark_files(spark, ref),
        "manifests": {m.manifest_path for m in after.current_snapshot().manifests(after.io)},
    }

    spark.sql(f"ALTER TABLE {t} ADD PARTITION FIELD bucket(4, id)")
    spark.sql(f"INSERT INTO {t} SELECT CAST(id AS INT), CAST(id % 3 AS STRING), 0.0 FROM range(2000, 2030)")
    stages["evolved"] = {
        "stats": compute_table_stats(load_table(cat, ref), settings.thresholds, cache),
        "files": spark_files(spark, ref),
        "table": load_table(cat, ref),
    }
    return {"settings": settings, "stages": stages}


def _by_content(files: list[dict]) -> dict[int, tuple[int, int, int]]:
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0])
    for f in files:
        out[f["content"]][0] += 1
        out[f["content"]][1] += f["record_count"]
        out[f["content"]][2] += f["file_size_in_bytes"]
    return {k: tuple(v) for k, v in out.items()}


def test_merge_on_read_position_deletes(lake):
    stage = lake["stages"]["deletes"]
    stats, spark = stage["stats"], _by_content(stage["files"])
    assert stats.position_delete_records == DELETED + UPDATED  # by construction
    assert stats.records == ROWS + UPDATED  # the updated rows were written again
    assert stats.records - stats.position_delete_records == stage["count"] == ROWS - DELETED
    assert (stats.data_files, stats.records, stats.data_bytes) == spark[0]
    assert (stats.position_delete_files, stats.position_delete_records, stats.delete_bytes) == spark[1]
    assert stats.equality_delete_files == 0
    per_cat = Counter(f["cat"] for f in stage["files"] if f["content"] == 1)
    expected = {f"cat={c}": n for c, n in per_cat.items()}
    assert {p: s.position_delete_files for p, s in stats.partitions.items()} == expected
    assert stats.recent_writer_commits == 3 and stats.last_maintenance_age_minutes is None
    finding = delete_files_finding(stats, lake["settings"].thresholds)
    assert finding.severity is not Severity.OK  # about one delete file per data file
    assert health_score(stats, lake["settings"].thresholds).penalties["position_deletes"] > 0


def test_equality_deletes_written_through_the_java_api(lake):
    stage = lake["stages"]["equality"]
    stats, spark = stage["stats"], _by_content(stage["files"])
    assert stage["count"] == ROWS - DELETED - len(EQ_DELETED)  # Spark applies them: they are real
    assert (stats.equality_delete_files, stats.equality_delete_records) == (1, len(EQ_DELETED))
    assert (stats.equality_delete_files, stats.equality_delete_records) == spark[2][:2]
    assert stats.partitions["cat=1"].equality_delete_files == 1
    assert stats.manifests_read == 1  # the row delta's new delete manifest only
    assert "equality" in delete_files_finding(stats, lake["settings"].thresholds).recommendation
    assert health_score(stats, lake["settings"].thresholds).penalties["equality_deletes"] > 0


def test_a_full_scan_of_a_table_with_equality_deletes_is_measured(lake):
    """Proof of benefit must measure the tables a delete-applying rewrite heals: pyiceberg's own scan
    planner refuses equality deletes, the cost is read from the manifests as a planner reads them."""
    stage = lake["stages"]["equality"]
    spark = _by_content(stage["files"])
    cost = measure_scan_cost(stage["table"])
    assert cost.data_files == spark[0][0]
    assert cost.delete_files == spark[1][0] + spark[2][0]
    assert cost.data_bytes == sum(bytes_ for _, _, bytes_ in spark.values())
    assert cost.manifests >= 2 and cost.metadata_bytes > 0


def test_files_out_of_the_sort_order(lake):
    stage = lake["stages"]["sorted"]
    stats = stage["stats"]
    assert stats.sort_column == "id" and stats.sort_order_id == 1
    assert stats.unsorted_files == overlapping_by_brute_force(stage["files"]) > 0


def test_a_sort_compaction_is_maintenance_and_is_read_incrementally(lake):
    stages = lake["stages"]
    stats, fresh = stages["rewritten"]["stats"], stages["rewritten"]["fresh"]
    assert stats.unsorted_files == overlapping_by_brute_force(stages["rewritten"]["files"]) == 0
    assert stats.data_files == 3  # one file per partition: the tiny table fits in one file each
    assert stats.last_maintenance_age_minutes is not None and stats.last_maintenance_age_minutes < 30
    assert (
        stats.recent_writer_commits == stages["sorted"]["stats"].recent_writer_commits
    )  # 'replace' is not a writer
    new_manifests = stages["rewritten"]["manifests"] - stages["sorted"]["manifests"]
    assert stats.manifests_read == len(new_manifests) > 0
    assert (stats.data_files, stats.records, stats.partitions) == (
        fresh.data_files,
        fresh.records,
        fresh.partitions,
    )


def test_an_evolved_partition_spec_in_spark(lake):
    stage = lake["stages"]["evolved"]
    stats = stage["stats"]
    old = sum(1 for f in stage["files"] if f["content"] == 0 and f["spec_id"] == 0)
    assert stats.default_spec_id == 1 and old == 3
    assert stats.old_spec_files == old and stats.data_files == old + sum(
        1 for f in stage["files"] if f["content"] == 0 and f["spec_id"] == 1
    )
    assert (
        any("/id_bucket_4=" in p for p in stats.partitions) and stats.partitions["cat=0"].old_spec_files == 1
    )
    assert layout_drift_finding(stats, lake["settings"].thresholds).severity is not Severity.OK


def test_the_projected_reader_agrees_on_spark_written_manifests(lake):
    table = lake["stages"]["evolved"]["table"]
    manifests = [m for s in table.metadata.snapshots for m in s.manifests(table.io)]
    assert {int(m.content) for m in manifests} == {0, 1}  # data and delete manifests
    for manifest in {m.manifest_path: m for m in manifests}.values():
        ours, theirs = projected_and_full_read(table, manifest)
        assert ours == theirs
