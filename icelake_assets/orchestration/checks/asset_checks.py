"""Asset checks of each table, from pyiceberg metadata only (no Spark), and the lake-wide overview.

The metadata checks share one op per table (one metadata read serves all five); the orphan check
lists storage, which is expensive, so it is a separate check with its own job and a slower schedule
(see project.py). Every result carries numeric metadata (plotted by the UI), the table's health
score and status, the worst partitions as a table and a one-line recommendation.
"""

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    AutomationCondition,
    Definitions,
    MaterializeResult,
    MetadataValue,
    Nothing,
    asset,
    define_asset_job,
    in_process_executor,
)

from icelake_assets.audit.metrics import record_health
from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable, DiscoveryProblem
from icelake_assets.health.findings import Finding
from icelake_assets.health.overview import lake_overview
from icelake_assets.orchestration.checks import approvals
from icelake_assets.orchestration.checks.benefits import lake_benefit
from icelake_assets.orchestration.checks.configuration import build_config_checks
from icelake_assets.orchestration.checks.group_ops import group_checks
from icelake_assets.orchestration.checks.health import ORPHAN_CHECK, run_orphan_findings, table_health
from icelake_assets.orchestration.checks.partition_checks import (
    partition_check_definitions,
    partition_checks_enabled,
)
from icelake_assets.orchestration.checks.partition_report_job import partition_report_job
from icelake_assets.orchestration.checks.partition_summary import (
    partition_metadata,
    table_partition_report,
    unhealthy_partitions,
)
from icelake_assets.orchestration.checks.results import (
    HEALTH_CHECK,
    HEALTH_CHECK_DESCRIPTION,
    METADATA_CHECKS,
    check_result,
    health_metadata,
    metadata_check_results,
    number_value,
    table_value,
)
from icelake_assets.orchestration.display import md_cell
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.tables.table_groups import TableGroup
from icelake_assets.planning.orphans import orphan_finding
from icelake_assets.settings import ChecksPerTable

OVERVIEW_KEY = AssetKey(["icelake", "health_overview"])
CHECKS_JOB = "icelake_health_checks"
# Health without Spark: the metadata checks and the lake-wide overview (cheap, run often), and the
# orphan check, which lists storage (expensive, run less often). Their schedules: settings.automation.
HEALTH_JOB = "icelake_health"
ORPHANS_JOB = "icelake_orphan_checks"


def metadata_check_names(granularity: ChecksPerTable = "each") -> tuple[str, ...]:
    """The metadata checks of each table (``automation.checks_per_table``): every one and the health
    summary, or the summary alone (which reports every check's finding)."""
    return (*METADATA_CHECKS, HEALTH_CHECK) if granularity == "each" else (HEALTH_CHECK,)


def _metadata_specs(table: DiscoveredTable, names: Sequence[str]) -> list[AssetCheckSpec]:
    key = table_asset_key(table.ref)
    descriptions = {**METADATA_CHECKS, HEALTH_CHECK: HEALTH_CHECK_DESCRIPTION}
    return [AssetCheckSpec(name, asset=key, description=descriptions[name]) for name in names]


def _orphan_specs(table: DiscoveredTable) -> list[AssetCheckSpec]:
    return [
        AssetCheckSpec(
            ORPHAN_CHECK,
            asset=table_asset_key(table.ref),
            description="Files under the table location that no "
            "snapshot references, leaving hidden files and other tables' files aside "
            "(lists storage; never deletes).",
        )
    ]


