"""The lake-wide overview: which tables and partitions to maintain first, and why.

Expected benefit is counted in the unit a reader pays for: **file opens saved per full scan**.

* a partition's compaction saves ``data_files - ceil(data_bytes / target)`` data files, counted only
  when it has at least ``small_files.min_input_files`` small files (below that Iceberg's
  rewrite_data_files would not rewrite it either), plus its delete files, which a rewrite applies;
* a table's manifest rewrite saves ``manifests - ceil(manifest_bytes / manifest target)`` manifests
  when manifest_fragmentation is failing (every scan plans through every manifest).

Tables are ranked by that benefit, then (for the sensor, which knows it) by the age of the finding,
oldest first, then by status (Critical before Warning before Healthy), then by snapshots that expiry
would remove (:func:`priority_key`, also the order in which the sensor launches runs when the global
run cap leaves fewer slots than tables to heal); partitions across the lake by their benefit. Expiring
snapshots and removing orphans save storage and planning time rather than file opens, so they are
listed in "why" without inflating the benefit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.retention import expiry_forecast
from icelake_assets.health.score import HealthScore, HealthStatus
from icelake_assets.health.stats import TableStats
from icelake_assets.settings import Policy
from icelake_assets.text import human_bytes

MiB = 1_048_576


@dataclass(frozen=True)
class TableHealth:
    """One table's evaluation: statistics, findings, score and status."""

    table: str
    stats: TableStats
    findings: tuple[Finding, ...]
    score: HealthScore
    status: HealthStatus
    policy: Policy
    not_evaluated: tuple[str, ...] = ()

    def finding(self, check: str) -> Finding | None:
        return next((f for f in self.findings if f.check == check), None)

    def metrics(self) -> dict[str, int | float]:
        return {**self.score.metrics(), "health_status_level": self.status.rank}


@dataclass(frozen=True)
class PartitionBenefit:
    table: str
    partition: str
    data_files: int
    expected_files: int
    delete_files: int
    files_saved: int
    rewrite_bytes: int
    why: str


@dataclass(frozen=True)
class TableBenefit:
    table: str
    status: HealthStatus
    score: int
    files_saved: int  # data + delete files, from compaction of the worthwhile partitions
    manifests_saved: int
    expirable_snapshots: int
    rewrite_bytes: int
    partitions: int  # partitions worth compacting
    actions: tuple[str, ...]
    why: str
    # Partitions failing a check per partition (planning/partition_health.py grades them, its caller
    # counts them); None: unpartitioned, or not counted.
    unhealthy_partitions: int | None = None

    @property
    def benefit(self) -> int:
        return self.files_saved + self.manifests_saved


def partition_benefits(stats: TableStats, policy: Policy, name: str | None = None) -> list[PartitionBenefit]:
    target = stats.target_file_size_bytes
    out = []
    for p in stats.partitions.values():
        expected = max(1, math.ceil(p.data_bytes / target)) if p.data_files else 0
        compact = p.small_files >= policy.small_files.min_input_files and p.data_files > expected
        saved = (p.data_files - expected if compact else 0) + p.delete_files
        if saved <= 0:
            continue
        reasons = []
        if compact:
            reasons.append(
                f"{p.data_files} files → ~{expected} ({p.small_files} small, "
                f"avg {human_bytes(p.avg_file_bytes)})"
            )
        if p.delete_files:
            reasons.append(f"{p.delete_files} delete files applied ({p.delete_records} deleted rows)")
        if p.drift_files:
            reasons.append(f"{p.drift_files} files out of layout")
        out.append(
            PartitionBenefit(
                name or stats.table,
                p.partition,
                p.data_files,
                expected if compact else p.data_files,
                p.delete_files,
                saved,
                p.data_bytes + p.delete_bytes,
                "; ".join(reasons),
            )
        )
    return sorted(out, key=lambda b: (-b.files_saved, b.rewrite_bytes, b.partition))


def table_benefit(health: TableHealth, unhealthy_partitions: int | None = None) -> TableBenefit:
    stats, policy = health.stats, health.policy
    parts = partition_benefits(stats, policy, health.table)
    manifests = health.finding("manifest_fragmentation")
    manifests_saved = 0
    if manifests is not None and not manifests.passed:
        expected = max(1, math.ceil(stats.manifest_bytes / stats.manifest_target_bytes))
        manifests_saved = max(0, stats.manifests - expected)
    snapshots = health.finding("snapshot_retention")
    expiring = snapshots is not None and not snapshots.passed
    expirable = expiry_forecast(stats, policy).count if expiring else 0
    failing = [f for f in health.findings if not f.passed]
    failing.sort(key=lambda f: -f.severity.rank)
    return TableBenefit(
        table=health.table,
        status=health.status,
        score=health.score.score,
        files_saved=sum(p.files_saved for p in parts),
        manifests_saved=manifests_saved,
        expirable_snapshots=expirable,
        rewrite_bytes=sum(p.rewrite_bytes for p in parts),
        partitions=len(parts),
        actions=tuple(f"{f.check}: {f.recommendation}" for f in failing),
        why="; ".join(f"{f.check} {f.severity.value}: {f.summary}" for f in failing) or "healthy",
        unhealthy_partitions=unhealthy_partitions,
    )


