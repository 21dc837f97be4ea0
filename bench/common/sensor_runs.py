"""A maintenance-sensor tick and the runs it asks for, executed in this process as the daemon and the run
launcher would (a new resource per tick, as Dagster builds one per evaluation): for benchmarks of the
loop on a local Dagster instance without a daemon."""

from __future__ import annotations

from typing import Any

from dagster import DagsterInstance, build_sensor_context

from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.sensors.maintenance import MAINTENANCE_SENSOR
from icelake_assets.settings import Settings


def tick(
    defs: Any,
    settings: Settings,
    instance: DagsterInstance,
    cursor: str | None,
    sensor: str = MAINTENANCE_SENSOR,
):
    """One real evaluation of ``sensor`` of ``defs``."""
    context = build_sensor_context(
        instance=instance,
        cursor=cursor,
        definitions=defs,
        resources={"icelake": IcelakeResource(config_path=settings.source)},
    )
    return defs.get_sensor_def(sensor).evaluate_tick(context)


def run_requests(defs: Any, instance: DagsterInstance, result: Any, log_level: str = "WARNING") -> list[Any]:
    """Every run the tick ``result`` asked for, in process and in order; their materialization events.
    Only the console log is quieter than the daemon's runs (the events stored are the same)."""
    events = []
    for request in result.run_requests or []:
        run = defs.resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance,
            asset_selection=request.asset_selection,
            tags=request.tags,
            run_config={"loggers": {"console": {"config": {"log_level": log_level}}}},
            raise_on_error=True,
        )
        events += list(run.get_asset_materialization_events())
    return events
