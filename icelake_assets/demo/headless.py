"""The headless demo: degrade the demo lake, show the checks failing, run maintenance through Dagster,
and print a before/after table (data files, snapshots, orphans, manifests, one aggregate query)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from dagster import DagsterInstance

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.demo.lake import build_demo_lake
from icelake_assets.health.orphans import find_orphans
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.maintenance.spark.procedures import table_identifier
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.checks.asset_checks import ORPHANS_JOB
from icelake_assets.orchestration.project import CHECKS_JOB, build_definitions, execute_maintenance
from icelake_assets.orchestration.resources import IcebergSparkResource
from icelake_assets.policies import policy_for
from icelake_assets.settings import Settings
from icelake_assets.text import format_table

AGGREGATE = (
    "SELECT vendor, date(pickup_at) AS day, count(*) AS trips, avg(fare) AS avg_fare FROM {t} GROUP BY 1, 2"
)


@dataclass(frozen=True)
class Snapshot:
    data_files: int
    snapshots: int
    orphans: int
    manifests: int
    records: int


def measure(settings: Settings, catalog, ref: TableRef) -> Snapshot:
    table = load_table(catalog, ref)
    policy = policy_for(settings, ref, table.properties)
    stats = compute_table_stats(table, policy)
    orphans = find_orphans(table, policy.orphans.older_than_hours)
    return Snapshot(stats.data_files, stats.snapshots, len(orphans), stats.manifests, stats.records)


def time_aggregate(spark, ref: TableRef) -> float:
    started = time.perf_counter()
    spark.sql(AGGREGATE.format(t=table_identifier(ref))).collect()
    return time.perf_counter() - started


def _instance() -> DagsterInstance:
    return DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else DagsterInstance.ephemeral()


def run_headless_demo(settings: Settings, scale: str = "demo") -> int:
    print(f"== building the degraded demo lake ({scale} scale)")
    refs = build_demo_lake(settings, scale=scale, reset=True)
    trips = next(r for r in refs if r.name == "trips")
    defs = build_definitions(settings)
    instance = _instance()
    spark = IcebergSparkResource(spark_config=spark_config(settings)).spark_session
    spark.sql("SELECT 1").collect()  # JVM warm-up is not part of the query time

    catalog = open_catalog(settings, trips.catalog)  # the demo lake is one catalog
    before = {ref: measure(settings, catalog, ref) for ref in refs}
    query_before = time_aggregate(spark, trips)

    print("== health checks before maintenance (Dagster runs of the orphan checks job, then the checks job)")
    # The orphan check first: the checks job's health summary reads its evaluation (one verdict).
    defs.resolve_job_def(ORPHANS_JOB).execute_in_process(instance=instance, raise_on_error=False)
    checks = defs.resolve_job_def(CHECKS_JOB).execute_in_process(instance=instance, raise_on_error=False)
    _print_checks(checks)

    print("== maintenance through Dagster (materializing every table asset)")
    started = time.perf_counter()
    runs = execute_maintenance(defs, instance)
    success = all(r.success for r in runs)
    print(f"{len(runs)} runs: {'succeeded' if success else 'FAILED'} in {time.perf_counter() - started:.1f}s")
    for run in runs:
        for event in run.get_asset_materialization_events():
            md = event.materialization.metadata
            acted = md.get("ops/acted")
            print(f"  {event.asset_key.to_user_string()}: ops acted: {acted.value if acted else '?'}")
    print("== health checks after maintenance (same runs)")
    _print_checks(runs)

    after = {ref: measure(settings, catalog, ref) for ref in refs}
    query_after = time_aggregate(spark, trips)
    rows = []
    for ref in refs:
        b, a = before[ref], after[ref]
        for field in ("data_files", "snapshots", "orphans", "manifests", "records"):
            rows.append((str(ref), field, getattr(b, field), getattr(a, field)))
    rows.append((str(trips), "aggregate query (s)", f"{query_before:.2f}", f"{query_after:.2f}"))
    print("== before / after")
    print(format_table(("table", "measure", "before", "after"), rows))
    return 0 if success else 1


def _print_checks(results) -> None:
    rows = [
        (
            e.asset_key.to_user_string(),
            e.check_name,
            "pass" if e.passed else f"FAIL ({e.severity.value})",
            e.description or "",
        )
        for result in (results if isinstance(results, list) else [results])
        for e in result.get_asset_check_evaluations()
    ]
    print(format_table(("table", "check", "result", "finding"), sorted(rows)))
