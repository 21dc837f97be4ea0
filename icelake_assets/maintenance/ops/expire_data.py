"""expire_data: delete the rows past the retention cut-off (the first op of the chain).

Decided again on fresh metadata (planning/data_retention.py), then one Spark ``DELETE`` whose
condition is the cut-off in the column's own terms, every part quoted. Where every file with expired
rows is wholly past the cut-off (the cut-off lies on a partition boundary: health/data_retention.py
lowers it there for tables partitioned by the column), Iceberg drops the files as a metadata-only
delete; otherwise Spark deletes rows in the table's write mode. What went is read back from the
snapshot summaries of the run's own commits (validation expects exactly that change).

An expiry the last approved one does not bound (the table's first, a changed policy, a cut-off that
jumped, more than ``max_delete_fraction`` of the rows: planning/data_retention.py) acts only when the
run carries the approval tag (planning/guards.py holds it in the sensor too). The fraction is checked
again on Spark's exact counts before the delete. The commit records what bound it (the policy's
digest, keep_days, the cut-off): the next unapproved expiry is bounded by them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.ancestry import ancestors
from icelake_assets.catalog.connection import TableRef, current_snapshot_id
from icelake_assets.health.data_retention import RetentionFacts
from icelake_assets.health.retention_column import RetentionColumn, retention_column, sortable_format
from icelake_assets.maintenance.ops.attempts import retry_on_conflict
from icelake_assets.maintenance.ops.runner import StatsFn, timed
from icelake_assets.maintenance.results.expire_data import ExpireDataResult, ExpiryCommit
from icelake_assets.maintenance.spark import commit_tags, procedures, row_delete
from icelake_assets.partitions.quoting import quote_identifier, sql_string
from icelake_assets.planning.data_retention import OP, approval_needed, decide_expire_data, fraction_exceeded
from icelake_assets.planning.decision import disabled
from icelake_assets.planning.guards import APPROVAL_TAG
from icelake_assets.settings import Policy
from icelake_assets.types import (
    SNAPSHOT_OP,
    SNAPSHOT_RETENTION_CUTOFF,
    SNAPSHOT_RETENTION_KEEP_DAYS,
    SNAPSHOT_RETENTION_POLICY,
    SNAPSHOT_RUN_ID,
    IcelakeError,
)


class RetentionPredicateError(IcelakeError, ValueError):
    """The retention cut-off cannot be written as a condition Spark compares correctly."""


def retention_condition(col: RetentionColumn, cutoff: datetime) -> str:
    """``<column> < <cut-off literal>``: a TIMESTAMP (timestamptz, at UTC) or TIMESTAMP_NTZ literal (the
    wall time in the policy's zone), a DATE, a number in the column's unit, or a string in the
    column's format (only formats whose text sorts like time: anything else is refused)."""
    name = ".".join(quote_identifier(p) for p in col.name.split("."))
    wall = col.wall(cutoff)
    if col.kind == "timestamptz":
        literal = f"TIMESTAMP {sql_string(wall.strftime('%Y-%m-%d %H:%M:%S.%f') + '+00:00')}"
    elif col.kind == "timestamp":
        literal = f"TIMESTAMP_NTZ {sql_string(wall.strftime('%Y-%m-%d %H:%M:%S.%f'))}"
    elif col.kind == "date":
        literal = f"DATE {sql_string(wall.date().isoformat())}"
    elif col.kind == "epoch":
        literal = str(int(col.key(cutoff)))
    elif col.kind == "string" and col.format and not (why := sortable_format(col.format)):
        literal = sql_string(str(col.key(cutoff)))
    else:
        fmt = col.format or "no format"
        raise RetentionPredicateError(
            f"retention on {col.name!r} ({col.kind}, {fmt}): cannot compare it with the cut-off"
            + (f": {why}" if col.kind == "string" and col.format else "")
        )
    return f"{name} < {literal}"


def _our_commits(table: Table, before: int | None, run_id: str | None) -> tuple[ExpiryCommit, ...]:
    """The snapshots the delete committed, oldest first: those naming this run's expire_data since
    its first attempt (one whose commit state was unknown may have landed; a writer's is not ours),
    or, in a session no run tagged, every one since ``before``, its last attempt's snapshot."""
    found = []
    for snap in ancestors(table, until=before):
        summary = dict(snap.summary.additional_properties) if snap.summary else {}
        if run_id is not None and (
            summary.get(SNAPSHOT_RUN_ID) != run_id or summary.get(SNAPSHOT_OP) != "expire_data"
        ):
            continue
        operation = snap.summary.operation.value if snap.summary else ""
        found.append(ExpiryCommit.of(snap.snapshot_id, operation, summary))
    return tuple(reversed(found))


def expire_data(
    spark_fn: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    policy: Policy,
    stats_fn: StatsFn,
    approved: bool = False,
) -> ExpireDataResult:
    def work() -> ExpireDataResult:
        if off := disabled(OP, policy):  # the op of every run: no table statistics when it cannot act
            return ExpireDataResult(acted=False, reason=off.reason)
        if not policy.retention.enabled:
            return ExpireDataResult(acted=False, reason="retention not configured")
        stats = stats_fn(table)
        d = decide_expire_data(stats, policy)
        facts = stats.data_retention
        if not d.act or facts is None or facts.cutoff is None:
            return ExpireDataResult(acted=False, reason=d.reason, signals=d.signals)
        first = not facts.expired_before
        if (bound := approval_needed(facts, policy.retention)) and not approved:
            why = (
                f"{bound} ({facts.rows} rows in {facts.files} files older than {facts.cutoff}): awaits "
                f"approval: launch with tag {APPROVAL_TAG}=true"
            )
            return ExpireDataResult(acted=False, reason=why, signals=d.signals, first_expiry=first)
        col = retention_column(table, policy.retention)
        if isinstance(col, str):  # the table changed since the stats were read
            return ExpireDataResult(
                acted=False, reason=f"retention cannot be applied: {col}", signals=d.signals
            )
        cutoff = datetime.fromisoformat(facts.cutoff)
        condition = retention_condition(col, cutoff)
        bound_by = {
            SNAPSHOT_RETENTION_POLICY: policy.retention.digest(),
            SNAPSHOT_RETENTION_KEEP_DAYS: repr(facts.keep_days),
            SNAPSHOT_RETENTION_CUTOFF: facts.raw_cutoff or facts.cutoff,
        }
        spark = spark_fn()
        table.refresh()
        first_before = current_snapshot_id(table)

        def delete() -> tuple[int | None, int] | str:
            """(snapshot before, rows matched) once deleted, or why the delete awaits approval. Counted and
            deleted again on the new snapshot when a writer's commit conflicts (attempts.py)."""
            table.refresh()
            before = current_snapshot_id(table)
            matched = procedures.count_rows(spark, ref, before, where=condition)
            if not approved and (
                over := fraction_exceeded(
                    matched, procedures.count_rows(spark, ref, before), policy.retention
                )
            ):
                return f"{over}: awaits approval: launch with tag {APPROVAL_TAG}=true"
            row_delete.delete_where(spark, ref, condition, bound_by)
            return before, matched

        deleted = retry_on_conflict(delete)
        if isinstance(deleted, str):
            return ExpireDataResult(acted=False, reason=deleted, signals=d.signals, first_expiry=first)
        before, matched_before = deleted
        table.refresh()
        after = current_snapshot_id(table)
        run_id = commit_tags.session_properties(spark).get(SNAPSHOT_RUN_ID)
        res = _result(
            d.reason,
            d.signals,
            facts,
            condition,
            table,
            _our_commits(table, first_before if run_id else before, run_id),
            first,
        )
        return replace(
            res,
            matched_before=matched_before,
            matched_after=procedures.count_rows(spark, ref, after, where=condition),
        )

    return timed(table, work)


def _result(
    reason: str,
    signals: dict[str, object],
    facts: RetentionFacts,
    condition: str,
    table: Table,
    commits: tuple[ExpiryCommit, ...],
    first: bool,
) -> ExpireDataResult:
    return ExpireDataResult(
        acted=True,
        reason=reason if commits else f"{reason}; Spark committed nothing (no row matched any more)",
        signals=signals,
        column=facts.column,
        cutoff=facts.cutoff,
        predicate=condition,
        write_mode=table.properties.get("write.delete.mode", "copy-on-write"),
        predicted_rows=facts.rows,
        predicted_files=facts.files,
        predicted_bytes=facts.bytes,
        predicted_metadata_only=facts.metadata_only,
        commits=commits,
        first_expiry=first,
    )
