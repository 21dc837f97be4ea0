"""Command line for people outside the UI (the operator commands live in operate/commands.py). Its
``--help`` lists the commands from the parser itself (:func:`build_parser`), so the list cannot go
stale; a test keeps README's command line equal to it."""

from __future__ import annotations

import argparse
import sys
import textwrap
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

# Only light modules at import: `icelake --help` must not load pyiceberg, pyarrow or Dagster (each
# command imports what it needs).
from icelake_assets.operate.commands import DEFAULT_DAGSTER_URL, add_commands as add_operator_commands
from icelake_assets.operate.names import parse_table
from icelake_assets.operate.scan_reports import add_layout_command
from icelake_assets.types import IcelakeError, KnownTables, TableRef

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

    from icelake_assets.catalog.discovery import DiscoveryProblem
    from icelake_assets.health.overview import TableHealth
    from icelake_assets.settings import Settings

__all__ = ["build_parser", "main", "parse_table"]


def _selected_refs(settings: Settings, table: str | None) -> tuple[list[TableRef], list[DiscoveryProblem]]:
    """The tables to report on, and what discovery could not read (reported after the others)."""
    from icelake_assets.catalog.discovery import discover_lake

    if table:
        return [parse_table(table, settings)], []
    found = discover_lake(settings)
    return [t.ref for t in found.tables], list(found.problems)


def cmd_health(args: argparse.Namespace) -> int:
    """Findings of one table or all, as a table; ``--overview`` ranks what to fix first.

    A catalog or table that cannot be read is an error for itself only: every other table is
    reported, then one error line per problem, and the exit status is 2. Otherwise exit status 1
    when ``--fail-on`` is given and a finding reaches that severity (for CI and cron).
    ``--partitions``: one table's unhealthy partitions instead (operate/partition_health.py)."""
    if args.partitions:
        from icelake_assets.operate.partition_health import cmd_partition_health

        return cmd_partition_health(args)
    from icelake_assets.catalog.connection import CatalogUnavailableError, open_catalog
    from icelake_assets.catalog.discovery import DiscoveryProblem
    from icelake_assets.health.cache import ManifestCache, default_cache_path
    from icelake_assets.health.overview import lake_overview
    from icelake_assets.operate.partition_health import unhealthy_partition_count
    from icelake_assets.operate.table_health import table_health
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    cache = ManifestCache(path=default_cache_path())  # repeated runs read only new manifests
    healths, rows = [], []
    listing: list[KnownTables] = []

    def known() -> KnownTables:  # listed once, with the index every table's orphan scan shares
        from icelake_assets.catalog.known_tables import known_tables
        from icelake_assets.health.neighbours import IndexedTables

        if not listing:
            listing.append(IndexedTables.of(known_tables(settings)))
        return listing[0]

    refs, problems = _selected_refs(settings, args.table)
    catalogs: dict[str, Catalog | DiscoveryProblem] = {}
    unhealthy: dict[str, int] = {}  # --overview: failing partitions of the partitioned tables
    for ref in refs:
        if ref.catalog not in catalogs:
            try:
                catalogs[ref.catalog] = open_catalog(settings, ref.catalog)
            except CatalogUnavailableError as err:  # down since discovery: reported once
                down = DiscoveryProblem.from_error(ref.catalog, err)
                catalogs[ref.catalog] = down
                problems.append(down)
        catalog = catalogs[ref.catalog]
        if isinstance(catalog, DiscoveryProblem):
            continue
        try:
            health = table_health(settings, catalog, ref, cache, known if args.orphans else None)
        except Exception as err:  # missing, unreadable metadata or manifests: this table only
            problems.append(
                DiscoveryProblem.from_error(ref.catalog, err, ref, settings.catalog_properties(ref.catalog))
            )
            continue
        healths.append(health)
        if args.overview and (count := unhealthy_partition_count(catalog, ref, health)) is not None:
            unhealthy[health.table] = count
        for f in health.findings:
            rows.append((str(ref), f.check, f.severity.value, f.summary, f.recommendation))
    if args.json:
        from icelake_assets.operate.commands import emit_json, health_json

        overview = lake_overview(healths, unhealthy_partitions=unhealthy) if args.overview else None
        emit_json(health_json(healths, problems, overview))
    else:
        _print_health(healths, rows, args, unhealthy)
    for problem in problems:  # after the complete output for everything that could be read
        print(f"icelake: error: {problem}", file=sys.stderr)
    if problems:
        return 2
    if args.fail_on:
        level = {"warn": 1, "error": 2}[args.fail_on]
        if any(f.severity.rank >= level for h in healths for f in h.findings):
            return 1
    return 0


