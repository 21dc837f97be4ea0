"""The recovery sensor: always on, whatever the maintenance sensor does.

Stale runs are failed (after the launcher is asked to stop them), runs that lost their worker are
tagged as interruptions, and settled run keys are swept (orchestration/runs/). The maintenance sensor
does the same on its ticks, but only after it discovered and loaded tables: stopped, failing to load
its settings or finding no table, dead runs would hold their pools and run slots for good. This
sensor needs no settings, no catalog and no table: it knows the product's runs by their leases, job
names, tags and pools. It ships in the product's definitions and, stand-alone, in a code location
of its own (icelake_assets/recovery_location.py), so it ticks even when the lake's location fails to
load. Both doing the same work is harmless: each step reads the run afresh before it acts."""

from __future__ import annotations

from collections.abc import Sequence

from dagster import (
    DagsterRun,
    DefaultSensorStatus,
    SensorDefinition,
    SensorEvaluationContext,
    SkipReason,
    sensor,
)

from icelake_assets.orchestration.runs.housekeeping import sweep_run_keys
from icelake_assets.orchestration.runs.pools import POOL_PREFIX
from icelake_assets.orchestration.runs.recovery import ended_runs, fail_stale_runs, mark_lost_workers
from icelake_assets.orchestration.runs.run_tags import named_tables

RECOVERY_SENSOR = "icelake_recovery_sensor"
RECOVERY_INTERVAL_SECONDS = 30


def product_run(run: DagsterRun) -> Sequence[str] | None:
    """The tables a run of the product maintains, as far as the run itself says (its table tags, else
    its selected assets when it claims the product's pools); ``()`` for a run of the product naming
    none; None for a run that is not the product's (a run with a lease is the product's anyway)."""
    if (named := named_tables(run.tags)) is not None:
        return named
    pools = set(run.run_op_concurrency.all_pools or ()) if run.run_op_concurrency else set()
    if any(p.startswith(POOL_PREFIX) for p in pools):
        return tuple(".".join(k.path) for k in run.asset_selection or ())
    if run.job_name.startswith("icelake_"):
        return ()
    return None


def recover_runs(context: SensorEvaluationContext) -> str:
    """One tick's recovery, said in the tick's log; what it did, in a line."""
    instance = context.instance
    failed = fail_stale_runs(instance, product_run)
    for run in failed:
        context.log.warning(f"run {run.run_id} ({run.job_name}, {run.status}) failed: {run.reason}")
    lost = mark_lost_workers(instance, ended_runs(instance, product_run))
    for run in lost:
        context.log.warning(f"run {run.run_id} ({run.job_name}) lost its worker: {run.reason}")
    swept = sweep_run_keys(instance)
    return (
        f"{len(failed)} stale run(s) failed, {len(lost)} lost worker(s) tagged, {swept} settled key(s) swept"
    )


def build_recovery_sensor(interval_seconds: int = RECOVERY_INTERVAL_SECONDS) -> SensorDefinition:
    @sensor(
        name=RECOVERY_SENSOR,
        minimum_interval_seconds=interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Fails the product's runs whose worker is gone (stopping them first), marks runs that "
        "lost their worker as interruptions and sweeps settled run keys; needs no table or catalog.",
    )
    def recovery_sensor(context: SensorEvaluationContext):
        return SkipReason(recover_runs(context))

    return recovery_sensor
