"""Building the project's Definitions from settings (kept apart from definitions.py so importing it
does not load the lake)."""

from __future__ import annotations

import os
from pathlib import Path

from dagster import AssetSelection, Definitions, define_asset_job, in_process_executor

from icelake_assets.catalog.discovery import discover_tables
from icelake_assets.maintenance.spark_session import spark_config
from icelake_assets.orchestration.assets import build_table_asset
from icelake_assets.orchestration.checks import build_table_checks
from icelake_assets.orchestration.resources import IcebergSparkResource, IcelakeResource
from icelake_assets.settings import CONFIG_ENV_VAR, Settings, load_settings

CHECKS_JOB = "icelake_health_checks"
MAINTENANCE_JOB = "icelake_maintenance"


def build_definitions(settings: Settings | None = None) -> Definitions:
    """Definitions for every selected table of the configured catalogs.

    One in-process executor per run: every op of a run shares one Spark JVM instead of one per step."""
    settings = settings or load_settings()
    config_path = settings.source if Path(settings.source).is_file() else os.environ.get(CONFIG_ENV_VAR)
    tables = discover_tables(settings)
    return Definitions(
        assets=[build_table_asset(t) for t in tables],
        asset_checks=[c for t in tables for c in build_table_checks(t)],
        jobs=[
            define_asset_job(CHECKS_JOB, selection=AssetSelection.all_asset_checks(),
                             description="Every table's health checks (pyiceberg metadata only, no Spark)"),
            define_asset_job(MAINTENANCE_JOB, selection=AssetSelection.all(),
                             description="Maintenance of every table, then its checks"),
        ],
        resources={
            "icelake": IcelakeResource(config_path=config_path),
            "pyspark": IcebergSparkResource(spark_config=spark_config(settings)),
        },
        executor=in_process_executor,
    )
