"""Asset checks of each table, from pyiceberg metadata only (no Spark), and the lake-wide overview.

The metadata checks share one op per table (one metadata read serves all five); the orphan check
lists storage, which is expensive, so it is a separate check with its own job and a slower schedule
(see project.py). Every result carries numeric metadata (plotted by the UI), the table's health
score and status, the worst partitions as a table and a one-line recommendation.
"""

import time
from typing import Any, Iterator, Sequence

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetChecksDefinition,
    AssetExecutionContext,
    AssetIn,
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    MaterializeResult,
    MetadataValue,
    Nothing,
    TableColumn,
    TableRecord,
    TableSchema,
    asset,
)

from icelake_assets.catalog.connection import CatalogUnavailableError, TableMissingError
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.health.findings import Finding, Severity, orphan_finding
from icelake_assets.health.overview import TableHealth, lake_overview
from icelake_assets.orchestration.assets import table_asset_key
from icelake_assets.orchestration.health import ORPHAN_CHECK, table_health
from icelake_assets.orchestration.names import named_checks
from icelake_assets.orchestration.resources import IcelakeResource

METADATA_CHECKS = {
    "small_files": "Partitions with many files that are small on average (compaction candidates).",
    "snapshot_retention": "Snapshots piling up beyond the retention policy (count and age).",
    "manifest_fragmentation": "Too many manifests in the current snapshot.",
    "delete_files": "Position and equality delete files (merge-on-read) relative to the data they delete from.",
    "layout_drift": "Data files written under an older partition spec or out of the table's sort order.",
}
OVERVIEW_KEY = AssetKey(["icelake", "health_overview"])


def _number(value: int | float) -> MetadataValue:
    if isinstance(value, int) and not isinstance(value, bool):
        return MetadataValue.int(value)
    return MetadataValue.float(float(value))


def _table_value(rows: Sequence[dict[str, object]]) -> MetadataValue:
    columns = list(rows[0])
    kinds = {"int": "int", "float": "float", "bool": "bool"}
    types = {c: kinds.get(type(rows[0][c]).__name__, "string") for c in columns}
    return MetadataValue.table(
        records=[TableRecord({c: (row[c] if types[c] != "string" else str(row[c])) for c in columns}) for row in rows],
        schema=TableSchema(columns=[TableColumn(c, types[c]) for c in columns]),
    )


def health_metadata(health: TableHealth) -> dict[str, MetadataValue]:
    """The table-level numbers every check result carries (the UI plots each over time)."""
    s = health.stats
    md: dict[str, MetadataValue] = {k: _number(v) for k, v in health.metrics().items()}
    md["health_status"] = MetadataValue.text(health.status.value)
    md["recent_writer_commits"] = MetadataValue.int(s.recent_writer_commits)
    md["manifests_read"] = MetadataValue.int(s.manifests_read)
    for name in ("last_writer_commit_age_minutes", "last_maintenance_age_minutes"):
        value = getattr(s, name)
        if value is not None:
            md[name] = MetadataValue.float(round(value, 2))
    return md


def check_result(finding: Finding, asset_key, extra: dict[str, MetadataValue] | None = None) -> AssetCheckResult:
    metadata: dict[str, Any] = {k: _number(v) for k, v in finding.metrics.items()}
    metadata.update(extra or {})
    metadata["summary"] = MetadataValue.text(finding.summary)
    metadata["recommendation"] = MetadataValue.text(finding.recommendation)
    if finding.rows:
        metadata["worst_partitions" if "partition" in finding.rows[0] else "sample"] = _table_value(finding.rows)
    return AssetCheckResult(
        asset_key=asset_key,
        check_name=finding.check,
        passed=finding.passed,
        severity=AssetCheckSeverity.ERROR if finding.severity is Severity.ERROR else AssetCheckSeverity.WARN,
        metadata=metadata,
        description=f"{finding.summary}. Recommendation: {finding.recommendation}",
    )


