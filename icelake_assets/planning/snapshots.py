"""Snapshots: the snapshot_retention finding and the expire_snapshots decision, both from the expiry
forecast (health/retention.py mirrors Iceberg's rule)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from icelake_assets.health.findings import Finding, Severity, grade
from icelake_assets.health.retention import cutoff_age_hours, expiry_forecast, kept_reason
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Decision, Evaluation, disabled
from icelake_assets.settings import Policy
from icelake_assets.text import human_bytes


def snapshot_finding(stats: TableStats, policy: Policy) -> Finding:
    """:func:`_retention_finding` with what the restore points hold, when the table has some: their
    count, the oldest and the data files only they keep (storage expiry cannot free while they live)."""
    finding = _retention_finding(stats, policy)
    rp = stats.restore_points
    if not rp.tags:
        return finding
    held = (
        f"; {rp.tags} restore points (oldest {rp.oldest}, {rp.oldest_age_days:.1f} days) hold "
        f"{rp.held_files} data files ({human_bytes(rp.held_bytes)}) the current snapshot no longer has"
    )
    return replace(finding, summary=finding.summary + held, metrics={**finding.metrics, **rp.metrics()})


def _retention_finding(stats: TableStats, policy: Policy) -> Finding:
    """Graded like expiry decides (decide_expire below): past the count or age limit
    AND with snapshots expiry may remove. Snapshots all too young, among the newest ``min_keep`` or
    held by branches and tags are what expiry keeps: that passes, saying why."""
    p = policy.snapshots
    metrics = {
        "snapshots": stats.snapshots,
        "oldest_snapshot_age_hours": round(stats.oldest_snapshot_age_hours, 3),
        "snapshots_last_24h": stats.snapshots_last_24h,
        "max_snapshots": p.max_count,
        "max_snapshot_age_hours": p.max_age_hours,
        "min_keep": p.min_keep,
        "min_snapshot_age_hours": p.min_age_hours,
    }
    severity = grade(stats.snapshots, p.max_count)
    too_old = stats.snapshots > p.min_keep and stats.oldest_snapshot_age_hours > p.max_age_hours
    if severity is Severity.OK and too_old:
        severity = Severity.WARN
    if severity is Severity.OK:
        return Finding(
            "snapshot_retention",
            severity,
            f"{stats.snapshots} snapshots, oldest {stats.oldest_snapshot_age_hours:.1f} h",
            "nothing to expire",
            metrics,
        )
    fc = expiry_forecast(stats, policy)
    metrics["expirable_snapshots"] = fc.count
    if not fc.count:
        return Finding(
            "snapshot_retention",
            Severity.OK,
            f"{stats.snapshots} snapshots (max {p.max_count}), oldest "
            f"{stats.oldest_snapshot_age_hours:.1f} h, none may expire yet: "
            f"{kept_reason(fc, p.min_keep)}",
            f"nothing to expire before snapshots are {fc.cutoff_age_hours:g} h old",
            metrics,
        )
    return Finding(
        "snapshot_retention",
        severity,
        f"{stats.snapshots} snapshots (max {p.max_count}, {stats.snapshots_last_24h} in the last 24 h), "
        f"oldest {stats.oldest_snapshot_age_hours:.1f} h (max {p.max_age_hours:g} h); "
        f"{fc.count} may expire",
        f"run expire_snapshots: {fc.count} snapshots older than {fc.cutoff_age_hours:g} h go "
        f"({kept_reason(fc, p.min_keep)})",
        metrics,
    )


def decide_expire(stats: TableStats, policy: Policy) -> Decision:
    """Acts past the count or age threshold, and only when some snapshot would actually go: older
    than the cutoff (``min_age_hours`` over the count, else ``max_age_hours``), beyond the newest
    ``min_keep`` and referenced by no branch or tag (health/retention.py mirrors Iceberg's rule)."""
    if off := disabled("expire_snapshots", policy):
        return off
    p = policy.snapshots
    signals = {
        "snapshots": stats.snapshots,
        "oldest_snapshot_age_hours": round(stats.oldest_snapshot_age_hours, 2),
        "max_snapshots": p.max_count,
        "max_snapshot_age_hours": p.max_age_hours,
        "min_keep": p.min_keep,
        "min_snapshot_age_hours": p.min_age_hours,
    }
    if stats.snapshots <= p.min_keep:
        return Decision(
            "expire_snapshots",
            False,
            f"{stats.snapshots} snapshots, not above the minimum of {p.min_keep} to keep",
            signals,
        )
    if stats.snapshots > p.max_count:
        why = f"{stats.snapshots} snapshots > {p.max_count}"
    elif stats.oldest_snapshot_age_hours > p.max_age_hours:
        why = f"oldest snapshot {stats.oldest_snapshot_age_hours:.1f} h old > {p.max_age_hours:g} h"
    else:
        return Decision(
            "expire_snapshots",
            False,
            f"{stats.snapshots} snapshots ≤ {p.max_count} and none older than {p.max_age_hours:g} h",
            signals,
        )
    fc = expiry_forecast(stats, policy)
    signals.update(
        expirable_snapshots=fc.count,
        kept_by_ref=fc.kept_by_ref,
        kept_newest=fc.kept_newest,
        kept_young=fc.kept_young,
        expire_older_than_hours=fc.cutoff_age_hours,
    )
    if not fc.count:
        return Decision(
            "expire_snapshots", False, f"{why}, but none may go yet: {kept_reason(fc, p.min_keep)}", signals
        )
    return Decision(
        "expire_snapshots",
        True,
        f"{why}: {fc.count} older than {fc.cutoff_age_hours:g} h beyond the newest {p.min_keep} "
        f"will go ({kept_reason(fc, p.min_keep)})",
        signals,
    )


def expire_cutoff(stats: TableStats, policy: Policy, now: datetime | None = None) -> datetime:
    """Snapshots older than this may go (``retain_last`` still keeps the newest ``min_keep``, and
    Iceberg keeps what branches and tags point to). ``now`` defaults to when the stats were taken,
    so the cutoff is the one :func:`decide_expire` forecast."""
    now = now or datetime.fromtimestamp(stats.evaluated_at, UTC)
    return now - timedelta(hours=cutoff_age_hours(stats.snapshots, policy))


def evaluate(stats: TableStats, policy: Policy) -> Evaluation:
    return Evaluation(snapshot_finding(stats, policy), decide_expire(stats, policy))
