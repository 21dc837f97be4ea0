"""Building the project's Definitions from settings (kept apart from definitions.py so importing it
does not load the lake)."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor

from icelake_assets.catalog.discovery import discover_tables
from icelake_assets.maintenance.spark_session import spark_config
from icelake_assets.orchestration.assets import build_table_asset
from icelake_assets.orchestration.checks import (
    OVERVIEW_KEY,
    build_health_overview,
    build_table_checks,
    metadata_checks_selection,
    orphan_checks_selection,
)
from icelake_assets.orchestration.config_checks import build_config_checks
from icelake_assets.orchestration.health_sensor import build_health_sensor
from icelake_assets.orchestration.lineage import build_lineage
from icelake_assets.orchestration.partitions import (
    build_partition_keys_sensor,
    maintenance_job_name,
    maintenance_jobs,
)
from icelake_assets.orchestration.resources import IcebergSparkResource, IcelakeResource
from icelake_assets.orchestration.schedules import build_check_schedules, build_table_schedules
from icelake_assets.orchestration.sensors import build_maintenance_sensor
from icelake_assets.policies import resolve_policy
from icelake_assets.settings import CONFIG_ENV_VAR, Settings, load_settings

CHECKS_JOB = "icelake_health_checks"
MAINTENANCE_JOB = "icelake_maintenance"
# Health without Spark: the metadata checks and the lake-wide overview (cheap, run often), and the
# orphan check, which lists storage (expensive, run less often). Their schedules: settings.automation.
HEALTH_JOB = "icelake_health"
ORPHANS_JOB = "icelake_orphan_checks"


def build_definitions(settings: Settings | None = None) -> Definitions:
    """Definitions for every selected table of the configured catalogs.

    One in-process executor per run: every op of a run shares one Spark JVM instead of one per step."""
    settings = settings or load_settings()
    config_path = settings.source if Path(settings.source).is_file() else os.environ.get(CONFIG_ENV_VAR)
    tables = discover_tables(settings)
    policies = {t.ref: resolve_policy(settings, t.ref, t.properties) for t in tables}
    lineage = build_lineage(tables, policies)
    table_assets = {t.ref: build_table_asset(t, policies[t.ref], lineage.producers[t.ref]) for t in tables}
    fix_jobs = {ref: maintenance_job_name(a, MAINTENANCE_JOB) for ref, a in table_assets.items()}
    interval = min((p.policy.sensor.interval_seconds for p in policies.values()), default=300)
    jobs = [
        define_asset_job(
            CHECKS_JOB,
            selection=AssetSelection.all_asset_checks(),
            description="Every table's health checks (pyiceberg metadata only, no Spark)",
        ),
        *maintenance_jobs(
            list(table_assets.values()),
            MAINTENANCE_JOB,
            description="Maintenance of every table, then its checks",
        ),
        define_asset_job(
            HEALTH_JOB,
            selection=AssetSelection.assets(OVERVIEW_KEY) | metadata_checks_selection(tables),
            description="Metadata checks of every table and the lake-wide overview (no Spark)",
        ),
        define_asset_job(
            ORPHANS_JOB,
            selection=orphan_checks_selection(tables),
            description="Orphan check of every table: lists storage, never deletes",
        ),
    ]
    sensors = [
        build_maintenance_sensor(tables, table_assets, settings, interval),
        build_partition_keys_sensor(tables, interval),
        build_health_sensor(tables, fix_jobs, interval, settings.automation.tick_budget_seconds),
    ]
    return Definitions(
        assets=[*table_assets.values(), build_health_overview(tables), *lineage.assets],
        asset_checks=[
            c for t in tables for c in (*build_table_checks(t, fix_jobs[t.ref]), *build_config_checks(t))
        ],
        jobs=jobs,
        sensors=[s for s in sensors if s is not None],
        schedules=[
            *build_check_schedules(
                settings, *(next(j for j in jobs if j.name == n) for n in (HEALTH_JOB, ORPHANS_JOB))
            ),
            *build_table_schedules(tables, table_assets, policies),
        ],
        resources={
            "icelake": IcelakeResource(config_path=config_path),
            "pyspark": IcebergSparkResource(
                spark_config=spark_config(settings, include_secrets=False), config_path=config_path
            ),
        },
        executor=in_process_executor,
    )


def maintenance_job_names(defs: Definitions) -> list[str]:
    """The whole-table maintenance jobs: one for the unpartitioned tables, one per partitioned table."""
    return sorted(
        j.name
        for j in defs.jobs or ()
        if j.name == MAINTENANCE_JOB or j.name.startswith(MAINTENANCE_JOB + "__")
    )


def execute_maintenance(defs: Definitions, instance, raise_on_error: bool = False) -> list:
    """Maintain every table in this process (headless demo, tests): each maintenance job once."""
    return [
        defs.resolve_job_def(name).execute_in_process(instance=instance, raise_on_error=raise_on_error)
        for name in maintenance_job_names(defs)
    ]
