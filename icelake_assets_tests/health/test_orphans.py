"""Orphan detection: everything referenced by any snapshot is kept; planted files are found; nothing is deleted."""

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.io.pyarrow import PyArrowFileIO
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.transforms import IdentityTransform

from icelake_assets.catalog.connection import table_ref
from icelake_assets.demo.lake import local_path, plant_orphans
from icelake_assets.health import neighbours
from icelake_assets.health.findings import Severity
from icelake_assets.health.orphans import (
    KnownTable,
    KnownTables,
    PathMismatchError,
    ReferencedFilesMissingError,
    file_key,
    find_orphans,
    referenced_files,
    scan_orphans,
    scan_table_orphans,
    verify_referenced_files,
)
from icelake_assets.health.storage import normalized_path
from icelake_assets.planning.orphans import orphan_finding
from icelake_assets.settings import Policy
from icelake_assets_tests.health.conftest import SCHEMA, batch, data_dir, files_on_disk


def test_referenced_files_cover_every_snapshot_and_metadata_file(new_table):
    table = new_table()
    table.append(batch(range(20), [i % 2 for i in range(20)]))
    table.delete("id < 5")  # rewrites files: the old ones stay referenced by the first snapshot
    table.append(batch(range(20, 30), 3))
    refs = referenced_files(table)
    every_snapshot = {normalized_path(p) for p in table.inspect.all_files().column("file_path").to_pylist()}
    assert every_snapshot <= refs
    assert {
        normalized_path(p) for p in files_on_disk(table)
    } <= refs  # no data file of this table is an orphan
    assert normalized_path(table.metadata_location) in refs
    assert all(normalized_path(s.manifest_list) in refs for s in table.metadata.snapshots)


def test_only_old_unreferenced_files_are_orphans_and_nothing_is_deleted(new_table):
    table = new_table()
    table.append(batch(range(10), 0))
    planted = plant_orphans(table, 3, age_days=5)
    young = plant_orphans(table, 1, age_days=0)
    orphans = find_orphans(table, older_than_hours=72)
    assert sorted(o.path for o in orphans) == sorted(planted)
    assert all(o.age_hours > 72 and o.size > 0 for o in orphans)
    assert all(Path(p).exists() for p in planted + young)
    finding = orphan_finding(len(orphans), sum(o.size for o in orphans), Policy(), [o.path for o in orphans])
    assert finding.severity is Severity.WARN and len(finding.rows) == 3


# -- safety rules (issue 10, item 1) ----------------------------------------------------------------


def _old_file(path: Path, days: float = 5) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * 10)
    t = time.time() - days * 86_400
    os.utime(path, (t, t))
    return str(path)


def test_locations_are_compared_as_iceberg_compares_them():
    assert (
        file_key("file:/w/t/a.parquet")
        == file_key("file:///w/t//a.parquet")
        == file_key("file:/w/t/a.parquet/")
    )
    assert file_key("/w/t/a.parquet").same_place(file_key("file:///w/t/a.parquet"))
    assert file_key("s3a://b/k/x") == file_key("s3n://b/k/x") == file_key("s3://b//k/x")
    assert not file_key("s3://other/k/x").same_place(file_key("s3://b/k/x"))  # another authority
    assert not file_key("gs://b/k/x").same_place(file_key("s3://b/k/x"))  # another scheme
    assert file_key("s3://b/k/x/y").under(file_key("s3a://b/k/x"))
    assert not file_key("s3://b/k/xy").under(file_key("s3://b/k/x"))  # whole path components only


