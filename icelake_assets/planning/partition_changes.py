"""Which partitions' health to report again: those whose findings changed since they were last reported.

A partition's digest is a short hash of what its per-partition checks would report (each finding's
severity and numbers, thresholds included): files appended to or rewritten in a partition change its
counts and bytes, a policy change its thresholds, so either reports it again; a partition whose files
did not change keeps its digest and is not reported. Digests are compared against the ones last
reported (the health sensor keeps them in its cursor, orchestration/sensors/health_cursor.py).

A key reported before that holds no file now (retention dropped its files, a rewrite moved them under
another spec's key) is reported once more as an empty partition, passing, then forgotten: its last
report must not keep failing in the UI.

Dagster-free: the sensor's wiring is orchestration/sensors/partition_reports.py."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from icelake_assets.health.table_stats import PartitionStats
from icelake_assets.planning.partition_health import (
    PartitionHealth,
    PartitionReport,
    delete_files_of,
    layout_drift_of,
    small_files_of,
)
from icelake_assets.settings import Policy


def partition_digest(p: PartitionHealth) -> str:
    """12 hex characters (48 bits: a changed partition passing as unchanged is a 1 in 10^14 chance)
    over what its checks report; the labels too, so a key whose Iceberg partitions changed reports."""
    facts = [list(p.labels)] + [
        [f.check, f.severity.value, sorted((k, float(v)) for k, v in f.metrics.items())] for f in p.findings
    ]
    return hashlib.blake2b(json.dumps(facts).encode(), digest_size=6).hexdigest()


def report_digests(report: PartitionReport) -> dict[str, str]:
    """Each Dagster key's digest (partitions without a key are left out: no Dagster partition shows them)."""
    return {p.key: partition_digest(p) for p in report.partitions if p.key is not None}


@dataclass(frozen=True)
class PartitionChanges:
    """``changed``: keys with files whose digest differs from the one reported (or none was);
    ``vanished``: keys reported with files before that hold none now. Both sorted."""

    changed: tuple[str, ...]
    vanished: tuple[str, ...]

    @property
    def keys(self) -> tuple[str, ...]:
        return (*self.changed, *self.vanished)

    def __bool__(self) -> bool:
        return bool(self.changed or self.vanished)


def changed_partitions(current: Mapping[str, str], reported: Mapping[str, str]) -> PartitionChanges:
    """The keys of ``current`` (digests now) to report against ``reported`` (digests last reported)."""
    changed = sorted(k for k, d in current.items() if reported.get(k) != d)
    vanished = sorted(k for k in reported if k not in current)
    return PartitionChanges(tuple(changed), tuple(vanished))


def empty_partition(key: str, policy: Policy, small_file_limit_bytes: int) -> PartitionHealth:
    """A key without files, graded like any partition: every check passes on zero files."""
    p = PartitionStats(key)
    findings = (
        small_files_of(p, None, policy, small_file_limit_bytes),
        delete_files_of(p, policy),
        layout_drift_of(p, policy),
    )
    return PartitionHealth(key, (), findings)
