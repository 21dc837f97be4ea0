"""The index of the lake's locations (health/neighbours.py): for any location, every table whose
location or write path lies inside it or contains it (what the orphan scan's rules look at), found
without comparing it with every other table, built once per listing and carried by it (no memo of
the module's); the rules themselves are tested in test_orphans.py."""

from icelake_assets.health import neighbours
from icelake_assets.health.neighbours import IndexedTables, Neighbours
from icelake_assets.health.storage import file_key
from icelake_assets.types import KnownTable, KnownTables, UnlistedTable

LAKE = (
    KnownTable("a", "file:///lake/wh/ns/a"),
    KnownTable("nested", "file:///lake/wh/ns/a/nested"),
    KnownTable("sibling", "file:///lake/wh/ns/ab"),  # a string prefix of a's, not a folder of it
    KnownTable("writer", "file:///elsewhere/w", {"write.data.path": "file:///lake/wh/ns/a/ext"}),
    KnownTable("container", "file:///lake/wh", {"write.metadata.path": "/lake/wh/ns/a"}),
    KnownTable("bucket", "s3://bucket"),
    KnownTable("far", "s3://bucket/x/y"),
    KnownTable("trailing", "/lake/wh/ns/c/"),
    *(KnownTable(f"t{i}", f"file:///lake/wh/many/t{i}") for i in range(2000)),
)


def _claims(table: KnownTable):
    return [file_key(p) for p in (table.location, *table.write_paths.values())]


def _by_comparing_all(location):
    return [t.name for t in LAKE if any(c.under(location) or location.under(c) for c in _claims(t))]


def test_near_finds_every_table_inside_or_around_a_location_in_the_listings_order():
    index = Neighbours(LAKE)
    for table in LAKE[:8] + LAKE[-3:]:
        location = file_key(table.location)
        near = [t.name for t in index.near(location)]
        expected = _by_comparing_all(location)
        assert set(expected) <= set(near), table.name
        assert near == [t.name for t in LAKE if t.name in set(near)]  # the listing's order
        # Never the whole lake, but for the tables that contain it (by path: the bucket's is "").
        assert len(near) <= 8 or table.name in ("container", "bucket"), (table.name, near)
    a = [t.name for t in index.near(file_key("file:///lake/wh/ns/a"))]
    assert {"a", "nested", "writer", "container"} <= set(a)
    assert "far" not in a and "t7" not in a and "sibling" not in a
    assert [t.name for t in index.near(file_key("file:///lake/wh/many/t7"))] == ["container", "bucket", "t7"]


def test_a_listing_carries_its_index_built_once_and_the_module_keeps_none():
    listing = IndexedTables(LAKE, (UnlistedTable("cat.x.broken", "unreadable"),))
    assert listing.neighbours is listing.neighbours  # built on first use, kept by the listing
    assert IndexedTables.of(listing) is listing  # already indexed: the same listing, the same index
    plain = KnownTables(LAKE[:3], listing.unlisted)  # as catalog/known_tables.py lists the lake
    indexed = IndexedTables.of(plain)
    assert (indexed.tables, indexed.unlisted, indexed.complete) == (plain.tables, plain.unlisted, False)
    assert indexed.neighbours is not listing.neighbours and indexed.neighbours.tables == LAKE[:3]
    assert [t.name for t in indexed.neighbours.near(file_key("/lake/wh/ns/a"))] == ["a", "nested"]
    # No index outlives its listing in the module (it used to keep the last one, keyed by identity).
    assert not [v for v in vars(neighbours).values() if isinstance(v, Neighbours)]
    assert not hasattr(neighbours, "neighbours_of")
