"""Command line for people outside the UI: `icelake demo-lake`, `icelake demo`, `icelake health`."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Sequence

from icelake_assets.catalog.connection import CatalogUnavailableError, TableMissingError, TableRef, load_table, open_catalog
from icelake_assets.catalog.discovery import discover_tables
from icelake_assets.health.findings import metadata_findings, orphan_finding
from icelake_assets.health.orphans import find_orphans
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.settings import Settings, SettingsError, load_settings


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _selected_refs(settings: Settings, table: str | None) -> list[TableRef]:
    if table:
        return [TableRef.parse(table, default_catalog=next(iter(settings.catalogs)))]
    return [t.ref for t in discover_tables(settings)]


def cmd_health(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
    rows = []
    for ref in _selected_refs(settings, args.table):
        table = load_table(open_catalog(settings, ref.catalog), ref)
        policy = settings.policy_for(table.properties)
        findings = metadata_findings(compute_table_stats(table, policy), policy)
        if args.orphans:
            orphans = find_orphans(table, policy.orphans.older_than_hours)
            findings.append(orphan_finding(len(orphans), sum(o.size for o in orphans), policy))
        for f in findings:
            rows.append((str(ref), f.check, f.severity.value, f.summary, f.recommendation))
    print(format_table(("table", "check", "severity", "finding", "recommendation"), rows))
    return 0


def cmd_demo_lake(args: argparse.Namespace) -> int:
    from icelake_assets.demo.lake import build_demo_lake

    settings = load_settings(args.config)
    started = time.perf_counter()
    refs = build_demo_lake(settings, scale=args.scale, reset=args.reset)
    print(f"demo lake ready in {time.perf_counter() - started:.1f}s: {', '.join(map(str, refs))}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from icelake_assets.demo.headless import run_headless_demo

    return run_headless_demo(load_settings(args.config), scale=args.scale)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="icelake", description=__doc__)
    parser.add_argument("--config", help="settings file (default: $ICELAKE_CONFIG or ./icelake.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("health", help="print the health findings of one table or all")
    p.add_argument("table", nargs="?", help="catalog.namespace.table (or namespace.table)")
    p.add_argument("--orphans", action="store_true", help="also list storage for orphan files (slower)")
    p.set_defaults(func=cmd_health)
    p = sub.add_parser("demo-lake", help="build the degraded demo lake")
    p.add_argument("--scale", default="demo", choices=["test", "demo"])
    p.add_argument("--reset", action="store_true", help="drop and rebuild the demo tables")
    p.set_defaults(func=cmd_demo_lake)
    p = sub.add_parser("demo", help="headless demo: degrade, check, maintain through Dagster, compare")
    p.add_argument("--scale", default="demo", choices=["test", "demo"])
    p.set_defaults(func=cmd_demo)
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (SettingsError, CatalogUnavailableError, TableMissingError, ValueError) as err:
        print(f"icelake: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
