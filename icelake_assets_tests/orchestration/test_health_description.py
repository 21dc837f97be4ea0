"""The `health` check's one line (what the UI shows of it) names the worst finding first: highest
severity, then the largest penalty on the score, then the checks' own order."""

from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.overview import TableHealth
from icelake_assets.health.score import verdict
from icelake_assets.health.stats import TableStats
from icelake_assets.orchestration.checks.results import health_result, worst_first
from icelake_assets.settings import Policy

MiB = 1_048_576
POLICY = Policy()


def stats(files: int, avg_bytes: float, records: int = 1000, eq: int = 0) -> TableStats:
    return TableStats(
        table="t",
        metadata_location="m",
        current_snapshot_id=1,
        target_file_size_bytes=128 * MiB,
        data_files=files,
        data_bytes=int(files * avg_bytes),
        records=records,
        equality_delete_records=eq,
    )


def finding(check: str, severity: Severity) -> Finding:
    return Finding(check, severity, f"{check} {severity.value}", "fix it")


def _health(table_stats: TableStats, *findings: Finding) -> TableHealth:
    """The table's health by the one rule, over ``findings`` instead of its metadata checks' own."""
    score, status = verdict(table_stats, POLICY, findings)
    return TableHealth("t", table_stats, findings, score, status, POLICY)


def test_an_error_comes_before_a_warning_whatever_the_checks_order():
    health = _health(
        stats(100, 128 * MiB),
        finding("snapshot_retention", Severity.WARN),
        finding("layout_drift", Severity.WARN),
        finding("orphan_files", Severity.ERROR),
    )
    result = health_result(health, None)
    assert result.description == (
        f"Critical, score {health.score.score}/100; failing: orphan_files, snapshot_retention, layout_drift"
    )
    assert [f.check for f in worst_first(health)] == ["orphan_files", "snapshot_retention", "layout_drift"]


def test_between_equal_severities_the_larger_penalty_comes_first():
    # Small files (avg 24 MiB: 30 points) and equality deletes (5 % of rows: 20 points), both ERROR;
    # manifests cost no points: last of the three although listed first.
    health = _health(
        stats(100, 24 * MiB, records=1000, eq=50),
        finding("manifest_fragmentation", Severity.ERROR),
        finding("delete_files", Severity.ERROR),
        finding("small_files", Severity.ERROR),
    )
    assert health_result(health, None).description.endswith(
        "failing: small_files, delete_files, manifest_fragmentation"
    )
    # The table's deletes now cost more than its small files (avg 72 MiB: 10 points; deletes 40).
    health = _health(
        stats(100, 72 * MiB, records=1000, eq=500),
        finding("small_files", Severity.ERROR),
        finding("delete_files", Severity.ERROR),
    )
    assert health_result(health, None).description.endswith("failing: delete_files, small_files")


def test_the_summary_table_keeps_the_checks_order():
    health = _health(
        stats(100, 128 * MiB),
        finding("small_files", Severity.OK),
        finding("snapshot_retention", Severity.WARN),
        finding("orphan_files", Severity.ERROR),
    )
    summary = health_result(health, None).metadata["summary"].value
    rows = [line.split(" | ")[0].lstrip("| ") for line in summary.splitlines() if line.startswith("| ")]
    assert rows[1:] == ["small_files", "snapshot_retention", "orphan_files"]
