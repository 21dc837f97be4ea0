"""Iceberg partitions as Dagster partitions, end to end on real Spark and a real Dagster instance:
a backfill of 5 days of a 30-day table compacts exactly those days with one materialization each;
an identity-partitioned table whose values hold quotes, unicode and SQL keywords compacts exactly
the partition asked for; a partition with a corrupt file fails alone, the others commit, and after
repair the failed partition re-runs and compacts."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pyarrow as pa
import pytest
from dagster import (
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    DailyPartitionsDefinition,
    Definitions,
    DynamicPartitionsDefinition,
    MultiPartitionsDefinition,
    TimeWindowPartitionsDefinition,
    build_sensor_context,
)
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform
from pyiceberg.types import DateType, LongType, NestedField, StringType, TimestampType, TimestamptzType

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, open_catalog
from icelake_assets.catalog.discovery import DiscoveredTable, discover_tables
from icelake_assets.demo.lake import TRIPS_SCHEMA, TRIPS_SPEC, append, local_path, trips_batch
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.ops.chain import MAINTENANCE_OPS
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.tables.partitions import (
    build_partition_keys_sensor,
    dynamic_partitions_name,
    key_values,
    offending_partition_keys,
    partition_key,
    partitions_def_for,
    register_partition_keys,
)
from icelake_assets.orchestration.tables.table_groups import maintenance_jobs
from icelake_assets_tests.conftest import TEST_THRESHOLDS, catalog_name, new_lake

UTC = UTC
COMMITS = 6  # every commit writes one file per partition it touches
THRESHOLDS = {
    **TEST_THRESHOLDS,
    "small_files": {"max_files_per_partition": 4},
    "partitions": {"partitions_per_run": 2, "max_retries": 1, "retry_delay_seconds": 0.1},
}
# Values of the identity-partitioned table: quotes and a backslash with SQL keywords, unicode, a value
# Dagster refuses in keys ('|', '...'), a prefix of another value, the string 'null', a real null.
QUOTED = 'it\'s "quoted" \\ DROP TABLE t; --'
UNICODE = "Ünïcødé ☕ 東京"
ESCAPED = "a|b...c"
CATEGORIES = [QUOTED, 'it\'s "quoted"', "SELECT", UNICODE, ESCAPED, "null", None]


def _lake(tmp_path_factory, thresholds=THRESHOLDS):
    settings = new_lake(tmp_path_factory, thresholds=thresholds)
    cat = open_catalog(settings, catalog_name(settings), create=True)
    cat.create_namespace("ns")
    return settings, cat


def _files(table) -> dict[str, int]:
    table.refresh()
    return {k: p.data_files for k, p in compute_table_stats(table, _policy()).partitions.items()}


def _policy():
    from icelake_assets.settings import Policy

    return Policy.model_validate({k: v for k, v in THRESHOLDS.items()})


def _rows(table):
    return table.scan().to_arrow().sort_by("id" if "id" in table.schema().column_names else "trip_id")


# -- the mapping (pyiceberg metadata only) ------------------------------------------------------------


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    """Small tables of every partition shape, each with two commits per partition."""
    settings, cat = _lake(
        tmp_path_factory, thresholds={**THRESHOLDS, "small_files": {"max_files_per_partition": 1}}
    )
    ts = pa.array([datetime(2024, 1, 2, 7), datetime(2024, 3, 5, 1)], pa.timestamp("us"))
    tstz = pa.array(
        [datetime(2023, 6, 1, tzinfo=UTC), datetime(2024, 1, 1, tzinfo=UTC)], pa.timestamp("us", tz="UTC")
    )
    days = pa.array([date(2024, 2, 29), date(2024, 4, 1)], pa.date32())
    ids = pa.array([1, 2], pa.int64())
    specs = {
        "hourly": (
            Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestampType())),
            PartitionSpec(PartitionField(2, 1000, HourTransform(), "ts_hour")),
            {"id": ids, "ts": ts},
        ),
        "monthly": (
            Schema(NestedField(1, "id", LongType()), NestedField(2, "d", DateType())),
            PartitionSpec(PartitionField(2, 1000, MonthTransform(), "d_month")),
            {"id": ids, "d": days},
        ),
        "yearly": (
            Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestamptzType())),
            PartitionSpec(PartitionField(2, 1000, YearTransform(), "ts_year")),
            {"id": ids, "ts": tstz},
        ),
        "by_vendor": (
            Schema(NestedField(1, "id", LongType()), NestedField(2, "vendor", StringType())),
            PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "vendor")),
            {"id": ids, "vendor": pa.array(["it's", UNICODE])},
        ),
        "day_vendor": (
            Schema(
                NestedField(1, "id", LongType()),
                NestedField(2, "ts", TimestampType()),
                NestedField(3, "vendor", StringType()),
            ),
            PartitionSpec(
                PartitionField(2, 1000, DayTransform(), "ts_day"),
                PartitionField(3, 1001, IdentityTransform(), "vendor"),
            ),
            {"id": ids, "ts": ts, "vendor": pa.array(["it's", ESCAPED])},
        ),
        "plain": (Schema(NestedField(1, "id", LongType())), PartitionSpec(), {"id": ids}),
        "empty_daily": (
            Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestampType())),
            PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")),
            None,
        ),
    }
    tables = {}
    for name, (schema, spec, data) in specs.items():
        t = cat.create_table(("ns", name), schema=schema, partition_spec=spec)
        for _ in range(2 if data else 0):
            append(t, pa.table(data))
        tables[name] = (t, DiscoveredTable.from_table(TableRef(catalog_name(settings), ("ns",), name), t))
    return settings, tables


def test_time_transforms_become_time_window_partitions_from_the_earliest_partition(shapes):
    _, tables = shapes
    expected = {
        "hourly": ("%Y-%m-%d-%H", "2024-01-02-07"),
        "monthly": ("%Y-%m", "2024-02"),
        "yearly": ("%Y", "2023"),
    }
    for name, (fmt, first) in expected.items():
        pdef = partitions_def_for(tables[name][1])
        assert isinstance(pdef, TimeWindowPartitionsDefinition) and pdef.fmt == fmt, name
        assert pdef.get_first_partition_key() == first, name
        # keys are Iceberg's own partition values, e.g. the hourly table's second partition:
    assert "2024-03-05-01" in partitions_def_for(tables["hourly"][1]).get_partition_keys()
    # ... and they end with the latest partition that holds data, not with today.
    assert partitions_def_for(tables["hourly"][1]).get_last_partition_key() == "2024-03-05-01"
    assert partitions_def_for(tables["monthly"][1]).get_partition_keys() == ["2024-02", "2024-03", "2024-04"]
    assert partitions_def_for(tables["yearly"][1]).get_partition_keys() == ["2023", "2024"]


def test_an_empty_time_partitioned_table_starts_at_the_current_period(shapes):
    _, tables = shapes
    pdef = partitions_def_for(tables["empty_daily"][1])
    assert isinstance(pdef, DailyPartitionsDefinition)
    assert pdef.get_partition_keys() == [datetime.now(UTC).strftime("%Y-%m-%d")]


def test_identity_becomes_dynamic_two_fields_multi_and_unpartitioned_none(shapes):
    _, tables = shapes
    vendor = partitions_def_for(tables["by_vendor"][1])
    assert isinstance(vendor, DynamicPartitionsDefinition)
    assert vendor.name == f"{tables['by_vendor'][1].ref.safe_name}__vendor"
    multi = partitions_def_for(tables["day_vendor"][1])
    assert isinstance(multi, MultiPartitionsDefinition)
    assert {d.name: type(d.partitions_def) for d in multi.partitions_defs} == {
        "ts_day": DailyPartitionsDefinition,
        "vendor": DynamicPartitionsDefinition,
    }
    assert partitions_def_for(tables["plain"][1]) is None


def test_offending_keys_of_a_multi_partitioned_table_round_trip_to_their_values(shapes):
    settings, tables = shapes
    t, discovered = tables["day_vendor"]
    stats = compute_table_stats(t, settings.thresholds)
    assert sorted(stats.compaction_candidates) == [
        "ts_day=2024-01-02/vendor=it%27s",
        "ts_day=2024-03-05/vendor=a%7Cb...c",
    ]
    keys = offending_partition_keys(discovered, stats)
    assert keys == ["2024-01-02|it's", "2024-03-05|~s:a%7Cb%2E%2E%2Ec"]
    layout = discovered.layout
    assert [key_values(layout, k) for k in keys] == [("2024-01-02", "it's"), ("2024-03-05", ESCAPED)]
    assert [partition_key(layout, key_values(layout, k)) for k in keys] == keys
    # the same from the pyiceberg table (what a sensor holds), and a partitions definition that
    # starts later leaves the earlier day out
    assert offending_partition_keys(t, stats) == keys
    later = MultiPartitionsDefinition(
        {"ts_day": DailyPartitionsDefinition("2024-02-01"), "vendor": DynamicPartitionsDefinition(name="x")}
    )
    assert offending_partition_keys(discovered, stats, later) == keys[1:]


# -- end to end ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """``ns.days30``: 30 day partitions x 6 files; ``ns.categories``: identity(category) over
    CATEGORIES x 6 files; ``ns.fragile``: 4 day partitions x 6 files."""
    settings, cat = _lake(tmp_path_factory)
    rng = np.random.default_rng(7)
    days30 = cat.create_table(("ns", "days30"), schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
    fragile = cat.create_table(("ns", "fragile"), schema=TRIPS_SCHEMA, partition_spec=TRIPS_SPEC)
    categories = cat.create_table(
        ("ns", "categories"),
        schema=Schema(NestedField(1, "id", LongType()), NestedField(2, "category", StringType())),
        partition_spec=PartitionSpec(PartitionField(2, 1000, IdentityTransform(), "category")),
    )
    for c in range(COMMITS):
        append(days30, trips_batch(rng, c * 30, 30, 30))
        append(fragile, trips_batch(rng, c * 4, 4, 4))
        n = len(CATEGORIES)
        append(
            categories,
            pa.table(
                {
                    "id": pa.array(range(c * n, (c + 1) * n), pa.int64()),
                    "category": pa.array(CATEGORIES, pa.string()),
                }
            ),
        )
    defs = build_definitions(settings)
    instance = DagsterInstance.local_temp(str(tmp_path_factory.mktemp("dagster_home")))
    ref = {
        name: TableRef(catalog_name(settings), ("ns",), name) for name in ("days30", "fragile", "categories")
    }
    return {
        "settings": settings,
        "defs": defs,
        "instance": instance,
        "ref": ref,
        "tables": {"days30": days30, "fragile": fragile, "categories": categories},
    }


def _key(ref: TableRef) -> AssetKey:
    return AssetKey(ref.asset_key_path)


def _run(lake, name: str, keys: list[str]):
    """One run of the table's asset over ``keys`` (one key, or a contiguous range as a backfill run)."""
    key = _key(lake["ref"][name])
    job = lake["defs"].resolve_implicit_job_def_def_for_assets([key])
    if len(keys) == 1:
        return job.execute_in_process(
            instance=lake["instance"], asset_selection=[key], partition_key=keys[0], raise_on_error=False
        )
    return job.execute_in_process(
        instance=lake["instance"],
        asset_selection=[key],
        raise_on_error=False,
        tags={ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]},
    )


