"""``icelake layout apply TABLE``: the layout chosen from the table's scan reports, applied (issue 52,
item 4). The operator's command is the approval: the choice is made again now (reports, sample,
replay: operate/layout_view.py), and only a recommended sort is applied, unless ``--force`` (which
also passes ``layout.min_days_between_changes``) or ``--keys`` names the columns. The change is the
table's sort order (operate/layout_change.py); the maintenance loop then rewrites the files that
overlap on it, behind the cost guard, validation and rollback. The same function serves the
sensor when ``layout.auto`` is on in a table in mode ``enforce``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from icelake_assets.audit.records import Trigger
from icelake_assets.audit.store import AuditLog
from icelake_assets.operate.layout_change import LayoutChange, LayoutChangeRefused, change_layout
from icelake_assets.operate.layout_view import LayoutReport, layout_json, layout_report, load_reports
from icelake_assets.settings import Settings
from icelake_assets.types import TableRef


@dataclass(frozen=True)
class AppliedLayout:
    report: LayoutReport
    change: LayoutChange

    def to_json(self) -> dict[str, Any]:
        return {**self.change.to_json(), "choice": layout_json(self.report)["choice"]}


def prediction(report: LayoutReport) -> dict[str, Any]:
    """What the change is expected to do, kept with it (the effect check reads ``skipped_fraction``)."""
    choice, best = report.choice, report.replay.best
    return {
        "strategy": choice.strategy,
        "files_read_before": round(choice.files_read_before, 3),
        "files_read_after": round(choice.files_read_after, 3),
        "predicted_gain": round(choice.predicted_gain, 4),
        "skipped_fraction": None if best is None else round(best.skipped_fraction, 4),
        "reports_used": choice.reports_used,
        "reason": choice.reason,
    }


def apply_layout(
    settings: Settings,
    ref: TableRef,
    *,
    keys: Sequence[str] = (),
    force: bool = False,
    by: str = "",
    trigger: Trigger = "manual",
    now: datetime | None = None,
) -> AppliedLayout:
    """Choose again and apply. Raises :class:`LayoutChangeRefused` naming why nothing changed."""
    from icelake_assets.catalog.connection import load_table, open_catalog
    from icelake_assets.policies import resolve_policy

    now = now or datetime.now(UTC)
    report = layout_report(settings, ref, load_reports(settings, ref, now), now)
    choice = report.choice
    if not keys:
        if choice.strategy == "zorder":
            raise LayoutChangeRefused(
                f"{ref}: the choice is a z-order of {', '.join(choice.new_keys)}, which a table sort order "
                "cannot hold: set small_files.strategy zorder with zorder_columns in its policy"
            )
        if not (choice.recommend or (force and choice.strategy == "sort")):
            raise LayoutChangeRefused(f"{ref}: nothing to apply: {choice.reason}")
        keys = choice.new_keys
    table = load_table(open_catalog(settings, ref.catalog), ref)
    policy = resolve_policy(settings, ref, table.properties).policy
    audit = AuditLog.from_settings(settings) if settings.audit.enabled else None
    change = change_layout(
        table,
        ref,
        keys,
        min_days_between_changes=policy.layout.min_days_between_changes,
        predicted=prediction(report)
        if tuple(keys) == choice.new_keys
        else {"keys_given_by": by or "operator"},
        audit=audit,
        trigger=trigger,
        by=by,
        force=force,
        now=now,
    )
    return AppliedLayout(report, change)


def cmd_layout_apply(args: argparse.Namespace) -> int:
    import getpass
    import sys

    from icelake_assets.operate.commands import emit_json
    from icelake_assets.operate.names import parse_table
    from icelake_assets.settings import load_settings

    settings = load_settings(args.config)
    ref = parse_table(args.table, settings)
    keys = tuple(k.strip() for k in args.keys.split(",") if k.strip()) if args.keys else ()
    try:
        applied = apply_layout(settings, ref, keys=keys, force=args.force, by=args.by or getpass.getuser())
    except LayoutChangeRefused as err:
        print(f"icelake: {err}", file=sys.stderr)
        return 1
    if args.json:
        emit_json(applied.to_json())
        return 0
    change = applied.change
    print(
        f"{change.table}: sort order {', '.join(change.old_keys) or 'none'} -> {', '.join(change.new_keys)}"
        f" ({applied.report.choice.reason}). The next maintenance run rewrites the files out of this order."
    )
    return 0


def add_layout_apply(commands: Any) -> None:
    """``apply TABLE [--keys a,b] [--force] [--json]`` under ``icelake layout``."""
    p = commands.add_parser("apply", help="set the table's sort order to the layout chosen from its scans")
    p.add_argument("table", help="catalog.namespace.table (or namespace.table)")
    p.add_argument("--keys", help="comma-separated columns to sort by instead of the choice")
    p.add_argument(
        "--force",
        action="store_true",
        help="apply a sort the choice did not recommend, or sooner than allowed",
    )
    p.add_argument("--by", help="who approves (recorded in the audit; default: the user)")
    p.add_argument("--json", action="store_true", help="print the change as JSON")
    p.set_defaults(func=cmd_layout_apply)
