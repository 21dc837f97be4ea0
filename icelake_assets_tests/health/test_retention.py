"""The expiry forecast mirrors Iceberg's expire_snapshots: pure cases, then the same forecast checked
against what Iceberg's procedure really removes on a table with a branch and a tag (real Spark)."""

from datetime import UTC, datetime

from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.health.retention import (
    RefPoint,
    SnapshotPoint,
    cutoff_age_hours,
    forecast,
    snapshot_points,
)
from icelake_assets.maintenance.spark import procedures
from icelake_assets.settings import Policy, SnapshotPolicy
from icelake_assets_tests.conftest import catalog_name

NOW = 1_800_000_000_000.0  # ms
H = 3_600_000


def chain(ages_hours: list[float]) -> tuple[SnapshotPoint, ...]:
    """Snapshots 1..n on one line, oldest first, with the given ages."""
    return tuple(SnapshotPoint(i + 1, i or None, int(NOW - age * H)) for i, age in enumerate(ages_hours))


def test_only_snapshots_older_than_the_cutoff_and_beyond_the_newest_go():
    snaps = chain([50, 40, 30, 20, 10, 1])
    main = (RefPoint("main", True, 6),)
    fc = forecast(snaps, main, cutoff_hours=24, min_keep=2, now_ms=NOW)
    assert fc.expire == {1, 2, 3} and (fc.kept_newest, fc.kept_young, fc.kept_by_ref) == (2, 1, 0)
    # min_keep wins over age: keeping 5, only the oldest may go.
    assert forecast(snaps, main, cutoff_hours=24, min_keep=5, now_ms=NOW).expire == {1}
    # Iceberg stops at the first ancestor it may expire: an older but "younger" clock skew goes too.
    skewed = chain([50, 1, 30, 1, 1])
    assert forecast(skewed, (RefPoint("main", True, 5),), 24, 2, NOW).expire == {1, 2, 3}


def test_tags_and_branches_keep_their_snapshots_and_unreferenced_ones_follow_the_age():
    snaps = chain([50, 40, 30, 20, 1]) + (
        SnapshotPoint(9, 2, int(NOW - 45 * H)),  # an old side branch head
        SnapshotPoint(10, 3, int(NOW - 60 * H)),
    )  # rolled back, unreferenced
    refs = (RefPoint("main", True, 5), RefPoint("audit", False, 2), RefPoint("side", True, 9))
    fc = forecast(snaps, refs, cutoff_hours=24, min_keep=1, now_ms=NOW)
    # kept: main's head 5 and 4 (20 h); tag on 2; branch head 9 (its old ancestor 1 goes). Gone: 1, 3, 10.
    assert fc.expire == {1, 3, 10} and fc.kept_by_ref == 2
    # A tag past its own max-ref-age is dropped by Iceberg, and its snapshot with it.
    aged_tag = (RefPoint("main", True, 5), RefPoint("audit", False, 2, max_ref_age_ms=10 * H))
    assert 2 in forecast(snaps, aged_tag, 24, 1, NOW).expire


def test_over_the_count_the_cutoff_is_the_minimum_age_not_now():
    policy = Policy(snapshots=SnapshotPolicy(max_count=100, max_age_hours=120, min_keep=5, min_age_hours=24))
    assert cutoff_age_hours(101, policy) == 24 and cutoff_age_hours(100, policy) == 120
    snaps = chain([1.0] * 300)  # the demo: 300 snapshots written in the last hour
    assert forecast(snaps, (RefPoint("main", True, 300),), cutoff_age_hours(300, policy), 5, NOW).count == 0
    # An operator's max age under the minimum age does not undercut it.
    tight = Policy(snapshots=SnapshotPolicy(max_age_hours=2, min_age_hours=24))
    assert cutoff_age_hours(3, tight) == 24


def test_the_forecast_matches_what_icebergs_expire_snapshots_removes(make_lake, spark_for):
    settings = make_lake()
    spark = spark_for(settings)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "refs"), Schema(NestedField(1, "id", LongType())))
    import pyarrow as pa

    for i in range(8):
        table.append(pa.table({"id": pa.array([i], pa.int64())}))
    ids = [s.snapshot_id for s in table.metadata.snapshots]
    ref = TableRef(catalog_name(settings), ("ns",), "refs")
    spark.sql(f"ALTER TABLE {procedures.table_identifier(ref)} CREATE TAG `audit` AS OF VERSION {ids[1]}")
    spark.sql(f"ALTER TABLE {procedures.table_identifier(ref)} CREATE BRANCH `side` AS OF VERSION {ids[3]}")
    table.refresh()
    snaps, refs, max_ref_age = snapshot_points(table)
    now = datetime.now(UTC)
    fc = forecast(
        snaps,
        refs,
        cutoff_hours=0,
        min_keep=2,
        now_ms=now.timestamp() * 1000,
        default_max_ref_age_ms=max_ref_age,
    )
    # The tag's snapshot and the branch's stay, with the side branch's own newest 2 (ids[3], ids[2]).
    assert fc.expire == {ids[0], ids[4], ids[5]}
    procedures.expire_snapshots(spark, ref, now, retain_last=2)
    table.refresh()
    assert {s.snapshot_id for s in table.metadata.snapshots} == set(ids) - fc.expire
    assert table.metadata.refs["audit"].snapshot_id == ids[1]
