"""Restore points: which of this product's tags are due and which are past their age, and the
``manage_restore_points`` decision, from table metadata alone (the tags are refs of the metadata).

A restore point is an Iceberg tag named ``<prefix>daily-YYYY-MM-DD``, ``<prefix>weekly-YYYY-Www`` (ISO
week) or ``<prefix>run-<run id, 8 characters>`` (made before a run that rewrites data). Iceberg's
snapshot expiry never removes a snapshot a tag points to, so the tag keeps the table restorable to it
(``icelake restore TABLE --to TAG``) for as long as it lives.

A tag's age: a periodic tag's from the day its name carries (a daily tag made today on a snapshot a
month old is one day old: it is not removed at once and made again the next day); any other tag's
from its snapshot's time. The tags the product made (recorded, health/restore_points.py; never an
operator's sharing the prefix) past ``max_age_days`` are removed by the op itself, not by Iceberg's
``max-ref-age-ms`` (which counts from the snapshot's time and would drop such a daily tag at the next
expiry)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from icelake_assets.health.restore_points import RestorePoint, restore_points
from icelake_assets.health.table_stats import TableStats
from icelake_assets.planning.decision import Decision, disabled
from icelake_assets.planning.rewrite import decide_rewrite
from icelake_assets.settings import Policy

RESTORE_POINTS = "manage_restore_points"
RUN_ID_CHARS = 8


@dataclass(frozen=True)
class RestorePointPlan:
    """What the op would do now: the tags to create (on the current snapshot) and to remove."""

    tags: tuple[RestorePoint, ...]
    create: tuple[str, ...]
    remove: tuple[str, ...]
    why_create: tuple[str, ...]  # per created tag: why it is due


def periodic_tag(prefix: str, every: str, now_s: float) -> str | None:
    """The name of this period's tag (``every``: daily or weekly), None when off."""
    day = datetime.fromtimestamp(now_s, UTC).date()
    if every == "daily":
        return f"{prefix}daily-{day.isoformat()}"
    if every == "weekly":
        year, week, _ = day.isocalendar()
        return f"{prefix}weekly-{year}-W{week:02d}"
    return None


def run_tag(prefix: str, run_id: str) -> str:
    return f"{prefix}run-{run_id[:RUN_ID_CHARS]}"


def plan_restore_points(stats: TableStats, policy: Policy, run_id: str | None = None) -> RestorePointPlan:
    """The tags due now (this period's, and with ``before_rewrite`` this run's when its rewrite acts)
    and those past ``max_age_days``. ``run_id``: the run's (None in a plan: the tag is named
    ``<prefix>run-<run id>``)."""
    rp = policy.restore_points
    made = stats.restore_points.made  # an operator's tag sharing the prefix is never removed
    tags = restore_points(stats.snapshot_refs, stats.snapshot_points, rp.prefix, stats.evaluated_at, made)
    names = {t.name for t in tags}
    create: list[str] = []
    why: list[str] = []
    if stats.current_snapshot_id is not None:
        periodic = periodic_tag(rp.prefix, rp.every, stats.evaluated_at)
        if periodic is not None and periodic not in names:
            create.append(periodic)
            why.append(f"{rp.every} restore point due")
        if rp.before_rewrite and (rewrite := decide_rewrite(stats, policy)).act:
            name = run_tag(rp.prefix, run_id) if run_id else f"{rp.prefix}run-<run id>"
            if name not in names:
                create.append(name)
                why.append(f"before the rewrite ({rewrite.reason})")
    remove = tuple(t.name for t in tags if t.ours and t.age_days > rp.max_age_days and t.name not in create)
    return RestorePointPlan(tags, tuple(create), remove, tuple(why))


def decide_restore_points(stats: TableStats, policy: Policy) -> Decision:
    """Acts when a restore point is due or one of this product's tags is past ``max_age_days``; never
    with the section off (``every: off`` and no ``before_rewrite``)."""
    if off := disabled(RESTORE_POINTS, policy):
        return off
    rp = policy.restore_points
    if not rp.enabled:
        return Decision(RESTORE_POINTS, False, "restore points off (restore_points.every: off)")
    plan = plan_restore_points(stats, policy)
    signals: dict[str, object] = {
        "restore_points": len(plan.tags),
        "oldest_restore_point_days": round(plan.tags[0].age_days, 2) if plan.tags else 0,
        "restore_points_due": len(plan.create),
        "restore_points_past_age": len(plan.remove),
        "max_age_days": rp.max_age_days,
    }
    parts = [f"{n} ({w})" for n, w in zip(plan.create, plan.why_create, strict=True)]
    if plan.remove:
        parts.append(f"{len(plan.remove)} older than {rp.max_age_days:g} days to remove ({plan.remove[0]}…)")
    if not parts:
        return Decision(
            RESTORE_POINTS,
            False,
            f"{len(plan.tags)} restore points, none due, none older than {rp.max_age_days:g} days",
            signals,
        )
    return Decision(RESTORE_POINTS, True, "; ".join(parts), signals)
