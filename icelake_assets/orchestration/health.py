"""One health truth per table: the status and score every surface shows (the metadata checks'
``health_status``, the overview asset, a maintenance run's ``health/status``) come from here.

The verdict (health/score.py: one rule for status and score) covers *all* the table's checks: the
five metadata findings, the ``table_configuration`` check (metadata only, computed here) and the
``orphan_files`` check, which lists storage and so is taken from its latest recorded evaluation in
the Dagster instance (never run here). A table is never Healthy while one of its checks fails, and
is Unknown while its orphan check has never been evaluated.
"""

from dagster import AssetCheckEvaluation, AssetCheckKey, DagsterInstance

from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.overview import TableHealth, evaluate
from icelake_assets.orchestration.config_checks import configuration_finding
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.policies import configuration_report

ORPHAN_CHECK = "orphan_files"


def orphan_check_planned(instance: DagsterInstance | None, ref: TableRef) -> bool:
    """The table's orphan check has an execution recorded (evaluated, or planned in a run now)."""
    if instance is None:
        return False
    key = AssetCheckKey(table_asset_key(ref), ORPHAN_CHECK)
    return instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key) is not None


def recorded_orphan_finding(instance: DagsterInstance | None, ref: TableRef) -> Finding | None:
    """The latest orphan_files evaluation of the table as a finding (None: never evaluated)."""
    if instance is None:
        return None
    key = AssetCheckKey(table_asset_key(ref), ORPHAN_CHECK)
    record = instance.event_log_storage.get_latest_asset_check_execution_by_key([key]).get(key)
    event = record.event if record is not None else None
    dagster_event = event.dagster_event if event is not None else None
    evaluation = dagster_event.event_specific_data if dagster_event is not None else None
    if not isinstance(evaluation, AssetCheckEvaluation):
        return None  # planned or still running: nothing recorded yet
    if evaluation.passed:
        return Finding(ORPHAN_CHECK, Severity.OK, evaluation.description or "passed", "nothing to remove")
    severity = Severity.ERROR if evaluation.severity.value == "ERROR" else Severity.WARN
    return Finding(ORPHAN_CHECK, severity, evaluation.description or "failed", "run remove_orphan_files")


def table_health(
    icelake: IcelakeResource,
    table,
    ref: TableRef,
    instance: DagsterInstance | None = None,
    stats=None,
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
        elif not orphan_check_planned(instance, ref):  # never scanned: Unknown until it is, not Healthy
            not_evaluated = (ORPHAN_CHECK,)
    stats = stats if stats is not None else icelake.stats(table, policy)
    return evaluate(stats, policy, extra, name=str(ref), not_evaluated=not_evaluated)
