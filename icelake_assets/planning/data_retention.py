"""Row retention: the data_retention finding and the expire_data decision, from the retention facts
health/data_retention.py reads from the manifests (the retention column's bounds, no data scan).

Any row past the cut-off fails the check (WARN): the policy says it must not be kept. A policy the
table cannot serve (a column it lacks, a type ``unit`` / ``format`` does not fit) fails it too,
naming the cause, and expire_data does not act. Values dated after now (past the future skew) fail
it too, naming the column and the greatest value: they never move the cut-off.

What an unapproved expiry may delete is bounded by the last approved one (:func:`approval_needed`,
in every mode; planning/guards.py holds the run, maintenance/ops/expire_data.py refuses it):
- the first expiry of a table, or one after an expiry that recorded no binding, needs approval;
- the policy's digest (column, unit, format, since, timezone) must be the one the last expiry
  committed with, and ``keep_days`` no smaller;
- the cut-off (before it is lowered to a partition boundary) may move forward no more than the time
  that passed since that commit, plus ``approval_slack_days``;
- the rows surely past the cut-off may be at most ``max_delete_fraction`` of the table's rows
  (the op counts them exactly before it deletes)."""

from __future__ import annotations

from datetime import datetime, timedelta

from icelake_assets.health.data_retention import EXPIRE_DATA, RetentionFacts
from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Decision, Evaluation, disabled
from icelake_assets.settings import Policy
from icelake_assets.settings.lifecycle_policy import RetentionPolicy
from icelake_assets.text import human_bytes

OP = EXPIRE_DATA
CHECK = "data_retention"


def _metrics(f: RetentionFacts) -> dict[str, int | float]:
    return {
        "retention_configured": 1,
        "keep_days": f.keep_days,
        "expired_files": f.expired_files,
        "expired_rows": f.expired_rows,
        "expired_bytes": f.expired_bytes,
        "straddling_files": f.straddling_files,
        "straddling_rows": f.straddling_rows,
        "straddling_bytes": f.straddling_bytes,
        "unbounded_files": f.unbounded_files,
        "data_files": f.data_files,
        "future_files": f.future_files,
        "future_rows": f.future_rows,
    }


def _days(delta: timedelta) -> str:
    return f"{delta.total_seconds() / 86_400:.2f} days"


def fraction_exceeded(rows: int, total: int, policy: RetentionPolicy) -> str | None:
    """Why deleting ``rows`` of ``total`` is over the per-run cap (None: it is not)."""
    if total <= 0 or rows <= policy.max_delete_fraction * total:
        return None
    return (
        f"{rows} of the table's {total} rows ({rows / total:.0%}) would go, over "
        f"retention.max_delete_fraction {policy.max_delete_fraction:g}"
    )


def approval_needed(f: RetentionFacts, policy: RetentionPolicy) -> str | None:
    """Why this expiry needs an operator's approval, or None when the last approved expiry bounds it
    (the module docstring lists the bounds)."""
    last = f.last
    if last is None:
        return "first expiry of this table's rows"
    since = f"the approved expiry of snapshot {last.snapshot_id} ({last.committed_at:%Y-%m-%d %H:%M} UTC)"
    if last.policy_digest is None or last.cutoff is None or last.keep_days is None:
        return f"{since} recorded no retention policy it was bound to"
    if last.policy_digest != policy.digest():
        return f"the retention policy (column, unit, format, since or timezone) changed since {since}"
    if f.keep_days < last.keep_days:
        return f"keep_days lowered from {last.keep_days:g} to {f.keep_days:g} since {since}"
    if f.raw_cutoff is not None and f.as_of is not None:
        moved = datetime.fromisoformat(f.raw_cutoff) - last.cutoff
        passed = datetime.fromisoformat(f.as_of) - last.committed_at
        if moved > passed + timedelta(days=policy.approval_slack_days):
            return (
                f"the cut-off moved {_days(moved)} since {since}, more than the {_days(passed)} that "
                f"passed (+ approval_slack_days {policy.approval_slack_days:g})"
            )
    return fraction_exceeded(f.expired_rows, f.data_rows, policy)


