"""Guards between "a threshold is crossed" and "a run is launched": every stop is explained.

- writers: a table with a writer commit inside the quiet period is deferred (maintenance would race
  its commits and, at best, retry);
- expiry bounds: an expire_data the last approved one does not bound (the first of a table, a changed
  policy, a cut-off that jumped, over the delete fraction: planning/data_retention.py) is held until
  an operator approves it, showing the rows, files and bytes it would delete;
- cost: a rewrite estimated above the cap is held until an operator approves it explicitly (a row
  expiry's rewritten files count, its metadata-only drops cost nothing);
- nothing to do: no op's threshold is crossed;
- runs (run_guard): a run of the table already queued or running, or the backoff after failed runs,
  from what the sensor read of the instance (planning/history.py).
Concurrency (one run per table, a global cap) is Dagster's job: see dagster.yaml and the run tags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Decision
from icelake_assets.planning.history import Runs

Action = Literal["launch", "defer", "hold", "skip"]
# Run tag an operator sets (UI: Materialize → tags) to approve a run held by the cost guard.
APPROVAL_TAG = "icelake/approved"


def is_approved(tags: Mapping[str, str]) -> bool:
    """A run launched with the approval tag (``icelake approve``, the launchpad link)."""
    return tags.get(APPROVAL_TAG, "").lower() == "true"


EXPIRE_DATA = "expire_data"  # planning/op_plans.py: its first run on a table waits for approval
# What the plan and the audit show of a row expiry the guards saw (planning/data_retention.py signals).
_EXPIRY_DETAILS = (
    "expire_rows",
    "expire_files",
    "expire_bytes",
    "cutoff",
    "metadata_only",
    "first_expiry",
    "needs_approval",
)


def _scalar(value: object) -> float | int | str:
    return value if isinstance(value, (int, float, str)) else str(value)


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: str
    ops: tuple[str, ...] = ()  # ops whose thresholds are crossed
    details: Mapping[str, float | int | str] = field(default_factory=dict)


def estimated_rewrite_bytes(stats: TableStats, partitions: Sequence[str] | None = None) -> int:
    """Bytes a rewrite reads and writes again: the candidate partitions' data (in scope)."""
    scope = (
        stats.compaction_candidates
        if partitions is None
        else [p for p in partitions if p in stats.partitions]
    )
    return sum(stats.partitions[p].data_bytes for p in scope)


def evaluate_guards(
    stats: TableStats,
    decisions: Sequence[Decision],
    quiet_period_minutes: float,
    max_rewrite_bytes: int,
    approved: bool = False,
    partitions: Sequence[str] | None = None,
    position_delete_bytes: int = 0,
) -> Verdict:
    """``partitions``: those the data rewrite takes; ``position_delete_bytes``: the delete files its
    position-delete compaction reads and writes again (planning/rewrite.py), priced too."""
    acting = tuple(d.op for d in decisions if d.act)
    if not acting:
        return Verdict("skip", "; ".join(d.reason for d in decisions) or "no maintenance op enabled")
    last_write = stats.last_writer_commit_age_minutes
    writer = {
        "last_writer_commit_age_minutes": -1.0 if last_write is None else round(last_write, 2),
        "quiet_period_minutes": quiet_period_minutes,
    }
    if last_write is not None and last_write < quiet_period_minutes:
        return Verdict(
            "defer",
            f"a writer committed {last_write:.1f} min ago, inside the quiet period of "
            f"{quiet_period_minutes:g} min",
            acting,
            writer,
        )
    rewriting = "rewrite_data_files" in acting
    data = estimated_rewrite_bytes(stats, partitions) if rewriting else 0
    position = position_delete_bytes if rewriting else 0
    expiry = next((d for d in decisions if d.op == EXPIRE_DATA and d.act), None)
    expiry_bytes = int(expiry.signals.get("rewrite_bytes", 0)) if expiry else 0  # drops cost nothing
    cost = data + position + expiry_bytes
    details: dict[str, float | int | str] = {
        **writer,
        "estimated_rewrite_bytes": cost,
        "max_rewrite_bytes": max_rewrite_bytes,
    }
    if position:
        details["estimated_position_delete_bytes"] = position
    if expiry is not None:
        details.update({k: _scalar(expiry.signals.get(k)) for k in _EXPIRY_DETAILS})
        if (why := expiry.signals.get("needs_approval")) and not approved:
            s = expiry.signals
            return Verdict(
                "hold",
                f"{why}: {s.get('expire_rows')} rows in "
                f"{s.get('expire_files')} files ({s.get('expire_bytes')} bytes) older than "
                f"{s.get('cutoff')} would be deleted: awaiting approval (launch with tag "
                f"{APPROVAL_TAG}=true)",
                acting,
                details,
            )
    if cost > max_rewrite_bytes and not approved:
        return Verdict(
            "hold",
            f"rewrite of {cost} bytes is over the cap of {max_rewrite_bytes} bytes: awaiting "
            f"approval (launch with tag {APPROVAL_TAG}=true)",
            acting,
            details,
        )
    return Verdict("launch", "; ".join(d.reason for d in decisions if d.act), acting, details)


def run_guard(runs: Runs | None, now: float) -> tuple[str, str] | None:
    """What the run model forbids a launch: ``("in_flight", why)`` while the table's maintenance is
    queued or running (launched by anyone), ``("backoff", why)`` while its failed runs' backoff is not
    over; None: it may launch."""
    if runs is None:
        return None
    if runs.in_flight:
        return "in_flight", f"maintenance already queued or running ({runs.in_flight})"
    if runs.retry_at is not None and runs.retry_at > now:
        cause = runs.failure_reason
        failed = (
            "the last maintenance run was interrupted (not the table's failure)"
            if runs.interrupted or not runs.failures_in_a_row
            else f"the last {runs.failures_in_a_row} maintenance run(s) failed"
        )
        return "backoff", (
            f"{failed}; retrying after "
            f"{datetime.fromtimestamp(runs.retry_at, tz=UTC):%Y-%m-%d %H:%M:%S} UTC"
            + (f" (last failure: {cause})" if cause else "")
        )
    return None
