"""One maintenance sensor tick and the run it requests, executed in this process as the run launcher
would: for tests of a healing loop on real Spark through Dagster."""

from __future__ import annotations

from typing import Any

from icelake_assets.orchestration.project import build_definitions
from icelake_assets.settings import Settings
from icelake_assets_tests.conftest import sensor_tick


def maintain(settings: Settings, instance, cursor: str | None) -> tuple[Any, Any]:
    """The tick (its ``cursor`` for the next) and the metadata of the run's one materialization;
    fails naming the sensor's reasons when the tick requests anything but one run."""
    defs = build_definitions(settings)
    tick = sensor_tick(defs, settings, instance, cursor=cursor)
    assert len(tick.run_requests) == 1, [e.metadata.get("sensor/reason") for e in tick.asset_events]
    request = tick.run_requests[0]
    result = defs.resolve_implicit_global_asset_job_def().execute_in_process(
        instance=instance, asset_selection=request.asset_selection, tags=request.tags, raise_on_error=True
    )
    [event] = list(result.get_asset_materialization_events())
    return tick, event.materialization.metadata
