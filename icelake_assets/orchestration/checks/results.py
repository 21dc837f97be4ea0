"""What a table's asset checks report: a Finding as an AssetCheckResult (numeric metadata the UI plots,
the worst partitions as a table, a one-line recommendation) and the health summary with its score and
status. checks/asset_checks.py builds the check definitions that return these."""

from collections.abc import Mapping, Sequence
from typing import Any, cast

from dagster import AssetCheckResult, AssetCheckSeverity, MetadataValue, TableColumn, TableRecord, TableSchema

from icelake_assets.catalog.locations import metadata_file
from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.overview import TableHealth
from icelake_assets.health.score import PENALTY_FINDING, WEIGHTS, HealthStatus
from icelake_assets.orchestration.display import human_bytes
from icelake_assets.planning.op_plans import healers

METADATA_CHECKS = {
    "small_files": "Partitions with many files that are small on average (compaction candidates).",
    "snapshot_retention": "Snapshots piling up beyond the retention policy (count and age).",
    "manifest_fragmentation": "Too many manifests in the current snapshot.",
    "delete_files": "Position and equality delete files (merge-on-read) relative to the data they delete from.",
    "layout_drift": "Data files written under an older partition spec or out of the table's sort order.",
    "statistics": "Column statistics (Puffin NDV sketches) for cost-based optimizers: missing for the current "
    "snapshot, or computed on rows that changed since.",
    "data_retention": "Rows older than the retention policy keeps (from the retention column's bounds in the "
    "manifests): files wholly past the cut-off and files straddling it.",
}
# One summary per table: its status and score, every check's result and a link to the job that fixes it.
HEALTH_CHECK = "health"
# The health summary's entry naming the metadata file it judged (its name, not its whole path).
METADATA_FILE = "metadata_file"


HEALTH_CHECK_DESCRIPTION = (
    "The table's health at a glance: status (Healthy / Warning / Critical), "
    "score out of 100, and each failing check with a link to the maintenance "
    "job that fixes it."
)


def number_value(value: int | float) -> MetadataValue:
    if isinstance(value, int) and not isinstance(value, bool):
        return MetadataValue.int(value)
    return MetadataValue.float(float(value))


def table_value(rows: Sequence[dict[str, object]]) -> MetadataValue:
    columns = list(rows[0])
    kinds = {"int": "int", "float": "float", "bool": "bool"}
    # A column's type from its first value that is not None (None stays an empty cell).
    first = {c: next((row[c] for row in rows if row[c] is not None), "") for c in columns}
    types = {c: kinds.get(type(first[c]).__name__, "string") for c in columns}
    return MetadataValue.table(
        records=[
            TableRecord(
                {
                    c: (cast(int | float | None, row[c]) if types[c] != "string" else str(row[c]))
                    for c in columns
                }
            )
            for row in rows
        ],
        schema=TableSchema(columns=[TableColumn(c, types[c]) for c in columns]),
    )


def health_metadata(health: TableHealth) -> dict[str, MetadataValue]:
    """The table-level numbers every check result carries (the UI plots each over time)."""
    s = health.stats
    md: dict[str, MetadataValue] = {k: number_value(v) for k, v in health.metrics().items()}
    md["health_status"] = MetadataValue.text(health.status.value)
    md["recent_writer_commits"] = MetadataValue.int(s.recent_writer_commits)
    md["manifests_read"] = MetadataValue.int(s.manifests_read)
    if s.restore_points.tags:  # the restore points and the storage only they hold
        md.update({k: number_value(v) for k, v in s.restore_points.metrics().items()})
    for name in ("last_writer_commit_age_minutes", "last_maintenance_age_minutes"):
        value = getattr(s, name)
        if value is not None:
            md[name] = MetadataValue.float(round(value, 2))
    return md


def human_sizes(metrics: dict[str, int | float]) -> str:
    """The byte counts among ``metrics`` in human units, for people (the numbers stay for plots)."""
    return ", ".join(
        f"{k.removesuffix('_bytes').replace('_', ' ')} {human_bytes(v)}"
        for k, v in metrics.items()
        if k.endswith("_bytes") and not isinstance(v, bool)
    )


def fix_link(check: str, fix_job: str | None) -> str | None:
    """Markdown link to the job whose run fixes ``check`` (Dagster's /guess/<job> finds its location)."""
    ops = healers(check)  # the ops that heal it (planning/op_plans.py)
    return f"[{fix_job}](/guess/{fix_job}) ({', '.join(ops)})" if ops and fix_job else None


