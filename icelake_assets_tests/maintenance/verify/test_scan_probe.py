"""The proof of benefit's probe (maintenance/verify/scan_probe.py): a full scan, or the query a table's
policy names, timed on the snapshots before and after a run, in real Spark."""

import pyarrow as pa
import pytest
from pydantic import ValidationError
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.maintenance.verify.scan_probe import probe_scan
from icelake_assets.settings.policy_schema import LoopPolicy


@pytest.mark.parametrize(
    "query, said",
    [
        ("DELETE FROM {table}", "must be a SELECT"),
        ("SELECT 1 FROM {table}; DROP TABLE x", "one statement"),
        ("SELECT count(*) FROM t", "exactly once as {table}"),
        ("SELECT * FROM {table} JOIN {table}", "exactly once as {table}"),
        ("SELECT '{other}' FROM {table}", "no other {...}"),
    ],
)
def test_a_probe_query_is_one_select_naming_the_table_once(query, said):
    with pytest.raises(
        ValidationError, match=said.replace("{", r"\{").replace("}", r"\}").replace(".", r"\.")
    ):
        LoopPolicy(scan_probe_query=query)
    assert LoopPolicy(scan_probe_query=" SELECT count(*) FROM {table} WHERE id < 3 ").scan_probe_query == (
        "SELECT count(*) FROM {table} WHERE id < 3"
    )


@pytest.mark.integration
def test_the_policys_query_is_timed_on_both_snapshots_of_a_table_whose_name_needs_quoting(
    make_lake, spark_for
):
    settings = make_lake()
    name = next(iter(settings.catalogs))
    cat = open_catalog(settings, name, create=True)
    cat.create_namespace("odd ns")
    table = cat.create_table(("odd ns", "it's"), Schema(NestedField(1, "id", LongType())))
    table.append(pa.table({"id": pa.array([1, 2], pa.int64())}))
    first = table.current_snapshot().snapshot_id
    table.append(pa.table({"id": pa.array([3, 4], pa.int64())}))
    last = table.current_snapshot().snapshot_id
    ref = TableRef(name, ("odd ns",), "it's")
    spark = spark_for(settings)
    probe = probe_scan(spark, ref, first, last, "SELECT count(*) AS n FROM {table} WHERE id > 1")
    assert probe.query is not None and probe.before_seconds > 0 and probe.after_seconds > 0
    assert probe_scan(spark, ref, first, last).query is None  # the default: a full scan
