"""Building the project's Definitions from settings (kept apart from definitions.py so importing it
does not load the lake)."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from dagster import (
    AssetKey,
    AssetsDefinition,
    Definitions,
    PreviewWarning,
    get_dagster_logger,
    in_process_executor,
)

from icelake_assets.catalog import inventory
from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable, DiscoveryProblem, discover_lake
from icelake_assets.maintenance.spark.session import spark_config
from icelake_assets.orchestration.assets.graph import MAINTENANCE_JOB, fix_jobs_of, maintenance_definitions
from icelake_assets.orchestration.assets.lineage import Lineage, build_lineage
from icelake_assets.orchestration.assets.restore_job import restore_job
from icelake_assets.orchestration.assets.run_state_io import RunStateStore
from icelake_assets.orchestration.checks.asset_checks import (
    CHECKS_JOB,
    HEALTH_JOB,
    ORPHANS_JOB,
    OVERVIEW_KEY,
    health_definitions,
)
from icelake_assets.orchestration.checks.lake_access import build_catalogs_check, problems_markdown
from icelake_assets.orchestration.checks.layout_checks import build_layout_checks
from icelake_assets.orchestration.checks.partition_checks import partition_checks_enabled
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import (
    ICELAKE_RESOURCE,
    RUN_STATE_IO_MANAGER,
    SPARK_RESOURCE,
    IcebergSparkResource,
    IcelakeResource,
)
from icelake_assets.orchestration.sensors.health import build_health_sensor, build_overview_sensor
from icelake_assets.orchestration.sensors.maintenance import build_maintenance_sensor
from icelake_assets.orchestration.sensors.scan_reports import build_scan_reports_sensor
from icelake_assets.orchestration.sensors.schedules import schedule_definitions
from icelake_assets.orchestration.tables.partitions import build_partition_keys_sensor
from icelake_assets.orchestration.tables.table_groups import TableGroup, group_tables, maintenance_job_name
from icelake_assets.policies import EffectivePolicy, resolve_policies
from icelake_assets.private_api import IMPLICIT_ASSET_JOB_NAME, DefinitionsLoadContext, DefinitionsLoadType
from icelake_assets.settings import CONFIG_ENV_VAR, ChecksPerTable, Settings, load_settings
from icelake_assets.settings.asset_keys import use_asset_keys

# The job names live with their modules; re-exported here for the command line, demo and tests.
__all__ = [
    "CHECKS_JOB",
    "HEALTH_JOB",
    "INVENTORY_METADATA_KEY",
    "MAINTENANCE_JOB",
    "ORPHANS_JOB",
    "build_definitions",
    "execute_maintenance",
    "load_definitions",
    "maintenance_job_names",
    "table_maintenance_job",
]
# Reconstruction metadata: the inventory file the code server loaded its tables from.
INVENTORY_METADATA_KEY = "icelake/inventory"


@dataclass(frozen=True)
class _LakeShape:
    """What the Definitions are built from: the tables with their policies, lineage and groups."""

    settings: Settings
    tables: list[DiscoveredTable]
    problems: Sequence[DiscoveryProblem]
    policies: Mapping[TableRef, EffectivePolicy]
    lineage: Lineage
    groups: list[TableGroup]
    # The checks each table carries (automation.checks_per_table), by the whole lake's size: a run
    # worker's definitions, built for some of its tables, carry the code server's checks.
    checks: ChecksPerTable = "each"


def _lake_shape(
    settings: Settings | None,
    tables: Sequence[DiscoveredTable] | None,
    problems: Sequence[DiscoveryProblem],
) -> _LakeShape:
    settings = settings or load_settings()
    use_asset_keys(settings.asset_keys)
    if tables is None:
        found = discover_lake(settings)
        tables, problems = found.tables, found.problems
    tables = list(tables)
    policies = resolve_policies(settings, ((t.ref, t.properties) for t in tables))
    # Tables the project defines: its own lineage; the product adds checks and maintenance jobs only.
    lineage = (
        Lineage(producers={t.ref: [] for t in tables})
        if settings.asset_keys.defined_by_project
        else build_lineage(tables, policies)
    )
    groups = group_tables(tables, settings.automation.maintenance_pools, lineage.producers)
    checks = settings.automation.checks_for(len(tables))
    if settings.automation.checks_per_table == "auto" and checks == "summary":
        get_dagster_logger().info(
            f"automation.checks_per_table auto: the health summary and orphan check per table for "
            f"{len(tables)} tables (every check up to {settings.automation.checks_each_max_tables}; set "
            "it to each or summary to keep the checks as the lake grows)"
        )
    return _LakeShape(settings, tables, problems, policies, lineage, groups, checks)


def build_definitions(
    settings: Settings | None = None,
    tables: Sequence[DiscoveredTable] | None = None,
    problems: Sequence[DiscoveryProblem] = (),
    *,
    standalone: bool = True,
) -> Definitions:
    """Definitions for ``tables`` (default: discovery of every selected table of the configured
    catalogs): each orchestration module contributes its part, merged here with the resources.
    ``problems``: catalogs and tables discovery could not read (shown on the lake overview).

    Every job of the product runs in process (every op of a run shares one Spark JVM instead of one
    per step). ``standalone``: the product is the whole code location, so the in-process executor
    is also the default of the assets' implicit jobs (partition runs and backfills); added to a
    user's project (embedding.py), it sets no executor and leaves the project's own."""
    shape = _lake_shape(settings, tables, problems)
    _warn_left_out(shape.problems)
    return _assemble(shape, standalone=standalone, automation=True)


def build_run_definitions(
    settings: Settings, tables: Sequence[DiscoveredTable], selected: Collection[AssetKey]
) -> Definitions | None:
    """What a run worker needs for a run that selects the table assets ``selected`` (and their
    checks): the table groups of their pools, whole, as the code server built them (same ops, same
    partitions), with the lake-wide jobs over them and no sensor or schedule. At 10,000 tables a run
    then reconstructs a few hundred tables' ops instead of every table's. None where that would not
    be the code server's graph: a key that is not a table's, a group with producer assets (lineage),
    tables the project defines (its runs name the table in a tag)."""
    if settings.asset_keys.defined_by_project:
        return None
    shape = _lake_shape(settings, tables, ())
    selected = set(selected)
    pools = {g.pool for g in shape.groups if any(table_asset_key(r) in selected for r in g.refs)}
    groups = [g for g in shape.groups if g.pool in pools]
    kept = [t for g in groups for t in g.tables]
    if not selected <= {table_asset_key(t.ref) for t in kept} or any(g.producers for g in groups):
        return None
    lineage = Lineage(producers={t.ref: shape.lineage.producers[t.ref] for t in kept})
    return _assemble(
        replace(shape, tables=kept, lineage=lineage, groups=groups), standalone=True, automation=False
    )


def _assemble(shape: _LakeShape, *, standalone: bool, automation: bool) -> Definitions:
    """``automation``: with the sensors and schedules (a run worker's definitions need none)."""
    settings, tables, policies, groups = shape.settings, shape.tables, shape.policies, shape.groups
    config_path = settings.source if Path(settings.source).is_file() else os.environ.get(CONFIG_ENV_VAR)
    project_owned = settings.asset_keys.defined_by_project
    granularity = shape.checks
    partition_checks = partition_checks_enabled(settings.automation.partition_checks, granularity)
    interval = min((p.policy.sensor.interval_seconds for p in policies.values()), default=300)

    maintenance = maintenance_definitions(groups, policies, defined_by_project=project_owned)
    fix_jobs = fix_jobs_of(groups, maintenance)
    health = health_definitions(
        tables, groups, fix_jobs, granularity, problems_markdown(shape.problems), partition_checks
    )
    sensors = (
        [
            build_maintenance_sensor(
                tables,
                {t.ref: g.partitions_def for g in groups for t in g.tables},
                settings,
                interval,
                jobs=list(maintenance.jobs or ()),
                job_of=fix_jobs,
                by_table_tag=project_owned,
            ),
            build_partition_keys_sensor(tables, interval),
            build_health_sensor(
                tables,
                fix_jobs,
                interval,
                settings.automation.tick_budget_seconds,
                granularity,
                partition_checks,
            ),
            build_overview_sensor(max(interval, settings.automation.overview_min_interval_seconds)),
            build_scan_reports_sensor(settings, tables),
        ]
        if automation
        else []
    )
    schedules = (
        schedule_definitions(settings, tables, policies, health, fix_jobs if project_owned else None)
        if automation
        else Definitions()
    )
    return Definitions.merge(
        maintenance,
        health,
        Definitions(assets=shape.lineage.assets),
        Definitions(sensors=[s for s in sensors if s is not None]),
        Definitions(asset_checks=[build_catalogs_check(OVERVIEW_KEY, shape.problems)]),
        # layout_from_queries on every table, where the lake collects scan reports (issue 52)
        Definitions(
            asset_checks=[build_layout_checks(tables)] if settings.scan_reports.dir and tables else []
        ),
        Definitions(jobs=[restore_job]),  # `icelake restore` (operate/restore.py)
        schedules,
        Definitions(
            resources={
                ICELAKE_RESOURCE: IcelakeResource(config_path=config_path),
                SPARK_RESOURCE: IcebergSparkResource(
                    spark_config=spark_config(settings, include_secrets=False),
                    config_path=config_path,
                    session=settings.spark.session,
                    idle_seconds=settings.spark.idle_minutes * 60,
                ),
                RUN_STATE_IO_MANAGER: RunStateStore(),
            },
            executor=in_process_executor if standalone else None,
        ),
    )


def _warn_left_out(problems: Sequence[DiscoveryProblem]) -> None:
    """One warning per catalog or table the load left out, in Dagster's log of the code server (the
    UI shows them on the lake overview: its description and ``catalogs_reachable`` check)."""
    log = get_dagster_logger("icelake")
    for problem in problems:
        log.warning(f"left out of the code location: {problem} (see {OVERVIEW_KEY.to_user_string()})")


def load_definitions(context: DefinitionsLoadContext, run: RunSelection | None = None) -> Definitions:
    """The code location's Definitions (definitions.py): tables from the cached inventory
    (catalog/inventory.py) or from discovery. The code server records which inventory it used in the
    reconstruction metadata; a run worker then reads that file instead of discovering again, and
    given its ``run`` builds only what that run selects (:func:`build_run_definitions`)."""
    settings = load_settings()
    recorded = (
        context.reconstruction_metadata.get(INVENTORY_METADATA_KEY)
        if context.load_type == DefinitionsLoadType.RECONSTRUCTION
        else None
    )
    tables = None
    problems: tuple[DiscoveryProblem, ...] = ()
    if recorded:
        cached = inventory.read(settings, Path(json.loads(recorded)["path"]), any_age=True)
        tables = cached.tables if cached else None
    if tables is not None and run is not None and run.asset_keys:
        partial = build_run_definitions(settings, tables, run.asset_keys)
        jobs = _job_names(partial) if partial is not None else set()
        if partial is not None and run.job_name in jobs:
            get_dagster_logger("icelake").info(
                f"run {run.run_id}: definitions of {len(jobs)} jobs over the table "
                f"groups of its {len(run.asset_keys)} selected tables only"
            )
            return partial
    if tables is None:
        loaded = inventory.load_inventory(settings)
        tables, problems = loaded.tables, loaded.problems
    path = inventory.inventory_path()
    defs = build_definitions(settings, tables, problems)
    if path is None:
        return defs
    record = json.dumps({"path": str(path)})
    if context.load_type == DefinitionsLoadType.INITIALIZATION:
        # What Dagster hands a run worker: the load context's pending metadata (a @definitions
        # function's Definitions metadata never reaches the run's repository load data).
        context.add_to_pending_reconstruction_metadata(INVENTORY_METADATA_KEY, record)
    # Dagster's public way to hand a run worker what the code server loaded. It is marked preview and
    # would warn on every code-location load (daemon, code server, dg): a change of it in a Dagster
    # release shows in test_run_worker_definitions.py and test_definitions_entry.py, not in users' logs.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PreviewWarning)
        return defs.with_reconstruction_metadata({INVENTORY_METADATA_KEY: record})


@dataclass(frozen=True)
class RunSelection:
    """The run a run worker loads the definitions for: its job and the assets it selects (its
    checks' assets included)."""

    run_id: str
    job_name: str
    asset_keys: frozenset[AssetKey]


def _job_names(defs: Definitions) -> set[str]:
    # The implicit asset job (backfills, partition runs) exists wherever assets do.
    return {j.name for j in defs.jobs or ()} | {IMPLICIT_ASSET_JOB_NAME}


def table_maintenance_job(defs: Definitions, key: AssetKey) -> str:
    """The whole-table maintenance job of the table whose asset key is ``key``."""
    for asset in defs.assets or ():
        if isinstance(asset, AssetsDefinition) and key in asset.keys:
            return maintenance_job_name(asset, MAINTENANCE_JOB)
    raise KeyError(f"no table asset {key.to_user_string()} in these definitions")


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