def build_table_checks(table: DiscoveredTable) -> list[AssetChecksDefinition]:
    ref = table.ref
    key = table_asset_key(ref)

    @named_checks(
        name=f"{ref.safe_name}__metadata_checks",
        specs=[AssetCheckSpec(name, asset=key, description=desc) for name, desc in METADATA_CHECKS.items()],
        can_subset=True,
        description=f"Health of {ref} from Iceberg metadata",
    )
    def metadata_checks(context: AssetCheckExecutionContext, icelake: IcelakeResource) -> Iterator[AssetCheckResult]:
        started = time.perf_counter()
        tbl = icelake.load_table(ref)
        health = table_health(icelake, tbl, ref, context.instance)
        extra = {**health_metadata(health),
                 "evaluation_ms": MetadataValue.float(round((time.perf_counter() - started) * 1000, 2))}
        selected = {k.name for k in context.selected_asset_check_keys}
        context.log.info(f"{ref}: {health.status.value}, score {health.score.score}")
        for finding in health.findings:
            if finding.check in selected:
                yield check_result(finding, key, extra)

    @named_checks(
        name=f"{ref.safe_name}__{ORPHAN_CHECK}",
        specs=[AssetCheckSpec(ORPHAN_CHECK, asset=key, description="Files under the table location that no "
                              "snapshot references, leaving hidden files and other tables' files aside "
                              "(lists storage; never deletes).")],
    )
    def orphan_files(icelake: IcelakeResource) -> Iterator[AssetCheckResult]:
        tbl = icelake.load_table(ref)
        policy = icelake.policy(tbl)
        scan = icelake.scan_orphans(ref, tbl, policy)
        orphans = scan.orphans
        finding = orphan_finding(len(orphans), sum(o.size for o in orphans), policy,
                                 [o.path for o in orphans], scan.hidden_files, scan.skipped, scan.refused)
        extra = ({"skipped_sample": MetadataValue.json(scan.summary()["skipped_sample"])}
                 if scan.skipped else {})
        yield check_result(finding, key, extra)

    return [metadata_checks, orphan_files]


def metadata_check_keys(tables: Sequence[DiscoveredTable]) -> list[AssetCheckKey]:
    return [AssetCheckKey(table_asset_key(t.ref), name) for t in tables for name in METADATA_CHECKS]


def orphan_check_keys(tables: Sequence[DiscoveredTable]) -> list[AssetCheckKey]:
    return [AssetCheckKey(table_asset_key(t.ref), ORPHAN_CHECK) for t in tables]


def metadata_checks_selection(tables: Sequence[DiscoveredTable]) -> AssetSelection:
    return AssetSelection.checks(*metadata_check_keys(tables))


def orphan_checks_selection(tables: Sequence[DiscoveredTable]) -> AssetSelection:
    return AssetSelection.checks(*orphan_check_keys(tables))


def build_health_overview(tables: Sequence[DiscoveredTable]) -> AssetsDefinition:
    """The lake-wide overview asset: tables and partitions ranked by the expected benefit of maintenance."""

    @asset(
        key=OVERVIEW_KEY,
        group_name="icelake",
        kinds={"iceberg"},
        # Named inputs: deps=[key] derives input names from the keys, refusing e.g. o'brien or café.
        ins={t.ref.safe_name: AssetIn(key=table_asset_key(t.ref), dagster_type=Nothing) for t in tables},
        description="What to fix first, and why: every table's health status and score, and the tables and "
                    "partitions ranked by the file opens maintenance would save (pyiceberg metadata only).",
    )
    def health_overview(context: AssetExecutionContext, icelake: IcelakeResource) -> MaterializeResult:
        healths = []
        for t in tables:
            try:
                tbl = icelake.load_table(t.ref)
            except (TableMissingError, CatalogUnavailableError) as err:
                context.log.warning(f"{t.ref} left out of the overview: {err}")
                continue
            healths.append(table_health(icelake, tbl, t.ref, context.instance))
        overview = lake_overview(healths)
        metadata: dict[str, Any] = {k: _number(v) for k, v in overview.metrics().items()}
        metadata["overview"] = MetadataValue.md(overview.markdown())
        if overview.tables:
            metadata["ranking"] = _table_value([
                {"table": t.table, "status": t.status.value, "score": t.score, "files_saved": t.files_saved,
                 "manifests_saved": t.manifests_saved, "expirable_snapshots": t.expirable_snapshots,
                 "rewrite_mb": round(t.rewrite_bytes / 1_048_576, 2), "why": t.why}
                for t in overview.tables])
        return MaterializeResult(metadata=metadata)

    return health_overview
