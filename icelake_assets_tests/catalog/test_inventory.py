"""The cached table inventory: what discovery found, in one file, used while it is fresh and for the
same settings; refreshed when tables appear or go."""

import json
import time

import pyarrow as pa
import pytest
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

from icelake_assets.catalog import discovery, inventory
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets_tests.conftest import catalog_name

SCHEMA = Schema(
    NestedField(1, "id", LongType()),
    NestedField(2, "ts", TimestamptzType()),
    NestedField(3, "kind", StringType()),
)


def _lake(make_lake, **extra):
    settings = make_lake(extra=extra or None)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    plain = cat.create_table(("ns", "plain"), SCHEMA, properties={"icelake.mode": "observe"})
    daily = cat.create_table(
        ("ns", "daily"),
        SCHEMA,
        partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")),
    )
    kinds = cat.create_table(
        ("ns", "kinds"),
        SCHEMA,
        partition_spec=PartitionSpec(PartitionField(3, 1000, IdentityTransform(), "kind")),
    )
    rows = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "ts": pa.array([0, 86_400_000_000], pa.timestamp("us", tz="UTC")),
            "kind": pa.array(["a", "b"]),
        }
    )
    for t in (plain, daily, kinds):
        t.append(rows)
    return settings, cat


def _no_discovery(monkeypatch):
    def refuse(settings):
        raise AssertionError("discovery ran although the inventory is cached")

    monkeypatch.setattr(inventory, "discover_lake", refuse)


def test_the_inventory_round_trips_every_discovered_fact(make_lake):
    settings, _ = _lake(make_lake)
    tables = discovery.discover_tables(settings)
    assert {t.ref.name for t in tables} == {"plain", "daily", "kinds"}
    assert any(t.layout and t.layout.fields for t in tables)
    assert inventory.loads(inventory.dumps(tables)) == tables


def test_a_cached_inventory_replaces_discovery_until_it_is_too_old(make_lake, tmp_path, monkeypatch):
    settings, _ = _lake(make_lake)
    path = tmp_path / "inventory.json"
    first = inventory.load_inventory(settings, path)
    assert first.source == "discovery" and path.exists()
    real_discover = inventory.discover_lake
    _no_discovery(monkeypatch)
    cached = inventory.load_inventory(settings, path)
    assert cached.source == "cache" and cached.tables == first.tables
    # Older than automation.inventory_max_age_hours: discovered again.
    doc = json.loads(path.read_text())
    doc["written_at"] = time.time() - (settings.automation.inventory_max_age_hours + 1) * 3600
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(inventory, "discover_lake", real_discover)
    assert inventory.load_inventory(settings, path).source == "discovery"


def test_catalog_properties_are_hashed_never_written(make_lake, tmp_path):
    settings, _ = _lake(make_lake)
    name = catalog_name(settings)
    secret = "s3cr3t-key-material-0123"
    props = {**settings.catalogs[name], "s3.secret-access-key": secret}
    with_secret = settings.model_copy(update={"catalogs": {name: props}})
    path = tmp_path / "inventory.json"
    inventory.load_inventory(with_secret, path)
    assert secret not in path.read_text()
    # The property still decides which inventory applies: another key, another fingerprint.
    assert inventory.fingerprint(with_secret) != inventory.fingerprint(settings)
    assert inventory.load_inventory(settings, path).source == "discovery"


def test_other_settings_never_use_the_inventory(make_lake, tmp_path):
    settings, _ = _lake(make_lake)
    path = tmp_path / "inventory.json"
    inventory.load_inventory(settings, path)
    tables = settings.tables.model_copy(update={"exclude": (*settings.tables.exclude, "*.kinds")})
    narrower = settings.model_copy(update={"tables": tables})
    again = inventory.load_inventory(narrower, path)
    assert again.source == "discovery" and {t.ref.name for t in again.tables} == {"plain", "daily"}


def test_an_unreadable_inventory_is_discovered_again(make_lake, tmp_path):
    settings, _ = _lake(make_lake)
    path = tmp_path / "inventory.json"
    path.write_text("{not json")
    assert inventory.load_inventory(settings, path).source == "discovery"
    assert json.loads(path.read_text())["format"] == inventory.FORMAT  # rewritten whole


