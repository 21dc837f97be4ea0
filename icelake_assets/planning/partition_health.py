"""Health per partition: the findings that are a property of one partition (small_files,
delete_files, layout_drift), each graded on the partition's own numbers by the rule its table-level
finding uses (planning/rewrite.py, deletes.py, layout.py hold the one judgement both call), keyed by
the Dagster partition key the product gives that partition (icelake_assets/partitions/keys.py).

* small_files: a compaction candidate the table's rewrite takes (``taken_candidates``) fails,
  graded on its data files against ``max_files_per_partition`` (``grade_candidate``); the table's
  finding is the worst of its partitions'.
* delete_files: the partition's delete files per data file and deleted rows per row, graded against
  the policy's ratios (``grade_deletes``).
* layout_drift: the partition's drift files per data file (``grade_drift``).

A partition's delete and drift ratios are its own, so a partition may fail while the table's ratio
passes (its deletes concentrate there), and the other way round.

data_retention is table-level here: its facts (health/data_retention.py) count files against the
cut-off for the whole table, not per partition.

Several Iceberg partitions may share one Dagster key (files of an older, finer time spec inside a
current partition): their numbers are summed under the key. A partition without a key (an older
spec lacking the dimension's field, a null time value) is reported under its label with ``key``
None: only a whole-table run maintains it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from icelake_assets.health.findings import Finding, Severity, worst
from icelake_assets.health.stats import PartitionStats, TableStats
from icelake_assets.partitions.keys import key_parts
from icelake_assets.partitions.layout import PartitionLayout
from icelake_assets.partitions.values import partition_values
from icelake_assets.planning.deletes import grade_deletes, ratio_of
from icelake_assets.planning.layout import grade_drift
from icelake_assets.planning.rewrite import grade_candidate, plan_rewrite, taken_candidates
from icelake_assets.settings import Policy

PARTITION_CHECKS = ("small_files", "delete_files", "layout_drift")
MULTI_KEY_DELIMITER = "|"  # Dagster's MultiPartitionKey: dimension keys in sorted dimension-name order
MiB = 1_048_576
# PartitionStats' counts, summed when several partitions share a key.
COUNTS = (
    "data_files",
    "data_bytes",
    "records",
    "small_files",
    "delete_files",
    "position_delete_files",
    "equality_delete_files",
    "delete_records",
    "delete_bytes",
    "fragment_files",
    "old_spec_files",
    "unsorted_files",
)


def dagster_key(parts: dict[str, str]) -> str:
    """The Dagster partition key string of one partition's dimension keys (by dimension name): the
    key itself for one dimension, else Dagster's multi-partition key string."""
    if len(parts) == 1:
        return next(iter(parts.values()))
    return MULTI_KEY_DELIMITER.join(parts[name] for name in sorted(parts))


def partition_keys(layout: PartitionLayout, p: PartitionStats) -> tuple[str, ...]:
    """The Dagster keys one partition of the stats stands for (usually one; none when it maps to no
    Dagster partition), as orchestration/tables/partitions.py's ``partition_key`` spells them."""
    keys = []
    for values in partition_values(layout, p.partition, p.spec_id, p.values):
        parts = key_parts(layout, values)
        if parts is not None:
            keys.append(dagster_key(parts))
    return tuple(dict.fromkeys(keys))


@dataclass(frozen=True)
class PartitionHealth:
    """One Dagster partition's findings (one per check of PARTITION_CHECKS, passing ones included: a
    partition that healed reports passing). ``labels``: the Iceberg partitions (stats labels) it
    holds. ``key`` None: partitions no Dagster key stands for, one label each."""

    key: str | None
    labels: tuple[str, ...]
    findings: tuple[Finding, ...]

    @property
    def failing(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.passed)

    @property
    def healthy(self) -> bool:
        return not self.failing

    @property
    def severity(self) -> Severity:
        return worst(Severity.OK, *(f.severity for f in self.findings))

    def finding(self, check: str) -> Finding:
        return next(f for f in self.findings if f.check == check)