def _backfill(lake, name: str, keys: list[str]):
    """What a backfill with the asset's BackfillPolicy.multi_run(N) launches: one run per N keys."""
    n = lake["defs"].resolve_assets_def(_key(lake["ref"][name])).backfill_policy.max_partitions_per_run
    return [_run(lake, name, keys[i : i + n]) for i in range(0, len(keys), n)]


def _materialized(lake, name: str) -> list[str]:
    records = lake["instance"].fetch_materializations(_key(lake["ref"][name]), limit=1000).records
    return sorted(r.partition_key for r in records)


def _rewrite_md(result, name: str) -> dict:
    return {
        k: v.value
        for e in result.get_asset_materialization_events()
        for k, v in e.materialization.metadata.items()
        if k.startswith(("partitions/", "files/"))
    }


def test_the_assets_carry_partitions_and_the_configured_backfill_and_retry_policies(lake):
    defs, ref = lake["defs"], lake["ref"]
    days30 = defs.resolve_assets_def(_key(ref["days30"]))
    assert isinstance(days30.partitions_def, DailyPartitionsDefinition)
    assert days30.partitions_def.get_first_partition_key() == "2024-01-01"
    assert days30.backfill_policy.max_partitions_per_run == 2
    rewrite = days30.node_def.node_dict["rewrite_data_files"].definition
    assert rewrite.retry_policy.max_retries == 1 and rewrite.retry_policy.backoff.value == "EXPONENTIAL"
    categories = defs.resolve_assets_def(_key(ref["categories"]))
    assert categories.partitions_def.name == dynamic_partitions_name(
        ref["categories"], lake_layout(lake).fields[0]
    )


