"""The read tools of ``icelake mcp``: each returns the JSON document the matching ``icelake … --json``
command prints (operate/: ``icelake.health/v1``, ``icelake.partition_health/v1``, ``icelake.plan/v1``,
``icelake.policy/v1``, ``icelake.audit/v1``), computed by the same functions; two documents have no
command of their own: ``icelake.statistics/v1`` (a table's column statistics from its metadata and
Puffin files) and the overview's ``benefit`` (what past maintenance runs bought, from the Dagster
instance). No tool scans data or runs SQL: metadata, manifests, Puffin footers and the audit table
only."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import datetime

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import CatalogUnavailableError, load_table, open_catalog
from icelake_assets.catalog.discovery import DiscoveryProblem, discover_lake
from icelake_assets.health.cache import ManifestCache, default_cache_path
from icelake_assets.health.overview import TableHealth, lake_overview
from icelake_assets.health.statistics import read_puffin_ndv
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.operate.audit_view import AuditTrail, parse_since, read_trail
from icelake_assets.operate.commands import health_json, policy_json
from icelake_assets.operate.names import parse_table
from icelake_assets.operate.partition_health import (
    DEFAULT_TOP,
    partition_health_json,
    read_partition_health,
    unhealthy_partition_count,
)
from icelake_assets.operate.plan import plan_table
from icelake_assets.operate.table_health import table_health
from icelake_assets.policies import EffectivePolicy, format_value, resolve_policy
from icelake_assets.settings import Settings
from icelake_assets.types import TableRef

# A JSON document as the commands print it: a mapping of plain JSON values, "schema" naming its shape.
JsonDocument = dict[str, object]
STATISTICS_SCHEMA = "icelake.statistics/v1"
# The policy sections whose knobs set each finding's thresholds (check name -> policy key prefixes).
THRESHOLD_SECTIONS: dict[str, tuple[str, ...]] = {
    "small_files": ("small_files.",),
    "snapshot_retention": ("snapshots.",),
    "manifest_fragmentation": ("manifests.",),
    "delete_files": ("delete_files.",),
    "layout_drift": ("layout.",),
    "statistics": ("statistics.",),
    "orphan_files": ("orphans.",),
}


@dataclass(frozen=True)
class LakeHealth:
    healths: tuple[TableHealth, ...]
    problems: tuple[DiscoveryProblem, ...]


def table_ref(settings: Settings, table: str) -> TableRef:
    """A table name as the commands take it; an unknown one raises TableMissingError naming it."""
    return parse_table(table, settings)


def lake_health(settings: Settings, only: TableRef | None = None) -> LakeHealth:
    """Every selected table's health (or ``only``'s), and what could not be read, as `icelake health`
    reports them: a catalog down or a broken table is a problem of its own, the others are reported."""
    if only is not None:
        refs, problems = [only], []
    else:
        found = discover_lake(settings)
        refs, problems = [t.ref for t in found.tables], list(found.problems)
    cache = ManifestCache(path=default_cache_path())
    healths = []
    for ref in refs:
        try:
            catalog = open_catalog(settings, ref.catalog)
            healths.append(table_health(settings, catalog, ref, cache))
        except Exception as err:  # missing, unreadable, catalog down: this table only
            if only is not None:  # the one table asked for: the caller's error names it
                raise
            props = settings.catalog_properties(ref.catalog)
            problems.append(DiscoveryProblem.from_error(ref.catalog, err, ref, props))
    if problems and not healths:  # nothing readable (every catalog down): an error, not an empty lake
        raise CatalogUnavailableError("; ".join(str(p) for p in problems))
    return LakeHealth(tuple(healths), tuple(problems))


def list_tables(settings: Settings) -> JsonDocument:
    """``icelake health --json``: every table's status, score, numbers and findings."""
    lake = lake_health(settings)
    return health_json(lake.healths, lake.problems, None)


def _effective(settings: Settings, ref: TableRef) -> EffectivePolicy:
    table = load_table(open_catalog(settings, ref.catalog), ref)
    return resolve_policy(settings, ref, table.properties)


def table_findings(settings: Settings, table: str) -> JsonDocument:
    """``icelake health TABLE --json``, each finding with its numbers and the policy values that set
    its thresholds, each with its source (the settings file's key, a table property, the default)."""
    ref = table_ref(settings, table)
    lake = lake_health(settings, ref)
    doc = health_json(lake.healths, lake.problems, None)
    effective = _effective(settings, ref)
    health = lake.healths[0]
    by_check = {f.check: f for f in health.findings}
    for entry in doc["tables"][0]["findings"]:
        finding = by_check[entry["check"]]
        prefixes = THRESHOLD_SECTIONS.get(finding.check, (finding.check + ".",))
        entry["metrics"] = dict(finding.metrics)
        entry["thresholds"] = [
            {"key": v.key, "value": format_value(v.value), "source": v.source}
            for v in effective.values
            if v.key.startswith(prefixes)
        ]
    return doc


def partition_health(settings: Settings, table: str, top: int = DEFAULT_TOP) -> JsonDocument:
    """``icelake health TABLE --partitions --json`` (icelake.partition_health/v1): the table's
    unhealthy partitions by Dagster key, their failing checks and numbers, the worst per check."""
    report, dimensions, snapshot_id = read_partition_health(settings, table_ref(settings, table), top=top)
    return partition_health_json(report, dimensions, snapshot_id)


