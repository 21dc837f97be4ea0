"""The data-file rewrite op (Dagster-free), in steps: the candidates in scope and the decision, the
``where`` that names what was priced, the cost guard, the procedure (with its partial-progress
fallback), and the measurement of what committed (and the cleanup of dangling delete files)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.connection import TableRef, current_snapshot_id as _snapshot_id
from icelake_assets.causes import Cause, describe, root_cause
from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance.ops import delete_compaction, progress
from icelake_assets.maintenance.ops.rewrite_where import table_where
from icelake_assets.maintenance.ops.runner import StatsFn, refreshed, timed
from icelake_assets.maintenance.results.models import DanglingDeletes, ProcedureRow, RewriteResult
from icelake_assets.maintenance.spark import procedures
from icelake_assets.partitions.filters import PartitionScope
from icelake_assets.partitions.values import PartitionValues
from icelake_assets.planning.guards import APPROVAL_TAG, estimated_rewrite_bytes
from icelake_assets.planning.rewrite import (
    RewritePlan,
    decide_rewrite,
    plan_rewrite,
    rewritable,
    rewrite_candidates,
)
from icelake_assets.settings import Policy


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
) -> RewriteResult:
    """Compact the compaction candidates: all of the table's, or with ``scope`` only those among the
    run's partitions (the ``where`` then names exactly them).

    Partial progress commits each finished file group, so a failing group leaves the others
    committed. Iceberg's ``failed_data_files_count`` only counts groups whose *rewrite* failed
    (a dropped commit is only logged), so the outcome also measures, from metadata, which attempted
    partitions kept all their small files: ``partitions_failed``, and ``failed_data_files_count`` is
    the larger of Iceberg's count and the data files of those partitions. A Spark
    error does not raise: it is recorded in ``error`` with the partitions it left behind, so the
    caller decides whether to retry (and validation of what did commit still runs)."""

    def work() -> RewriteResult:
        stats = stats_fn(table)
        candidates = _in_scope(stats, policy, scope)
        d = decide_rewrite(
            stats,
            policy,
            candidates if scope is not None else None,
            scope.describe() if scope is not None else None,
        )
        if not d.act:
            return RewriteResult(acted=False, reason=d.reason, signals=d.signals)
        rp = plan_rewrite(stats, policy, candidates)
        candidates, run_where = _planned(table, ref, stats, rp, where, scope) if rp.partitions else ([], None)
        # The cost guard holds for every trigger: only an explicit approval (run tag) lifts it.
        cost = estimated_rewrite_bytes(stats, candidates) + rp.position_delete_bytes
        signals = {**d.signals, "estimated_rewrite_bytes": cost}
        if cost > policy.guards.max_rewrite_bytes and not approved:
            held = (
                f"held: rewriting {cost} bytes is over the cap of "
                f"{policy.guards.max_rewrite_bytes} bytes; launch with the run tag "
                f"{APPROVAL_TAG}=true to approve"
            )
            return RewriteResult(acted=False, reason=held, signals=signals)
        measured = _untouched(stats)
        if rp.partitions:
            call = _Call(
                spark_fn,
                ref,
                table,
                stats.current_snapshot_id,
                run_where,
                policy,
                say,
                progress_every_s,
                table_order=rp.drift.sort and bool(rp.drift_partitions),
            )
            run = call.with_fallback(rp.options, rp.groups)
            measured = _measure(spark_fn, ref, table, stats_fn, stats, candidates, run, run_where, scope, rp)
        if rp.position_partitions:
            position_where = _position_where(table, ref, stats, rp.position_partitions, where, scope)
            compacted = delete_compaction.compact_position_deletes(
                spark_fn, ref, table, stats_fn, stats, rp, position_where
            )
            measured = replace(
                measured,
                position_deletes=compacted,
                delete_files_after=stats_fn(refreshed(table)).delete_files,
            )
        failed, error = measured.partitions_failed, measured.error
        reason = (
            d.reason
            if not (failed or error)
            else f"{d.reason}; {len(failed)} partitions not compacted" + (f" ({error})" if error else "")
        )
        return replace(measured, reason=reason, signals=signals, estimated_rewrite_bytes=cost)

    return timed(table, work)


def _untouched(stats: TableStats) -> RewriteResult:
    """The data rewrite's measures when only position deletes are compacted: no data file moves."""
    return RewriteResult(
        acted=True,
        reason="",
        data_files_before=stats.data_files,
        data_files_after=stats.data_files,
        small_files_before=stats.small_files,
        small_files_after=stats.small_files,
        snapshots_committed=0,
        delete_files_before=stats.delete_files,
    )


