"""``icelake layout apply TABLE``: the layout chosen from the table's scan reports, applied (issue 52,
item 4) by :func:`~icelake_assets.orchestration.checks.layout_checks.apply_layout`, which the sensor
uses too when ``layout.auto`` is on in mode ``enforce``. The operator's command is the approval."""

from __future__ import annotations

import argparse
from typing import Any

from icelake_assets.layout.table_layout import LayoutChangeRefused
from icelake_assets.operate.layout_view import layout_json
from icelake_assets.orchestration.checks.layout_checks import AppliedLayout, apply_layout


def applied_json(applied: AppliedLayout) -> dict[str, Any]:
    return {**applied.change.to_json(), "choice": layout_json(applied.report)["choice"]}


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
        emit_json(applied_json(applied))
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
