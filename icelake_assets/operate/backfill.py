"""``icelake backfill TABLE --unhealthy [--check CHECK] [--dry-run] [--json]``: a Dagster backfill of
exactly the partitions of a table that fail their health checks, so maintenance heals those and no other.

1. The table's partition health now (planning/partition_health.py, read as ``icelake health TABLE
   --partitions`` reads it): the Dagster keys of the partitions failing ``--check`` (small_files,
   delete_files or layout_drift; any of them by default). Unhealthy partitions no key stands for (an
   older spec without the partition field, a null time value) are named apart: only a whole-table run
   maintains them.
2. ``--dry-run`` prints the keys, the asset and the runs the backfill would launch, and launches nothing.
3. Otherwise the lake's webserver launches one backfill of those keys of the table's asset (the
   GraphQL ``launchPartitionBackfill`` mutation, the one the UI's partition dialog sends), tagged as a
   manual maintenance of the table. Dagster's daemon runs it: one run per
   ``partitions.partitions_per_run`` keys (the asset's backfill policy), each compacting only its
   partitions' candidates, under the run queue and pools like every run; each run reports its
   partitions' checks when it ends (orchestration/checks/partition_checks.py).

Exit status: 0 launched, or nothing unhealthy (said), or a dry run; 2 an error (an unknown table or
check, an unpartitioned table, the webserver), printed as ``icelake: error: ...``."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from icelake_assets.operate.approve import ApprovalError, DagsterWebserver
from icelake_assets.operate.partition_health import read_partition_health

# The maintenance sensor's run tags, same keys: the runs of the backfill are the table's maintenance.
from icelake_assets.orchestration.sensors.maintenance import SIGNAL_TAG, TABLE_TAG, TRIGGER_TAG
from icelake_assets.planning.partition_health import PARTITION_CHECKS, PartitionReport
from icelake_assets.settings import Settings
from icelake_assets.settings.asset_keys import asset_key_path
from icelake_assets.types import IcelakeError, TableRef

BACKFILL_SCHEMA = "icelake.backfill/v1"

LAUNCH = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId }
  ... on PartitionKeysNotFoundError { message partitionKeys } ... on Error { message } } }"""


class BackfillError(IcelakeError, ValueError):
    """What to backfill cannot be named: an unknown check, an unpartitioned table."""


_PLAIN_KEY = re.compile(r"[-a-zA-Z0-9_:/@]+")


def ui_key(key: str) -> str:
    """A key as the UI's partition selection reads it (its escapePartitionKey)."""
    if _PLAIN_KEY.fullmatch(key):
        return key
    return '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class BackfillPlan:
    table: str
    asset_key: tuple[str, ...]
    check: str | None  # None: any of PARTITION_CHECKS
    failing: Mapping[str, tuple[str, ...]]  # the keys to backfill, in key order -> their failing checks
    keyless: tuple[str, ...]  # unhealthy partitions without a key (labels): whole-table runs only
    partitions_per_run: int
    snapshot_id: int | None
    evaluated: int  # partitions graded

    @property
    def keys(self) -> list[str]:
        return list(self.failing)

    @property
    def max_runs(self) -> int:
        """At most this many runs: contiguous keys share a run up to ``partitions_per_run`` of them."""
        return math.ceil(len(self.failing) / self.partitions_per_run)

    @property
    def selection(self) -> str:
        """The keys as the UI's partition selection takes them: comma-separated, quoted where a key holds
        more than letters, digits and ``-_:/@`` (the dialog's grammar)."""
        return ", ".join(ui_key(k) for k in self.failing)


@dataclass(frozen=True)
class Backfill:
    plan: BackfillPlan
    backfill_id: str | None = None  # None: a dry run, or nothing to backfill
    dagster_url: str | None = None

    @property
    def backfill_url(self) -> str | None:
        if self.backfill_id is None or self.dagster_url is None:
            return None
        return f"{self.dagster_url.rstrip('/')}/runs/b/{self.backfill_id}"

    def to_json(self) -> dict[str, Any]:
        """``icelake.backfill/v1`` (docs/operating.md)."""
        p = self.plan
        return {
            "schema": BACKFILL_SCHEMA,
            "table": p.table,
            "asset_key": list(p.asset_key),
            "check": p.check,
            "checks": [p.check] if p.check else list(PARTITION_CHECKS),
            "snapshot_id": p.snapshot_id,
            "partitions_evaluated": p.evaluated,
            "keys": p.keys,
            "partitions": [{"key": k, "failing": list(c)} for k, c in p.failing.items()],
            "keyless_unhealthy": list(p.keyless),
            "partitions_per_run": p.partitions_per_run,
            "max_runs": p.max_runs,
            "dry_run": self.backfill_id is None,
            "backfill_id": self.backfill_id,
            "backfill_url": self.backfill_url,
            "dagster_url": self.dagster_url,
        }