def _position_where(
    table: Table,
    ref: TableRef,
    stats: TableStats,
    labels: tuple[str, ...],
    where: str | None,
    scope: PartitionScope | None,
) -> str | None:
    """The ``where`` naming the partitions whose position deletes are compacted (as ``_planned`` names
    the data rewrite's): the run's scope, else a filter of the table's partitions (None: all)."""
    parts = stats.partitions
    named: str | None
    if scope is not None:
        named = scope.where(
            [v for c in labels for v in scope.values_of(c, parts[c].spec_id, parts[c].values)]
        )
    else:
        named = table_where(table, ref, stats, list(labels))[0]
    return f"({where}) AND ({named})" if where and named else (where or named)


def _in_scope(stats: TableStats, policy: Policy, scope: PartitionScope | None) -> list[str]:
    """The compaction candidates, among the run's partitions when it has a scope."""
    candidates = rewrite_candidates(stats, policy)
    if scope is None:
        return candidates
    return [
        c for c in candidates if scope.contains(c, stats.partitions[c].spec_id, stats.partitions[c].values)
    ]


def _planned(
    table: Table,
    ref: TableRef,
    stats: TableStats,
    rp: RewritePlan,
    where: str | None,
    scope: PartitionScope | None,
) -> tuple[list[str], str | None]:
    """The partitions the rewrite will take (the plan's, plus what its ``where`` also selects and
    Iceberg would rewrite) and that ``where``."""
    candidates = list(rp.partitions)
    parts = stats.partitions
    if scope is not None:
        scoped = scope.where(
            [v for c in candidates for v in scope.values_of(c, parts[c].spec_id, parts[c].values)]
        )
        return candidates, (f"({where}) AND ({scoped})" if where else scoped)
    # Whole table: scope Iceberg to the planned partitions, so it rewrites what was priced.
    named, covered = table_where(table, ref, stats, candidates, rp.rewrite_all)
    run_where = f"({where}) AND ({named})" if where and named else (where or named)
    # What the where also takes (a coarser filter, or none) and Iceberg would rewrite is priced too:
    # under rewrite-all (drift), every file it selects.
    min_input, deletes = int(rp.options["min-input-files"]), "delete-file-threshold" in rp.options
    extra = [
        c
        for c in covered
        if c not in rp.partitions and (rp.rewrite_all or rewritable(parts[c], min_input, deletes))
    ]
    return sorted([*candidates, *extra]), run_where


def _sort_spec(policy: Policy, table_order: bool = False) -> tuple[str, str | None]:
    """Iceberg's strategy and sort order for the policy (z-order is a sort order expression);
    ``table_order``: files out of the table's sort order are rewritten, so a binpack sorts by it."""
    sf = policy.small_files
    if table_order and sf.strategy == "binpack":
        return "sort", None  # Iceberg's sort strategy without an order: the table's
    if sf.strategy == "zorder":
        return "sort", f"zorder({', '.join(procedures.quote_identifier(c) for c in sf.zorder_columns)})"
    order = ", ".join(procedures.quote_identifier(c) for c in sf.sort_order) if sf.sort_order else None
    return sf.strategy, order


@dataclass(frozen=True)
class _Run:
    """What the procedure returned (nothing when it failed), why it failed, and how it was called."""

    row: ProcedureRow
    cause: Cause | None
    options: dict[str, str]
    fallback: bool


@dataclass(frozen=True)
class _Call:
    """One table's call of the rewrite procedure."""

    spark_fn: Callable[[], SparkSession]
    ref: TableRef
    table: Table
    before_id: int | None
    where: str | None
    policy: Policy
    say: Callable[[str], None] | None
    progress_every_s: float
    table_order: bool = False

    def once(self, options: dict[str, str]) -> tuple[ProcedureRow, Cause | None]:
        # Outside the try: a pre-flight refusal (PreflightError) is no partition's failure to retry,
        # it ends the op with its cause before anything is committed.
        spark = self.spark_fn()
        strategy, sort_order = _sort_spec(self.policy, self.table_order)
        try:
            # Partial progress commits group by group: say what is committed while Spark works.
            with progress.reporting(self.table, self.before_id, self.say, self.progress_every_s):
                row = procedures.rewrite_data_files(
                    spark,
                    self.ref,
                    strategy=strategy,
                    sort_order=sort_order,
                    options=options,
                    where=self.where,
                )
            return row, None
        except Exception as err:  # Spark/Iceberg failure: measured below, the caller decides on retries
            return {}, root_cause(err)

    def with_fallback(self, options: dict[str, str], groups: int) -> _Run:
        """The procedure; a single commit that failed as a whole (nothing committed) is retried once
        with partial progress, so the groups that can be rewritten commit and only the failing ones
        are left behind."""
        row, cause = self.once(options)
        single_commit = (
            options["partial-progress.enabled"] == "false"
            and self.policy.small_files.partial_progress_enabled
        )
        if not (cause and cause.kind != "access_denied" and single_commit and groups > 1):
            return _Run(row, cause, options, False)
        options = {**options, "partial-progress.enabled": "true"}
        row, cause = self.once(options)
        return _Run(row, cause, options, True)