def _print_health(
    healths: list[TableHealth], rows: list[tuple], args: argparse.Namespace, unhealthy: dict[str, int]
) -> None:
    from icelake_assets.health.overview import lake_overview
    from icelake_assets.text import format_table

    print(
        format_table(
            ("table", "status", "score", "data files", "small", "delete files", "snapshots", "manifests"),
            [
                (
                    h.table,
                    h.status.value,
                    h.score.score,
                    h.stats.data_files,
                    h.stats.small_files,
                    h.stats.delete_files,
                    h.stats.snapshots,
                    h.stats.manifests,
                )
                for h in healths
            ],
        )
    )
    print()
    print(format_table(("table", "check", "severity", "finding", "recommendation"), rows))
    if args.overview:
        overview = lake_overview(healths, unhealthy_partitions=unhealthy)
        print("\nwhat to fix first (by file opens saved per full scan):")
        print(
            format_table(
                (
                    "#",
                    "table",
                    "status",
                    "unhealthy partitions",
                    "files saved",
                    "manifests saved",
                    "snapshots to expire",
                    "first action",
                ),
                [
                    (
                        i,
                        t.table,
                        t.status.value,
                        "-" if t.unhealthy_partitions is None else t.unhealthy_partitions,
                        t.files_saved,
                        t.manifests_saved,
                        t.expirable_snapshots,
                        t.actions[0] if t.actions else "-",
                    )
                    for i, t in enumerate(overview.tables, 1)
                ],
            )
        )
        if overview.partitions:
            print("\npartitions with the largest benefit:")
            print(
                format_table(
                    ("#", "table", "partition", "files", "expected", "delete files", "files saved", "why"),
                    [
                        (
                            i,
                            p.table,
                            p.partition,
                            p.data_files,
                            p.expected_files,
                            p.delete_files,
                            p.files_saved,
                            p.why,
                        )
                        for i, p in enumerate(overview.partitions[: args.top], 1)
                    ],
                )
            )


def cmd_policy(args: argparse.Namespace) -> int:
    """The effective policy of one table, each value with its source (a missing table gets the settings only)."""
    from icelake_assets.catalog.connection import TableMissingError, load_table, open_catalog
    from icelake_assets.policies import format_value, resolve_policy
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys
    from icelake_assets.text import format_table

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    ref = parse_table(args.table, settings)
    missing = False
    try:
        properties = load_table(open_catalog(settings, ref.catalog), ref).properties
    except TableMissingError:
        properties, missing = {}, True
        print(
            f"icelake: error: {ref} does not exist: the policy below is the settings' only (exit 1)",
            file=sys.stderr,
        )
    effective = resolve_policy(settings, ref, properties)
    if args.json:
        from icelake_assets.operate.commands import emit_json, policy_json

        emit_json(policy_json(str(ref), not missing, effective, settings.source, args.changed))
        return 1 if missing else 0
    values = effective.overridden() if args.changed else effective.values
    print(
        f"policy of {ref}: mode {effective.mode} ({effective.source_of('mode')}); settings: {settings.source}"
    )
    print(
        format_table(("key", "value", "source"), [(v.key, format_value(v.value), v.source) for v in values])
    )
    for problem in effective.problems:
        print(f"problem: {problem}")
    return 1 if missing else 0


def cmd_demo_lake(args: argparse.Namespace) -> int:
    from icelake_assets.demo.lake import build_demo_lake
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    started = time.perf_counter()
    refs = build_demo_lake(settings, scale=args.scale, reset=args.reset)
    print(f"demo lake ready in {time.perf_counter() - started:.1f}s: {', '.join(map(str, refs))}")
    return 0


def cmd_backfill(args: argparse.Namespace) -> int:
    """A Dagster backfill of exactly the table's unhealthy partitions (operate/backfill.py)."""
    from icelake_assets.operate.backfill import cmd_backfill as backfill

    return backfill(args)


def cmd_mcp(args: argparse.Namespace) -> int:
    from icelake_assets.agents.server import cmd_mcp as serve

    return serve(args.config, args.agent, args.http, args.host, args.port, args.dagster_url)


def cmd_demo(args: argparse.Namespace) -> int:
    from icelake_assets.demo.headless import run_headless_demo
    from icelake_assets.settings import load_settings

    return run_headless_demo(load_settings(args.config), scale=args.scale)


TABLE_HELP = "catalog.namespace.table, namespace.table, or the UI's catalog/namespace/table"