def test_hidden_files_and_folders_are_not_orphans_but_hidden_partitions_are_listed(new_table):
    spec = PartitionSpec(
        PartitionField(source_id=1, field_id=1000, transform=IdentityTransform(), name="_id")
    )
    table = new_table(spec=spec)
    table.append(batch(range(3), 0))
    root = data_dir(table)
    hidden = [
        _old_file(root / "_SUCCESS"),
        _old_file(root / ".part-0.parquet.crc"),
        _old_file(root / ".x"),
        _old_file(root / "_temporary" / "0" / "part-1.parquet"),
        _old_file(local_path(table.metadata.location) / "metadata" / ".v1.metadata.json.crc"),
    ]
    real = [_old_file(root / "_id=7" / "lost.parquet"), _old_file(root / "lost.parquet")]
    # a "_id=" partition folder is not hidden: its files are listed
    assert sorted(o.path for o in find_orphans(table, older_than_hours=72)) == sorted(real)
    scan = scan_orphans(table, "t", older_than_hours=72)
    assert scan.hidden_files == len(hidden) and scan.refused is None


def test_a_referenced_file_seen_under_another_scheme_or_authority_is_an_error(new_table, monkeypatch):
    import icelake_assets.health.orphans as orphans

    table = new_table()
    table.append(batch(range(3), 0))
    planted = plant_orphans(table, 2, age_days=5)
    real = orphans.referenced_locations(table)
    # A metadata file written with an s3:// location for what storage lists as a local file: S3 cannot
    # run here, so the reference is rewritten the way such a table's metadata would read.
    monkeypatch.setattr(
        orphans, "referenced_locations", lambda t: real | {"s3://bucket" + local_path(planted[0]).as_posix()}
    )
    with pytest.raises(PathMismatchError, match="scheme or authority"):
        scan_orphans(table, "t", older_than_hours=72)
    # file:/x//y names the listed file:///x/y: the same file, neither an orphan nor an error
    monkeypatch.setattr(
        orphans, "referenced_locations", lambda t: real | {"file:" + planted[0].replace("/data/", "/data//")}
    )
    assert [o.path for o in scan_orphans(table, "t", older_than_hours=72).orphans] == [planted[1]]


def test_gc_disabled_tables_are_never_cleaned(new_table):
    table = new_table(properties={"gc.enabled": "false"})
    table.append(batch(range(3), 0))
    plant_orphans(table, 3, age_days=5)
    scan = scan_orphans(table, "t", older_than_hours=72)
    assert len(scan.orphans) == 3 and scan.removable == [] and "gc.enabled=false" in scan.refused


def test_other_tables_paths_are_skipped_and_a_table_containing_another_is_refused(new_table):
    table = new_table()
    table.append(batch(range(3), 0))
    loc = table.metadata.location.rstrip("/")
    mine = plant_orphans(table, 1, age_days=5)
    theirs = _old_file(local_path(loc) / "ext" / "their-data.parquet")
    writer = KnownTable("cat.x.writer", "file:///elsewhere/writer", {"write.data.path": f"{loc}/ext"})
    scan = scan_orphans(table, "me", older_than_hours=72, others=[writer])
    assert [o.path for o in scan.orphans] == mine and scan.refused is None
    assert scan.skipped == {"under cat.x.writer's write.data.path": 1} and scan.skipped_sample[0][0] == theirs
    nested = KnownTable("cat.x.nested", f"{loc}/nested")
    assert "contains cat.x.nested's location" in scan_orphans(table, "me", 72, others=[nested]).refused
    twin = KnownTable("cat.x.twin", loc + "/")
    assert "also the location of cat.x.twin" in scan_orphans(table, "me", 72, others=[twin]).refused
    container = KnownTable("cat.x.container", loc.rsplit("/", 1)[0], {"write.metadata.path": loc})
    assert "write.metadata.path" in scan_orphans(table, "me", 72, others=[container]).refused
    assert scan_orphans(table, "me", 72, others=[KnownTable("me", loc)]).refused is None  # itself


