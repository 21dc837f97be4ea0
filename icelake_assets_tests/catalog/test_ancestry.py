"""The one walk up a snapshot's parents, on a real pyiceberg table (SQLite catalog, no Spark)."""

import pyarrow as pa
from pyiceberg.catalog.sql import SqlCatalog

from icelake_assets.catalog.ancestry import ancestors, reaches


def test_ancestors_walk_newest_first_and_stop_before_the_snapshot_named(tmp_path):
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/c.db", warehouse=f"file://{tmp_path}/w")
    catalog.create_namespace("ns")
    table = catalog.create_table("ns.t", schema=pa.schema([("id", pa.int64())]))
    for i in range(4):
        table.append(pa.table({"id": [i]}))
    ids = [s.snapshot_id for s in table.metadata.snapshots]  # oldest first
    assert [s.snapshot_id for s in ancestors(table)] == ids[::-1]
    assert [s.snapshot_id for s in ancestors(table, until=ids[1])] == [ids[3], ids[2]]
    assert [s.snapshot_id for s in ancestors(table, ids[2])] == [ids[2], ids[1], ids[0]]
    assert reaches(table, ids[0]) and reaches(table, None) and not reaches(table, 12345)
    table.manage_snapshots().create_branch(ids[1], "side").commit()
    assert list(ancestors(table, until=ids[3])) == []
