"""Findings: one per health concern, with a severity, numeric metrics and a one-line recommendation.

Severity boundaries, the same for every concern: a concern is OK while its value is at or under its
threshold, WARN once it is over it, and ERROR once it reaches ``ERROR_FACTOR`` (4) times it.

======================  =====================================================  ===================================
check                   value graded                                           threshold (policy)
======================  =====================================================  ===================================
small_files             files of the busiest compaction-candidate partition    small_files.max_files_per_partition
                        that Iceberg's rewrite takes (planning/rewrite.py)
snapshot_retention      snapshots (also WARN: oldest older than the max age)   snapshots.max_count / max_age_hours
                        when some may expire (min_age_hours, min_keep, refs)
manifest_fragmentation  manifests of the current snapshot                      manifests.max_count
delete_files            delete files / data files; deleted rows / data rows    delete_files.max_file_ratio,
                                                                               delete_files.max_record_ratio
layout_drift            data files of an older spec or out of sort order       layout.max_drift_ratio
                        / data files
statistics              no NDV statistics serving the current snapshot, or      statistics.max_stale_ratio,
                        computed on rows that changed since (WARN at most)     statistics.min_rows
orphan_files            unreferenced files older than orphans.older_than_hours  orphans.max_count
data_retention          data files with rows past the retention cut-off          retention (any row past it: WARN)
                        (now or the newest value - keep_days), from bounds
======================  =====================================================  ===================================

The findings are built by the decision core (icelake_assets/planning/, one module per concern), beside
the maintenance decision of the same numbers; this module holds their types and the grading rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

ERROR_FACTOR = 4
CHECKS = (
    "small_files",
    "snapshot_retention",
    "manifest_fragmentation",
    "delete_files",
    "layout_drift",
    "statistics",
    "orphan_files",
    "data_retention",
)
MiB = 1_048_576


class Severity(str, Enum):
    OK = "OK"
    WARN = "WARN"
    ERROR = "ERROR"

    @property
    def rank(self) -> int:
        return {"OK": 0, "WARN": 1, "ERROR": 2}[self.value]


@dataclass(frozen=True)
class Finding:
    check: str
    severity: Severity
    summary: str
    recommendation: str
    metrics: dict[str, int | float] = field(default_factory=dict)
    rows: tuple[dict[str, object], ...] = ()  # worst partitions, shown as a table

    @property
    def passed(self) -> bool:
        return self.severity is Severity.OK


def grade(value: float, threshold: float) -> Severity:
    if value <= threshold:
        return Severity.OK
    return Severity.ERROR if value >= threshold * ERROR_FACTOR else Severity.WARN


_grade = grade  # the first version's name


def worst(*severities: Severity) -> Severity:
    return max(severities, key=lambda s: s.rank)