def check_result(
    finding: Finding, asset_key, extra: Mapping[str, MetadataValue] | None = None, fix_job: str | None = None
) -> AssetCheckResult:
    metadata: dict[str, Any] = {k: number_value(v) for k, v in finding.metrics.items()}
    metadata.update(extra or {})
    metadata["summary"] = MetadataValue.text(finding.summary)
    if sizes := human_sizes(finding.metrics):
        metadata["sizes"] = MetadataValue.text(sizes)
    metadata["recommendation"] = MetadataValue.text(finding.recommendation)
    if not finding.passed and (link := fix_link(finding.check, fix_job)):
        metadata["fix"] = MetadataValue.md(f"Materialize the table: {link}")
    if finding.rows:
        first = finding.rows[0]
        name = "worst_partitions" if "partition" in first else "columns" if "column" in first else "sample"
        metadata[name] = table_value(finding.rows)
    return AssetCheckResult(
        asset_key=asset_key,
        check_name=finding.check,
        passed=finding.passed,
        severity=AssetCheckSeverity.ERROR if finding.severity is Severity.ERROR else AssetCheckSeverity.WARN,
        metadata=metadata,
        description=f"{finding.summary}. Recommendation: {finding.recommendation}",
    )


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def finding_penalty(health: TableHealth, check: str) -> float:
    """The points of the score a failing ``check`` costs (its layout penalties, weighted by the table
    factor, as in health/score.py's rule; 0 for a check that costs no points, e.g. manifests)."""
    score = health.score
    return score.table_factor * sum(
        WEIGHTS[k] * v for k, v in score.penalties.items() if PENALTY_FINDING.get(k) == check
    )


def worst_first(health: TableHealth) -> list[Finding]:
    """The failing findings, the one that matters most first: highest severity, then the largest
    penalty on the score, then the checks' own order."""
    failing = [f for f in health.findings if not f.passed]
    return sorted(failing, key=lambda f: (-f.severity.rank, -finding_penalty(health, f.check)))


def health_result(
    health: TableHealth, asset_key, extra: dict[str, MetadataValue] | None = None, fix_job: str | None = None
) -> AssetCheckResult:
    """The per-table summary: passes only when the table is Healthy; one row per check, with the job
    that fixes each failing one. The description (the one line the UI shows) names the failing checks
    worst first (:func:`worst_first`)."""
    failing = worst_first(health)
    rows = ["| check | result | finding | fix |", "|---|---|---|---|"]
    for f in health.findings:
        result = "passed" if f.passed else f"**{f.severity.value}**"
        fix = "" if f.passed else (fix_link(f.check, fix_job) or _cell(f.recommendation))
        rows.append(f"| {f.check} | {result} | {_cell(f.summary)} | {fix} |")
    if failing:
        verdict = f"failing: {', '.join(f.check for f in failing)}"
    elif health.not_evaluated:
        verdict = f"not evaluated yet: {', '.join(health.not_evaluated)}"
    else:
        verdict = "every check passes"
    description = f"{health.status.value}, score {health.score.score}/100; {verdict}"
    metadata: dict[str, Any] = dict(extra or {})
    metadata["failing_checks"] = MetadataValue.int(len(failing))
    metadata["summary"] = MetadataValue.md(f"**{description}**\n\n" + "\n".join(rows))
    # The metadata version judged: the health sensor does not judge it again (sensors/health.py).
    metadata[METADATA_FILE] = MetadataValue.text(metadata_file(health.stats.metadata_location))
    return AssetCheckResult(
        asset_key=asset_key,
        check_name=HEALTH_CHECK,
        passed=health.status is HealthStatus.HEALTHY,
        metadata=metadata,
        severity=(
            AssetCheckSeverity.ERROR if health.status is HealthStatus.CRITICAL else AssetCheckSeverity.WARN
        ),
        description=description,
    )


def metadata_check_results(
    health: TableHealth,
    asset_key,
    selected: set[str] | None = None,
    extra: dict[str, MetadataValue] | None = None,
    fix_job: str | None = None,
    by_check: Mapping[str, Mapping[str, MetadataValue]] | None = None,
) -> list[AssetCheckResult]:
    """The metadata checks' results (``selected`` names, default all) and the health summary.
    ``by_check``: what one check's result adds (a partitioned table's failing partitions:
    checks/partition_summary.py)."""
    extra = {**health_metadata(health), **(extra or {})}
    by_check = by_check or {}
    results = [
        check_result(f, asset_key, {**extra, **by_check.get(f.check, {})}, fix_job)
        for f in health.findings
        if f.check in METADATA_CHECKS and (selected is None or f.check in selected)
    ]
    if selected is None or HEALTH_CHECK in selected:
        results.append(health_result(health, asset_key, {**extra, **by_check.get(HEALTH_CHECK, {})}, fix_job))
    return results