def describe(commands: Sequence[str]) -> str:
    """``icelake --help``'s description: what the command line is for, and its commands in order."""
    return f"The self-maintaining lakehouse's command line, for people outside the UI: {', '.join(commands)}."


class _HelpFormatter(argparse.HelpFormatter):
    """The description wrapped between words only: a command named with a hyphen (demo-lake) is never
    split at it."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return textwrap.fill(
            " ".join(text.split()),
            width,
            initial_indent=indent,
            subsequent_indent=indent,
            break_on_hyphens=False,
        )


def build_parser() -> argparse.ArgumentParser:
    """The ``icelake`` parser, its description listing every command it was given."""
    parser = argparse.ArgumentParser(prog="icelake", formatter_class=_HelpFormatter)
    parser.add_argument("--config", help="settings file (default: $ICELAKE_CONFIG or ./icelake.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("health", help="print the health findings of one table or all")
    p.add_argument("table", nargs="?", help=TABLE_HELP)
    p.add_argument("--orphans", action="store_true", help="also list storage for orphan files (slower)")
    p.add_argument(
        "--overview", action="store_true", help="rank tables and partitions by the benefit of maintenance"
    )
    p.add_argument(
        "--partitions",
        action="store_true",
        help="list the table's unhealthy partitions (Dagster keys) with their failing checks and numbers",
    )
    p.add_argument(
        "--top",
        type=int,
        default=20,
        help="partitions shown by --overview, worst per check of --partitions (20)",
    )
    p.add_argument("--fail-on", choices=["warn", "error"], help="exit 1 when a finding reaches this severity")
    p.add_argument("--json", action="store_true", help="print the findings as JSON (icelake.health/v1)")
    p.set_defaults(func=cmd_health)
    p = sub.add_parser("policy", help="print the effective policy of a table with the source of each value")
    p.add_argument("table", help=TABLE_HELP)
    p.add_argument("--changed", action="store_true", help="only the values that are not built-in defaults")
    p.add_argument("--json", action="store_true", help="print the policy as JSON (icelake.policy/v1)")
    p.set_defaults(func=cmd_policy)
    add_operator_commands(sub, TABLE_HELP)
    p = sub.add_parser("backfill", help="launch a Dagster backfill of exactly a table's unhealthy partitions")
    p.add_argument("table", help=TABLE_HELP)
    p.add_argument(
        "--unhealthy",
        action="store_true",
        required=True,
        help="the partitions failing a check per partition (what `health TABLE --partitions` lists)",
    )
    p.add_argument("--check", help="only those failing this check: small_files, delete_files or layout_drift")
    p.add_argument("--dry-run", action="store_true", help="print the keys and what would run; launch nothing")
    p.add_argument(
        "--dagster-url", default=DEFAULT_DAGSTER_URL, help=f"the webserver (default {DEFAULT_DAGSTER_URL})"
    )
    p.add_argument("--json", action="store_true", help="print the backfill as JSON (icelake.backfill/v1)")
    p.set_defaults(func=cmd_backfill)
    add_layout_command(sub)
    p = sub.add_parser("mcp", help="serve the operator tools to agents over MCP (stdio, or --http)")
    p.add_argument(
        "--agent", help="the identity of the stdio client (default: $ICELAKE_AGENT, else anonymous)"
    )
    p.add_argument(
        "--http", action="store_true", help="streamable HTTP at http://HOST:PORT/mcp (bearer tokens)"
    )
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="the HTTP address, loopback only: 127.0.0.1 (default), ::1, localhost",
    )
    p.add_argument("--port", type=int, default=0, help="the HTTP port (default 0: a free port, printed)")
    p.add_argument(
        "--dagster-url",
        default=DEFAULT_DAGSTER_URL,
        help=f"the webserver approvals launch on ({DEFAULT_DAGSTER_URL})",
    )
    p.set_defaults(func=cmd_mcp)
    p = sub.add_parser("demo-lake", help="build the degraded demo lake")
    p.add_argument("--scale", default="demo", choices=["test", "demo"])
    p.add_argument("--reset", action="store_true", help="drop and rebuild the demo tables")
    p.set_defaults(func=cmd_demo_lake)
    p = sub.add_parser("demo", help="headless demo: degrade, check, maintain through Dagster, compare")
    p.add_argument("--scale", default="demo", choices=["test", "demo"])
    p.set_defaults(func=cmd_demo)
    parser.description = describe(list(sub.choices))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (IcelakeError, ValueError) as err:  # settings, catalogs, tables, names: the cause, no trace
        print(f"icelake: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
