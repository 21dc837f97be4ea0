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

**Verdict** — what every surface shows (checks, health summary, overview, CLI, metrics) comes from
:func:`verdict`, one rule over the same findings, so status and score never disagree:

* a layout penalty counts only while its finding fails (``small_files`` for small files,
  ``delete_files`` for deletes): a table maintenance cannot improve loses no points for its layout;
* the score is then capped by the worst finding: any ERROR → at most 49, any WARN → at most 79;
* the status is the score's band: 80-100 Healthy, 50-79 Warning, 0-49 Critical;
* a check that has not been evaluated yet (the orphan scan, which lists storage) makes a table whose
  evaluated checks all pass **Unknown**, never Healthy.

:func:`health_score` is Amoro's raw score (plotted as ``health_raw_score``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
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
    UNKNOWN = "Unknown"  # a check not evaluated yet, every evaluated one passing

    @property
    def rank(self) -> int:
        """Severity order (Unknown below Healthy: nothing is known to be wrong)."""
        return {"Unknown": -1, "Healthy": 0, "Warning": 1, "Critical": 2}[self.value]


@dataclass(frozen=True)
class HealthScore:
    score: int
    table_factor: float
    penalties: dict[str, float] = field(default_factory=dict)  # each in [0, 1], before weights
    raw: int | None = None  # Amoro's score before the verdict's rule (None: this is the raw score)

    def metrics(self) -> dict[str, float | int]:
        return {
            "health_score": self.score,
            **({"health_raw_score": self.raw} if self.raw is not None else {}),
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
    """The worst severity among ``findings`` alone (see :func:`verdict` for what surfaces show)."""
    worst = max((f.severity.rank for f in findings), default=0)
    return {Severity.OK.rank: HealthStatus.HEALTHY, Severity.WARN.rank: HealthStatus.WARNING}.get(
        worst, HealthStatus.CRITICAL
    )


# Which finding owns each layout penalty (its penalty counts only while it fails).
PENALTY_FINDING = {
    "small_files": "small_files",
    "equality_deletes": "delete_files",
    "position_deletes": "delete_files",
}
SEVERITY_CAP = {Severity.WARN: 79, Severity.ERROR: 49}
HEALTHY_FROM, WARNING_FROM = 80, 50


def status_of(score: int) -> HealthStatus:
    """The status band of a score."""
    if score >= HEALTHY_FROM:
        return HealthStatus.HEALTHY
    return HealthStatus.WARNING if score >= WARNING_FROM else HealthStatus.CRITICAL


def verdict(
    stats: TableStats, policy: Policy, findings: Sequence[Finding], not_evaluated: Sequence[str] = ()
) -> tuple[HealthScore, HealthStatus]:
    """The score and status every surface shows (module docstring: the rule)."""
    raw = health_score(stats, policy)
    failing = {f.check for f in findings if not f.passed}
    counted = sum(WEIGHTS[k] * v for k, v in raw.penalties.items() if PENALTY_FINDING[k] in failing)
    score = max(0, min(100, math.ceil(100 - raw.table_factor * counted - 1e-9)))
    worst = max((f.severity for f in findings), key=lambda s: s.rank, default=Severity.OK)
    score = min(score, SEVERITY_CAP.get(worst, 100))
    status = status_of(score)
    if status is HealthStatus.HEALTHY and not failing and not_evaluated:
        status = HealthStatus.UNKNOWN
    return HealthScore(score, raw.table_factor, raw.penalties, raw.score), status