@dataclass(frozen=True)
class Offender:
    """A failing partition of one check, with its severity and how many times over its threshold
    the graded value is (``over``: 1 at the threshold, ERROR from 4)."""

    key: str | None
    labels: tuple[str, ...]
    severity: Severity
    over: float


@dataclass(frozen=True)
class CheckSummary:
    check: str
    failing: int
    worst: tuple[Offender, ...]  # the worst failing partitions, worst first


@dataclass(frozen=True)
class PartitionReport:
    table: str
    partitioned: bool
    partitions: tuple[PartitionHealth, ...]  # every partition, sorted by key (keyless last)
    checks: tuple[CheckSummary, ...]  # one per PARTITION_CHECKS

    @property
    def unhealthy(self) -> tuple[PartitionHealth, ...]:
        return tuple(p for p in self.partitions if not p.healthy)

    def failing_keys(self, check: str | None = None) -> list[str]:
        """Dagster keys of the partitions failing ``check`` (any check by default)."""
        return [
            p.key
            for p in self.partitions
            if p.key is not None and any(check in (None, f.check) for f in p.failing)
        ]

    def summary(self, check: str) -> CheckSummary:
        return next(c for c in self.checks if c.check == check)


def merged(parts: Sequence[PartitionStats], label: str) -> PartitionStats:
    """The partitions of one key as one (counts summed; ``deleted_data_files`` unknown once any is)."""
    if len(parts) == 1:
        return parts[0]
    counts = {name: sum(getattr(p, name) for p in parts) for name in COUNTS}
    targets = [p.deleted_data_files for p in parts]
    return PartitionStats(
        label,
        **counts,
        spec_id=parts[0].spec_id,
        deleted_data_files=-1 if -1 in targets else sum(targets),
        values=parts[0].values,
    )


def _over(value: float, threshold: float) -> float:
    return round(value / threshold, 3) if threshold else 0.0


def small_files_of(p: PartitionStats, busiest: int | None, policy: Policy, limit_bytes: int) -> Finding:
    """``busiest``: the data files of the busiest of ``p``'s partitions the table's rewrite takes as a
    compaction candidate (``p``'s own when it is one partition), None when it takes none."""
    sf = policy.small_files
    metrics: dict[str, int | float] = {
        "data_files": p.data_files,
        "small_files": p.small_files,
        "avg_file_bytes": int(p.avg_file_bytes),
        "data_bytes": p.data_bytes,
        "records": p.records,
        "small_file_limit_bytes": limit_bytes,
        "max_files_per_partition": sf.max_files_per_partition,
        "max_avg_file_bytes": sf.max_avg_file_bytes,
        "over_threshold": _over(busiest or 0, sf.max_files_per_partition),
    }
    avg = f"averaging {p.avg_file_bytes / MiB:.3f} MB"
    if busiest is None:
        return Finding(
            "small_files",
            Severity.OK,
            f"{p.data_files} files {avg} ({p.small_files} small): not a compaction candidate the rewrite "
            f"takes (> {sf.max_files_per_partition} files averaging < {sf.max_avg_file_bytes / MiB:g} MB, "
            "at least 2 small)",
            "nothing to compact",
            metrics,
        )
    return Finding(
        "small_files",
        grade_candidate(busiest, policy),
        f"{p.data_files} files {avg} ({p.small_files} small; max {sf.max_files_per_partition} files)",
        "run rewrite_data_files on this partition (a backfill of its key)",
        metrics,
    )


def delete_files_of(p: PartitionStats, policy: Policy) -> Finding:
    d = policy.delete_files
    file_ratio, record_ratio = ratio_of(p.delete_files, p.data_files), ratio_of(p.delete_records, p.records)
    metrics: dict[str, int | float] = {
        "delete_files": p.delete_files,
        "position_delete_files": p.position_delete_files,
        "equality_delete_files": p.equality_delete_files,
        "delete_records": p.delete_records,
        "delete_bytes": p.delete_bytes,
        "data_files": p.data_files,
        "records": p.records,
        "delete_file_ratio": round(file_ratio, 4),
        "delete_record_ratio": round(record_ratio, 4),
        "max_file_ratio": d.max_file_ratio,
        "max_record_ratio": d.max_record_ratio,
        "over_threshold": max(_over(file_ratio, d.max_file_ratio), _over(record_ratio, d.max_record_ratio)),
    }
    severity = grade_deletes(file_ratio, record_ratio, policy)
    summary = (
        f"{p.delete_files} delete files ({p.position_delete_files} position, {p.equality_delete_files} "
        f"equality) for {p.data_files} data files (ratio {file_ratio:.2f}, max {d.max_file_ratio:g}); "
        f"{p.delete_records} deleted rows for {p.records} rows (ratio {record_ratio:.3f}, max "
        f"{d.max_record_ratio:g})"
    )
    advice = (
        "nothing to apply"
        if severity is Severity.OK
        else "apply the deletes: rewrite_data_files with delete-file-threshold=1 on this partition"
    )
    return Finding("delete_files", severity, summary, advice, metrics)


