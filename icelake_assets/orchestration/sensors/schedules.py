"""Schedules: the health checks' crons (lake-wide) and per-table maintenance crons, an alternative
trigger to the sensor for tables whose policy sets ``schedule.cron`` (each op still acts only past
its threshold)."""

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetSelection,
    DefaultScheduleStatus,
    Definitions,
    ScheduleDefinition,
    define_asset_job,
    in_process_executor,
)

from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.orchestration.checks.asset_checks import HEALTH_JOB, ORPHANS_JOB
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.runs.model import TABLE_TAG
from icelake_assets.orchestration.sensors.maintenance import TRIGGER_TAG
from icelake_assets.planning.stale_runs import max_runtime_seconds
from icelake_assets.policies import EffectivePolicy
from icelake_assets.private_api import MAX_RUNTIME_SECONDS_TAG
from icelake_assets.settings import Settings
from icelake_assets.types import TableRef


def build_check_schedules(settings: Settings, checks_job, orphan_checks_job) -> list[ScheduleDefinition]:
    """Each schedule is named after the job it runs: ``<job>_schedule``."""
    status = (
        DefaultScheduleStatus.RUNNING
        if settings.automation.schedules_default_status == "running"
        else DefaultScheduleStatus.STOPPED
    )
    return [
        ScheduleDefinition(
            name=f"{checks_job.name}_schedule",
            job=checks_job,
            cron_schedule=settings.automation.checks_cron,
            default_status=status,
            description="Every table's metadata checks (pyiceberg only, no Spark)",
        ),
        ScheduleDefinition(
            name=f"{orphan_checks_job.name}_schedule",
            job=orphan_checks_job,
            cron_schedule=settings.automation.orphan_checks_cron,
            default_status=status,
            description="Orphan-file checks: they list storage, so they run less often",
        ),
    ]


def build_table_schedules(
    tables: Sequence[DiscoveredTable],
    policies: Mapping[TableRef, EffectivePolicy],
    group_jobs: Mapping[TableRef, str] | None = None,
) -> list[ScheduleDefinition]:
    """Cron as an alternative trigger: a table whose policy sets ``schedule.cron`` (and enforces) gets
    a schedule running its whole-table maintenance; each op still acts only past its threshold."""
    schedules = []
    for t in tables:
        effective = policies[t.ref]
        cron = effective.policy.schedule.cron
        if not cron or effective.mode != "enforce":
            continue
        # No estimate before the run plans: the max runtime's floor plus the cost cap at a slow pace.
        runtime = max_runtime_seconds(effective.policy.guards.max_rewrite_bytes)
        tags = {TABLE_TAG: str(t.ref), TRIGGER_TAG: "schedule", MAX_RUNTIME_SECONDS_TAG: str(runtime)}
        # Tables the project defines: their group's maintenance job, the table named by its tag.
        target: dict[str, Any] = (
            {"job_name": group_jobs[t.ref], "tags": tags}
            if group_jobs is not None
            else {
                "job": define_asset_job(
                    f"icelake_scheduled__{t.ref.safe_name}",
                    executor_def=in_process_executor,
                    selection=AssetSelection.assets(table_asset_key(t.ref)),
                    tags=tags,
                )
            }
        )
        schedules.append(
            ScheduleDefinition(
                name=f"{t.ref.safe_name}__maintenance_schedule",
                **target,
                cron_schedule=cron,
                execution_timezone=effective.policy.schedule.timezone,
                default_status=DefaultScheduleStatus.RUNNING,
                description=f"Maintenance of {t.ref} on its policy's cron ({cron})",
            )
        )
    return schedules


def schedule_definitions(
    settings: Settings,
    tables: Sequence[DiscoveredTable],
    policies: Mapping[TableRef, EffectivePolicy],
    health: Definitions,
    group_jobs: Mapping[TableRef, str] | None = None,
) -> Definitions:
    """This module's part of the code location: the checks' schedules (on the jobs of ``health``,
    checks/asset_checks.py's part) and the per-table maintenance crons (``group_jobs``: each table's maintenance
    job when the project defines the tables' assets)."""
    jobs = {j.name: j for j in health.jobs or ()}
    return Definitions(
        schedules=[
            *build_check_schedules(settings, jobs[HEALTH_JOB], jobs[ORPHANS_JOB]),
            *build_table_schedules(tables, policies, group_jobs),
        ]
    )
