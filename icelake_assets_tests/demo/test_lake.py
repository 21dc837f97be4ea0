"""The demo lake is degraded exactly as built: file, row, snapshot and orphan counts known by construction."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.demo import lake
from icelake_assets.demo.__main__ import main
from icelake_assets.demo.lake import (
    SCALES,
    DemoScale,
    add_snapshots,
    age_all_files,
    build_demo_lake,
    degrade_trips,
    list_orphans,
    plant_orphans,
)
from icelake_assets.health.orphans import referenced_files
from icelake_assets.settings import Settings, default_settings

TEST = SCALES["test"]
TINY = DemoScale(days=2, commits=3, rows_per_commit=10, click_snapshots=4, orphan_files=2)
DAY = 86_400


def _tables(settings: Settings, refs: list[TableRef]) -> dict[str, Table]:
    catalog = open_catalog(settings, "demo")
    return {f"{r.namespace_name}.{r.name}": catalog.load_table(r.identifier) for r in refs}


def _age_days(path: str | Path) -> float:
    return (time.time() - os.stat(path).st_mtime) / DAY


@pytest.fixture(scope="module")
def test_lake(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Table]:
    settings = default_settings(tmp_path_factory.mktemp("lake"))
    return _tables(settings, build_demo_lake(settings, scale="test"))


def test_build_returns_the_three_demo_tables(test_lake: dict[str, Table]) -> None:
    assert sorted(test_lake) == ["events.clicks", "sales.orders", "taxi.trips"]


def test_trips_has_one_small_file_per_day_per_commit(test_lake: dict[str, Table]) -> None:
    trips = test_lake["taxi.trips"]
    files = trips.inspect.files()
    assert files.num_rows == TEST.days * TEST.commits == TEST.trip_files
    assert len(trips.snapshots()) == TEST.commits
    # Every day partition got one file from every commit: the small-files shape compaction targets.
    days = files.column("partition").combine_chunks().field("pickup_at_day").to_pylist()
    assert {d: days.count(d) for d in set(days)} == {d: TEST.commits for d in set(days)}
    assert len(set(days)) == TEST.days
    assert sum(files.column("record_count").to_pylist()) == TEST.trip_rows
    rows = trips.scan().to_arrow()
    assert rows.num_rows == TEST.commits * TEST.rows_per_commit
    assert len(set(rows.column("trip_id").to_pylist())) == rows.num_rows
    assert str(rows.schema.field("pickup_at").type) == "timestamp[us]"


def test_trips_is_partitioned_by_day_with_default_target_size(test_lake: dict[str, Table]) -> None:
    trips = test_lake["taxi.trips"]
    (field,) = trips.spec().fields
    assert isinstance(field.transform, DayTransform)
    assert trips.schema().find_column_name(field.source_id) == "pickup_at"
    assert "write.target-file-size-bytes" not in trips.properties


def test_clicks_has_one_snapshot_per_tiny_append(test_lake: dict[str, Table]) -> None:
    clicks = test_lake["events.clicks"]
    snapshots = clicks.snapshots()
    assert len(snapshots) == TEST.click_snapshots
    added = [int(s.summary["added-records"]) for s in snapshots if s.summary]
    assert len(added) == TEST.click_snapshots and all(1 <= n <= 5 for n in added)
    assert clicks.scan().to_arrow().num_rows == sum(added)


def test_orders_orphans_are_old_unreferenced_parquet(test_lake: dict[str, Table]) -> None:
    orders = test_lake["sales.orders"]
    orphans = list_orphans(orders)
    assert len(orphans) == TEST.orphan_files
    referenced = referenced_files(orders)
    assert referenced and referenced.isdisjoint(orphans)
    for path in orphans:
        assert Path(path).is_file() and _age_days(path) > 4.9
        assert pq.read_schema(path).names == orders.schema().column_names
    # Only the orphans are old, so an age-limited orphan removal can touch nothing else.
    assert all(_age_days(p) < 1 for p in referenced)


def test_degrade_trips_and_add_snapshots_count_rows(tmp_path: Path) -> None:
    settings = default_settings(tmp_path)
    refs = build_demo_lake(settings, scale=TINY)
    tables = _tables(settings, refs)
    trips, clicks = tables["taxi.trips"], tables["events.clicks"]
    # Fewer rows than days: each commit touches only as many days as it has rows.
    assert degrade_trips(trips, days=5, commits=2, rows_per_commit=3, seed=1) == 6
    assert len(trips.inspect.files()) == TINY.trip_files + 2 * 3
    assert trips.scan().to_arrow().num_rows == TINY.trip_rows + 6
    assert len(set(trips.scan().to_arrow().column("trip_id").to_pylist())) == TINY.trip_rows + 6
    before = clicks.scan().to_arrow().num_rows
    rows = add_snapshots(clicks, 3, seed=1)
    assert len(clicks.snapshots()) == TINY.click_snapshots + 3
    assert clicks.scan().to_arrow().num_rows == before + rows


def test_plant_orphans_and_age_all_files(tmp_path: Path) -> None:
    settings = default_settings(tmp_path)
    orders = _tables(settings, build_demo_lake(settings, scale=TINY))["sales.orders"]
    planted = plant_orphans(orders, 2, age_days=10)
    assert set(planted) < set(list_orphans(orders)) and all(9.9 < _age_days(p) < 10.1 for p in planted)
    # Works on any table: an empty one gets an empty parquet file in its schema.
    catalog = open_catalog(settings, "demo")
    empty = catalog.create_table(("sales", "empty"), schema=orders.schema())
    (blank,) = plant_orphans(empty, 1)
    assert pq.read_table(blank).num_rows == 0 and list_orphans(empty) == [blank]
    age_all_files(orders, 7)
    everything = [p for p in lake.local_path(orders.metadata.location).rglob("*") if p.is_file()]
    assert len(everything) > len(planted) and all(6.9 < _age_days(p) < 7.1 for p in everything)
    # The table still reads: ageing files changes no content.
    assert orders.scan().to_arrow().num_rows == lake.ORDERS_COMMITS * lake.ORDERS_ROWS_PER_COMMIT


def test_build_twice_without_reset_keeps_tables(tmp_path: Path) -> None:
    settings = default_settings(tmp_path)
    first = _tables(settings, build_demo_lake(settings, scale=TINY))
    again = build_demo_lake(settings, scale=TINY)
    second = _tables(settings, again)
    assert sorted(first) == sorted(second)
    for name, table in second.items():
        assert table.metadata_location == first[name].metadata_location
    assert list_orphans(second["sales.orders"]) == list_orphans(first["sales.orders"])


def test_reset_rebuilds_from_scratch(tmp_path: Path) -> None:
    settings = default_settings(tmp_path)
    first = _tables(settings, build_demo_lake(settings, scale=TINY))
    old_orphans = list_orphans(first["sales.orders"])
    add_snapshots(first["events.clicks"], 2, seed=3)
    second = _tables(settings, build_demo_lake(settings, scale=TINY, reset=True))
    assert not any(Path(p).exists() for p in old_orphans)
    assert len(list_orphans(second["sales.orders"])) == TINY.orphan_files
    assert len(second["events.clicks"].snapshots()) == TINY.click_snapshots
    assert len(second["taxi.trips"].inspect.files()) == TINY.trip_files
    for name, table in second.items():
        assert table.metadata.table_uuid != first[name].metadata.table_uuid


def test_scales_are_validated() -> None:
    with pytest.raises(ValueError, match="unknown demo scale"):
        lake.resolve_scale("huge")
    with pytest.raises(ValueError, match="commits"):
        DemoScale(days=1, commits=0, rows_per_commit=1, click_snapshots=1, orphan_files=0)
    assert SCALES["demo"].trip_files == 3600


def test_cli_builds_and_summarizes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ICELAKE_CONFIG", raising=False)
    monkeypatch.setitem(SCALES, "test", TINY)
    assert main(["--scale", "test"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / ".lake" / "catalog.db").is_file()
    line = next(ln for ln in out.splitlines() if ln.startswith("demo.taxi.trips"))
    assert line.split()[1:] == [str(TINY.trip_files), str(TINY.commits), "0"]
    line = next(ln for ln in out.splitlines() if ln.startswith("demo.sales.orders"))
    assert line.split()[-1] == str(TINY.orphan_files)
