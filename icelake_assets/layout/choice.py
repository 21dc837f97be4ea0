"""The layout decision: the replay's best candidate against the current layout, recommended only when
the predicted gain passes ``layout.min_predicted_gain``, the rewrite pays for itself within the
reports' window, it fits the cost guard, and the last change is at least
``layout.min_days_between_changes`` old. Every outcome carries its reason and the numbers behind it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Literal

from icelake_assets.layout.filters import Always
from icelake_assets.layout.mining import TableUsage
from icelake_assets.layout.replay import Calibration, Replay
from icelake_assets.settings.policy_schema import LayoutPolicy


@dataclass(frozen=True)
class LayoutChoice:
    table_name: str
    recommend: bool
    reason: str
    old_keys: tuple[str, ...]
    new_keys: tuple[str, ...]  # the best candidate's (the old keys when nothing beats them)
    strategy: Literal["sort", "zorder"] | None
    files_read_before: float  # predicted per query (weighted), table at its target size
    files_read_after: float
    predicted_gain: float  # share of files skipped gained (weighted), 0..1
    bytes_saved_per_window: float  # predicted bytes the recorded scans would not have read
    rewrite_bytes: int  # what the change rewrites: the table's data bytes
    reports_used: int
    calibration: Calibration | None = None


def _saved_bytes(usage: TableUsage, replay: Replay, before: float, after: float) -> float:
    """Bytes the window's filtered scans would not have read under the new layout: what they read,
    scaled by the predicted drop in files read (or, when the engine reported no bytes, each scan
    counted as reading its predicted share of the table)."""
    read = sum(s.bytes_read for s in usage.shapes if not isinstance(s.filter, Always))
    filtered_scans = usage.reports - usage.unfiltered - usage.unparsed
    if read > 0 and before > 0:
        return read * (before - after) / before
    table_bytes = replay.current.table_bytes if replay.current else 0
    return filtered_scans * table_bytes * (before - after)


def choose(
    usage: TableUsage,
    replay: Replay,
    policy: LayoutPolicy,
    now: datetime,
    last_change: datetime | None = None,
    max_rewrite_bytes: int | None = None,
) -> LayoutChoice:
    """The decision for one table (``last_change``: when its layout was last changed, None if never;
    ``max_rewrite_bytes``: the cost guard's cap, None for none)."""
    current, best = replay.current, replay.best
    old = current.candidate.keys if current else ()

    def nothing(reason: str) -> LayoutChoice:
        before = current.files_read if current else 0.0
        return LayoutChoice(
            usage.table_name, False, reason, old, old, None, before, before, 0.0, 0.0, 0, usage.reports
        )

    if usage.reports == 0:
        return nothing(f"no scan reports of the table in the last {policy.reports_days} days")
    if replay.shapes_replayed == 0 or current is None or best is None:
        why = (
            "the table has no rows to sample"
            if usage.reports > usage.unfiltered + usage.unparsed
            else (f"no filtered scans ({usage.unfiltered} unfiltered, {usage.unparsed} unreadable filters)")
        )
        return nothing(why)
    if not any(c.selective_scans for c in usage.columns):
        return nothing("no selective filters (only negations or operators no layout helps)")
    gain = current.fraction_read - best.fraction_read
    strategy: Literal["sort", "zorder"] | None = None
    if best.candidate.strategy in ("sort", "zorder") and gain > 0:
        strategy = "zorder" if best.candidate.strategy == "zorder" else "sort"
    saved = _saved_bytes(usage, replay, current.fraction_read, best.fraction_read)
    rewrite = current.table_bytes
    choice = LayoutChoice(
        table_name=usage.table_name,
        recommend=False,
        reason="",
        old_keys=old,
        new_keys=best.candidate.keys if strategy else old,
        strategy=strategy,
        files_read_before=current.files_read,
        files_read_after=best.files_read if strategy else current.files_read,
        predicted_gain=max(gain, 0.0),
        bytes_saved_per_window=max(saved, 0.0),
        rewrite_bytes=rewrite,
        reports_used=usage.reports,
        calibration=replay.calibration,
    )
    if strategy is None:
        reason = (
            "no candidate layout reads fewer files than the current one: the filters are not selective "
            "on this data (e.g. a filtered column holding one value)"
        )
    elif gain < policy.min_predicted_gain:
        reason = f"{best.candidate.name} gains {gain:.0%} of files skipped, under min_predicted_gain {policy.min_predicted_gain:.0%}"
    elif saved < rewrite:
        reason = (
            f"{best.candidate.name} would save {saved:,.0f} bytes of reads per {policy.reports_days} days, "
            f"less than the {rewrite:,} bytes its rewrite reads and writes"
        )
    elif max_rewrite_bytes is not None and rewrite > max_rewrite_bytes:
        reason = f"the rewrite ({rewrite:,} bytes) is over the cost guard ({max_rewrite_bytes:,} bytes)"
    elif last_change is not None and (age := (now - last_change).total_seconds() / 86400) < (
        policy.min_days_between_changes
    ):
        reason = f"the layout changed {age:.1f} days ago, under min_days_between_changes {policy.min_days_between_changes:g}"
    else:
        return _with(choice, True, f"{best.candidate.name}: {gain:.0%} more of the files skipped per query")
    return _with(choice, False, reason)


def _with(choice: LayoutChoice, recommend: bool, reason: str) -> LayoutChoice:
    return replace(choice, recommend=recommend, reason=reason)
