"""Health per partition at a glance on a partitioned table's table-level checks (issue 51, item 4):
``small_files``, ``delete_files``, ``layout_drift`` and the health summary each say how many of the
table's partitions fail (the summary: fail any of the three), the worst few by the Dagster partition
key a backfill selects, and link to the asset's partitions page, where those keys are selected.

The numbers come from the table's PartitionReport (planning/partition_health.py), graded from the
statistics the table-level checks just read: the health sensor grades it once for both these and its
partition reports (sensors/health.py). An unpartitioned table's checks carry none of it.

``worst_partition_keys``, not ``worst_partitions``: the small_files result already has a
``worst_partitions`` table (Iceberg partitions by file count, failing or not)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

from dagster import AssetKey, MetadataValue
from pyiceberg.table import Table

from icelake_assets.health.findings import Severity
from icelake_assets.health.overview import TableHealth
from icelake_assets.orchestration.checks.results import HEALTH_CHECK
from icelake_assets.partitions.layout import partition_layout
from icelake_assets.planning.partition_health import (
    PARTITION_CHECKS,
    PartitionHealth,
    PartitionReport,
    partition_health,
)

TOP = 5  # worst partitions named per check: a line a person reads, the rest are one click away
# The number a person reads first in a failing partition of each check (the partition's own check
# result has every number).
_HEADLINE = {
    "small_files": ("data_files", "files"),
    "delete_files": ("delete_files", "delete files"),
    "layout_drift": ("drift_files", "drift files"),
}


@dataclass(frozen=True)
class WorstPartition:
    """A failing partition: ``key`` None when no Dagster partition holds it (``labels``: its Iceberg
    partitions); ``over``: how many times its threshold (the largest of its failing checks')."""

    key: str | None
    labels: tuple[str, ...]
    severity: Severity
    over: float
    numbers: tuple[str, ...]  # e.g. "7 files", one per failing check summarised

    def text(self) -> str:
        name = self.key if self.key is not None else f"(no key) {self.labels[0]}"
        return f"{name} ({self.severity.value}, {self.over:g}x: {', '.join(self.numbers)})"


@dataclass(frozen=True)
class PartitionSummary:
    """One table-level check's view of the partitions: ``check`` one of PARTITION_CHECKS, or
    HEALTH_CHECK for the partitions failing any of them."""

    check: str
    partitions: int  # graded
    failing: int
    worst: tuple[WorstPartition, ...]  # worst first, at most TOP


def _headline(p: PartitionHealth, check: str) -> str:
    metric, unit = _HEADLINE[check]
    return f"{p.finding(check).metrics.get(metric, 0)} {unit}"


def _worst(p: PartitionHealth, checks: tuple[str, ...]) -> WorstPartition:
    failing = [f for f in p.failing if f.check in checks]
    return WorstPartition(
        p.key,
        p.labels,
        max((f.severity for f in failing), key=lambda s: s.rank),
        max(float(f.metrics.get("over_threshold", 0.0)) for f in failing),
        tuple(_headline(p, f.check) for f in failing),
    )


def _rank(w: WorstPartition) -> tuple:
    return (-w.severity.rank, -w.over, w.key is None, w.key or "", w.labels)


def summarize(report: PartitionReport, top: int = TOP) -> dict[str, PartitionSummary]:
    """Per check of PARTITION_CHECKS and HEALTH_CHECK, its failing partitions; empty for an
    unpartitioned table. Ranked as the report ranks offenders (severity, then times the threshold)."""
    if not report.partitioned:
        return {}
    graded = len(report.partitions)
    out = {}
    for check in PARTITION_CHECKS:
        failing = [_worst(p, (check,)) for p in report.partitions if not p.finding(check).passed]
        out[check] = PartitionSummary(check, graded, len(failing), tuple(sorted(failing, key=_rank)[:top]))
    unhealthy = [_worst(p, PARTITION_CHECKS) for p in report.unhealthy]
    out[HEALTH_CHECK] = PartitionSummary(
        HEALTH_CHECK, graded, len(unhealthy), tuple(sorted(unhealthy, key=_rank)[:top])
    )
    return out


def partitions_page(asset_key: AssetKey) -> str:
    """The asset's partitions page in the Dagster UI, root-relative like the product's other links
    (there is no base URL setting): ``/assets/<key parts, each escaped, joined by />?view=partitions``."""
    return "/assets/" + "/".join(quote(part, safe="") for part in asset_key.path) + "?view=partitions"


def summary_metadata(summary: PartitionSummary, asset_key: AssetKey) -> dict[str, MetadataValue]:
    """The check result's entries: the count (always, so the UI plots it), the worst keys when any
    fail, and the link."""
    md: dict[str, MetadataValue] = {"failing_partitions": MetadataValue.int(summary.failing)}
    if summary.worst:
        shown = ", ".join(w.text() for w in summary.worst)
        more = summary.failing - len(summary.worst)
        md["worst_partition_keys"] = MetadataValue.text(shown + (f" and {more} more" if more else ""))
    md["partitions_page"] = MetadataValue.url(partitions_page(asset_key))
    return md


def partition_metadata(
    report: PartitionReport | None, asset_key: AssetKey
) -> dict[str, Mapping[str, MetadataValue]]:
    """By check name, what its table-level result adds (checks/results.py's ``by_check``)."""
    if report is None:
        return {}
    return {check: summary_metadata(s, asset_key) for check, s in summarize(report).items()}


def table_partition_report(table: Table, health: TableHealth) -> PartitionReport:
    """The table's partitions graded from the statistics ``health`` was judged on (no second read)."""
    return partition_health(health.stats, health.policy, partition_layout(table, with_earliest=False))


def unhealthy_partitions(report: PartitionReport) -> int | None:
    """For the lake overview: the partitions failing any check, None for an unpartitioned table."""
    return len(report.unhealthy) if report.partitioned else None
