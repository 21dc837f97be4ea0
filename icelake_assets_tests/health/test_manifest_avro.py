"""Manifest lists read through the shared reader (health/manifest_avro.py) are what pyiceberg's own
reader returns, for tables of format v1 and v2, partitioned, after appends and a delete."""

import pytest
from pyiceberg.manifest import read_manifest_list as pyiceberg_read_manifest_list

from icelake_assets.health.manifest_avro import read_manifest_list
from icelake_assets_tests.health.conftest import batch


@pytest.mark.parametrize("version", ["1", "2"])
def test_a_manifest_list_reads_as_pyiceberg_reads_it(new_table, version):
    table = new_table(properties={"format-version": version})
    for c in range(3):
        table.append(batch(range(c * 10, c * 10 + 10), [i % 3 for i in range(10)]))
    table.delete(delete_filter="id < 5")
    snapshots = table.metadata.snapshots
    assert len(snapshots) >= 4
    for snapshot in snapshots:
        ours = read_manifest_list(table.io, snapshot.manifest_list)
        theirs = list(pyiceberg_read_manifest_list(table.io.new_input(snapshot.manifest_list)))
        assert ours == theirs and ours
        # Every field, partition summaries included (equality of pyiceberg's records compares them).
        assert [m.partitions for m in ours] == [m.partitions for m in theirs]