def layout_usage(settings: Settings, table: str) -> JsonDocument:
    """``icelake layout show TABLE --json`` (icelake.layout/v1): the columns the table's recorded scans
    filter, how and how often, and the layout the replay of those filters would choose, and why."""
    from icelake_assets.operate.layout_view import layout_json, layout_report, load_reports

    ref = table_ref(settings, table)
    return layout_json(layout_report(settings, ref, load_reports(settings, ref)))


def plan(settings: Settings, table: str, orphans: bool = False) -> JsonDocument:
    """``icelake plan TABLE --json``: what maintenance would do now, why, at what cost."""
    return plan_table(settings, table_ref(settings, table), orphans=orphans).to_json()


def policy(settings: Settings, table: str, changed: bool = False) -> JsonDocument:
    """``icelake policy TABLE --json``: the effective policy, each value with its source."""
    ref = table_ref(settings, table)
    return policy_json(str(ref), True, _effective(settings, ref), settings.source, changed)


def column_statistics(settings: Settings, table: str, read_puffin: bool = False) -> JsonDocument:
    """``icelake.statistics/v1``: rows, file sizes and each column's NDV from the Puffin statistics
    the metadata references (with ``read_puffin`` the Puffin file's own footer is read too), no scan."""
    ref = table_ref(settings, table)
    tbl = load_table(open_catalog(settings, ref.catalog), ref)
    effective = resolve_policy(settings, ref, tbl.properties)
    stats = compute_table_stats(tbl, effective.policy, ManifestCache(path=default_cache_path()))
    facts = stats.statistics
    ndv = dict(facts.ndv)
    if read_puffin and facts.path:
        ndv = {**ndv, **read_puffin_ndv(tbl, facts.path)}
    return {
        "schema": STATISTICS_SCHEMA,
        "table": str(ref),
        "snapshot_id": stats.current_snapshot_id,
        "rows": stats.records,
        "data_files": stats.data_files,
        "data_bytes": stats.data_bytes,
        "file_sizes": {
            "min": stats.file_size_min,
            "p10": stats.file_size_p10,
            "p50": stats.file_size_p50,
            "p90": stats.file_size_p90,
            "max": stats.file_size_max,
            "target": stats.target_file_size_bytes,
        },
        "delete_files": stats.position_delete_files + stats.equality_delete_files,
        "delete_bytes": stats.delete_bytes,
        "puffin": {
            "snapshot_id": facts.snapshot_id,
            "current": facts.current,
            "commits_behind": facts.commits_behind,
            "rows_at": facts.rows_at,
            "file_bytes": facts.file_bytes,
            "read_from_file": bool(read_puffin and facts.path),
        },
        "columns": [
            {
                "name": name,
                "field_id": field_id,
                "ndv": ndv.get(field_id),
                "key": name in facts.key_columns,
            }
            for field_id, name in facts.columns
        ],
    }


def audit(
    settings: Settings,
    table: str | None = None,
    run_id: str | None = None,
    since: str | None = None,
    limit: int | None = 50,
) -> JsonDocument:
    """``icelake audit [TABLE] --json``, or the records of one Dagster run (``run_id``)."""
    ref = table_ref(settings, table) if table else None
    when: datetime | None = parse_since(since) if since else None
    if run_id is None:
        return read_trail(settings, ref, when, limit).to_json()
    if limit is not None and limit < 1:
        raise ValueError(f"invalid limit {limit}: expected a number of records >= 1")
    log = AuditLog.from_settings(settings)
    records = log.records(table=str(ref) if ref else None, since=when, run_id=run_id)
    records = records[-limit:] if limit else records
    doc = AuditTrail(log.name, str(ref) if ref else None, when, limit, tuple(records)).to_json()
    return {**doc, "run_id": run_id}


def overview(settings: Settings) -> JsonDocument:
    """``icelake health --overview --json`` (what to fix first), and ``benefit``: what the latest
    maintenance run of each table bought (files a full scan no longer opens, metadata bytes, storage),
    read from the Dagster instance of ``$DAGSTER_HOME`` (None without one)."""
    lake = lake_health(settings)
    unhealthy = {}
    for health in lake.healths:
        ref = TableRef.parse(health.table)
        count = unhealthy_partition_count(open_catalog(settings, ref.catalog), ref, health)
        if count is not None:
            unhealthy[health.table] = count
    overview_ = lake_overview(lake.healths, unhealthy_partitions=unhealthy)
    doc = health_json(lake.healths, lake.problems, overview_)
    doc["benefit"] = _benefit(settings, lake.healths)
    return doc


def _benefit(settings: Settings, healths: tuple[TableHealth, ...]) -> dict[str, object] | None:
    if not os.environ.get("DAGSTER_HOME"):
        return None
    from dagster import AssetKey, DagsterInstance

    from icelake_assets.orchestration.checks.benefits import lake_benefit
    from icelake_assets.settings.asset_keys import asset_key_path

    keys = [AssetKey(asset_key_path(TableRef.parse(h.table))) for h in healths]
    with DagsterInstance.get() as instance:
        benefit = lake_benefit(instance, keys)
    return {
        "runs": benefit.runs,
        "files_saved": benefit.files_saved,
        "metadata_bytes_saved": benefit.metadata_bytes_saved,
        "storage_reclaimed": benefit.storage_reclaimed,
    }


__all__ = [
    "JsonDocument",
    "LakeHealth",
    "audit",
    "column_statistics",
    "lake_health",
    "list_tables",
    "overview",
    "partition_health",
    "plan",
    "policy",
    "table_findings",
]
