"""The maintenance ops' work, free of Dagster: read the op's own signal, act only past its threshold,
and return what happened. Order (seed documents): expire → orphans → rewrite data → rewrite manifests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef, current_snapshot_id as _snapshot_id
from icelake_assets.causes import Cause, describe, root_cause
from icelake_assets.health.orphans import OrphanScan, file_key, referenced_locations, verify_referenced_files
from icelake_assets.health.retention import expiry_forecast
from icelake_assets.health.stats import MAINTENANCE_OPERATION, TableStats
from icelake_assets.maintenance import plan, procedures, progress
from icelake_assets.maintenance.guards import APPROVAL_TAG, estimated_rewrite_bytes
from icelake_assets.partitions.filters import PartitionScope, where_clause
from icelake_assets.partitions.layout import partition_layout
from icelake_assets.partitions.values import PartitionValues, partition_values
from icelake_assets.settings import Policy

StatsFn = Callable[[Table], TableStats]
ScanFn = Callable[[Table], OrphanScan]


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
    attempt: int = 1  # the op's attempt (Dagster retries the rewrite while partitions fail)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _timed(op: str, table: Table, work: Callable[[], OpOutcome]) -> OpOutcome:
    table.refresh()
    before = _snapshot_id(table)
    started = time.perf_counter()
    outcome = work()
    outcome.duration_s = round(time.perf_counter() - started, 3)
    table.refresh()
    outcome.snapshot_before, outcome.snapshot_after = before, _snapshot_id(table)
    return outcome


def expire_snapshots(
    spark_fn: Callable[[], SparkSession], ref: TableRef, table: Table, policy: Policy, stats_fn: StatsFn
) -> OpOutcome:
    def work() -> OpOutcome:
        stats = stats_fn(table)
        d = plan.decide_expire(stats, policy)
        if not d.act:
            return OpOutcome(d.op, False, d.reason, d.signals)
        cutoff = plan.expire_cutoff(stats, policy)
        forecast = set(expiry_forecast(stats, policy).expire)  # the ids decide_expire counted
        res = procedures.expire_snapshots(spark_fn(), ref, cutoff, policy.snapshots.min_keep)
        table.refresh()
        after = len(table.metadata.snapshots)
        remaining = {s.snapshot_id for s in table.metadata.snapshots}
        removed = {p.snapshot_id for p in stats.snapshot_points} - remaining
        res.update(
            snapshots_before=stats.snapshots,
            snapshots_after=after,
            snapshots_expired=len(removed),
            snapshots_forecast=len(forecast),
            older_than=cutoff.isoformat(),
            retain_last=policy.snapshots.min_keep,
        )
        mismatch = _forecast_mismatch(forecast, removed, res.get("deleted_manifest_lists_count"))
        res.update(
            forecast_mismatches=len(forecast ^ removed),
            expired_not_forecast=sorted(removed - forecast)[:20],
            forecast_not_expired=sorted(forecast - removed)[:20],
            forecast_mismatch=mismatch,
        )
        reason = f"{d.reason}; forecast mismatch: {mismatch}" if mismatch else d.reason
        return OpOutcome(d.op, True, reason, d.signals, res)

    return _timed("expire_snapshots", table, work)


def _forecast_mismatch(forecast: set[int], removed: set[int], manifest_lists: Any) -> str | None:
    """Where what the decision counted (health/retention.py) and what Iceberg removed differ, or None.

    Each expired snapshot has its own manifest list, so the procedure's deleted manifest lists count
    the snapshots it expired. A difference means the forecast's mirror of Iceberg's rule is off, or
    the table changed between decision and procedure (a writer's new tag or branch)."""
    parts = []
    if removed - forecast:
        extra = removed - forecast
        parts.append(f"{len(extra)} expired that were not forecast (e.g. {min(extra)})")
    if forecast - removed:
        parts.append(f"{len(forecast - removed)} forecast that were kept (e.g. {min(forecast - removed)})")
    if isinstance(manifest_lists, int) and manifest_lists != len(removed):
        parts.append(
            f"the procedure deleted {manifest_lists} manifest lists for {len(removed)} expired snapshots"
        )
    if not parts:
        return None
    return f"forecast {len(forecast)} snapshots, Iceberg expired {len(removed)}: " + "; ".join(parts)


def remove_orphan_files(
    spark_fn: Callable[[], SparkSession], ref: TableRef, table: Table, policy: Policy, scan_fn: ScanFn
) -> OpOutcome:
    """Delete exactly the orphans ``scan_fn`` decided on (health/orphans.py: not referenced, not hidden,
    not another table's, old enough), one by one through the table's own FileIO, then verify that every
    file the metadata references still exists (else raise ReferencedFilesMissingError).

    Iceberg's ``remove_orphan_files`` procedure is not called: it lists the whole location itself and
    would delete the files of a table nested inside it. So this op needs no Spark."""

    def work() -> OpOutcome:
        scan = scan_fn(table)
        info: dict[str, Any] = scan.summary()
        orphans = scan.removable
        d = plan.decide_orphans(len(orphans), sum(o.size for o in orphans), policy)
        signals = {
            **d.signals,
            "hidden_files": scan.hidden_files,
            "skipped_other_tables": sum(scan.skipped.values()),
        }
        if scan.refused:
            return OpOutcome(d.op, False, f"never cleaned: {scan.refused}", signals, info)
        if scan.deferred:
            return OpOutcome(d.op, False, scan.deferred, signals, info)
        if not d.act:
            return OpOutcome(d.op, False, d.reason, signals, info)
        # A commit since the listing may reference a listed file (e.g. add_files): keep those.
        listed_at = table.metadata_location
        table.refresh()
        if table.metadata_location != listed_at:
            now_referenced = {file_key(r).path for r in referenced_locations(table)}
            orphans = [o for o in orphans if file_key(o.path).path not in now_referenced]
        removed, errors = [], []
        for orphan in orphans:
            try:
                table.io.delete(orphan.path)
                removed.append(orphan.path)
            except FileNotFoundError:
                pass  # gone already: nothing to do
            except OSError as err:
                errors.append(f"{orphan.path}: {type(err).__name__}: {err}")
        checked = verify_referenced_files(table)
        res = {
            **info,
            "orphans_removed": len(removed),
            "bytes_found": sum(o.size for o in scan.orphans),
            "removed_sample": removed[:20],
            "referenced_files_verified": checked,
        }
        reason = d.reason
        if errors:
            res["delete_errors"] = errors[:20]
            reason = f"{reason}; {len(errors)} files could not be deleted (e.g. {errors[0]})"
        return OpOutcome(d.op, True, reason, signals, res)

    return _timed("remove_orphan_files", table, work)


def rewrite_data_files(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    policy: Policy,
    stats_fn: StatsFn,
    where: str | None = None,
    scope: PartitionScope | None = None,
    approved: bool = False,
    say: Callable[[str], None] | None = None,
    progress_every_s: float = progress.DEFAULT_EVERY_SECONDS,
) -> OpOutcome:
    """Compact the compaction candidates: all of the table's, or with ``scope`` only those among the
    run's partitions (the ``where`` then names exactly them).

    Partial progress commits each finished file group, so a failing group leaves the others
    committed. Iceberg's ``failed_data_files_count`` only counts groups whose *rewrite* failed
    (a dropped commit is only logged), so the outcome also measures, from metadata, which attempted
    partitions kept all their small files: ``partitions_failed``, and ``failed_data_files_count`` is
    the larger of Iceberg's count and the data files of those partitions. A Spark
    error does not raise: it is recorded in ``error`` with the partitions it left behind, so the
    caller decides whether to retry (and validation of what did commit still runs)."""

    def work() -> OpOutcome:
        stats = stats_fn(table)
        before_id = stats.current_snapshot_id
        candidates = plan.rewrite_candidates(stats, policy)
        if scope is not None:
            candidates = [
                c
                for c in candidates
                if scope.contains(c, stats.partitions[c].spec_id, stats.partitions[c].values)
            ]
        d = plan.decide_rewrite(
            stats,
            policy,
            candidates if scope is not None else None,
            scope.describe() if scope is not None else None,
        )
        if not d.act:
            return OpOutcome(d.op, False, d.reason, d.signals)
        rp = plan.plan_rewrite(stats, policy, candidates)
        candidates = list(rp.partitions)
        if scope is not None:
            parts = stats.partitions
            scoped = scope.where(
                [v for c in candidates for v in scope.values_of(c, parts[c].spec_id, parts[c].values)]
            )
            run_where: str | None = f"({where}) AND ({scoped})" if where else scoped
        else:  # whole table: scope Iceberg to the planned partitions, so it rewrites what was priced
            table_where, covered = _table_where(table, ref, stats, candidates)
            run_where = f"({where}) AND ({table_where})" if where and table_where else (where or table_where)
            # What the where also takes (a coarser filter, or none) and Iceberg would rewrite is priced too.
            min_input, deletes = int(rp.options["min-input-files"]), "delete-file-threshold" in rp.options
            extra = [
                c
                for c in covered
                if c not in rp.partitions and plan.rewritable(stats.partitions[c], min_input, deletes)
            ]
            candidates = sorted([*candidates, *extra])
        # The cost guard holds for every trigger: only an explicit approval (run tag) lifts it.
        cost = estimated_rewrite_bytes(stats, candidates)
        signals = {**d.signals, "estimated_rewrite_bytes": cost}
        if cost > policy.guards.max_rewrite_bytes and not approved:
            return OpOutcome(
                d.op,
                False,
                f"held: rewriting {cost} bytes is over the cap of "
                f"{policy.guards.max_rewrite_bytes} bytes; launch with the run tag "
                f"{APPROVAL_TAG}=true to approve",
                signals,
            )
        sf = policy.small_files
        strategy = "sort" if sf.strategy == "zorder" else sf.strategy
        if sf.strategy == "zorder":  # Iceberg spells z-order as a sort order expression
            sort_order: str | None = (
                f"zorder({', '.join(procedures.quote_identifier(c) for c in sf.zorder_columns)})"
            )
        else:
            sort_order = (
                ", ".join(procedures.quote_identifier(c) for c in sf.sort_order) if sf.sort_order else None
            )
        options = rp.options

        def run(opts: dict[str, str]) -> tuple[dict[str, Any], Cause | None]:
            # Outside the try: a pre-flight refusal (PreflightError) is no partition's failure to retry,
            # it ends the op with its cause before anything is committed.
            spark = spark_fn()
            try:
                # Partial progress commits group by group: say what is committed while Spark works.
                with progress.reporting(table, before_id, say, progress_every_s):
                    return procedures.rewrite_data_files(
                        spark,
                        ref,
                        strategy=strategy,
                        sort_order=sort_order,
                        options=opts,
                        where=run_where,
                    ), None
            except Exception as err:  # Spark/Iceberg failure: measured below, the caller decides on retries
                return {}, root_cause(err)

        res, cause = run(options)
        fallback = False
        single_commit = options["partial-progress.enabled"] == "false" and sf.partial_progress_enabled
        if cause and cause.kind != "access_denied" and single_commit and rp.groups > 1:
            # A single commit failed as a whole (nothing committed): retry with partial progress so
            # the groups that can be rewritten commit and only the failing ones are left behind.
            fallback, options = True, {**options, "partial-progress.enabled": "true"}
            res, cause = run(options)
        error = str(cause) if cause else None
        after = stats_fn(_refreshed(table))
        failed = [c for c in candidates if _not_compacted(stats, after, c, int(options["min-input-files"]))]
        iceberg_failed = int(res.get("failed_data_files_count", 0) or 0)
        commits = _commits_after(_refreshed(table), before_id)
        cleanup: dict[str, Any] = {}
        if "delete-file-threshold" in options and commits:
            cleanup = _remove_dangling_deletes(spark_fn, ref, table, after, candidates, run_where)
            if cleanup.get("dangling_delete_commits"):
                after = stats_fn(_refreshed(table))
        res.update(cleanup)
        res.update(
            data_files_before=stats.data_files,
            data_files_after=after.data_files,
            small_files_before=stats.small_files,
            small_files_after=after.small_files,
            candidate_partitions=candidates[:50],
            where=run_where,
            options=options,
            partial_progress_fallback=fallback,
            estimated_rewrite_bytes=cost,
            snapshots_committed=commits,
            delete_files_before=stats.delete_files,
            delete_files_after=after.delete_files,
            partitions_rewritten=[c for c in candidates if c not in failed],
            partitions_failed=failed,
            iceberg_failed_data_files_count=iceberg_failed,
            failed_data_files_count=max(iceberg_failed, sum(stats.partitions[c].data_files for c in failed)),
        )
        if scope is not None:  # the run's partitions, for the caller's Dagster keys

            def vals(labels: list[str]) -> list[list[str | None]]:
                return [
                    list(v)
                    for c in labels
                    for v in scope.values_of(c, stats.partitions[c].spec_id, stats.partitions[c].values)
                ]

            res["failed_partition_values"] = vals(failed)
            res["rewritten_partition_values"] = vals([c for c in candidates if c not in failed])
        if cause:
            res["error"], res["error_kind"] = error, cause.kind
        reason = (
            d.reason
            if not (failed or error)
            else f"{d.reason}; {len(failed)} partitions not compacted" + (f" ({error})" if error else "")
        )
        return OpOutcome(d.op, True, reason, signals, res)

    return _timed("rewrite_data_files", table, work)


def _remove_dangling_deletes(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    after: TableStats,
    named: list[str],
    where: str | None,
) -> dict[str, Any]:
    """After a rewrite that applied deletes, remove the delete files it left matching no live row.

    Iceberg 1.10 keeps them: the rewritten files take the starting snapshot's sequence number, so a
    position delete committed last still "applies" to them by number, and ``remove-dangling-deletes``
    skips unpartitioned tables. Position deletes go through ``rewrite_position_delete_files`` with
    ``rewrite-all`` (it drops deletes whose data file is gone), equality deletes of an unpartitioned
    table through Iceberg's own dangling rule (procedures.remove_dangling_deletes). A failure here is
    recorded, not raised: the rewrite itself committed and is validated either way."""
    parts = [after.partitions[c] for c in named if c in after.partitions]
    position = sum(p.position_delete_files for p in parts)
    equality = sum(p.equality_delete_files for p in parts)
    out: dict[str, Any] = {"dangling_delete_commits": 0}
    if not (position or equality):
        return out
    before_id = _snapshot_id(_refreshed(table))
    try:
        if position:
            r = procedures.rewrite_position_delete_files(spark_fn(), ref, {"rewrite-all": "true"}, where)
            out.update({f"position_deletes_{k}": v for k, v in r.items()})
        if equality and len(table.metadata.partition_specs) == 1 and table.spec().is_unpartitioned():
            out.update(procedures.remove_dangling_deletes(spark_fn(), ref))
    except Exception as err:  # recorded: effect verification reports the delete files left
        out["dangling_deletes_error"] = describe(err)
    out["dangling_delete_commits"] = _commits_after(_refreshed(table), before_id)
    return out


def _table_where(
    table: Table, ref: TableRef, stats: TableStats, named: list[str]
) -> tuple[str | None, list[str]]:
    """A ``where`` selecting the named partitions of a whole-table rewrite, and every partition of the
    table it selects. None (and every partition) when the partitions cannot be named by a filter: an
    unpartitioned table (one partition), or fields no filter can express."""
    if set(stats.partitions) <= set(named):
        return None, sorted(stats.partitions)
    layout = partition_layout(table, with_earliest=False)
    wanted: set[PartitionValues] = set()
    for label in named:
        ps = stats.partitions[label]
        values = partition_values(layout, label, ps.spec_id, ps.values) if layout.dimensions else ()
        if not values:
            return None, sorted(stats.partitions)
        wanted.update(values)
    covered = [
        label
        for label, ps in stats.partitions.items()
        if set(partition_values(layout, label, ps.spec_id, ps.values)) & wanted
    ]
    return where_clause(layout, ref.catalog, wanted), sorted(covered)


def _commits_after(table: Table, snapshot_id: int | None) -> int:
    """Rewrite (``replace``) snapshots on the current branch after ``snapshot_id``: the commits one
    op made (writers committing meanwhile are not counted)."""
    n, snap = 0, table.current_snapshot()
    while snap is not None and snap.snapshot_id != snapshot_id:
        n += snap.summary is not None and snap.summary.operation.value == MAINTENANCE_OPERATION
        snap = table.snapshot_by_id(snap.parent_snapshot_id) if snap.parent_snapshot_id else None
    return n


def _not_compacted(before: TableStats, after: TableStats, label: str, min_input_files: int) -> bool:
    """A partition whose rewrite did not commit: it still holds enough small files for a rewrite group
    and none of its small files went away. (Binpack rewrites the files under 75 % of the target, health's
    small files at the default ratio, so a committed rewrite leaves at most one small file per group.)"""
    now = after.partitions.get(label)
    return (
        now is not None
        and now.small_files >= min_input_files
        and now.small_files >= before.partitions[label].small_files
    )


def rewrite_manifests(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    policy: Policy,
    stats_fn: StatsFn,
    rewrite_commits: int = 0,
) -> OpOutcome:
    def work() -> OpOutcome:
        stats = stats_fn(table)
        d = plan.decide_manifests(stats, policy, rewrite_commits)
        if not d.act:
            return OpOutcome(d.op, False, d.reason, d.signals)
        res = _rewrite_manifests_retrying(spark_fn(), ref)
        res.update(manifests_before=stats.manifests, manifests_after=stats_fn(_refreshed(table)).manifests)
        return OpOutcome(d.op, True, d.reason, d.signals, res)

    return _timed("rewrite_manifests", table, work)


# A writer committing while manifests are rewritten can remove a manifest the rewrite planned to
# replace (Iceberg then refuses: "Deleted manifest ... could not be found in the latest snapshot");
# planning again from the new snapshot is the fix, as Iceberg's own commit retries do for conflicts.
_MANIFEST_CONFLICTS = ("ValidationException", "CommitFailedException")
_MANIFEST_ATTEMPTS = 4


def _rewrite_manifests_retrying(spark: SparkSession, ref: TableRef) -> dict[str, Any]:
    for attempt in range(1, _MANIFEST_ATTEMPTS + 1):
        try:
            res = procedures.rewrite_manifests(spark, ref)
            return {**res, "attempts": attempt}
        except Exception as err:  # py4j wraps the Java exception: match it by name
            if attempt == _MANIFEST_ATTEMPTS or not any(c in str(err) for c in _MANIFEST_CONFLICTS):
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")


def _refreshed(table: Table) -> Table:
    table.refresh()
    return table
