"""What happens to a table after its maintenance ops, decided free of Dagster: the row-count
validation (and the cross-engine proof), whether to roll back, each op's effect, the run's outcome,
and what the audit's validation record says. orchestration/assets/validation.py calls these and renders
the result in Dagster (metadata, tags, failures)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from pyiceberg.table import Table
from pyspark.sql import SparkSession

from icelake_assets.catalog.ancestry import ancestors
from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.findings import Finding
from icelake_assets.health.orphan_phases import PendingSummary
from icelake_assets.health.scan_cost import ScanBenefit, measure_scan_cost
from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance.ops.chain import (
    ORPHANS_OP,
    REWRITE_OP,
    REWRITING_OPS,
    STATISTICS_OP,
    judge_effects,
)
from icelake_assets.maintenance.results.base import OpResult
from icelake_assets.maintenance.results.effect import Effect, OpEffect, run_outcome
from icelake_assets.maintenance.results.rewrite import RewriteResult
from icelake_assets.maintenance.spark.commit_tags import run_of
from icelake_assets.maintenance.verify.cross_engine import CrossEngineError, cross_engine_check
from icelake_assets.maintenance.verify.scan_probe import probe_scan
from icelake_assets.maintenance.verify.validation import (
    RollbackOutcome,
    ValidationFailed,
    ValidationResult,
    rollback_if_safe,
    validate_row_counts,
)
from icelake_assets.planning.orphans import orphan_finding
from icelake_assets.planning.relaunch import (
    OUTCOME_SNAPSHOT_TAG,
    OUTCOME_TAG,
    POLICY_HASH_TAG,
    policy_hash,
    table_outcome_tags,
)
from icelake_assets.planning.statistics import refused_tag
from icelake_assets.settings import Policy

# How a run ends, for the audit's metrics (audit/metric_families.RUN_OUTCOMES).
RunOutcome = Literal["succeeded", "partial", "failed", "rolled_back"]


@dataclass(frozen=True)
class Baseline:
    """The snapshot validation compares with: where the run's first rewrite started (expiry and orphan
    removal change no rows, and expiry may remove the run's first snapshot when a writer committed
    since), or the current one when nothing rewrote."""

    snapshot_id: int | None
    rewrote: bool  # an op of ours committed rewritten files or expired rows: only then can rows change
    # The run's row expiry commits, each with the rows its summary says it removed.
    expiry: Mapping[int, int] = field(default_factory=dict)
    expiry_mismatch: str | None = None  # what the expiry's own counts contradict


def baseline(ops: Sequence[OpResult], current_snapshot_id: int | None) -> Baseline:
    """Where the first op that changed rows or files started (the row expiry, first in the chain,
    or a rewrite)."""
    expiry = {snap: rows for o in ops if o.acted for snap, rows in o.expiry_commits().items()}
    changing = [o for o in ops if o.acted and (o.op in REWRITING_OPS or o.expiry_commits())]
    if changing:
        mismatch = next((m for o in ops if o.acted and (m := o.expiry_mismatch())), None)
        return Baseline(changing[0].snapshot_before, True, expiry, mismatch)
    return Baseline(current_snapshot_id, False)


def duration_s(ops: Sequence[OpResult]) -> float:
    return sum(o.duration_s for o in ops)


@dataclass(frozen=True)
class RowCheck:
    """Row-count parity (and the engines' agreement): ``mismatch`` says why validation failed."""

    result: ValidationResult | None
    mismatch: str | None
    cross_engine: str | None = None  # the engines' agreement, when the policy asked for the proof


def check_rows(
    spark: Callable[[], SparkSession],
    ref: TableRef,
    table: Table,
    start: Baseline,
    cross_engine: bool,
    say: Callable[[str], None],
) -> RowCheck:
    """Without a rewrite of ours no row can have changed: summaries suffice, no JVM needed. With one,
    Spark counts the live rows of snapshots that carry delete files. ``cross_engine``: prove the
    result with a second and third engine (Spark, pyiceberg and DuckDB agree) when rows match."""
    result, described = None, None
    try:
        result = validate_row_counts(
            spark if start.rewrote else None,
            ref,
            table,
            start.snapshot_id,
            real_counts=start.rewrote,
            expiry=start.expiry,
        )
        if not result.ok:
            return RowCheck(result, result.mismatch(ref))
        if start.expiry_mismatch:
            return RowCheck(result, f"{ref}: {start.expiry_mismatch}")
        if cross_engine:
            cross = cross_engine_check(spark(), ref, table)
            described = cross.describe()
            say(f"{ref} cross-engine read: {described}")
            if not cross.ok:
                return RowCheck(result, f"{ref}: engines disagree after maintenance: {described}", described)
    except (ValidationFailed, CrossEngineError) as err:
        return RowCheck(result, str(err), described)
    return RowCheck(result, None, described)


def roll_back(table: Table, start: Baseline) -> RollbackOutcome | None:
    """Undo our rewrites after a failed validation, when nothing else came after them; None when the
    run rewrote nothing (nothing of ours to undo)."""
    return rollback_if_safe(table, start.snapshot_id, frozenset(start.expiry)) if start.rewrote else None


def failed_outcome(rollback: RollbackOutcome | None) -> RunOutcome:
    return "rolled_back" if rollback is not None and rollback.rolled_back else "failed"


def recovery_advice(ref: TableRef, rollback: RollbackOutcome | None, before_snapshot_id: int | None) -> str:
    """What the failed run did about it, or how to recover by hand."""
    if rollback is not None and rollback.rolled_back:
        return f"Rolled back automatically: {rollback.reason}."
    return (
        f"Not rolled back ({rollback.reason if rollback else 'nothing of ours to undo'}). Recover "
        f"with CALL {ref.catalog}.system.rollback_to_snapshot('{'.'.join(ref.identifier)}', "
        f"{before_snapshot_id}) once the writers' rows are accounted for."
    )


def scanned_orphans(ops: Sequence[OpResult], policy: Policy) -> Finding | None:
    """The orphan finding of this run's own storage scan (what its orphan op left), if it scanned."""
    o = ORPHANS_OP.find(ops)
    if o is None:
        return None
    left = o.scan.orphans_found - o.orphans_removed - o.pending_files
    pending = (
        PendingSummary(o.recovery_window_hours, o.pending_files, o.pending_bytes, 0, o.first_removable_at)
        if o.pending_files
        else None
    )
    return orphan_finding(
        max(0, left),
        0 if left <= 0 else max(0, o.bytes_found - o.bytes_removed - o.pending_bytes),
        policy,
        pending=pending,
        hidden_files=o.scan.hidden_files,
        skipped=o.scan.skipped_reasons,
        refused=o.scan.refused,
        deferred=o.scan.deferred,
    )


def rewrite_failure(ops: Sequence[OpResult]) -> RewriteResult | None:
    """The rewrite's result when some of its partitions did not compact (or Spark failed)."""
    o = REWRITE_OP.find(ops)  # merged: the last attempt's failures, earlier ones were retried
    return o if o is not None and o.failed else None


def scan_benefit(
    table: Table, ops: Sequence[OpResult], policy: Policy, spark: Callable[[], SparkSession], ref: TableRef
) -> ScanBenefit | None:
    """A full scan's cost on the snapshot the run started from and on the current one (proof of
    benefit), when an op acted; None when nothing changed or the run started on an empty table.
    With ``loop.scan_probe``, a full-scan query (or the policy's ``scan_probe_query``) is timed on both
    too, if the table is small enough."""
    start = ops[0].snapshot_before if ops else None
    if not any(o.acted for o in ops) or start is None:
        return None
    benefit = ScanBenefit(measure_scan_cost(table, start), measure_scan_cost(table))
    bounded = max(benefit.before.data_bytes, benefit.after.data_bytes) <= policy.loop.scan_probe_max_bytes
    if policy.loop.scan_probe and bounded and benefit.after.snapshot_id is not None:
        probe = probe_scan(spark(), ref, start, benefit.after.snapshot_id, policy.loop.scan_probe_query)
        benefit = replace(
            benefit, probe_seconds=(probe.before_seconds, probe.after_seconds), probe_query=probe.query
        )
    return benefit


@dataclass(frozen=True)
class RunReport:
    """The verdict on a run whose rows matched: did each op fix what triggered it, how the run ends,
    and what its validation record says."""

    effects: tuple[OpEffect, ...]
    outcome: Effect | None  # the worst effect; None when no op acted
    failure: RewriteResult | None  # the rewrite, when partitions did not compact or Spark failed
    scanned_orphans: Finding | None
    statistics_refused: str | None = None  # the store's answer when it refused the statistics file

    @property
    def ineffective(self) -> tuple[OpEffect, ...]:
        return tuple(e for e in self.effects if e.effect == "ineffective")

    @property
    def orphans_removed(self) -> bool:
        """The orphan op removed what it found (health then needs no new scan)."""
        return any(e.op == ORPHANS_OP.name and e.effect == "effective" for e in self.effects)

    @property
    def failed_partitions(self) -> tuple[str, ...]:
        return self.failure.failed_names() if self.failure is not None else ()

    @property
    def validation_decision(self) -> Literal["passed", "partial"]:
        return "partial" if self.failure is not None else "passed"

    @property
    def run_outcome(self) -> RunOutcome:
        return "partial" if self.failure is not None else "succeeded"

    def validation_reason(self) -> str:
        failed = f"; {len(self.failed_partitions)} partitions not compacted" if self.failure else ""
        ineffective = self.ineffective
        note = f"; ineffective: {', '.join(e.op for e in ineffective)}" if ineffective else ""
        return "rows match" + failed + note

    def audit_effects(self, benefit: ScanBenefit | None) -> dict[str, object]:
        """The effects as the validation record's results carry them."""
        return {
            "outcome": self.outcome,
            "ops": [e.to_dict() for e in self.effects],
            **({"benefit": benefit.to_dict()} if benefit is not None else {}),
        }

    def fails_as_ineffective(self, policy: Policy) -> str | None:
        """Why the run fails for doing nothing useful (``loop.on_ineffective: fail``), or None."""
        if not (self.ineffective and policy.loop.on_ineffective == "fail"):
            return None
        return "maintenance was ineffective (loop.on_ineffective: fail): " + "; ".join(
            f"{e.op}: {e.reason}" for e in self.ineffective
        )

    def outcome_tags(
        self, ref: TableRef, after_snapshot_id: int | None, policy: Policy, shared: bool = False
    ) -> dict[str, str]:
        """The run tags the sensor reads back (effect.relaunch_hold, and the statistics refusal:
        planning/statistics.statistics_refusal); none when no op acted. ``shared``: the run maintains
        other tables too (each table's outcome under its own keys only)."""
        if self.outcome is None:
            return {}
        outcome = {
            OUTCOME_TAG: self.outcome,
            OUTCOME_SNAPSHOT_TAG: str(after_snapshot_id),
            POLICY_HASH_TAG: policy_hash(policy),
            **(refused_tag(self.statistics_refused) if self.statistics_refused else {}),
        }
        return table_outcome_tags(str(ref), outcome, shared)


def commits_by_others(table: Table, ops: Sequence[OpResult], run_id: str) -> dict[str, int]:
    """Per op that acted: the commits on the table's current branch after the op's end that name
    another run than ``run_id`` or none (writers). An op whose end is not on that branch any more
    counts none: what came after it cannot be told."""
    chain = [(s.snapshot_id, run_of(s.summary)) for s in ancestors(table)]
    at = {snapshot_id: i for i, (snapshot_id, _) in enumerate(chain)}
    out = {}
    for o in ops:
        end = at.get(o.snapshot_after) if o.acted and o.snapshot_after is not None else None
        if end is not None:
            out[o.op] = sum(1 for _, run in chain[:end] if run != run_id)
    return out


def judge(
    merged_ops: Sequence[OpResult], after: TableStats, policy: Policy, others: dict[str, int] | None = None
) -> RunReport:
    """The closed loop, on metadata only (incremental cache): each op's effect on ``after``.
    ``merged_ops``: one result per op, a retried op's attempts folded into one; ``others``: the
    commits others made on top of each op (:func:`commits_by_others`)."""
    effects = judge_effects(merged_ops, after, policy, others)
    return RunReport(
        effects=tuple(effects),
        outcome=run_outcome(effects),
        failure=rewrite_failure(merged_ops),
        scanned_orphans=scanned_orphans(merged_ops, policy),
        statistics_refused=(s.refused if (s := STATISTICS_OP.find(merged_ops)) is not None else None),
    )


def with_effects(ops: Sequence[OpResult], effects: Sequence[OpEffect]) -> tuple[OpResult, ...]:
    """Every attempt of an op that has an effect, carrying it (for its audit record)."""
    by_op = {e.op: e for e in effects}
    return tuple(o.with_effect(by_op[o.op].effect, by_op[o.op].reason) if o.op in by_op else o for o in ops)


__all__ = [
    "Baseline",
    "RowCheck",
    "RunOutcome",
    "RunReport",
    "baseline",
    "check_rows",
    "duration_s",
    "failed_outcome",
    "judge",
    "recovery_advice",
    "roll_back",
    "scan_benefit",
    "scanned_orphans",
    "with_effects",
]