def build_group_checks(
    name: str,
    tables: Sequence[DiscoveredTable],
    fix_jobs: Mapping[TableRef, str] | None = None,
    granularity: ChecksPerTable = "each",
) -> list[AssetChecksDefinition]:
    """The metadata checks (one metadata read serves all of a table's checks) and the orphan check
    of ``tables``, in one op for the group. The orphan check, when the run selects it, goes first, so
    the table's health summary in the same run reads its fresh result (one verdict per run; the
    summary of a run without it rests on the latest evaluated one). ``fix_jobs``: each table's
    maintenance job (by ref), linked from its failing checks."""
    fix_jobs = fix_jobs or {}

    # The orphan findings a maintenance run recorded, read once per run (not once per table).
    recorded: dict[str, dict[AssetKey, Finding]] = {}

    def evaluate_table(
        context: AssetCheckExecutionContext, icelake: IcelakeResource, t: DiscoveredTable, selected: set[str]
    ) -> Iterator[AssetCheckResult]:
        started = time.perf_counter()
        tbl = icelake.load_table(t.ref)  # once for both kinds of check
        fresh: Finding | None = None
        if ORPHAN_CHECK in selected:
            fresh, extra = orphans(context, icelake, t, tbl)
            yield check_result(fresh, table_asset_key(t.ref), extra, fix_job=fix_jobs.get(t.ref))
            started = time.perf_counter()
        if selected - {ORPHAN_CHECK}:
            yield from metadata(context, icelake, t, tbl, selected, fresh, started)

    def metadata(
        context: AssetCheckExecutionContext,
        icelake: IcelakeResource,
        t: DiscoveredTable,
        tbl,
        selected: set[str],
        orphans_now: Finding | None,
        started: float,
    ) -> Iterator[AssetCheckResult]:
        health = table_health(icelake, tbl, t.ref, context.instance, orphans=orphans_now)
        extra = {
            **health_metadata(health),
            "evaluation_ms": MetadataValue.float(round((time.perf_counter() - started) * 1000, 2)),
        }
        context.log.info(f"{t.ref}: {health.status.value}, score {health.score.score}")
        record_health(icelake.settings, t.ref, health.status, health.score.score)
        key = table_asset_key(t.ref)
        by_check = partition_metadata(table_partition_report(tbl, health), key)
        yield from metadata_check_results(health, key, selected, extra, fix_jobs.get(t.ref), by_check)

    def orphans(
        context: AssetCheckExecutionContext, icelake: IcelakeResource, t: DiscoveredTable, tbl
    ) -> tuple[Finding, dict[str, Any]]:
        run_id = context.run.run_id
        if run_id not in recorded:
            recorded[run_id] = run_orphan_findings(context.instance, run_id)
        # After this run's maintenance of the table: its own listing of storage, not a second one.
        if (reused := recorded[run_id].get(table_asset_key(t.ref))) is not None:
            return reused, {
                "listing": MetadataValue.text("this run's remove_orphan_files listing (not listed again)")
            }
        policy = icelake.policy(tbl)
        scan = icelake.scan_orphans(t.ref, tbl, policy)
        phases = icelake.orphan_phases(t.ref, scan, policy)
        # Without a window every orphan found counts (a refused table's too); with one, those past it.
        found = list(phases.removable) if phases is not None else scan.orphans
        finding = orphan_finding(
            len(found),
            sum(o.size for o in found),
            policy,
            [o.path for o in found],
            scan.hidden_files,
            scan.skipped,
            scan.refused,
            scan.deferred,
            phases.summary() if phases is not None else None,
        )
        extra = (
            {"skipped_sample": MetadataValue.json(cast(list[str], scan.summary()["skipped_sample"]))}
            if scan.skipped
            else {}
        )
        return finding, extra

    return [
        group_checks(
            f"{name}__checks",
            tables,
            lambda t: [*_orphan_specs(t), *_metadata_specs(t, metadata_check_names(granularity))],
            evaluate_table,
            "Health from Iceberg metadata, and orphan files (lists storage) when selected",
        )
    ]


def metadata_check_keys(
    tables: Sequence[DiscoveredTable], granularity: ChecksPerTable = "each"
) -> list[AssetCheckKey]:
    return [
        AssetCheckKey(table_asset_key(t.ref), name)
        for t in tables
        for name in metadata_check_names(granularity)
    ]


