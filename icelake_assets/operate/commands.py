"""The operator commands behind cli.py: ``plan``, ``audit``, ``orphans``, ``approve``, ``restore`` and the
JSON shapes of
``health --json`` and ``policy --json``. Each command computes a typed result (operate/plan.py,
audit_view.py, approve.py) and prints it, as text or as its documented JSON (docs/operating.md).

Exit status: 0 done; 1 ``approve`` of a table that awaits no approval (or whose plan changed), or a
``restore`` refused (writers' commits or retention expiries after the tag, without ``--force``);
2 an error (settings, catalog, table, audit log, Dagster webserver), printed as ``icelake: error: ...``.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from icelake_assets.catalog.discovery import DiscoveryProblem
    from icelake_assets.health.overview import LakeOverview, TableHealth
    from icelake_assets.operate.plan import TablePlan
    from icelake_assets.policies import EffectivePolicy

HEALTH_SCHEMA = "icelake.health/v1"
POLICY_SCHEMA = "icelake.policy/v1"
DEFAULT_DAGSTER_URL = "http://127.0.0.1:3000"


def emit_json(document: dict[str, Any]) -> None:
    print(json.dumps(document, indent=2, sort_keys=False, default=str))


# -- health and policy as JSON ---------------------------------------------------------------------


def health_json(
    healths: Sequence[TableHealth], problems: Sequence[DiscoveryProblem], overview: LakeOverview | None
) -> dict[str, Any]:
    """``icelake.health/v1``: every table's status, score, numbers and findings; the ranking when asked."""
    return {
        "schema": HEALTH_SCHEMA,
        "tables": [
            {
                "table": h.table,
                "status": h.status.value,
                "score": h.score.score,
                "stats": {
                    "data_files": h.stats.data_files,
                    "small_files": h.stats.small_files,
                    "delete_files": h.stats.delete_files,
                    "snapshots": h.stats.snapshots,
                    "manifests": h.stats.manifests,
                },
                "findings": [
                    {
                        "check": f.check,
                        "severity": f.severity.value,
                        "passed": f.passed,
                        "summary": f.summary,
                        "recommendation": f.recommendation,
                    }
                    for f in h.findings
                ],
                "not_evaluated": list(h.not_evaluated),
            }
            for h in healths
        ],
        "overview": None
        if overview is None
        else [
            {
                "rank": i,
                "table": t.table,
                "status": t.status.value,
                "unhealthy_partitions": t.unhealthy_partitions,  # null: unpartitioned or not counted
                "files_saved": t.files_saved,
                "manifests_saved": t.manifests_saved,
                "expirable_snapshots": t.expirable_snapshots,
                "rewrite_bytes": t.rewrite_bytes,
                "actions": list(t.actions),
                "why": t.why,
            }
            for i, t in enumerate(overview.tables, 1)
        ],
        "problems": [str(p) for p in problems],
    }


def policy_json(
    table: str, exists: bool, effective: EffectivePolicy, settings_source: str, changed: bool
) -> dict:
    """``icelake.policy/v1``: the effective policy, each value with its source."""
    from icelake_assets.policies import format_value

    values = effective.overridden() if changed else effective.values
    return {
        "schema": POLICY_SCHEMA,
        "table": table,
        "exists": exists,
        "mode": effective.mode,
        "mode_source": effective.source_of("mode"),
        "settings": settings_source,
        "values": [
            {
                "key": v.key,
                "value": json.loads(json.dumps(v.value, default=str)),
                "text": format_value(v.value),
                "source": v.source,
            }
            for v in values
        ],
        "problems": [str(p) for p in effective.problems],
    }


# -- plan ------------------------------------------------------------------------------------------