def test_refresh_follows_new_and_dropped_tables_loading_only_the_new(make_lake, tmp_path, monkeypatch):
    settings, cat = _lake(make_lake)
    path = tmp_path / "inventory.json"
    known = [t.ref for t in inventory.load_inventory(settings, path).tables]
    assert not inventory.refresh(settings, known, path)
    cat.create_table(("ns", "new"), SCHEMA)
    cat.drop_table(("ns", "kinds"))
    _no_discovery(monkeypatch)
    change = inventory.refresh(settings, known, path)
    name = catalog_name(settings)
    assert change.added == [TableRef(name, ("ns",), "new")]
    assert change.dropped == [TableRef(name, ("ns",), "kinds")]
    assert "reload the code location" in change.describe()
    cached = inventory.load_inventory(settings, path)
    assert cached.source == "cache" and {t.ref.name for t in cached.tables} == {"plain", "daily", "new"}


def test_the_location_is_configurable_and_can_be_switched_off(monkeypatch, tmp_path):
    monkeypatch.setenv(inventory.INVENTORY_ENV, str(tmp_path / "x.json"))
    assert inventory.inventory_path() == tmp_path / "x.json"
    monkeypatch.setenv(inventory.INVENTORY_ENV, "off")
    assert inventory.inventory_path() is None
    monkeypatch.delenv(inventory.INVENTORY_ENV)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert inventory.inventory_path() == tmp_path / "icelake" / "inventory.json"


@pytest.mark.parametrize("load_type", ["initialization", "reconstruction"])
def test_the_code_location_records_its_inventory_and_a_run_worker_reads_it(
    make_lake, tmp_path, monkeypatch, load_type
):
    from dagster._core.definitions.definitions_load_context import DefinitionsLoadContext, DefinitionsLoadType
    from dagster._core.definitions.repository_definition.repository_definition import RepositoryLoadData

    from icelake_assets.orchestration import project

    settings, _ = _lake(make_lake)
    path = tmp_path / "inventory.json"
    monkeypatch.setenv(inventory.INVENTORY_ENV, str(path))
    monkeypatch.setenv("ICELAKE_CONFIG", settings.source)
    code_server = project.load_definitions(DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION))
    recorded = {project.INVENTORY_METADATA_KEY: code_server.metadata[project.INVENTORY_METADATA_KEY]}
    assert json.loads(recorded[project.INVENTORY_METADATA_KEY].data)["path"] == str(path)
    _no_discovery(monkeypatch)
    # A run worker (reconstruction) reads the recorded file, even when older than the maximum age.
    doc = json.loads(path.read_text())
    doc["written_at"] = 0
    path.write_text(json.dumps(doc))
    context = (
        DefinitionsLoadContext(
            DefinitionsLoadType.RECONSTRUCTION,
            repository_load_data=RepositoryLoadData(
                cacheable_asset_data={}, reconstruction_metadata=recorded
            ),
        )
        if load_type == "reconstruction"
        else DefinitionsLoadContext(DefinitionsLoadType.INITIALIZATION)
    )
    if load_type == "initialization":
        with pytest.raises(AssertionError, match="discovery ran"):  # the code server: too old, rediscovers
            project.load_definitions(context)
        return
    worker = project.load_definitions(context)
    keys = {
        k.path[-1]
        for a in worker.assets
        for k in getattr(a, "keys", ())
        if a.node_def.name.startswith("maintain")
    }
    assert keys == {"plain", "daily", "kinds"}


def test_the_sensor_adds_a_new_table_to_the_inventory_and_lists_at_most_every_few_minutes(
    make_lake, tmp_path, monkeypatch
):
    from dagster import DagsterInstance

    from icelake_assets.orchestration.project import build_definitions
    from icelake_assets.orchestration.sensors import maintenance as sensors
    from icelake_assets_tests.conftest import sensor_tick

    settings, cat = _lake(make_lake)
    path = tmp_path / "inventory.json"
    monkeypatch.setenv(inventory.INVENTORY_ENV, str(path))
    defs = build_definitions(settings, inventory.load_inventory(settings, path).tables)
    cat.create_table(("ns", "new"), SCHEMA)
    monkeypatch.setattr(sensors, "_LISTED_AT", {})
    calls = []
    real = inventory.refresh
    monkeypatch.setattr(inventory, "refresh", lambda *a, **k: calls.append(1) or real(*a, **k))
    (tmp_path / "home").mkdir()
    with DagsterInstance.local_temp(str(tmp_path / "home")) as instance:
        sensor_tick(defs, settings, instance)
        sensor_tick(defs, settings, instance)  # within INVENTORY_LIST_SECONDS: no second listing
    assert calls == [1]
    assert "new" in {t.ref.name for t in inventory.load_inventory(settings, path).tables}