def orphan_check_keys(tables: Sequence[DiscoveredTable]) -> list[AssetCheckKey]:
    return [AssetCheckKey(table_asset_key(t.ref), ORPHAN_CHECK) for t in tables]


def metadata_checks_selection(
    tables: Sequence[DiscoveredTable], granularity: ChecksPerTable = "each"
) -> AssetSelection:
    return AssetSelection.checks(*metadata_check_keys(tables, granularity))


def orphan_checks_selection(tables: Sequence[DiscoveredTable]) -> AssetSelection:
    return AssetSelection.checks(*orphan_check_keys(tables))


def overview_automation_condition() -> AutomationCondition:
    """When the overview refreshes by itself (Dagster's declarative automation): after a table was
    maintained (a materialization of a table asset) or had checks reported (a maintenance run's, the
    health sensor's tick, a check run), once the tables' runs in progress have ended (one refresh for
    several tables healed at once), never two at a time. A table never maintained does not hold it back
    (unlike ``AutomationCondition.eager()``, which waits for every dependency to be materialized).

    Each change holds until the overview is next requested, not until it is next updated
    (``since_last_handled``): a table maintained while the overview's own run reads the lake (its sensor
    ticks once a minute) was dropped when that run ended in the same tick, and the refresh after the
    last run of a heal waited on a later report. Kept apart from the checks' change, a table's
    materialization keeps its time, which Dagster's ``since`` weighs against the request's."""
    requested = AutomationCondition.newly_requested()
    maintained = AutomationCondition.any_deps_match(AutomationCondition.newly_updated()).since(requested)
    checked = AutomationCondition.any_deps_match(
        AutomationCondition.any_checks_match(AutomationCondition.newly_updated())
    ).since(requested)
    return (
        (maintained | checked).with_label("a table was maintained or checked since the last refresh")
        & ~AutomationCondition.any_deps_in_progress()
        & ~AutomationCondition.in_progress()
    ).with_label("refresh after a table's maintenance or checks")


def build_health_overview(
    tables: Sequence[DiscoveredTable], left_out: str = "", fix_jobs: Mapping[TableRef, str] | None = None
) -> AssetsDefinition:
    """The lake-wide overview asset: tables and partitions ranked by the expected benefit of maintenance,
    and the tables that wait (held, proposed, deferred: orchestration/checks/approvals.py);
    ``left_out``: markdown naming what the load could not read; ``fix_jobs``: each table's maintenance
    job. It refreshes by itself after every maintenance run and health tick
    (:func:`overview_automation_condition`, evaluated by the overview's automation sensor,
    sensors/health.py), and with the health job's schedule."""

    @asset(
        key=OVERVIEW_KEY,
        group_name="icelake",
        kinds={"iceberg"},
        automation_condition=overview_automation_condition(),
        # Named inputs: deps=[key] derives input names from the keys, refusing e.g. o'brien or café.
        ins={t.ref.safe_name: AssetIn(key=table_asset_key(t.ref), dagster_type=Nothing) for t in tables},
        description="What to fix first, and why: every table's health status and score, and the tables and "
        "partitions ranked by the file opens maintenance would save (pyiceberg metadata only)." + left_out,
    )
    def health_overview(context: AssetExecutionContext, icelake: IcelakeResource) -> MaterializeResult:
        healths, left_out, waiting = [], [], []
        unhealthy: dict[str, int] = {}  # failing partitions by table (partitioned tables only)
        for t in tables:
            try:
                loaded = icelake.load_table(t.ref)
                healths.append(table_health(icelake, loaded, t.ref, context.instance))
                count = unhealthy_partitions(table_partition_report(loaded, healths[-1]))
                if count is not None:
                    unhealthy[healths[-1].table] = count
                mode = icelake.effective_policy(loaded).mode
                if row := approvals.waiting_row(t.ref, healths[-1], mode, approvals.job_of(fix_jobs, t.ref)):
                    waiting.append(row)
            except Exception as err:  # one table that cannot be evaluated must not hide the others
                problem = DiscoveryProblem.from_error(t.ref.catalog, err, t.ref)
                context.log.warning(f"left out of the overview: {problem}")
                left_out.append(problem)
        overview = lake_overview(healths, unhealthy_partitions=unhealthy)
        metadata: dict[str, Any] = {k: number_value(v) for k, v in overview.metrics().items()}
        metadata["overview"] = MetadataValue.md(overview.markdown())
        # Always present, so the UI plots it (0 when every table was evaluated).
        metadata["tables/left_out"] = MetadataValue.int(len(left_out))
        metadata.update(approvals.waiting_metadata(waiting))
        # Waiting time per table, as the maintenance sensor last saw it (its cursor, not re-derived).
        metadata.update(approvals.lag_metadata(icelake.settings, [t.ref for t in tables]))
        # What the latest maintenance of each table bought readers and storage, summed (plotted).
        metadata.update(lake_benefit(context.instance, [table_asset_key(t.ref) for t in tables]).metadata())
        if left_out:
            metadata["left_out"] = MetadataValue.md("\n".join(f"- {md_cell(str(p), 300)}" for p in left_out))
        if overview.tables:
            metadata["ranking"] = table_value(
                [
                    {
                        "table": t.table,
                        "status": t.status.value,
                        "score": t.score,
                        "files_saved": t.files_saved,
                        "manifests_saved": t.manifests_saved,
                        "expirable_snapshots": t.expirable_snapshots,
                        "rewrite_mb": round(t.rewrite_bytes / 1_048_576, 2),
                        "unhealthy_partitions": t.unhealthy_partitions,  # None: unpartitioned
                        "why": t.why,
                    }
                    for t in overview.tables
                ]
            )
        return MaterializeResult(metadata=metadata)

    return health_overview


