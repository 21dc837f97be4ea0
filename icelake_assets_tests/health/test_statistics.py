"""A table's statistics facts from its metadata (pyiceberg, a real SQLite catalog): which statistics
file serves the current snapshot, how far back, on how many rows, which columns it sketches."""

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table.sorting import SortField, SortOrder
from pyiceberg.table.statistics import BlobMetadata, StatisticsFile
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import ListType, LongType, NestedField, StringType

from icelake_assets.catalog.connection import open_catalog
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.statistics import NDV_BLOB, statistics_facts
from icelake_assets.health.stats import compute_table_stats
from icelake_assets_tests.conftest import catalog_name

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "region", StringType()),
    NestedField(3, "user_id", LongType()),
    NestedField(4, "tags", ListType(5, StringType())),  # not primitive: never sketched
)


def _batch(first: int, rows: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(first, first + rows), pa.int64()),
            "region": pa.array(["eu", "us"] * (rows // 2)),
            "user_id": pa.array([i % 7 for i in range(rows)], pa.int64()),
            "tags": pa.array([["a"]] * rows, pa.list_(pa.string())),
        },
        schema=SCHEMA.as_arrow(),
    )


def _stats_file(snapshot_id: int, sequence_number: int, fields_ndv: dict[int, int]) -> StatisticsFile:
    return StatisticsFile(
        snapshot_id=snapshot_id,
        statistics_path=f"file:/nowhere/{snapshot_id}.stats",
        file_size_in_bytes=100,
        file_footer_size_in_bytes=10,
        blob_metadata=[
            BlobMetadata(
                type=NDV_BLOB,
                snapshot_id=snapshot_id,
                sequence_number=sequence_number,
                fields=[field],
                properties={"ndv": str(ndv)},
            )
            for field, ndv in fields_ndv.items()
        ],
    )


def test_the_newest_statistics_among_the_ancestors_serve_the_current_snapshot(make_lake):
    settings = make_lake()
    catalog = open_catalog(settings, catalog_name(settings), create=True)
    catalog.create_namespace("ns")
    spec = PartitionSpec(
        PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
    )
    order = SortOrder(SortField(source_id=3, transform=IdentityTransform()))
    table = catalog.create_table(("ns", "t"), SCHEMA, partition_spec=spec, sort_order=order)
    empty = statistics_facts(table)
    assert empty.columns == ((1, "id"), (2, "region"), (3, "user_id"))
    assert empty.key_columns == ("user_id", "region") and empty.partitioned
    assert empty.snapshot_id is None and empty.current_rows is None and not empty.current

    for i in range(3):
        table.append(_batch(i * 10, 10))
    first, second, third = table.metadata.snapshots
    table.update_statistics().set_statistics(_stats_file(first.snapshot_id, 1, {1: 9})).commit()
    table.update_statistics().set_statistics(_stats_file(second.snapshot_id, 2, {1: 20, 3: 7})).commit()
    facts = statistics_facts(table)
    assert (facts.snapshot_id, facts.commits_behind, facts.rows_at, facts.current_rows) == (
        second.snapshot_id,
        1,
        20,
        30,
    )
    assert (
        facts.ndv == {1: 20, 3: 7} and facts.files == 2 and facts.path.endswith(f"{second.snapshot_id}.stats")
    )
    assert not facts.current and facts.partition_snapshot_id is None

    # Statistics live in the table metadata, not the manifests: a cached evaluation still sees new ones.
    cache = ManifestCache()
    assert not compute_table_stats(table, settings.thresholds, cache).statistics.current
    table.update_statistics().set_statistics(_stats_file(third.snapshot_id, 3, {1: 30})).commit()
    now = compute_table_stats(table, settings.thresholds, cache)
    assert now.statistics.current and now.statistics.ndv == {1: 30} and now.manifests_read == 0