def _past(f: RetentionFacts) -> str:
    """The files and rows past the cut-off, in words."""
    parts = []
    if f.expired_files:
        parts.append(f"{f.expired_files} files ({f.expired_rows} rows) wholly past it")
    if f.straddling_files:
        parts.append(f"{f.straddling_files} files straddle it (up to {f.straddling_rows} rows)")
    return " and ".join(parts)


def retention_finding(stats: TableStats, policy: Policy) -> Finding:
    f = stats.data_retention
    if f is None:
        return Finding(
            CHECK, Severity.OK, "retention not configured", "nothing to expire", {"retention_configured": 0}
        )
    metrics = _metrics(f)
    where = f"{f.column} older than {f.keep_days:g} days"
    if f.problem:
        return Finding(
            CHECK,
            Severity.WARN,
            f"retention cannot be applied: {f.problem}",
            "fix the retention policy (column, unit, format) or the table",
            metrics,
        )
    if f.future_files:
        return Finding(
            CHECK,
            Severity.WARN,
            f"up to {f.future_rows} rows in {f.future_files} files have {f.column} dated after now "
            f"(past {f.future_limit}; greatest {f.future_value}): they never move the cut-off",
            "fix the writer or the rows (a clock bug, a sentinel); retention keeps them",
            metrics,
        )
    if f.cutoff is None:
        return Finding(
            CHECK, Severity.OK, f"no bounds on {f.column}: nothing placed", "nothing to expire", metrics
        )
    if not f.files:
        unplaced = f" ({f.unbounded_files} files without bounds on it)" if f.unbounded_files else ""
        return Finding(
            CHECK,
            Severity.OK,
            f"no row with {where} (cut-off {f.cutoff}){unplaced}",
            "nothing to expire",
            metrics,
        )
    how = "a metadata-only delete (no file rewritten)" if f.metadata_only else "deleting rows"
    return Finding(
        CHECK,
        Severity.WARN,
        f"rows with {where} (cut-off {f.cutoff}): {_past(f)}",
        f"run expire_data: {how}, {human_bytes(f.bytes)} of data files",
        metrics,
    )


def decide_expire_data(stats: TableStats, policy: Policy) -> Decision:
    """Acts when rows are past the cut-off. Its signals carry what the plan shows and the guards
    price: rows, files and bytes that would go, the bytes rewritten (straddling and unbounded files:
    a metadata-only drop rewrites nothing) and whether it is the table's first expiry."""
    if off := disabled(OP, policy):
        return off
    f = stats.data_retention
    if f is None:
        return Decision(OP, False, "retention not configured")
    if f.problem:
        return Decision(OP, False, f"retention cannot be applied: {f.problem}", {"column": f.column})
    signals: dict[str, object] = {
        "column": f.column,
        "cutoff": f.cutoff,
        "keep_days": f.keep_days,
        "since": f.since,
        "expire_files": f.files,
        "expire_rows": f.rows,
        "expire_bytes": f.bytes,
        "expired_files": f.expired_files,
        "straddling_files": f.straddling_files,
        "unbounded_files": f.unbounded_files,
        "metadata_only": f.metadata_only,
        "rewrite_bytes": 0 if f.metadata_only else f.straddling_bytes + f.unbounded_bytes,
        "first_expiry": not f.expired_before,
        "data_rows": f.data_rows,
    }
    if not f.files:
        return Decision(OP, False, f"no row of {f.column} older than the cut-off {f.cutoff}", signals)
    signals["needs_approval"] = approval_needed(f, policy.retention) or ""
    how = (
        "whole files dropped, none rewritten" if f.metadata_only else "rows deleted in the table's write mode"
    )
    return Decision(OP, True, f"rows older than {f.cutoff}: {_past(f)}; {how}", signals)


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    return Evaluation(retention_finding(stats, policy), decide_expire_data(stats, policy))
