"""The maintenance ops' work without Dagster, on real Spark and a real JDBC catalog over SQLite.

Orphan removal (issue 10, item 1): another table's files are never touched, hidden files stay,
tables on shared files are never cleaned, and a missing referenced file fails the op loudly.

Expiry through a real Dagster run: fresh snapshots survive whatever their count (min_age_hours),
and a tagged old snapshot survives an expiry that removes its neighbours.

The rewrite op on real Spark: the cost guard prices what Iceberg actually rewrites (issue 10.5)."""

from pathlib import Path

import pyarrow as pa
import pytest
from dagster import DagsterInstance
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.known_tables import default_locations, known_tables
from icelake_assets.demo.lake import local_path
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.orphans import ReferencedFilesMissingError, scan_orphans
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops import rewrite, runner
from icelake_assets.maintenance.results.models import OrphanResult
from icelake_assets.maintenance.spark import procedures
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.project import build_definitions, execute_maintenance
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.policies import policy_for
from icelake_assets.settings import Policy
from icelake_assets_tests.conftest import TEST_THRESHOLDS, build_nested_lake, catalog_name, new_lake


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    settings = new_lake(
        tmp_path_factory, {**TEST_THRESHOLDS, "orphans": {"max_count": 0, "recovery_window_hours": 0}}
    )
    spark = IcebergSparkResource(spark_config=spark_config(settings)).spark_session
    return {"settings": settings, "spark": spark, **build_nested_lake(settings, spark, gc_disabled=("g",))}


def _files(table) -> dict[str, float]:
    root = local_path(table.metadata.location)
    return {str(p): p.stat().st_mtime for p in root.rglob("*") if p.is_file()}


def _remove(lake, short: str) -> OrphanResult:
    ref, table = lake["refs"][short], lake["tables"][short]
    policy = policy_for(lake["settings"], ref, table.properties)
    known = known_tables(lake["settings"])
    where = default_locations(lake["catalog"], ref)
    return runner.remove_orphan_files(
        lambda: lake["spark"],
        ref,
        table,
        policy,
        lambda t: None,  # no stats needed: the orphan op decides from its scan
        lambda r, t, p: scan_orphans(
            t, str(r), p.orphans.older_than_hours, known.tables, where, unlisted=known.unlisted
        ),
    )


def _count(lake, short: str) -> int:
    return procedures.count_rows(lake["spark"], lake["refs"][short])


def test_a_table_containing_another_is_never_cleaned_and_the_nested_table_stays_whole(lake):
    nested = _files(lake["tables"]["c"])
    outer = str(local_path(lake["tables"]["b"].metadata.location))
    assert nested and all(p.startswith(outer) for p in nested)
    outcome = _remove(lake, "b")
    assert not outcome.acted
    assert "never cleaned" in outcome.reason and f"{lake['refs']['c']}'s location" in outcome.reason
    assert outcome.scan.orphans_found == 3 and outcome.scan.refused
    assert _files(lake["tables"]["c"]) == nested  # every file of a.b.c, untouched
    assert all(Path(p).exists() for p in lake["planted"]["b"])
    assert _count(lake, "c") == 4 and _count(lake, "b") == 4


def test_a_plain_tables_old_orphans_are_removed_and_nothing_else(lake):
    table = lake["tables"]["d"]
    root = local_path(table.metadata.location)
    hidden = [root / "data" / "_SUCCESS", root / "data" / ".x"]
    for path in hidden:
        path.write_text("kept")
    before = _files(table)
    crc = [p for p in before if p.endswith(".crc")]
    assert crc  # Spark's Hadoop writer leaves a .crc beside each file
    outcome = _remove(lake, "d")
    assert outcome.acted and outcome.orphans_removed == 3
    assert sorted(outcome.removed_sample) == sorted(lake["planted"]["d"])
    assert outcome.scan.hidden_files == len(crc) + len(hidden)
    assert (outcome.referenced_files_verified or 0) >= 6
    assert set(_files(table)) == set(before) - set(lake["planted"]["d"])
    assert _count(lake, "d") == 4
    assert not _remove(lake, "d").acted  # nothing left to remove


def test_a_gc_disabled_table_is_never_cleaned(lake):
    before = _files(lake["tables"]["g"])
    outcome = _remove(lake, "g")
    assert not outcome.acted and "gc.enabled=false" in outcome.reason
    assert _files(lake["tables"]["g"]) == before


