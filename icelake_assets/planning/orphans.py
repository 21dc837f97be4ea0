"""Orphan files: the orphan_files finding and the remove_orphan_files decision (one threshold: more
removable orphans than ``orphans.max_count``). Orphans need a storage listing, not metadata alone.

With ``orphans.recovery_window_hours`` > 0 (health/orphan_phases.py) only the candidates recorded that
long ago are removable; the others are pending. The op also runs to record new candidates when all
the orphans it would find are past the threshold (else nothing would ever start their window); a
table whose orphans are all recorded and pending is waiting, not failing."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from icelake_assets.health.findings import ERROR_FACTOR, Finding, Severity
from icelake_assets.health.orphan_phases import PendingSummary
from icelake_assets.planning.decision import Decision, Evaluation, disabled
from icelake_assets.settings import Policy


def crossed(orphan_count: int, policy: Policy) -> bool:
    """The one threshold: the finding fails and the op acts past ``orphans.max_count`` removable files."""
    return orphan_count > policy.orphans.max_count


def to_mark(orphan_count: int, pending: PendingSummary | None, policy: Policy) -> bool:
    """The op runs to record new candidates: some are not recorded yet, and with the pending ones the
    orphans are past the threshold (they would be removable if recorded)."""
    if pending is None or not pending.unmarked:
        return False
    return crossed(orphan_count + pending.files, policy)


def _when(epoch_s: float | None) -> str:
    if epoch_s is None:
        return "-"
    return datetime.fromtimestamp(epoch_s, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


def _pending_metrics(pending: PendingSummary | None, policy: Policy) -> dict[str, int | float]:
    p = pending or PendingSummary(policy.orphans.recovery_window_hours)
    out: dict[str, int | float] = {
        "orphan_pending_files": p.files,
        "orphan_pending_bytes": p.bytes,
        "orphan_unmarked_files": p.unmarked,
        "recovery_window_hours": policy.orphans.recovery_window_hours,
    }
    if p.first_removable_at is not None:  # epoch s
        out["first_removable_at"] = round(p.first_removable_at, 3)
    return out


def _pending_note(pending: PendingSummary | None) -> str:
    if pending is None or not pending.files:
        return ""
    return (
        f"; {pending.files} more ({pending.bytes} B) pending their {pending.window_hours:g} h "
        f"recovery window, the first removable at {_when(pending.first_removable_at)}"
    )


def orphan_finding(
    orphan_count: int,
    orphan_bytes: int,
    policy: Policy,
    sample: Sequence[str] = (),
    hidden_files: int = 0,
    skipped: Mapping[str, int] | None = None,
    refused: str | None = None,
    deferred: str | None = None,
    pending: PendingSummary | None = None,
) -> Finding:
    """``orphan_count``/``orphan_bytes``: the removable orphans (all of them without a recovery window);
    ``hidden_files``: not orphans by Iceberg's rule; ``skipped``: files left alone because another
    table owns them, by reason; ``refused``: why this table is never cleaned automatically;
    ``deferred``: why it is not cleaned now (a table that may overlap it cannot be read);
    ``pending``: the orphans in their recovery window, when there is one."""
    p = policy.orphans
    skipped = dict(skipped or {})
    metrics = {
        "orphan_files": orphan_count,
        "orphan_bytes": orphan_bytes,
        "max_orphans": p.max_count,
        "orphan_older_than_hours": p.older_than_hours,
        "hidden_files": hidden_files,
        "skipped_other_tables": sum(skipped.values()),
        "cleanup_refused": int(refused is not None),
        "cleanup_deferred": int(deferred is not None),
        **_pending_metrics(pending, policy),
    }
    rows: tuple[dict[str, object], ...] = tuple({"path": path} for path in list(sample)[:10])
    notes = "".join(f"; {n} files skipped ({reason})" for reason, n in sorted(skipped.items()))
    if refused:
        notes += f"; never removed automatically: {refused}"
    elif deferred:
        notes += f"; not removed now: {deferred}"
    notes += _pending_note(pending)
    if not crossed(orphan_count, policy) and not (to_mark(orphan_count, pending, policy) and not refused):
        waiting = pending is not None and bool(pending.files)
        return Finding(
            "orphan_files",
            Severity.OK,
            f"{orphan_count} unreferenced files removable (older than {p.older_than_hours:g} h){notes}"
            if waiting
            else f"{orphan_count} unreferenced files older than {p.older_than_hours:g} h{notes}",
            "nothing to do: pending orphans are deleted after their window if still unreferenced and "
            "unchanged (not stuck)"
            if waiting
            else "nothing to remove",
            metrics,
            rows,
        )
    if not crossed(orphan_count, policy) and pending is not None:  # to mark: the first phase is due
        return Finding(
            "orphan_files",
            Severity.WARN,
            f"{pending.unmarked} unreferenced files not yet recorded as removal candidates{notes}",
            f"run remove_orphan_files: it records them, and deletes them after {pending.window_hours:g} h "
            "if still unreferenced and unchanged",
            metrics,
            rows,
        )
    severity = Severity.ERROR if orphan_count >= max(1, p.max_count) * ERROR_FACTOR else Severity.WARN
    action = (
        f"review and delete them by hand (maintenance never cleans this table: {refused})"
        if refused
        else f"make the unreadable table readable again, then remove_orphan_files runs ({deferred})"
        if deferred
        else "run remove_orphan_files (after expire_snapshots, never concurrently with it)"
    )
    return Finding(
        "orphan_files",
        severity,
        f"{orphan_count} unreferenced files ({orphan_bytes} B) older than {p.older_than_hours:g} h{notes}",
        action,
        metrics,
        rows,
    )


def decide_orphans(
    orphan_count: int, orphan_bytes: int, policy: Policy, pending: PendingSummary | None = None
) -> Decision:
    """``orphan_count``/``orphan_bytes``: the removable orphans; ``pending``: with a recovery window,
    the pending ones (the op then also runs to record new candidates, see :func:`to_mark`)."""
    if off := disabled("remove_orphan_files", policy):
        return off
    p = policy.orphans
    signals: dict[str, Any] = {
        "orphan_files": orphan_count,
        "orphan_bytes": orphan_bytes,
        "max_orphans": p.max_count,
        "orphan_older_than_hours": p.older_than_hours,
    }
    if pending is not None:
        signals.update(_pending_metrics(pending, policy))
    note = _pending_note(pending)
    if crossed(orphan_count, policy):
        return Decision(
            "remove_orphan_files",
            True,
            f"{orphan_count} orphan files older than {p.older_than_hours:g} h > {p.max_count}{note}",
            signals,
        )
    if pending is not None and to_mark(orphan_count, pending, policy):
        return Decision(
            "remove_orphan_files",
            True,
            f"{pending.unmarked} orphan files to record as candidates ({orphan_count} removable + "
            f"{pending.files} pending > {p.max_count}): deleted after {pending.window_hours:g} h",
            signals,
        )
    return Decision(
        "remove_orphan_files",
        False,
        f"{orphan_count} orphan files older than {p.older_than_hours:g} h ≤ {p.max_count}{note}",
        signals,
    )


def evaluate(
    orphan_count: int,
    orphan_bytes: int,
    policy: Policy,
    sample: Sequence[str] = (),
    pending: PendingSummary | None = None,
    **finding: Any,
) -> Evaluation:
    """``finding``: orphan_finding's notes (hidden_files, skipped, refused, deferred)."""
    return Evaluation(
        orphan_finding(orphan_count, orphan_bytes, policy, sample, pending=pending, **finding),
        decide_orphans(orphan_count, orphan_bytes, policy, pending),
    )