@dataclass(frozen=True)
class LakeOverview:
    tables: tuple[TableBenefit, ...]
    partitions: tuple[PartitionBenefit, ...]

    def counts(self) -> dict[str, int]:
        return {s.value.lower(): sum(1 for t in self.tables if t.status is s) for s in HealthStatus}

    def metrics(self) -> dict[str, int | float]:
        return {
            "tables": len(self.tables),
            **{f"tables_{k}": v for k, v in self.counts().items()},
            "files_saved": sum(t.files_saved for t in self.tables),
            "manifests_saved": sum(t.manifests_saved for t in self.tables),
            "expirable_snapshots": sum(t.expirable_snapshots for t in self.tables),
            "rewrite_bytes": sum(t.rewrite_bytes for t in self.tables),
            "min_health_score": min((t.score for t in self.tables), default=100),
            "unhealthy_partitions": sum(t.unhealthy_partitions or 0 for t in self.tables),
        }

    def markdown(self, tables: int = 20, partitions: int = 20) -> str:
        lines = [
            "## What to fix first",
            "",
            "Ranked by expected benefit (file opens saved per full scan), then status. "
            f"{self.counts()['critical']} critical, {self.counts()['warning']} warning, "
            f"{self.counts()['healthy']} healthy.",
            "",
            "| # | table | status | score | unhealthy partitions | files saved | manifests saved | "
            "snapshots to expire | rewrite MB | first action | why |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for i, t in enumerate(self.tables[:tables], 1):
            first = _cell(t.actions[0] if t.actions else "-")
            lines.append(
                f"| {i} | `{t.table}` | {t.status.value} | {t.score} | {_count(t.unhealthy_partitions)} | "
                f"{t.files_saved} | "
                f"{t.manifests_saved} | {t.expirable_snapshots} | {t.rewrite_bytes / MiB:.1f} | {first} | "
                f"{_cell(t.why)} |"
            )
        if self.partitions:
            lines += [
                "",
                "## Partitions with the largest benefit",
                "",
                "| # | table | partition | files | expected files | delete files | files saved | "
                "rewrite MB | why |",
                "|---|---|---|---|---|---|---|---|---|",
            ]
            for i, p in enumerate(self.partitions[:partitions], 1):
                lines.append(
                    f"| {i} | `{p.table}` | `{p.partition}` | {p.data_files} | {p.expected_files} | "
                    f"{p.delete_files} | {p.files_saved} | {p.rewrite_bytes / MiB:.1f} | {_cell(p.why)} |"
                )
        return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)  # "-": unpartitioned


def priority_key(t: TableBenefit, found_at: float | None = None) -> tuple[int, float, int, int, int, str]:
    """The one ranking of tables, best first: benefit, then the finding's age (``found_at``, epoch s,
    oldest first; unknown ages tie), then status, snapshots to expire, score and name."""
    return (
        -t.benefit,
        found_at if found_at is not None else 0.0,
        -t.status.rank,
        -t.expirable_snapshots,
        t.score,
        t.table,
    )


def lake_overview(
    healths: Sequence[TableHealth],
    top_partitions: int = 50,
    unhealthy_partitions: Mapping[str, int] | None = None,
) -> LakeOverview:
    """``unhealthy_partitions``: the partitioned tables' failing partitions, by table name (health/
    does not grade partitions by Dagster key: planning does, for the callers)."""
    counts = unhealthy_partitions or {}
    tables = sorted((table_benefit(h, counts.get(h.table)) for h in healths), key=priority_key)
    parts = sorted(
        (p for h in healths for p in partition_benefits(h.stats, h.policy, h.table)),
        key=lambda p: (-p.files_saved, p.rewrite_bytes, p.table, p.partition),
    )
    return LakeOverview(tuple(tables), tuple(parts[:top_partitions]))


__all__ = [
    "TableHealth",
    "PartitionBenefit",
    "TableBenefit",
    "partition_benefits",
    "table_benefit",
    "priority_key",
    "LakeOverview",
    "lake_overview",
    "Severity",
]