def test_whole_table_jobs_load_beside_differently_partitioned_tables(lake):
    defs = lake["defs"]
    assets = list(defs.assets)
    jobs = maintenance_jobs(assets, "maint")
    # one asset job over tables of different partitions definitions would not even load
    Definitions.validate_loadable(Definitions(assets=assets, jobs=jobs, resources=defs.resources))
    # One job per partitions definition: days30 and fragile (days from 2024-01-01) share one,
    # whatever their pools; categories (dynamic partitions) has its own.
    partitioned = sorted(j.name for j in jobs if j.name != "maint")
    assert partitioned == sorted(
        ["maint__day_2024_01_01", f"maint__maintain__{lake['ref']['categories'].safe_name}"]
    )
    covered = {k for a in assets if a.partitions_def is not None for k in a.keys}
    assert covered == {_key(r) for r in lake["ref"].values()}  # every table has a whole-table job


def lake_layout(lake):
    return next(t.layout for t in discover_tables(lake["settings"]) if t.ref == lake["ref"]["categories"])


def test_a_backfill_of_5_days_compacts_exactly_those_days_with_one_materialization_each(lake):
    table = lake["tables"]["days30"]
    before, rows = _files(table), _rows(table)
    assert len(before) == 30 and set(before.values()) == {COMMITS}
    days = [f"2024-01-{d:02d}" for d in range(11, 16)]
    runs = _backfill(lake, "days30", days)
    assert [r.success for r in runs] == [True, True, True]  # 2 + 2 + 1 partitions per run
    after = _files(table)
    compacted = {f"pickup_at_day={d}" for d in days}
    assert {k: v for k, v in after.items() if k in compacted} == dict.fromkeys(compacted, 1)
    assert {k: v for k, v in after.items() if k not in compacted} == {
        k: v for k, v in before.items() if k not in compacted
    }
    assert _materialized(lake, "days30") == days
    md = _rewrite_md(runs[0], "days30")
    assert md["partitions/rewritten_keys"] == days[:2] and md["partitions/failed_keys"] == []
    assert md["files/rewritten"] == 2 * COMMITS
    assert _rows(table).equals(rows)
    # each op of the table's graph ran once per run; table-wide ones only act past their own threshold
    for r in runs:
        ops = [
            e.step_key.split(".", 1)[1]
            for e in r.all_events
            if e.event_type == DagsterEventType.STEP_START and "." in e.step_key
        ]  # graph-asset ops
        assert sorted(ops) == sorted([*(o.name for o in MAINTENANCE_OPS), "validate"])


