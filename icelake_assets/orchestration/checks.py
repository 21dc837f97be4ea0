"""Asset checks of each table, from pyiceberg metadata only (no Spark).

The metadata checks share one op per table (one metadata read serves all of them); the orphan check
lists storage, which is expensive, so it is a separate check that can be run on its own schedule.
"""


from typing import Iterator

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetChecksDefinition,
    MetadataValue,
    TableColumn,
    TableRecord,
    TableSchema,
    asset_check,
    multi_asset_check,
)

from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.health.findings import Finding, Severity, metadata_findings, orphan_finding
from icelake_assets.health.orphans import find_orphans
from icelake_assets.orchestration.assets import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource

METADATA_CHECKS = {
    "small_files": "Partitions with many files that are small on average (compaction candidates).",
    "snapshot_retention": "Snapshots piling up beyond the retention policy (count and age).",
    "manifest_fragmentation": "Too many manifests in the current snapshot.",
}


def check_result(finding: Finding, asset_key) -> AssetCheckResult:
    metadata: dict = {k: (MetadataValue.int(v) if isinstance(v, int) else MetadataValue.float(float(v)))
                      for k, v in finding.metrics.items()}
    metadata["summary"] = MetadataValue.text(finding.summary)
    metadata["recommendation"] = MetadataValue.text(finding.recommendation)
    if finding.rows:
        columns = list(finding.rows[0])
        metadata["worst_partitions"] = MetadataValue.table(
            records=[TableRecord(dict(row)) for row in finding.rows],
            schema=TableSchema(columns=[TableColumn(c, type(finding.rows[0][c]).__name__) for c in columns]),
        )
    return AssetCheckResult(
        asset_key=asset_key,
        check_name=finding.check,
        passed=finding.passed,
        severity=AssetCheckSeverity.ERROR if finding.severity is Severity.ERROR else AssetCheckSeverity.WARN,
        metadata=metadata,
        description=finding.summary,
    )


def build_table_checks(table: DiscoveredTable) -> list[AssetChecksDefinition]:
    ref = table.ref
    key = table_asset_key(ref)

    @multi_asset_check(
        name=f"{ref.safe_name}__metadata_checks",
        specs=[AssetCheckSpec(name, asset=key, description=desc) for name, desc in METADATA_CHECKS.items()],
        can_subset=True,
        description=f"Health of {ref} from Iceberg metadata",
    )
    def metadata_checks(context: AssetCheckExecutionContext, icelake: IcelakeResource) -> Iterator[AssetCheckResult]:
        tbl = icelake.load_table(ref)
        stats = icelake.stats(tbl)
        selected = {k.name for k in context.selected_asset_check_keys}
        for finding in metadata_findings(stats, icelake.policy(tbl)):
            if finding.check in selected:
                yield check_result(finding, key)

    @asset_check(
        asset=key,
        name="orphan_files",
        description="Files under the table location that no snapshot references (lists storage; never deletes).",
    )
    def orphan_files(icelake: IcelakeResource) -> AssetCheckResult:
        tbl = icelake.load_table(ref)
        policy = icelake.policy(tbl)
        orphans = find_orphans(tbl, policy.orphans.older_than_hours)
        return check_result(orphan_finding(len(orphans), sum(o.size for o in orphans), policy), key)

    return [metadata_checks, orphan_files]