def print_plan(plan: TablePlan) -> None:
    from icelake_assets.text import format_table, human_bytes

    print(f"plan of {plan.table} at snapshot {plan.snapshot_id} (mode {plan.mode}: {plan.mode_source})")
    print(
        format_table(
            ("op", "acts", "why"),
            [(o.op, "yes" if o.act else "no", o.reason) for o in plan.ops]
            + (
                []
                if plan.orphans_evaluated
                else [("remove_orphan_files", "?", "not evaluated: add --orphans")]
            ),
        )
    )
    e = plan.estimate
    if plan.partitions:
        shown = ", ".join(plan.partitions[:10]) + (" …" if len(plan.partitions) > 10 else "")
        print(f"\npartitions to rewrite ({len(plan.partitions)}): {shown}")
    for label, why in list(plan.partitions_excluded.items())[:5]:
        print(f"  skipped {label}: {why}")
    if plan.position_partitions:
        shown = ", ".join(plan.position_partitions[:10]) + (
            " …" if len(plan.position_partitions) > 10 else ""
        )
        print(
            f"\nposition deletes compacted by rewrite_position_delete_files ({len(plan.position_partitions)} "
            f"partitions: {shown}): {human_bytes(e.position_delete_bytes)} of delete files instead of "
            f"rewriting {human_bytes(plan.position_data_bytes)} of data"
        )
    print(
        f"\nestimate: rewrite {human_bytes(e.rewrite_bytes)} ({e.rewrite_files} files, {e.rewrite_groups} "
        f"groups; cap {human_bytes(e.max_rewrite_bytes)}), {e.expirable_snapshots} snapshots to expire"
    )
    if "expire_data" in plan.acting:
        how = (
            "whole files dropped, none rewritten"
            if e.expire_metadata_only
            else "rows deleted, files rewritten"
        )
        first = f" (awaits approval: {e.expire_needs_approval})" if e.expire_needs_approval else ""
        print(
            f"row expiry: up to {e.expire_rows} rows in {e.expire_files} files "
            f"({human_bytes(e.expire_bytes)}) older than {e.expire_cutoff}; {how}{first}"
        )
    if (st := plan.statistics) is not None and st.columns:
        where = (
            "none yet"
            if st.snapshot_id is None
            else f"snapshot {st.snapshot_id} ({'current' if st.current else 'an ancestor'}, {st.rows_at} rows)"
        )
        shown = ", ".join(st.columns[:8]) + (" …" if len(st.columns) > 8 else "")
        extra = " + partition statistics" if st.partition_stats else ""
        print(f"statistics: NDV of {len(st.columns)} columns ({st.how}: {shown}){extra}; now: {where}")
    print(f"guards: {plan.guards}: {plan.guards_reason}")
    if plan.launch is not None and plan.acting:
        print(f"launch: {plan.launch.reason}")
    print(f"now (mode {plan.mode}): {plan.outcome}; mode enforce would: {plan.enforce}")
    if plan.awaiting_approval:
        print(f"awaiting approval: {plan.approve_command}  (plan {plan.digest})")
    else:
        print(f"plan {plan.digest}")


def cmd_plan(args: argparse.Namespace) -> int:
    from icelake_assets.operate.names import parse_table
    from icelake_assets.operate.plan import plan_table
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    plan = plan_table(settings, parse_table(args.table, settings), orphans=args.orphans)
    if args.json:
        emit_json(plan.to_json())
    else:
        print_plan(plan)
    return 0


# -- audit -----------------------------------------------------------------------------------------


def cmd_audit(args: argparse.Namespace) -> int:
    from icelake_assets.operate.audit_view import parse_since, print_trail, read_trail
    from icelake_assets.operate.names import parse_table
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    ref = parse_table(args.table, settings) if args.table else None
    since = parse_since(args.since) if args.since else None
    trail = read_trail(settings, ref, since, args.limit)
    if args.json:
        emit_json(trail.to_json())
    else:
        print_trail(trail)
    return 0


# -- orphans ---------------------------------------------------------------------------------------


def cmd_orphans(args: argparse.Namespace) -> int:
    from icelake_assets.operate.names import parse_table
    from icelake_assets.operate.orphans_view import print_candidates, read_candidates
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    view = read_candidates(settings, parse_table(args.table, settings))
    if args.json:
        emit_json(view.to_json())
    else:
        print_candidates(view)
    return 0


# -- approve ---------------------------------------------------------------------------------------


def default_approver() -> str:
    return os.environ.get("USER") or getpass.getuser()


def cmd_approve(args: argparse.Namespace) -> int:
    from icelake_assets.operate.approve import NotAwaitingApproval, approve_table
    from icelake_assets.operate.names import parse_table
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    ref = parse_table(args.table, settings)
    try:
        approval = approve_table(settings, ref, args.dagster_url, args.by or default_approver(), args.digest)
    except NotAwaitingApproval as err:
        print(f"icelake: {err}", file=sys.stderr)
        return 1
    if args.json:
        emit_json(approval.to_json())
        return 0
    print(
        f"approved by {approval.approved_by}: run {approval.run_id} of {approval.job} launched for "
        f"{approval.table} (plan {approval.plan.digest}; ops {', '.join(approval.plan.acting)})"
    )
    print(f"run: {approval.run_url}")
    print(f"audit record: {approval.audit_record_id or 'not written (audit disabled)'}")
    return 0