def health_definitions(
    tables: Sequence[DiscoveredTable],
    groups: Sequence[TableGroup],
    fix_jobs: Mapping[TableRef, str],
    granularity: ChecksPerTable = "each",
    left_out: str = "",
    partition_checks: bool | None = None,
) -> Definitions:
    """This module's part of the code location: every table's checks (one op per kind and table
    group; orchestration/tables/table_groups.py), the lake-wide overview (``left_out``: what the load could
    not read), and the jobs that run them. ``partition_checks``: partitioned tables also carry their
    checks per partition (partition_checks.py; None: ``automation.partition_checks: auto``), which the
    runs that maintain them report, and ``icelake_partition_checks`` between runs; the checks jobs
    leave them out (they run unpartitioned, over tables of every partitions definition)."""
    enabled = partition_checks_enabled("auto", granularity) if partition_checks is None else partition_checks
    by_partition = partition_check_definitions(groups, enabled)
    checks = [
        c
        for g in groups
        for c in (
            *build_group_checks(g.name, g.tables, fix_jobs, granularity),
            *(build_config_checks(g.name, g.tables) if granularity == "each" else ()),
        )
    ]
    jobs = [
        define_asset_job(
            CHECKS_JOB,
            executor_def=in_process_executor,
            # The product's checks only: a project that adds the product keeps its own checks apart.
            selection=AssetSelection.checks(*checks) | AssetSelection.checks_for_assets(OVERVIEW_KEY),
            description="Every table's health checks (pyiceberg metadata only, no Spark)",
        ),
        define_asset_job(
            HEALTH_JOB,
            executor_def=in_process_executor,
            selection=AssetSelection.assets(OVERVIEW_KEY) | metadata_checks_selection(tables, granularity),
            description="Metadata checks of every table and the lake-wide overview (no Spark)",
        ),
        define_asset_job(
            ORPHANS_JOB,
            executor_def=in_process_executor,
            selection=orphan_checks_selection(tables),
            description="Orphan check of every table: lists storage, never deletes",
        ),
    ]
    return Definitions(
        assets=[build_health_overview(tables, left_out, fix_jobs)],
        asset_checks=[*checks, *by_partition],
        jobs=[*jobs, *([partition_report_job] if by_partition else [])],
    )
