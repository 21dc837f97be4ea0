"""PostgreSQL for both stores, on a real server (initdb into a temp dir, a free local port): the
Iceberg catalog (pyiceberg SqlCatalog over psycopg2, Spark's JdbcCatalog over the PostgreSQL JDBC
driver) and Dagster's instance storage (dagster-postgres). Discovery, a sensor tick and a maintenance
run whose file groups are rewritten concurrently (the one-writer limit of SQLite does not apply)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml
from dagster import AssetKey, instance_for_test
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform
from pyiceberg.types import LongType, NestedField, StringType, TimestampType

from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.discovery import discover_tables
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.orchestration.project import build_definitions, table_maintenance_job
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG
from icelake_assets.planning.rewrite import rewrite_options
from icelake_assets.policies import resolve_policy
from icelake_assets.settings import load_settings
from icelake_assets_tests.conftest import TEST_THRESHOLDS, sensor_tick, write_settings
from icelake_assets_tests.servers import ServerUnavailable, postgres_server

ROOT = Path(__file__).resolve().parents[2]
DAYS = ("2026-11-01", "2026-11-02", "2026-11-03", "2026-11-04")
COMMITS = 22  # one small file per day per commit: 22 files per partition > 20, 22 snapshots > 20
ROWS = 40  # per commit
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "ts", TimestampType()),
    NestedField(3, "payload", StringType()),
)
SPEC = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=DayTransform(), name="ts_day"))


@pytest.fixture(scope="module")
def pg():
    try:
        with postgres_server() as server:
            yield server
    except ServerUnavailable as err:
        pytest.skip(f"no PostgreSQL server on this machine: {err}")


def _batch(first: int) -> pa.Table:
    rng = np.random.default_rng(first)
    ids = np.arange(first, first + ROWS)
    days = np.array([np.datetime64(DAYS[i % len(DAYS)]) for i in range(ROWS)], dtype="datetime64[us]")
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "ts": pa.array(days + np.timedelta64(3600, "s")),
            "payload": pa.array([rng.bytes(8).hex() for _ in ids]),
        }
    )


@pytest.fixture(scope="module")
def lake(pg, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pglake")
    name = "pglake"
    pg.create_database("catalog")
    thresholds = {
        **TEST_THRESHOLDS,
        "mode": "enforce",
        "guards": {"quiet_period_minutes": 0},
        "small_files": {
            **TEST_THRESHOLDS["small_files"],
            "max_concurrent_file_group_rewrites": 3,
            # partial progress for these 4 groups: each commits on its own
            "partial_progress_min_groups": 1,
        },
    }
    path = write_settings(folder, name, thresholds)
    text = path.read_text().replace("sqlite:///lake/catalog.db", pg.sqlalchemy_url("catalog"))
    path.write_text(text)
    (folder / "lake" / "warehouse").mkdir(parents=True)
    settings = load_settings(path)
    cat = open_catalog(settings, name)
    cat.create_namespace("ns")
    table = cat.create_table(("ns", "events"), SCHEMA, partition_spec=SPEC)
    for i in range(COMMITS):
        table.append(_batch(i * ROWS))
    return settings, TableRef(name, ("ns",), "events"), table


@pytest.fixture(scope="module")
def instance(pg):
    """The documented instance settings: dagster.yaml (run limits) + dagster.postgres.yaml (storage)."""
    config = yaml.safe_load(
        (ROOT / "dagster.yaml").read_text() + (ROOT / "dagster.postgres.yaml").read_text()
    )
    env = {
        "DAGSTER_PG_HOST": pg.host,
        "DAGSTER_PG_PORT": str(pg.port),
        "DAGSTER_PG_DB": pg.create_database("dagster"),
        "DAGSTER_PG_USER": pg.user,
        "DAGSTER_PG_PASSWORD": "unused-by-trust-auth",
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        with instance_for_test(overrides=config) as inst:
            yield inst


def test_the_instance_storage_calls_carry_timeouts(instance):
    """A hung statement must not hang a run worker's lease renewal (issue 50): the documented
    storage settings give every connection a statement and a lock timeout."""
    from sqlalchemy import text

    with instance.run_storage.connect() as conn:
        assert conn.execute(text("SHOW statement_timeout")).scalar() == "1min"
        assert conn.execute(text("SHOW lock_timeout")).scalar() == "30s"


def test_the_catalog_lives_in_postgres_and_discovery_finds_its_tables(lake):
    settings, ref, table = lake
    assert settings.catalogs[ref.catalog]["uri"].startswith("postgresql+psycopg2://")
    assert [t.ref for t in discover_tables(settings)] == [ref]
    assert len(table.inspect.files()) == COMMITS * len(DAYS)


def test_sensor_and_concurrent_maintenance_with_postgres_catalog_and_dagster_storage(lake, instance):
    settings, ref, table = lake
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    defs = build_definitions(settings)

    # The sensor: one run over the range of the offending days, tagged with the table.
    tick = sensor_tick(defs, settings, instance)
    assert [
        (r.tags[ASSET_PARTITION_RANGE_START_TAG], r.tags[ASSET_PARTITION_RANGE_END_TAG])
        for r in tick.run_requests
    ] == [(DAYS[0], DAYS[-1])]
    assert {r.tags[TABLE_TAG] for r in tick.run_requests} == {str(ref)}

    # One whole-table run: the four days are four file groups, rewritten three at a time (a SQLite
    # catalog refuses more than one), each committed through Spark's JdbcCatalog on PostgreSQL.
    policy = resolve_policy(settings, ref, table.properties).policy
    options = rewrite_options(compute_table_stats(table, policy), policy)
    assert options["max-concurrent-file-group-rewrites"] == "3"
    job = defs.resolve_job_def(table_maintenance_job(defs, AssetKey(ref.asset_key_path)))
    # The sensor's tags without its partition: the run maintains the whole table.
    tags = {k: v for k, v in tick.run_requests[0].tags.items() if not k.startswith("dagster/")}
    result = job.execute_in_process(instance=instance, tags=tags)
    assert result.success
    md = next(e for e in result.get_asset_materialization_events()).materialization.metadata
    assert "rewrite_data_files" in md["ops/acted"].value

    # Every file group either committed (its partition now holds one file) or is reported failed.
    table.refresh()
    files = table.inspect.files().to_pylist()
    per_day = {d: sum(1 for f in files if str(f["partition"]["ts_day"]) == d) for d in DAYS}
    rewritten = set(md["partitions/rewritten_keys"].value)
    failed = set(md["partitions/failed_keys"].value)
    print(f"partitions rewritten {sorted(rewritten)}, failed {sorted(failed)}")
    assert len(rewritten) + len(failed) == len(DAYS) and not rewritten & failed
    assert all(per_day[d] == 1 for d in DAYS if any(d in label for label in rewritten)), per_day
    assert all(per_day[d] == COMMITS for d in DAYS if any(d in label for label in failed)), per_day
    # ... each in a commit of its own (partial progress): one `replace` adding one file per group.
    before = int(md["snapshot_id/before"].value)
    ids = [e.snapshot_id for e in table.metadata.snapshot_log]
    since = [table.snapshot_by_id(i) for i in ids[ids.index(before) + 1 :]]
    group_commits = [
        s
        for s in since
        if s.summary.operation.value == "replace" and s.summary.get("added-data-files") == "1"
    ]
    assert len(group_commits) == len(rewritten)
    assert md["rows/before"].value == md["rows/after"].value == COMMITS * ROWS
    # The run and its events are in PostgreSQL.
    assert instance.get_run_by_id(result.run_id).is_success
