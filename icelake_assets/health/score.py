"""A table's health: a 0-100 score and a status (Healthy / Warning / Critical).

**Score** — Apache Amoro's health score (``CommonPartitionEvaluator.getHealthScore``), computed over
the whole table with this project's policy knobs::

    score = ceil(
        100
        - table_factor
        * (40 * small_file_penalty + 40 * equality_delete_penalty + 20 * position_delete_penalty)
    )

* ``small_file_penalty = 1 - min(avg_file_size, min_target) / min_target``, with
  ``min_target = small_file_ratio x target file size`` (75 % of the target by default);
* ``equality_delete_penalty = min(r_eq, d) / d`` where ``r_eq`` = equality-deleted rows / data rows and
  ``d = delete_files.max_record_ratio`` (Amoro's duplicate ratio, 0.1);
* ``position_delete_penalty = min(r_pos, 2d) / 2d`` likewise for position-deleted rows;
* ``table_factor = min(files, 12) / 12 x size_factor`` (0 for one file or none): small tables cost
  little whatever their layout, so they are barely penalized (Amoro's minor trigger file count, 12).
  Amoro's ``size_factor`` is ``min(bytes, target) / target``; here it applies only while the table
  has at most ``small_files.max_files_per_partition`` files and is 1 beyond: 20,000 files of 3 KB
  cost 20,000 file opens per scan however few bytes they hold (a deliberate deviation).

The score measures what the data layout costs readers; snapshots, manifests, drift and orphans do not
enter it (they do not slow a scan the same way) but they do set the status.

**Status** — the worst severity among the table's findings: all OK → Healthy, any WARN → Warning,
any ERROR → Critical.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum

from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.stats import TableStats
from icelake_assets.settings import Policy

WEIGHTS = {"small_files": 40, "equality_deletes": 40, "position_deletes": 20}
MINOR_LEAST_FILE_COUNT = 12  # Amoro's self-optimizing.minor.trigger.file-count


class HealthStatus(str, Enum):
    HEALTHY = "Healthy"
    WARNING = "Warning"
    CRITICAL = "Critical"

    @property
    def rank(self) -> int:
        return {"Healthy": 0, "Warning": 1, "Critical": 2}[self.value]


@dataclass(frozen=True)
class HealthScore:
    score: int
    table_factor: float
    penalties: dict[str, float] = field(default_factory=dict)  # each in [0, 1], before weights

    def metrics(self) -> dict[str, float | int]:
        return {
            "health_score": self.score,
            "health_table_factor": round(self.table_factor, 4),
            **{f"health_penalty_{k}": round(v, 4) for k, v in self.penalties.items()},
        }


def _ratio(numerator: float, denominator: float) -> float:
    """Amoro's getNormalizedRatio: min(n, d) / d, and 0 when d <= 0."""
    return 0.0 if denominator <= 0 else min(numerator, denominator) / denominator


def health_score(stats: TableStats, policy: Policy) -> HealthScore:
    min_target = stats.target_file_size_bytes * policy.small_files.small_file_ratio
    dup = policy.delete_files.max_record_ratio
    penalties = {
        "small_files": 1 - _ratio(stats.avg_file_bytes, min_target),
        "equality_deletes": _ratio(_ratio(stats.equality_delete_records, stats.records), dup),
        "position_deletes": _ratio(_ratio(stats.position_delete_records, stats.records), 2 * dup),
    }
    if stats.data_files <= 1:
        factor = 0.0
    else:
        many = stats.data_files > policy.small_files.max_files_per_partition
        size_factor = 1.0 if many else _ratio(stats.data_bytes, stats.target_file_size_bytes)
        factor = _ratio(stats.data_files, MINOR_LEAST_FILE_COUNT) * size_factor
    penalty = factor * sum(WEIGHTS[k] * v for k, v in penalties.items())
    return HealthScore(max(0, min(100, math.ceil(100 - penalty - 1e-9))), factor, penalties)


def health_status(findings: Iterable[Finding]) -> HealthStatus:
    worst = max((f.severity.rank for f in findings), default=0)
    return {Severity.OK.rank: HealthStatus.HEALTHY, Severity.WARN.rank: HealthStatus.WARNING}.get(
        worst, HealthStatus.CRITICAL
    )
