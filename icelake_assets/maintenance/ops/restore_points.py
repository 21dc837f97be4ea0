"""``manage_restore_points``: this period's restore-point tag (and, with ``before_rewrite``, this run's
when its rewrite acts) on the current snapshot, and this product's tags past ``max_age_days`` removed
(planning/restore_points.py decides which). First of the chain: the tags exist before expiry, so the
snapshots they name are kept (Iceberg's expire_snapshots never removes a tagged snapshot).

Tags are metadata: one pyiceberg commit, no Spark. Each tag's commit asserts the tag's current state,
so two runs making the same tag cannot both win. The same commit records each tag it makes (a table
property, health/restore_points.py) and drops the records of the tags it removes: a crash cannot
leave a tag of ours unrecorded, and only recorded tags are ever removed, never an operator's that
shares the prefix (nor a legacy tag made before the records: kept, see health/restore_points.py)."""

from __future__ import annotations

from collections.abc import Callable

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.table import Table
from pyiceberg.table.update.snapshot import ManageSnapshots
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.restore_points import record_key, stale_records
from icelake_assets.maintenance.ops.runner import StatsFn, refreshed, timed
from icelake_assets.maintenance.results.restore_points import RestorePointResult
from icelake_assets.maintenance.spark import fencing
from icelake_assets.planning.restore_points import decide_restore_points, plan_restore_points
from icelake_assets.settings import Policy

_ATTEMPTS = 3  # a writer's commit between the plan and the tags' commit: plan again


def manage_restore_points(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    policy: Policy,
    stats_fn: StatsFn,
    run_id: str = "",
) -> RestorePointResult:
    def work() -> RestorePointResult:
        for attempt in range(1, _ATTEMPTS + 1):
            stats = stats_fn(refreshed(table))
            d = decide_restore_points(stats, policy)
            if not d.act:
                return RestorePointResult(acted=False, reason=d.reason, signals=d.signals)
            if stats.format_version >= 3:  # pyiceberg 0.12 cannot write v3 metadata
                why = "pyiceberg cannot commit tags to a format-version 3 table"
                return RestorePointResult(
                    acted=False, reason=f"{d.reason}; not done: {why}", signals=d.signals
                )
            plan = plan_restore_points(stats, policy, run_id or None)
            # One transaction: the tags first (their requirements assert each tag's state), then
            # the records, so the tags and their records land in one metadata commit.
            tx = table.transaction()
            change = ManageSnapshots(tx)
            for name in plan.remove:
                change = change.remove_tag(name)
            records: dict[str, str] = {}
            if stats.current_snapshot_id is not None:
                for name in plan.create:
                    change = change.create_tag(stats.current_snapshot_id, name)
                    records[record_key(name)] = str(stats.current_snapshot_id)
            change.commit()  # staged in the transaction
            kept = stats.restore_points.made - set(plan.remove)
            if gone := stale_records(table.properties, kept | set(plan.create)):
                tx.remove_properties(*gone)
            if records:
                tx.set_properties(records)
            fencing.check(f"{ref} manage_restore_points")
            try:
                tx.commit_transaction()
            except CommitFailedException:
                if attempt == _ATTEMPTS:
                    raise
                continue
            after = stats_fn(refreshed(table)).restore_points.tags
            return RestorePointResult(
                acted=True,
                reason=d.reason,
                signals=d.signals,
                created=plan.create,
                removed=plan.remove,
                tagged_snapshot=stats.current_snapshot_id if plan.create else None,
                restore_points_after=after,
            )
        raise AssertionError("unreachable")

    return timed(table, work)