def test_the_scans_against_one_listing_share_the_index_it_carries(new_table, catalog, monkeypatch):
    tables = [new_table() for _ in range(3)]
    for table in tables:
        table.append(batch(range(3), 0))
    loc = tables[0].metadata.location.rstrip("/")
    writer = KnownTable("cat.x.writer", "file:///elsewhere/writer", {"write.data.path": f"{loc}/ext"})
    built = []
    real = neighbours.Neighbours.__init__
    monkeypatch.setattr(
        neighbours.Neighbours, "__init__", lambda self, ts: built.append(len(ts)) or real(self, ts)
    )
    listing = neighbours.IndexedTables.of(KnownTables((writer,)))  # as the resource and the CLI list the lake
    scans = [scan_table_orphans(catalog, table_ref(t), t, 72, listing) for t in tables]
    assert built == [1]  # one index for the listing, whatever the number of tables scanned against it
    theirs = _old_file(local_path(loc) / "ext" / "their-data.parquet")
    assert (
        scan_table_orphans(catalog, table_ref(tables[0]), tables[0], 72, listing).skipped_sample[0][0]
        == theirs
    )
    assert all(s.refused is None for s in scans)
    # A listing that carries no index (catalog/known_tables.py's) gets one for its scan.
    scan_table_orphans(catalog, table_ref(tables[1]), tables[1], 72, KnownTables((writer,)))
    assert built == [1, 1]


def test_a_location_outside_the_catalog_default_or_files_outside_it_are_refused(new_table, tmp_path):
    table = new_table()
    table.append(batch(range(3), 0))
    loc = table.metadata.location
    assert scan_orphans(table, "t", 72, default_locations=[loc.rsplit("/", 1)[0] + "/"]).refused is None
    refused = scan_orphans(table, "t", 72, default_locations=[str(tmp_path / "somewhere")]).refused
    assert "is not where its catalog puts t" in refused
    # Iceberg's snapshot procedure / add_files: data files of another table's folder
    outside = tmp_path / "source" / "part-0.parquet"
    outside.parent.mkdir()
    pq.write_table(batch(range(3, 6), 0), outside)
    table.add_files([str(outside)])
    assert "referenced files lie outside its location" in scan_orphans(table, "t", 72).refused


def test_verification_fails_loudly_when_a_referenced_file_is_missing(new_table):
    table = new_table()
    table.append(batch(range(3), 0))
    table.append(batch(range(3, 6), 1))
    assert verify_referenced_files(table) >= 6
    data_file = table.inspect.files().column("file_path").to_pylist()[0]
    local_path(data_file).unlink()
    with pytest.raises(ReferencedFilesMissingError, match="do not exist after orphan removal") as err:
        verify_referenced_files(table)
    assert local_path(data_file).name in str(err.value)


class RootedFileIO(PyArrowFileIO):
    """A FileIO whose storage is set by catalog properties (like an object store's endpoint): every
    location is read and written under ``rooted.root``. The default filesystem does not see it."""

    def _initialize_fs(self, scheme: str, netloc: str | None = None):
        from pyarrow import fs as pafs

        return pafs.SubTreeFileSystem(self.properties["rooted.root"], pafs.LocalFileSystem())


def test_the_listing_uses_the_catalogs_own_file_io_properties(tmp_path):
    root = tmp_path / "store"
    for folder in ("metadata", "data"):  # a SubTreeFileSystem creates no parent folders
        (root / "warehouse" / "ns" / "t" / folder).mkdir(parents=True)
    catalog = SqlCatalog(
        "rooted",
        uri=f"sqlite:///{tmp_path / 'catalog.db'}",
        warehouse="file:///warehouse",
        **{"py-io-impl": f"{__name__}.RootedFileIO", "rooted.root": str(root)},
    )
    catalog.create_namespace("ns")
    table = catalog.create_table(("ns", "t"), schema=SCHEMA)
    table.append(batch(range(3), 0))
    assert not Path("/warehouse").exists() and any((root / "warehouse" / "ns" / "t" / "data").iterdir())
    orphan = root / "warehouse" / "ns" / "t" / "data" / "lost.parquet"
    _old_file(orphan)
    assert [o.path for o in find_orphans(table, older_than_hours=72)] == ["/warehouse/ns/t/data/lost.parquet"]
    assert verify_referenced_files(table) > 0