def test_dynamic_keys_follow_the_table_through_the_sensor(lake):
    settings, instance = lake["settings"], lake["instance"]
    sensor = build_partition_keys_sensor(discover_tables(settings))
    ctx = build_sensor_context(
        instance=instance, resources={"icelake": IcelakeResource(config_path=settings.source)}
    )
    requests = sensor.evaluate_tick(ctx).dynamic_partitions_requests
    name = dynamic_partitions_name(lake["ref"]["categories"], lake_layout(lake).fields[0])
    assert [r.partitions_def_name for r in requests] == [name]
    assert sorted(requests[0].partition_keys) == sorted(
        [
            'it\'s "quoted" \\ DROP TABLE t; --',
            'it\'s "quoted"',
            "SELECT",
            UNICODE,
            "~s:a%7Cb%2E%2E%2Ec",
            "null",
            "~null",
        ]
    )
    instance.add_dynamic_partitions(name, list(requests[0].partition_keys))
    assert sensor.evaluate_tick(ctx).dynamic_partitions_requests == []  # nothing new on the next tick
    table = lake["tables"]["categories"]
    assert (
        register_partition_keys(
            instance,
            next(t for t in discover_tables(settings) if t.ref.name == "categories"),
            compute_table_stats(table, _policy()),
        )
        == {}
    )


