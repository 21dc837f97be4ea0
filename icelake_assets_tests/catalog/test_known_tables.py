"""Known tables: every table of every configured catalog; a table or catalog that cannot be read is
listed apart with its cause and where it may live (never silently left out)."""

from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.known_tables import default_locations, known_tables
from icelake_assets_tests.conftest import catalog_name

SCHEMA = Schema(NestedField(1, "id", LongType()))


def test_every_table_of_every_catalog_is_known_even_excluded_ones(make_lake):
    settings = make_lake(extra={"tables": {"exclude": ["ns.hidden*"]}})
    name = catalog_name(settings)
    cat = open_catalog(settings, name, create=True)
    cat.create_namespace("ns")
    cat.create_namespace(("ns", "deep"))
    cat.create_table(("ns", "t"), SCHEMA)
    cat.create_table(("ns", "hidden_t"), SCHEMA, properties={"write.data.path": "file:///elsewhere/data"})
    cat.create_table(("ns", "deep", "t"), SCHEMA)
    listing = known_tables(settings, lambda n: cat)
    assert listing.complete
    known = {k.name: k for k in listing.tables}
    assert set(known) == {f"{name}.ns.t", f"{name}.ns.hidden_t", f"{name}.ns.deep.t"}
    assert known[f"{name}.ns.hidden_t"].write_paths["write.data.path"] == "file:///elsewhere/data"
    assert known[f"{name}.ns.t"].location == cat.load_table(("ns", "t")).metadata.location
    # Unchanged metadata is not read again: a second listing loads no table.
    loads = []
    original = cat.load_table
    cat.load_table = lambda ident: loads.append(ident) or original(ident)
    assert {k.name for k in known_tables(settings, lambda n: cat).tables} == set(known) and loads == []


def test_a_catalog_that_cannot_be_listed_is_unlisted_with_its_cause_and_warehouse(make_lake):
    settings = make_lake()

    def down(name):
        raise OSError("connection refused")

    listing = known_tables(settings, down)
    assert listing.tables == () and not listing.complete
    (unlisted,) = listing.unlisted
    assert unlisted.name == f"catalog {catalog_name(settings)}" and "connection refused" in unlisted.cause
    assert unlisted.hints == (settings.catalogs[catalog_name(settings)]["warehouse"],)


def test_a_truncated_metadata_file_is_that_tables_fault_only(make_lake):
    settings = make_lake()
    name = catalog_name(settings)
    cat = open_catalog(settings, name, create=True)
    cat.create_namespace("ns")
    cat.create_table(("ns", "ok"), SCHEMA)
    broken = cat.create_table(("ns", "broken"), SCHEMA)
    path = broken.metadata_location.removeprefix("file://")
    with open(path, "r+b") as f:
        f.truncate(30)
    listing = known_tables(settings, lambda n: cat)
    assert [k.name for k in listing.tables] == [f"{name}.ns.ok"]
    (unlisted,) = listing.unlisted
    assert unlisted.name == f"{name}.ns.broken" and unlisted.cause
    assert unlisted.hints[0].rstrip("/").endswith("broken")  # the folder above its metadata folder


def test_default_locations_cover_pyiceberg_and_iceberg_java_layouts(make_lake):
    settings = make_lake()
    name = catalog_name(settings)
    cat = open_catalog(settings, name, create=True)
    cat.create_namespace(("a", "b"))
    wh = cat.properties["warehouse"].rstrip("/")
    assert default_locations(cat, TableRef(name, ("a", "b"), "t")) == [
        f"{wh}/a.b/t",
        f"{wh}/a.b.db/t",
        f"{wh}/a/b/t",
    ]
    cat.create_namespace("n", {"location": "file:///custom/n/"})
    assert default_locations(cat, TableRef(name, ("n",), "t"))[0] == "file:///custom/n/t"
