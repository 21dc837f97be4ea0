"""Orphan files: the orphan_files finding and the remove_orphan_files decision (one threshold: more
removable orphans than ``orphans.max_count``). Orphans need a storage listing, not metadata alone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from icelake_assets.health.findings import ERROR_FACTOR, Finding, Severity
from icelake_assets.planning.decision import Decision, Evaluation, disabled
from icelake_assets.settings import Policy


def crossed(orphan_count: int, policy: Policy) -> bool:
    """The one threshold: the finding fails and the op acts past ``orphans.max_count`` removable files."""
    return orphan_count > policy.orphans.max_count


def orphan_finding(
    orphan_count: int,
    orphan_bytes: int,
    policy: Policy,
    sample: Sequence[str] = (),
    hidden_files: int = 0,
    skipped: Mapping[str, int] | None = None,
    refused: str | None = None,
    deferred: str | None = None,
) -> Finding:
    """``hidden_files``: not orphans by Iceberg's rule; ``skipped``: files left alone because another
    table owns them, by reason; ``refused``: why this table is never cleaned automatically;
    ``deferred``: why it is not cleaned now (a table that may overlap it cannot be read)."""
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
    }
    rows: tuple[dict[str, object], ...] = tuple({"path": path} for path in list(sample)[:10])
    notes = "".join(f"; {n} files skipped ({reason})" for reason, n in sorted(skipped.items()))
    if refused:
        notes += f"; never removed automatically: {refused}"
    elif deferred:
        notes += f"; not removed now: {deferred}"
    if not crossed(orphan_count, policy):
        return Finding(
            "orphan_files",
            Severity.OK,
            f"{orphan_count} unreferenced files older than {p.older_than_hours:g} h{notes}",
            "nothing to remove",
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


def decide_orphans(orphan_count: int, orphan_bytes: int, policy: Policy) -> Decision:
    if off := disabled("remove_orphan_files", policy):
        return off
    p = policy.orphans
    signals = {
        "orphan_files": orphan_count,
        "orphan_bytes": orphan_bytes,
        "max_orphans": p.max_count,
        "orphan_older_than_hours": p.older_than_hours,
    }
    if crossed(orphan_count, policy):
        return Decision(
            "remove_orphan_files",
            True,
            f"{orphan_count} orphan files older than {p.older_than_hours:g} h > {p.max_count}",
            signals,
        )
    return Decision(
        "remove_orphan_files",
        False,
        f"{orphan_count} orphan files older than {p.older_than_hours:g} h ≤ {p.max_count}",
        signals,
    )


def evaluate(
    orphan_count: int, orphan_bytes: int, policy: Policy, sample: Sequence[str] = (), **finding: Any
) -> Evaluation:
    """``finding``: orphan_finding's notes (hidden_files, skipped, refused, deferred)."""
    return Evaluation(
        orphan_finding(orphan_count, orphan_bytes, policy, sample, **finding),
        decide_orphans(orphan_count, orphan_bytes, policy),
    )
