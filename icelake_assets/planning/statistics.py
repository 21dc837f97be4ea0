"""Column statistics: the statistics finding and the compute_statistics decision, from one set of
numbers (health/statistics.py's facts): the columns the policy selects, the newest statistics file
serving the current snapshot, and how far the rows moved since it was computed.

The finding fails (WARN, never ERROR: statistics are an optimizer's hint, the data reads the same
without them) for a table of at least ``statistics.min_rows`` rows when no statistics file serves
the current snapshot, when a selected column has no NDV sketch in it, or when the rows of its
snapshot differ from the current rows by more than ``statistics.max_stale_ratio``. The op acts on
exactly that, and also after a rewrite of the same run (rows unchanged, but the statistics are then
an ancestor's: Spark 3.5 reads only the current snapshot's file).

A store that refused the statistics file (the last run's ``STATISTICS_REFUSED_TAG``: 403 on a
read-only identity, a bucket that admits no such name) would refuse it again: while that refusal
holds (same policy, within ``loop.relaunch_backoff_hours``) the op does not act and the finding
states the refusal as its reason instead of warning on every tick.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from icelake_assets.health.findings import Finding, Severity
from icelake_assets.health.stats import TableStats
from icelake_assets.planning.decision import Decision, Evaluation, disabled
from icelake_assets.planning.relaunch import POLICY_HASH_TAG, policy_hash
from icelake_assets.settings import Policy

OP = "compute_statistics"
# Run tag: the store's answer when it refused the table statistics file (maintenance/verify/post_run.py
# writes it beside the outcome tags; the sensor reads the latest outcome run's back).
STATISTICS_REFUSED_TAG = "icelake/statistics_refused"
_MAX_CAUSE = 200  # Dagster tag values are short; the cause's first words name it


@dataclass(frozen=True)
class StatisticsRefusal:
    """The store refused the table statistics file on the table's last run: ``cause`` is its answer,
    ``hours_left`` the time until the product tries again (unless the policy changes first)."""

    cause: str
    hours_left: float

    @property
    def reason(self) -> str:
        return (
            f"the store refused the statistics file: {self.cause}; the product will not retry until the "
            f"policy changes or in {self.hours_left:.1f} h (grant the maintenance identity writes under "
            "the table's metadata/)"
        )


def refused_tag(cause: str) -> dict[str, str]:
    """The run tag that remembers a refusal (see :func:`statistics_refusal`)."""
    return {STATISTICS_REFUSED_TAG: cause[:_MAX_CAUSE]}


def statistics_refusal(
    last: Mapping[str, str] | None, policy: Policy, age_hours: float | None
) -> StatisticsRefusal | None:
    """The refusal the table's latest outcome run recorded, while it holds: the same policy (a new
    one may name other columns or a fix) and less than ``loop.relaunch_backoff_hours`` ago (a grant
    may have been added since). Unlike relaunch_hold, a new snapshot does not lift it: the store
    refuses the file, whatever the rows."""
    if not last or not last.get(STATISTICS_REFUSED_TAG):
        return None
    if last.get(POLICY_HASH_TAG) != policy_hash(policy) or age_hours is None:
        return None
    left = policy.loop.relaunch_backoff_hours - age_hours
    return StatisticsRefusal(last[STATISTICS_REFUSED_TAG], left) if left > 0 else None


@dataclass(frozen=True)
class StatisticsPlan:
    """What the statistics of the table's current snapshot lack, in numbers."""

    rows: int  # the current snapshot's records
    needed: bool  # the table has at least statistics.min_rows rows and a column to sketch
    columns: tuple[str, ...]  # the columns the policy selects (compute_table_stats' columns)
    how: str  # how they were chosen (all, keys, listed)
    unknown: tuple[str, ...]  # listed columns the table lacks (or that are not primitive)
    missing: tuple[str, ...]  # selected columns without an NDV sketch in the latest file
    stale_ratio: float | None  # |rows - rows at the statistics' snapshot| / those rows; None: no file
    problems: tuple[str, ...]  # why the finding fails (empty: it passes)

    @property
    def failing(self) -> bool:
        return bool(self.problems)


def selected_columns(stats: TableStats, policy: Policy) -> tuple[tuple[str, ...], str, tuple[str, ...]]:
    """The columns to sketch (``statistics.columns``), how they were chosen, and the listed names the
    table has no top-level primitive column for."""
    facts, choice = stats.statistics, policy.statistics.columns
    names = facts.column_names()
    if choice == "all":
        return names, "all", ()
    if choice == "keys":
        if facts.key_columns:
            return facts.key_columns, "keys (sort order and partition source columns)", ()
        return names, "all (the table has no sort order or partition source column)", ()
    present = tuple(c for c in choice if c in names)
    return present, "listed", tuple(c for c in choice if c not in names)


def plan_statistics(stats: TableStats, policy: Policy) -> StatisticsPlan:
    facts, p = stats.statistics, policy.statistics
    rows = facts.current_rows if facts.current_rows is not None else stats.records
    columns, how, unknown = selected_columns(stats, policy)
    needed = rows >= p.min_rows and bool(columns) and stats.current_snapshot_id is not None
    missing = tuple(c for c in columns if facts.field_id(c) not in facts.ndv)
    stale = None
    if facts.snapshot_id is not None:
        at = facts.rows_at if facts.rows_at is not None else 0
        stale = abs(rows - at) / at if at else float(rows > 0)
    problems: list[str] = []
    if needed:
        if facts.snapshot_id is None:
            problems.append("no statistics for the current snapshot or any of its ancestors")
        else:
            if missing:
                problems.append(
                    f"{len(missing)} selected columns without an NDV sketch ({', '.join(missing[:5])})"
                )
            if stale is not None and stale > p.max_stale_ratio:
                problems.append(
                    f"computed {facts.commits_behind} commits ago on {facts.rows_at} rows, now {rows} "
                    f"(changed {stale:.0%}, max {p.max_stale_ratio:.0%})"
                )
    return StatisticsPlan(rows, needed, columns, how, unknown, missing, stale, tuple(problems))