def test_a_referenced_file_missing_after_removal_fails_the_op(lake):
    name, spark = lake["refs"]["d"].catalog, lake["spark"]
    spark.sql(f"CREATE TABLE `{name}`.`a`.`v` (id bigint) USING iceberg")
    spark.sql(f"INSERT INTO `{name}`.`a`.`v` VALUES (1)")
    from icelake_assets.catalog.connection import TableRef
    from icelake_assets.demo.lake import plant_orphans

    ref = TableRef(name, ("a",), "v")
    lake["refs"]["v"] = ref
    table = lake["tables"]["v"] = lake["catalog"].load_table(ref.identifier)
    plant_orphans(table, 2, age_days=5)
    lost = table.inspect.files().column("file_path").to_pylist()[0]
    local_path(lost).unlink()  # what a wrong deletion would leave behind
    with pytest.raises(ReferencedFilesMissingError, match="do not exist after orphan removal"):
        _remove(lake, "v")


QUIET = {
    "small_files": {"max_files_per_partition": 1000},
    "manifests": {"max_count": 1000},
}  # only expiry acts


def _table(settings, commits: int):
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), Schema(NestedField(1, "id", LongType())))
    for i in range(commits):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    return table


def _run(settings):
    results = execute_maintenance(
        build_definitions(settings), DagsterInstance.ephemeral(), raise_on_error=True
    )
    events = [e for r in results for e in r.get_asset_materialization_events()]
    checks = {e.check_name: e for r in results for e in r.get_asset_check_evaluations()}
    return events[0].materialization.metadata, checks


def test_fresh_snapshots_over_the_count_are_kept_and_the_check_agrees(make_lake):
    settings = make_lake(
        {**QUIET, "snapshots": {"max_count": 20, "min_keep": 5}}
    )  # min_age_hours: default 24
    table = _table(settings, 30)
    md, checks = _run(settings)
    assert md["why/expire"].value.startswith("skipped: ")
    assert "none may go yet: 5 of the newest 5 kept, 25 younger than 24 h" in md["why/expire"].value
    table.refresh()
    assert len(table.metadata.snapshots) == 30
    assert (
        checks["snapshot_retention"].passed
        and "none may expire yet" in checks["snapshot_retention"].description
    )


def test_a_tagged_old_snapshot_survives_expiry(make_lake):
    settings = make_lake({**QUIET, "snapshots": {"max_count": 20, "min_keep": 5, "min_age_hours": 0}})
    table = _table(settings, 30)
    first = table.metadata.snapshots[0].snapshot_id
    table.manage_snapshots().create_tag(first, "audit-2026").commit()
    table.refresh()
    md, checks = _run(settings)
    assert md["why/expire"].value.startswith("acted: ")
    assert "24 older than 0 h beyond the newest 5 will go" in md["why/expire"].value
    assert md["snapshots/expired"].value == 24
    # What the decision counted is what the procedure removed (one manifest list per snapshot).
    assert md["snapshots/forecast"].value == 24
    assert md["snapshots/lists_deleted"].value == 24
    assert md["snapshots/mismatches"].value == 0
    table.refresh()
    kept = [s.snapshot_id for s in table.metadata.snapshots]
    assert len(kept) == 6 and first in kept and table.metadata.refs["audit-2026"].snapshot_id == first
    assert checks["snapshot_retention"].passed


def test_a_tag_created_between_decision_and_expiry_is_recorded_as_a_forecast_mismatch(make_lake, spark_for):
    """A writer tags an old snapshot after the decision was taken: Iceberg keeps it, and the outcome
    says the forecast and the procedure disagree instead of reporting the forecast as done."""
    settings = make_lake({**QUIET, "snapshots": {"max_count": 20, "min_keep": 5, "min_age_hours": 0}})
    table = _table(settings, 30)
    ref = TableRef(catalog_name(settings), ("ns",), "t")
    policy = policy_for(settings, ref, table.properties)
    first = table.metadata.snapshots[0].snapshot_id

    def stats_then_tag(t):
        stats = compute_table_stats(t, policy)
        t.manage_snapshots().create_tag(first, "late-tag").commit()
        return stats

    outcome = runner.expire_snapshots(lambda: spark_for(settings), ref, table, policy, stats_then_tag)
    res = outcome
    assert outcome.acted and res.snapshots_forecast == 25 and res.snapshots_expired == 24
    assert res.forecast_mismatches == 1 and res.forecast_not_expired == (first,)
    assert res.expired_not_forecast == () and res.deleted_manifest_lists_count == 24
    assert res.forecast_mismatch == (
        f"forecast 25 snapshots, Iceberg expired 24: 1 forecast that were kept (e.g. {first})"
    )
    assert "forecast mismatch: forecast 25 snapshots, Iceberg expired 24" in outcome.reason


SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "region", StringType()))
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))


def _append(table, regions, start):
    table.append(
        pa.table(
            {"id": pa.array(range(start, start + len(regions)), pa.int64()), "region": pa.array(regions)}
        )
    )


def test_a_whole_table_rewrite_takes_only_the_priced_partitions(make_lake, spark_for):
    settings = make_lake()
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "t"), SCHEMA, partition_spec=SPEC)
    everywhere = [f"r{i}" for i in range(6)]
    for i in range(6):  # 6 small files in every region: not a candidate (max 20), yet >= min-input-files 5
        _append(table, everywhere, i * 100)
    for i in range(19):  # r0 and r1 reach 25 files: the only candidates
        _append(table, ["r0", "r1"], 10_000 + i * 10)
    policy = Policy.model_validate({"small_files": {"max_files_per_partition": 20}})
    cache = ManifestCache()
    stats_fn = lambda t: compute_table_stats(t, policy, cache)  # noqa: E731
    before = stats_fn(table)
    assert before.compaction_candidates == ["region=r0", "region=r1"]

    ref = TableRef(catalog_name(settings), ("ns",), "t")
    outcome = rewrite.rewrite_data_files(lambda: spark_for(settings), ref, table, policy, stats_fn)
    assert outcome.acted
    assert outcome.rewritten_data_files_count == 50  # the 2 x 25 files priced, nothing else
    assert (outcome.rewritten_bytes_count or 0) <= outcome.estimated_rewrite_bytes
    assert outcome.signals["estimated_rewrite_bytes"] == sum(
        before.partitions[p].data_bytes for p in before.compaction_candidates
    )
    after = stats_fn(table)
    assert {p: after.partitions[p].data_files for p in after.partitions} == {
        "region=r0": 1,
        "region=r1": 1,
        **{f"region=r{i}": 6 for i in range(2, 6)},
    }
    assert outcome.where and "r0" in outcome.where and "r2" not in outcome.where


MOR = "'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', 'format-version'='2'"


@pytest.mark.parametrize("kind", ["position", "equality", "partitioned"])
def test_a_delete_applying_rewrite_leaves_no_delete_files(make_lake, spark_for, kind):
    """Merge-on-read deletes written by Spark (position) and by Iceberg's Java writer (equality, committed
    last, as a Flink upsert would), compacted through a Dagster run: Iceberg 1.10's rewrite alone keeps
    them (they match no row any more) and the delete_files check kept failing after a "successful" run."""
    from icelake_assets_tests.health.test_spark_truth import write_equality_deletes

    settings = make_lake()
    spark = spark_for(settings)
    ref = TableRef(catalog_name(settings), ("ns",), "t")
    open_catalog(settings, ref.catalog, create=True).create_namespace("ns")
    name = procedures.table_identifier(ref)
    part = "PARTITIONED BY (region)" if kind == "partitioned" else ""
    spark.sql(f"CREATE TABLE {name} (id INT, region STRING) USING iceberg {part} TBLPROPERTIES ({MOR})")
    for c in range(24):  # 24 small files per partition: over the test lake's 20
        spark.sql(f"INSERT INTO {name} VALUES " + ", ".join(f"({c * 6 + i}, 'r{i % 2}')" for i in range(6)))
    spark.sql(f"DELETE FROM {name} WHERE id % 3 = 0")
    if kind == "equality":
        write_equality_deletes(spark, ref, "id", [1, 10_000], {})  # one matches no row
    elif kind == "partitioned":
        for region, ids in (("r0", [2, 10_000]), ("r1", [1, 5])):
            write_equality_deletes(spark, ref, "id", ids, {"region": region})
    spark.sql(f"REFRESH TABLE {name}")
    live = procedures.count_rows(spark, ref)
    table = open_catalog(settings, ref.catalog).load_table(ref.identifier)
    before = compute_table_stats(table, policy_for(settings, ref, table.properties))
    assert before.position_delete_files and bool(before.equality_delete_files) == (kind != "position")

    md, checks = _run(settings)

    assert md["why/rewrite"].value.startswith("acted: ")
    table.refresh()
    after = compute_table_stats(table, policy_for(settings, ref, table.properties))
    assert (after.position_delete_files, after.equality_delete_files) == (0, 0)
    assert checks["delete_files"].passed, checks["delete_files"].description
    assert md["effect/rewrite"].value.startswith("effective"), md["effect/rewrite"].value
    assert procedures.count_rows(spark, ref) == live
    assert int(table.current_snapshot().summary["total-records"]) == live  # the deletes were applied
    assert md["rows/before"].value == md["rows/after"].value == live
