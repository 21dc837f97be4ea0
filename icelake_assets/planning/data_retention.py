"""Row retention: the data_retention finding and the expire_data decision, from the retention facts
health/data_retention.py reads from the manifests (the retention column's bounds, no data scan).

Any row past the cut-off fails the check (WARN): the policy says it must not be kept. A policy the
table cannot serve (a column it lacks, a type ``unit`` / ``format`` does not fit) fails it too,
naming the cause, and expire_data does not act. The first expiry of a table (no earlier expire_data
commit among its snapshots) waits for an operator's approval (planning/guards.py)."""

from __future__ import annotations

from icelake_assets.health.data_retention import EXPIRE_DATA, RetentionFacts
from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Decision, Evaluation, disabled
from icelake_assets.settings import Policy
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
    }


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
    }
    if not f.files:
        return Decision(OP, False, f"no row of {f.column} older than the cut-off {f.cutoff}", signals)
    how = (
        "whole files dropped, none rewritten" if f.metadata_only else "rows deleted in the table's write mode"
    )
    return Decision(OP, True, f"rows older than {f.cutoff}: {_past(f)}; {how}", signals)


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    return Evaluation(retention_finding(stats, policy), decide_expire_data(stats, policy))