def layout_drift_of(p: PartitionStats, policy: Policy) -> Finding:
    ratio = p.drift_files / p.data_files if p.data_files else 0.0
    max_ratio = policy.layout.max_drift_ratio
    metrics: dict[str, int | float] = {
        "drift_files": p.drift_files,
        "old_spec_files": p.old_spec_files,
        "unsorted_files": p.unsorted_files,
        "data_files": p.data_files,
        "drift_ratio": round(ratio, 4),
        "max_drift_ratio": max_ratio,
        "over_threshold": _over(ratio, max_ratio),
    }
    severity = grade_drift(ratio, policy)
    summary = (
        f"{p.drift_files} of {p.data_files} data files drift (ratio {ratio:.2f}, max {max_ratio:g}): "
        f"{p.old_spec_files} of an older spec, {p.unsorted_files} out of sort order"
    )
    advice = (
        "nothing to rewrite"
        if severity is Severity.OK
        else "rewrite_data_files with rewrite-all=true on this partition"
    )
    return Finding("layout_drift", severity, summary, advice, metrics)


def _groups(stats: TableStats, layout: PartitionLayout) -> list[tuple[str | None, list[PartitionStats]]]:
    by_key: dict[str, list[PartitionStats]] = {}
    keyless: list[tuple[str | None, list[PartitionStats]]] = []
    for label in sorted(stats.partitions):
        p = stats.partitions[label]
        keys = partition_keys(layout, p)
        if not keys:
            keyless.append((None, [p]))
        for key in keys:
            by_key.setdefault(key, []).append(p)
    return [*sorted(by_key.items()), *keyless]


def _summaries(partitions: Sequence[PartitionHealth], top: int) -> tuple[CheckSummary, ...]:
    out = []
    for check in PARTITION_CHECKS:
        offenders = [
            Offender(p.key, p.labels, f.severity, float(f.metrics.get("over_threshold", 0.0)))
            for p in partitions
            if not (f := p.finding(check)).passed
        ]
        offenders.sort(key=lambda o: (-o.severity.rank, -o.over, o.key or "", o.labels))
        out.append(CheckSummary(check, len(offenders), tuple(offenders[:top])))
    return tuple(out)


def partition_health(
    stats: TableStats, policy: Policy, layout: PartitionLayout | None, top: int = 10
) -> PartitionReport:
    """Every partition's findings of PARTITION_CHECKS, and per check how many partitions fail and
    the ``top`` worst (by severity, then how far over its threshold). ``layout``: the table's
    (partitions/layout.py); an unpartitioned table (no dimensions) has no partition findings."""
    if layout is None or not layout.dimensions:
        return PartitionReport(stats.table, False, (), _summaries((), top))
    taken = set(taken_candidates(stats, plan_rewrite(stats, policy)))
    out = []
    for key, parts in _groups(stats, layout):
        p = merged(parts, key or parts[0].partition)
        # Graded like the table: on the busiest partition of the key the table's rewrite takes.
        busiest = max((x.data_files for x in parts if x.partition in taken), default=None)
        small = small_files_of(p, busiest, policy, stats.small_file_limit_bytes)
        findings = (small, delete_files_of(p, policy), layout_drift_of(p, policy))
        out.append(PartitionHealth(key, tuple(x.partition for x in parts), findings))
    return PartitionReport(stats.table, True, tuple(out), _summaries(out, top))