def statistics_finding(
    stats: TableStats,
    policy: Policy,
    plan: StatisticsPlan | None = None,
    refused: StatisticsRefusal | None = None,
) -> Finding:
    """``refused``: the store's refusal of the last run's statistics file, while it holds: a failing
    finding then states it (OK, the op will not act) rather than warning again."""
    facts, p = stats.statistics, policy.statistics
    plan = plan_statistics(stats, policy) if plan is None else plan
    ids = dict((n, i) for i, n in facts.columns)
    metrics: dict[str, int | float] = {
        "rows": plan.rows,
        "min_rows": p.min_rows,
        "columns_selected": len(plan.columns),
        "columns_with_ndv": len(plan.columns) - len(plan.missing),
        "statistics_files": facts.files,
        "partition_statistics_files": facts.partition_files,
        "statistics_current": int(facts.current),
        "statistics_commits_behind": -1 if facts.commits_behind is None else facts.commits_behind,
        "stale_ratio": -1.0 if plan.stale_ratio is None else round(plan.stale_ratio, 4),
        "max_stale_ratio": p.max_stale_ratio,
        "statistics_bytes": facts.file_bytes,
    }
    rows = tuple(
        {"column": c, "field_id": ids[c], "ndv": str(facts.ndv.get(ids[c], "none"))}
        for c in plan.columns[:20]
    )
    unknown = f"; listed columns the table lacks: {', '.join(plan.unknown)}" if plan.unknown else ""
    where = (
        f"snapshot {facts.snapshot_id} ({'current' if facts.current else f'{facts.commits_behind} commits back'})"
        if facts.snapshot_id is not None
        else "none"
    )
    if not plan.needed:
        why = (
            f"{plan.rows} rows < {p.min_rows}"
            if plan.rows < p.min_rows
            else "no column to sketch"
            if not plan.columns
            else "no snapshot"
        )
        return Finding(
            "statistics",
            Severity.OK,
            f"not needed ({why}); statistics: {where}{unknown}",
            "nothing to compute",
            metrics,
            rows,
        )
    summary = (
        f"{len(plan.columns) - len(plan.missing)} of {len(plan.columns)} columns ({plan.how}) with an NDV "
        f"sketch; statistics: {where}"
    )
    if not plan.failing:
        return Finding("statistics", Severity.OK, summary + unknown, "nothing to compute", metrics, rows)
    if refused is not None:
        return Finding(
            "statistics",
            Severity.OK,
            f"{summary}: {'; '.join(plan.problems)}; {refused.reason}{unknown}",
            "nothing to compute while the store refuses the statistics file",
            {**metrics, "statistics_refused": 1},
            rows,
        )
    return Finding(
        "statistics",
        Severity.WARN,
        f"{summary}: {'; '.join(plan.problems)}{unknown}",
        f"run compute_table_stats on {len(plan.columns)} columns"
        + (" and compute_partition_stats" if facts.partitioned and p.partition_stats else ""),
        metrics,
        rows,
    )


def decide_statistics(
    stats: TableStats,
    policy: Policy,
    rewrite_commits: int = 0,
    refused: StatisticsRefusal | None = None,
) -> Decision:
    """``rewrite_commits``: snapshots this run's rewrites committed; statistics then follow the new
    current snapshot even when the finding passes (readers such as Spark use the current one's).
    ``refused``: the store refused the last run's statistics file (see :func:`statistics_refusal`)."""
    if off := disabled(OP, policy):
        return off
    facts = stats.statistics
    plan = plan_statistics(stats, policy)
    signals = {
        "rows": plan.rows,
        "columns": len(plan.columns),
        "columns_missing": len(plan.missing),
        "stale_ratio": -1.0 if plan.stale_ratio is None else round(plan.stale_ratio, 4),
        "statistics_snapshot_id": facts.snapshot_id,
        "rewrite_commits": rewrite_commits,
    }
    if refused is not None and (plan.failing or (plan.needed and rewrite_commits and not facts.current)):
        return Decision(OP, False, refused.reason, {**signals, "statistics_refused": 1})
    if plan.failing:
        return Decision(OP, True, "; ".join(plan.problems), signals)
    if plan.needed and rewrite_commits and not facts.current:
        return Decision(
            OP,
            True,
            f"this run's rewrite committed {rewrite_commits} snapshots: statistics follow the current "
            "snapshot (Spark reads only the current snapshot's)",
            signals,
        )
    if not plan.needed:
        return Decision(
            OP, False, f"not needed: {plan.rows} rows (min {policy.statistics.min_rows})", signals
        )
    return Decision(
        OP, False, f"statistics of snapshot {facts.snapshot_id} serve the current snapshot", signals
    )


def evaluate(stats: TableStats, policy: Policy, refused: StatisticsRefusal | None = None) -> Evaluation:
    plan = plan_statistics(stats, policy)
    return Evaluation(
        statistics_finding(stats, policy, plan, refused), decide_statistics(stats, policy, refused=refused)
    )