def _measure(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    stats_fn: StatsFn,
    stats: TableStats,
    candidates: list[str],
    run: _Run,
    where: str | None,
    scope: PartitionScope | None,
    rp: RewritePlan,
) -> RewriteResult:
    """Which partitions kept their small files (or drift files), the commits, and the dangling-delete
    cleanup."""
    options = run.options
    after = stats_fn(refreshed(table))
    min_input, drifting = int(options["min-input-files"]), set(rp.drift_partitions)
    failed = [c for c in candidates if _not_compacted(stats, after, c, min_input, c in drifting)]
    iceberg_failed = int(run.row.get("failed_data_files_count", 0) or 0)
    commits = delete_compaction.commits_after(refreshed(table), stats.current_snapshot_id)
    dangling: DanglingDeletes | None = None
    if "delete-file-threshold" in options and commits:
        dangling = _remove_dangling_deletes(spark_fn, ref, table, after, candidates, where)
        if dangling.commits:
            after = stats_fn(refreshed(table))
    rewritten = [c for c in candidates if c not in failed]

    def vals(labels: list[str]) -> tuple[PartitionValues, ...] | None:
        if scope is None:  # the run's partitions, for the caller's Dagster keys
            return None
        return tuple(
            tuple(v)
            for c in labels
            for v in scope.values_of(c, stats.partitions[c].spec_id, stats.partitions[c].values)
        )

    return RewriteResult(
        acted=True,
        reason="",
        procedure=run.row,
        dangling=dangling,
        data_files_before=stats.data_files,
        data_files_after=after.data_files,
        small_files_before=stats.small_files,
        small_files_after=after.small_files,
        candidate_partitions=tuple(candidates[:50]),
        where=where,
        options=options,
        partial_progress_fallback=run.fallback,
        snapshots_committed=commits,
        delete_files_before=stats.delete_files,
        delete_files_after=after.delete_files,
        partitions_rewritten=tuple(rewritten),
        partitions_failed=tuple(failed),
        iceberg_failed_data_files_count=iceberg_failed,
        failed_data_files_count=max(iceberg_failed, sum(stats.partitions[c].data_files for c in failed)),
        failed_partition_values=vals(failed),
        rewritten_partition_values=vals(rewritten),
        error=str(run.cause) if run.cause else None,
        error_kind=run.cause.kind if run.cause else None,
        drift_partitions=tuple(c for c in candidates if c in drifting),
        drift_files_before=stats.drift_files,
        drift_files_after=after.drift_files,
    )


def _remove_dangling_deletes(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    after: TableStats,
    named: list[str],
    where: str | None,
) -> DanglingDeletes:
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
    if not (position or equality):
        return DanglingDeletes()
    before_id = _snapshot_id(refreshed(table))
    position_row: ProcedureRow = {}
    equality_row: ProcedureRow = {}
    error = None
    try:
        if position:
            position_row = procedures.rewrite_position_delete_files(
                spark_fn(), ref, {"rewrite-all": "true"}, where
            )
        if equality and len(table.metadata.partition_specs) == 1 and table.spec().is_unpartitioned():
            equality_row = procedures.remove_dangling_deletes(spark_fn(), ref)
    except Exception as err:  # recorded: effect verification reports the delete files left
        error = describe(err)
    return DanglingDeletes(
        delete_compaction.commits_after(refreshed(table), before_id), position_row, equality_row, error
    )


def _not_compacted(
    before: TableStats, after: TableStats, label: str, min_input_files: int, drifting: bool = False
) -> bool:
    """A partition whose rewrite did not commit: it still holds enough small files for a rewrite group
    and none of its small files went away. (Binpack rewrites the files under 75 % of the target, health's
    small files at the default ratio, so a committed rewrite leaves at most one small file per group.)
    A drifting one (rewritten whole): it still holds drift files, no fewer than before."""
    now = after.partitions.get(label)
    if drifting:
        return now is not None and 0 < before.partitions[label].drift_files <= now.drift_files
    return (
        now is not None
        and now.small_files >= min_input_files
        and now.small_files >= before.partitions[label].small_files
    )
