"""The rewrite op on real Spark: the cost guard prices what Iceberg actually rewrites (issue 10.5)."""

import pyarrow as pa
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance import runner
from icelake_assets.settings import Policy
from icelake_assets_tests.conftest import catalog_name

SCHEMA = Schema(NestedField(1, "id", LongType()), NestedField(2, "region", StringType()))
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region"))


def _append(table, regions, start):
    table.append(pa.table({"id": pa.array(range(start, start + len(regions)), pa.int64()),
                           "region": pa.array(regions)}))


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
    outcome = runner.rewrite_data_files(lambda: spark_for(settings), ref, table, policy, stats_fn)
    assert outcome.acted
    res = outcome.result
    assert res["rewritten_data_files_count"] == 50  # the 2 x 25 files priced, nothing else
    assert res["rewritten_bytes_count"] <= outcome.signals["estimated_rewrite_bytes"]
    assert outcome.signals["estimated_rewrite_bytes"] == sum(before.partitions[p].data_bytes
                                                             for p in before.compaction_candidates)
    after = stats_fn(table)
    assert {p: after.partitions[p].data_files for p in after.partitions} == {
        "region=r0": 1, "region=r1": 1, **{f"region=r{i}": 6 for i in range(2, 6)}}
    assert "r0" in res["where"] and "r2" not in res["where"]