def test_identity_partitions_with_quotes_unicode_and_sql_keywords_compact_exactly_the_asked_ones(lake):
    instance, table = lake["instance"], lake["tables"]["categories"]
    name = dynamic_partitions_name(lake["ref"]["categories"], lake_layout(lake).fields[0])
    if not instance.get_dynamic_partitions(name):  # the sensor test registers them; alone, register here
        instance.add_dynamic_partitions(
            name,
            sorted({"~null" if c is None else c for c in CATEGORIES} - {ESCAPED} | {"~s:a%7Cb%2E%2E%2Ec"}),
        )
    before, rows = _files(table), _rows(table)
    # health keys partitions by label, where null and 'null' both read category=null
    assert before.pop("category=null") == 2 * COMMITS
    assert set(before.values()) == {COMMITS} and len(before) == len(CATEGORIES) - 2
    keys = instance.get_dynamic_partitions(name)
    one = _run(lake, "categories", [QUOTED])
    # a range of two adjacent keys: the escaped value and the unicode one
    i = keys.index("~s:a%7Cb%2E%2E%2Ec")
    pair = [keys[i], keys[i + 1]] if keys[i + 1] == UNICODE else [keys[i - 1], keys[i]]
    assert set(pair) == {"~s:a%7Cb%2E%2E%2Ec", UNICODE}
    two = _run(lake, "categories", pair)
    assert one.success and two.success
    after = _files(table)
    labels = {
        QUOTED: "category=it%27s+%22quoted%22+%5C+DROP+TABLE+t%3B+--",
        UNICODE: "category=%C3%9Cn%C3%AFc%C3%B8d%C3%A9+%E2%98%95+%E6%9D%B1%E4%BA%AC",
        ESCAPED: "category=a%7Cb...c",
    }
    assert {k: after[k] for k in labels.values()} == dict.fromkeys(labels.values(), 1)
    untouched = {k: v for k, v in before.items() if k not in labels.values()}
    assert len(untouched) == 2 and {k: after[k] for k in untouched} == untouched  # the prefix, the keyword
    assert after["category=null"] == 2 * COMMITS  # 'null' and null
    assert _rows(table).equals(rows)
    assert sorted(_materialized(lake, "categories")) == sorted([QUOTED, *pair])


def test_a_failing_partition_does_not_undo_the_others_and_reruns_after_repair(lake):
    table = lake["tables"]["fragile"]
    before, rows = _files(table), _rows(table)
    days = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-01-04"]
    assert before == {f"pickup_at_day={d}": COMMITS for d in days}
    victim = local_path(
        next(
            p
            for p in table.inspect.files().column("file_path").to_pylist()
            if "pickup_at_day=2024-01-02" in p
        )
    )
    good = victim.read_bytes()
    start_snapshot = table.current_snapshot().snapshot_id
    victim.write_bytes(b"not a parquet file")  # a corrupt data file in 2024-01-02 only
    try:
        first, second = _backfill(lake, "fragile", days)  # [01, 02] then [03, 04]
    finally:
        victim.write_bytes(good)  # repair
    assert not first.success and second.success
    after = _files(table)
    assert after == {
        "pickup_at_day=2024-01-01": 1,
        "pickup_at_day=2024-01-02": COMMITS,
        "pickup_at_day=2024-01-03": 1,
        "pickup_at_day=2024-01-04": 1,
    }
    assert _materialized(lake, "fragile") == ["2024-01-01", "2024-01-03", "2024-01-04"]
    failure = next(e for e in first.all_events if e.event_type == DagsterEventType.STEP_FAILURE)
    assert failure.step_key.endswith(".validate")
    assert failure.event_specific_data.error.message.count("2024-01-02") >= 1
    md = {k: v.value for k, v in failure.event_specific_data.user_failure_data.metadata.items()}
    assert md["partitions_failed"] == ["2024-01-02"] and md["partitions_done"] == ["2024-01-01"]
    assert md["failed_data_files_count"] == COMMITS
    retried = [e for e in first.all_events if e.event_type == DagsterEventType.STEP_UP_FOR_RETRY]
    assert [e.step_key.split(".", 1)[1] for e in retried] == ["rewrite_data_files"]
    assert _rows(table).equals(rows)
    # The first attempt committed 2024-01-01 and its retry nothing more: validation took its baseline
    # from the first attempt, the run's numbers count both, and the audit has both attempts.
    done = next(
        r.asset_materialization.metadata
        for r in lake["instance"].fetch_materializations(_key(lake["ref"]["fragile"]), limit=100).records
        if r.run_id == first.run_id
    )
    assert done["snapshot_id/before"].value == str(start_snapshot)
    assert done["files/rewritten"].value == COMMITS and "in 2 attempts" in done["change"].value
    audit = [
        r
        for r in AuditLog.from_settings(lake["settings"]).records(table=str(lake["ref"]["fragile"]))
        if r.run_id == first.run_id and r.op == "rewrite_data_files"
    ]
    assert [r.results["attempt"] for r in audit] == [1, 2]
    assert [r.results["snapshots_committed"] for r in audit] == [1, 0]
    assert audit[0].snapshot_before == start_snapshot

    rerun = _run(lake, "fragile", ["2024-01-02"])  # what "re-run failed" launches from the backfill page
    assert rerun.success
    assert _files(table)["pickup_at_day=2024-01-02"] == 1
    assert _materialized(lake, "fragile") == days
    assert _rows(table).equals(rows)
