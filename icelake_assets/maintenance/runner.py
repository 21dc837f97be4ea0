"""The maintenance ops' work, free of Dagster: read the op's own signal, act only past its threshold,
and return what happened. Order (seed documents): expire → orphans → rewrite data → rewrite manifests.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.orphans import find_orphans
from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance import plan, procedures
from icelake_assets.settings import Policy

StatsFn = Callable[[Table], TableStats]


@dataclass
class OpOutcome:
    op: str
    acted: bool
    reason: str
    signals: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    snapshot_before: int | None = None
    snapshot_after: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _snapshot_id(table: Table) -> int | None:
    snap = table.current_snapshot()
    return snap.snapshot_id if snap else None


def _timed(op: str, table: Table, work: Callable[[], OpOutcome]) -> OpOutcome:
    table.refresh()
    before = _snapshot_id(table)
    started = time.perf_counter()
    outcome = work()
    outcome.duration_s = round(time.perf_counter() - started, 3)
    table.refresh()
    outcome.snapshot_before, outcome.snapshot_after = before, _snapshot_id(table)
    return outcome


def expire_snapshots(spark_fn: Callable[[], SparkSession], ref: TableRef, table: Table, policy: Policy,
                     stats_fn: StatsFn) -> OpOutcome:
    def work() -> OpOutcome:
        stats = stats_fn(table)
        d = plan.decide_expire(stats, policy)
        if not d.act:
            return OpOutcome(d.op, False, d.reason, d.signals)
        cutoff = plan.expire_cutoff(stats, policy)
        res = procedures.expire_snapshots(spark_fn(), ref, cutoff, policy.snapshots.min_keep)
        table.refresh()
        res.update(snapshots_before=stats.snapshots, snapshots_after=len(table.metadata.snapshots),
                   older_than=cutoff.isoformat(), retain_last=policy.snapshots.min_keep)
        return OpOutcome(d.op, True, d.reason, d.signals, res)

    return _timed("expire_snapshots", table, work)


def remove_orphan_files(spark_fn: Callable[[], SparkSession], ref: TableRef, table: Table, policy: Policy,
                        now: datetime | None = None) -> OpOutcome:
    def work() -> OpOutcome:
        orphans = find_orphans(table, policy.orphans.older_than_hours)
        d = plan.decide_orphans(len(orphans), sum(o.size for o in orphans), policy)
        if not d.act:
            return OpOutcome(d.op, False, d.reason, d.signals)
        cutoff = (now or datetime.now(timezone.utc)) - timedelta(hours=policy.orphans.older_than_hours)
        removed = procedures.remove_orphan_files(spark_fn(), ref, cutoff)
        res = {"orphans_found": len(orphans), "orphans_removed": len(removed),
               "bytes_found": sum(o.size for o in orphans), "removed_sample": removed[:20]}
        return OpOutcome(d.op, True, d.reason, d.signals, res)

    return _timed("remove_orphan_files", table, work)


def rewrite_data_files(spark_fn: Callable[[], SparkSession], ref: TableRef, table: Table, policy: Policy,
                       stats_fn: StatsFn, where: str | None = None) -> OpOutcome:
    def work() -> OpOutcome:
        stats = stats_fn(table)
        d = plan.decide_rewrite(stats, policy)
        if not d.act:
            return OpOutcome(d.op, False, d.reason, d.signals)
        sf = policy.small_files
        sort_order = ", ".join(procedures.quote_identifier(c) for c in sf.sort_order) if sf.sort_order else None
        res = procedures.rewrite_data_files(spark_fn(), ref, strategy=sf.strategy, sort_order=sort_order,
                                            options=plan.rewrite_options(stats, policy), where=where)
        after = stats_fn(_refreshed(table))
        res.update(data_files_before=stats.data_files, data_files_after=after.data_files,
                   small_files_before=stats.small_files, small_files_after=after.small_files,
                   candidate_partitions=stats.compaction_candidates[:50])
        return OpOutcome(d.op, True, d.reason, d.signals, res)

    return _timed("rewrite_data_files", table, work)


def rewrite_manifests(spark_fn: Callable[[], SparkSession], ref: TableRef, table: Table, policy: Policy,
                      stats_fn: StatsFn) -> OpOutcome:
    def work() -> OpOutcome:
        stats = stats_fn(table)
        d = plan.decide_manifests(stats, policy)
        if not d.act:
            return OpOutcome(d.op, False, d.reason, d.signals)
        res = procedures.rewrite_manifests(spark_fn(), ref)
        res.update(manifests_before=stats.manifests, manifests_after=stats_fn(_refreshed(table)).manifests)
        return OpOutcome(d.op, True, d.reason, d.signals, res)

    return _timed("rewrite_manifests", table, work)


def _refreshed(table: Table) -> Table:
    table.refresh()
    return table