# -- restore ---------------------------------------------------------------------------------------


def cmd_restore(args: argparse.Namespace) -> int:
    from icelake_assets.maintenance.verify.restore import RestoreRefused
    from icelake_assets.operate.names import parse_table
    from icelake_assets.operate.restore import restore_table
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    ref = parse_table(args.table, settings)
    try:
        done = restore_table(settings, ref, args.to, args.force, args.by or default_approver())
    except RestoreRefused as err:
        print(f"icelake: refused: {err}", file=sys.stderr)
        return 1
    if args.json:
        emit_json({**done.to_json(), **done.check.to_dict()})
        return 0
    c = done.check
    if c.current == c.snapshot_id:
        print(
            f"{done.table} is already at {c.tag} (snapshot {c.snapshot_id}): nothing restored (run {done.run_id})"
        )
        return 0
    print(
        f"{done.table} restored to {c.tag} (snapshot {c.snapshot_id}) by run {done.run_id}: "
        f"{len(c.dropped)} commits dropped ({len(c.writers)} by writers{', forced' if done.forced else ''})"
    )
    for commit in c.dropped:
        print(
            f"  dropped {commit.describe()}{'' if commit.by_writer else f' maintenance run {commit.run_id}'}"
        )
    if c.expiries:  # only with --force: rows retention removed are back, said plainly
        print(f"  forced: brought back {c.undone()}")
    return 0


def add_commands(sub: Any, table_help: str) -> None:
    """The operator commands' parsers (cli.main)."""
    p = sub.add_parser("plan", help="dry run: what maintenance would do to a table now, and why (no Spark)")
    p.add_argument("table", help=table_help)
    p.add_argument("--orphans", action="store_true", help="also list storage for orphan files (slower)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON (icelake.plan/v1)")
    p.set_defaults(func=cmd_plan)
    p = sub.add_parser("audit", help="the audit trail in time order (decisions, ops, validations, approvals)")
    p.add_argument("table", nargs="?", help=table_help)
    p.add_argument("--since", help="an ISO time (2026-01-31T12:00Z) or an age: 30m, 24h, 7d")
    p.add_argument("--limit", type=int, help="only the most recent N records")
    p.add_argument("--json", action="store_true", help="print the records as JSON (icelake.audit/v1)")
    p.set_defaults(func=cmd_audit)
    p = sub.add_parser("orphans", help="the orphan candidates waiting their recovery window (no listing)")
    p.add_argument("table", help=table_help)
    p.add_argument("--json", action="store_true", help="print the candidates as JSON (icelake.orphans/v1)")
    p.set_defaults(func=cmd_orphans)
    p = sub.add_parser(
        "approve", help="launch a held or proposed table's maintenance through Dagster, approved"
    )
    p.add_argument("table", help=table_help)
    p.add_argument(
        "--dagster-url", default=DEFAULT_DAGSTER_URL, help=f"the webserver (default {DEFAULT_DAGSTER_URL})"
    )
    p.add_argument("--by", help="who approves (default: $USER)")
    p.add_argument("--digest", help="approve only this plan (the digest `icelake plan` printed)")
    p.add_argument("--json", action="store_true", help="print the approval as JSON (icelake.approval/v1)")
    p.set_defaults(func=cmd_approve)
    p = sub.add_parser("restore", help="set a table back to a restore point (a tag), through a Dagster run")
    p.add_argument("table", help=table_help)
    p.add_argument("--to", required=True, metavar="TAG", help="the tag (e.g. icelake-daily-2026-01-31)")
    p.add_argument(
        "--force",
        action="store_true",
        help="also drop writers' commits made after the tag and bring back rows retention expired after it",
    )
    p.add_argument("--by", help="who restores (default: $USER), for the audit")
    p.add_argument("--json", action="store_true", help="print what was restored as JSON (icelake.restore/v1)")
    p.set_defaults(func=cmd_restore)
