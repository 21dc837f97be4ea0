"""One health truth per table: the status and score every surface shows (the metadata checks'
``health_status``, the overview asset, a maintenance run's ``health/status``) come from here.

The verdict (health/score.py: one rule for status and score) covers *all* the table's checks: the
six metadata findings, the ``table_configuration`` check (metadata only, computed here) and the
``orphan_files`` check, which lists storage and so is taken from its latest recorded evaluation in
the Dagster instance (never run here). A table is never Healthy while one of its checks fails, and
is Unknown while its orphan check has never been evaluated.
"""

from typing import Any, cast

from dagster import (
    AssetCheckEvaluation,
    AssetCheckKey,
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    MetadataValue,
)
from pyiceberg.table import Table

from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.overview import TableHealth
from icelake_assets.health.stats import TableStats
from icelake_assets.orchestration.checks.configuration import configuration_finding
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.planning.health import evaluate
from icelake_assets.policies import configuration_report

ORPHAN_CHECK = "orphan_files"


def recorded_orphan_finding(instance: DagsterInstance | None, ref: TableRef) -> Finding | None:
    """The latest *evaluated* orphan_files result of the table as a finding (None: never evaluated).
    An execution only planned (the check runs later in the same run, or is running) is skipped: the
    verdict then rests on the evaluation before it, or is Unknown, never Healthy by default."""
    if instance is None:
        return None
    key = AssetCheckKey(table_asset_key(ref), ORPHAN_CHECK)
    for record in instance.event_log_storage.get_asset_check_execution_history(key, limit=_HISTORY):
        event = record.event
        dagster_event = event.dagster_event if event is not None else None
        evaluation = dagster_event.event_specific_data if dagster_event is not None else None
        if not isinstance(evaluation, AssetCheckEvaluation):
            continue  # planned or still running: look further back
        if evaluation.passed:
            return Finding(ORPHAN_CHECK, Severity.OK, evaluation.description or "passed", "nothing to remove")
        severity = Severity.ERROR if evaluation.severity.value == "ERROR" else Severity.WARN
        return Finding(ORPHAN_CHECK, severity, evaluation.description or "failed", "run remove_orphan_files")
    return None


# A maintenance run's own orphan listing, recorded by its validation for the checks that follow it in
# the same run (they need not list storage a second time).
RUN_ORPHANS_METADATA = "orphans/post_run"


def run_orphans_metadata(finding: Finding) -> dict[str, MetadataValue]:
    """What the run's orphan op left, as the materialization records it."""
    return {
        RUN_ORPHANS_METADATA: MetadataValue.json(
            {
                "severity": finding.severity.value,
                "summary": finding.summary,
                "recommendation": finding.recommendation,
                "metrics": finding.metrics,
            }
        )
    }


def run_orphan_findings(instance: DagsterInstance, run_id: str) -> dict[AssetKey, Finding]:
    """The orphan findings a maintenance run recorded for the tables it maintained (its own listing
    of storage, after removal), by table key; empty for a run that maintained nothing (the checks
    then list storage themselves). One query for the run."""
    found: dict[AssetKey, Finding] = {}
    records = instance.get_records_for_run(
        run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION, limit=100_000
    )
    for record in records.records:
        dagster_event = record.event_log_entry.dagster_event
        materialization = dagster_event.step_materialization_data.materialization if dagster_event else None
        value = (materialization.metadata or {}).get(RUN_ORPHANS_METADATA) if materialization else None
        if materialization is not None and value is not None:
            data = cast(dict[str, Any], value.value)  # written by run_orphans_metadata
            found[materialization.asset_key] = Finding(
                ORPHAN_CHECK,
                Severity(data["severity"]),
                data["summary"],
                data["recommendation"],
                dict(data.get("metrics") or {}),
            )
    return found


# Executions looked through for the latest evaluated one (planned ones of runs that never ran it too).
_HISTORY = 10


def table_health(
    icelake: IcelakeResource,
    table: Table,
    ref: TableRef,
    instance: DagsterInstance | None = None,
    stats: TableStats | None = None,
    orphans_removed: bool = False,
    orphans: Finding | None = None,
) -> TableHealth:
    """The table's findings (every check), score and status. ``stats``: already computed ones;
    ``orphans_removed``: a run just removed every orphan, so the recorded orphan result is stale;
    ``orphans``: a run's own scan of storage, newer than any recorded orphan check."""
    effective = icelake.effective_policy(table)
    policy = effective.policy
    report = configuration_report(table.metadata.format_version, table.properties, effective)
    extra = [configuration_finding(report, effective)]
    not_evaluated: tuple[str, ...] = ()
    if orphans is not None:
        extra.append(orphans)
    elif not orphans_removed:
        if (orphans := recorded_orphan_finding(instance, ref)) is not None:
            extra.append(orphans)
        else:  # never evaluated (or only planned): Unknown until it is, not Healthy
            not_evaluated = (ORPHAN_CHECK,)
    stats = stats if stats is not None else icelake.stats(table, policy)
    return evaluate(stats, policy, extra, name=str(ref), not_evaluated=not_evaluated)