def backfill_plan(
    report: PartitionReport, asset_key: Sequence[str], check: str | None, per_run: int
) -> BackfillPlan:
    """The keys failing ``check`` (any by default) with their failing checks, from ``report``."""
    if check is not None and check not in PARTITION_CHECKS:
        raise BackfillError(_unknown_check(check))
    if not report.partitioned:
        raise BackfillError(
            f"{report.table} is not partitioned: a backfill selects partitions; maintain the table whole "
            "(its maintenance job, or `icelake approve`)"
        )
    keys = set(report.failing_keys(check))
    failing = {
        p.key: tuple(f.check for f in p.failing if check in (None, f.check))
        for p in report.partitions
        if p.key in keys
    }
    keyless = tuple(
        label
        for p in report.partitions
        if p.key is None and any(check in (None, f.check) for f in p.failing)
        for label in p.labels
    )
    return BackfillPlan(
        report.table, tuple(asset_key), check, failing, keyless, per_run, None, len(report.partitions)
    )


def _unknown_check(check: str) -> str:
    from icelake_assets.orchestration.checks.results import METADATA_CHECKS

    known = ", ".join(PARTITION_CHECKS)
    if check in METADATA_CHECKS:
        return f"{check} is a table-level check, not graded per partition: --check takes {known}"
    return f"unknown check {check!r}: --check takes {known}"


def plan_unhealthy(settings: Settings, ref: TableRef, check: str | None = None) -> BackfillPlan:
    """The table's unhealthy partitions now (its metadata, the manifest cache)."""
    if check is not None and check not in PARTITION_CHECKS:  # before reading the table
        raise BackfillError(_unknown_check(check))
    from icelake_assets.catalog.connection import load_table, open_catalog
    from icelake_assets.policies import policy_for

    catalog = open_catalog(settings, ref.catalog)
    report, _, snapshot_id = read_partition_health(settings, ref, catalog)
    per_run = policy_for(settings, ref, load_table(catalog, ref).properties).partitions.partitions_per_run
    return replace(backfill_plan(report, asset_key_path(ref), check, per_run), snapshot_id=snapshot_id)


class BackfillWebserver(DagsterWebserver):
    """The lake's webserver, launching partition backfills (its GraphQL API, as the UI does)."""

    def launch(self, plan: BackfillPlan, tags: Mapping[str, str]) -> str:
        params = {
            "assetSelection": [{"path": list(plan.asset_key)}],
            "partitionNames": plan.keys,
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
            "title": f"unhealthy partitions of {plan.table}",
            "description": f"icelake backfill --unhealthy: {len(plan.keys)} partition(s) failing "
            + (plan.check or "their health checks"),
        }
        result = self._query(LAUNCH, {"params": params})["launchPartitionBackfill"]
        if result["__typename"] == "LaunchBackfillSuccess":
            return str(result["backfillId"])
        raise ApprovalError(
            f"Dagster did not launch the backfill of {plan.table} ({result['__typename']}): "
            f"{result.get('message', '')}"
            + (
                "; its partitions are not the loaded code location's yet: reload it"
                if result["__typename"] == "PartitionKeysNotFoundError"
                else ""
            )
        )


def backfill_tags(plan: BackfillPlan) -> dict[str, str]:
    return {
        TABLE_TAG: plan.table,
        TRIGGER_TAG: "manual",
        SIGNAL_TAG: f"unhealthy partitions ({plan.check or 'any check'}): {len(plan.keys)}"[:200],
    }


def launch_unhealthy(
    plan: BackfillPlan, dagster_url: str, webserver: type[BackfillWebserver] = BackfillWebserver
) -> Backfill:
    server = webserver(dagster_url)
    return Backfill(plan, server.launch(plan, backfill_tags(plan)), server.url)


def _print(done: Backfill) -> None:
    p = done.plan
    what = p.check or "any partition check"
    print(f"{len(p.keys)} of {p.evaluated} partitions of {p.table} fail {what}: {p.selection}")
    for key, checks in p.failing.items():
        print(f"  {key}: {', '.join(checks)}")
    print(
        f"backfill of asset {'/'.join(p.asset_key)}: at most {p.max_runs} run(s) of up to "
        f"{p.partitions_per_run} partitions each (partitions.partitions_per_run)"
    )
    if done.backfill_id is None:
        print("dry run: nothing launched")
    else:
        print(f"launched backfill {done.backfill_id}: {done.backfill_url}")


def cmd_backfill(args: argparse.Namespace) -> int:
    from icelake_assets.operate.commands import emit_json
    from icelake_assets.operate.names import parse_table
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    settings = load_settings(args.config)
    use_asset_keys(settings.asset_keys)
    plan = plan_unhealthy(settings, parse_table(args.table, settings), args.check)
    done = Backfill(plan) if args.dry_run or not plan.keys else launch_unhealthy(plan, args.dagster_url)
    if args.json:
        emit_json(done.to_json())
        return 0
    if plan.keys:
        _print(done)
    else:
        print(f"no partition of {plan.table} fails {plan.check or 'a partition check'}: nothing to backfill")
    if plan.keyless:
        print(
            f"{len(plan.keyless)} unhealthy partition(s) without a Dagster key, which only a whole-table "
            f"run maintains: {', '.join(plan.keyless[:10])}"
        )
    return 0
