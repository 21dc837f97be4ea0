"""One table's layout choice (issue 52): its recorded scans mined (mining.py), candidate layouts
replayed on a sample of its rows (replay.py), the decision (choice.py), and the measured effect of
the product's last change to it (effect.py): the scans before the change against those after."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.health.stats import target_file_size
from icelake_assets.layout.choice import LayoutChoice, choose
from icelake_assets.layout.effect import LayoutEffect, measure_effect
from icelake_assets.layout.mining import TableUsage, mine, same_table
from icelake_assets.layout.replay import Replay, replay_table
from icelake_assets.layout.reports import ScanReport
from icelake_assets.layout.table_layout import last_change as table_last_change, predicted_skipped
from icelake_assets.policies import resolve_policy
from icelake_assets.settings import Policy, Settings
from icelake_assets.types import TableRef


@dataclass(frozen=True)
class LayoutReport:
    table: str
    usage: TableUsage
    replay: Replay
    choice: LayoutChoice
    policy: Policy  # the table's, as the choice read it (its mode and layout.auto decide what follows)
    effect: LayoutEffect | None = None  # of the product's last layout change, when there was one


def layout_report(
    settings: Settings,
    ref: TableRef,
    reports: Iterable[ScanReport],
    now: datetime | None = None,
    last_change: datetime | None = None,
) -> LayoutReport:
    """Mine ``reports`` for ``ref``, replay its candidate layouts on a sample, decide."""
    table = load_table(open_catalog(settings, ref.catalog), ref)
    policy = resolve_policy(settings, ref, table.properties).policy
    reports = list(reports)
    changed = table_last_change(table)
    usage = mine(reports, str(ref))
    replay = replay_table(table, usage, target_file_size(table, policy), policy.layout.sample_rows)
    choice = choose(
        usage,
        replay,
        policy.layout,
        now or datetime.now(UTC),
        last_change or changed,
        policy.guards.max_rewrite_bytes,
    )
    effect = None
    if changed is not None:  # the scans before the change against those after it
        timed = [r for r in reports if r.recorded_at is not None and same_table(r.table_name, str(ref))]
        before = [r for r in timed if r.recorded_at is not None and r.recorded_at < changed]
        after = [r for r in timed if r.recorded_at is not None and r.recorded_at >= changed]
        effect = measure_effect(before, after, predicted_skipped(table))
        if effect.helped is False and choice.recommend:  # not kept pushing a layout that did not help
            choice = replace(
                choice,
                recommend=False,
                reason=f"the last layout change did not help ({effect.verdict}): no new change unless forced",
            )
    return LayoutReport(str(ref), usage, replay, choice, policy, effect)
