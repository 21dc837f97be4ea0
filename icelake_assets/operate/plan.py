"""``icelake plan TABLE``: what maintenance would do to a table now, from its metadata only (pyiceberg,
no Spark, no Dagster): each op's decision and reason, the partitions a rewrite takes, the cost
estimate, the guards' verdict, what the table's mode and mode ``enforce`` would do, and a digest
naming the plan (``icelake approve`` records it).

The decision is the maintenance sensor's own (planning/table.py). What only the sensor knows is
left out: runs of the table already queued or running, the backoff after a failed run, the global run
cap; the orphan op is decided only with ``--orphans`` (a storage listing). How the sensor would launch
the table (a run shared with other small tables, or its own) is said from its policy's ``packing``.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.health.cache import ManifestCache, default_cache_path
from icelake_assets.health.stats import compute_table_stats
from icelake_assets.partitions.layout import UNPARTITIONED
from icelake_assets.planning.approval import approve_command
from icelake_assets.planning.guards import estimated_rewrite_bytes
from icelake_assets.planning.packing import LaunchMode, launch_mode, predicted_work
from icelake_assets.planning.table import TableDecision, decide_table
from icelake_assets.policies import resolve_policy
from icelake_assets.settings import Policy, Settings
from icelake_assets.settings.asset_keys import asset_key_path
from icelake_assets.types import TableRef

PLAN_SCHEMA = "icelake.plan/v1"
# The guards' verdict in words an operator reads: allow (the ops may run), defer (writers active),
# hold (over the cost cap: awaiting approval), skip (no op's threshold is crossed).
GUARDS = {"launch": "allow", "defer": "defer", "hold": "hold", "skip": "skip"}
# What a sensor tick would do with the table in mode enforce.
ENFORCE = {"launch": "launch", "defer": "defer", "hold": "hold", "skip": "nothing"}


@dataclass(frozen=True)
class OpPlan:
    op: str
    act: bool
    reason: str
    signals: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Estimate:
    rewrite_bytes: int  # data bytes the rewrite reads and writes again (0 when it does not act)
    rewrite_files: int
    rewrite_groups: int
    max_rewrite_bytes: int  # the cost guard's cap (guards.max_rewrite_bytes)
    expirable_snapshots: int
    position_delete_bytes: int = 0  # delete files the position-delete compaction reads and writes again
    # What expire_data would delete (rows of straddling files counted whole) and before which cut-off.
    expire_rows: int = 0
    expire_files: int = 0
    expire_bytes: int = 0
    expire_cutoff: str | None = None
    expire_metadata_only: bool = False  # whole files dropped, none rewritten
    first_expiry: bool = False  # the table's first expiry: it waits for approval
    expire_needs_approval: str = ""  # why the expiry waits for approval (planning/data_retention.py)


@dataclass(frozen=True)
class StatisticsPreview:
    """What compute_statistics would sketch, and the statistics serving the snapshot now."""

    columns: tuple[str, ...]  # the columns the policy selects
    how: str  # how they were chosen: all, keys, listed
    snapshot_id: int | None  # the snapshot of the newest statistics among the current one's ancestors
    current: bool  # they are the current snapshot's own
    rows: int  # the current snapshot's rows
    rows_at: int | None  # the rows of the statistics' snapshot
    partition_stats: bool  # compute_partition_stats runs too (a partitioned table)

    def to_json(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns),
            "how": self.how,
            "snapshot_id": self.snapshot_id,
            "current": self.current,
            "rows": self.rows,
            "rows_at": self.rows_at,
            "partition_stats": self.partition_stats,
        }


@dataclass(frozen=True)
class TablePlan:
    table: str  # catalog.namespace.table
    asset_key: tuple[str, ...]
    mode: str
    mode_source: str
    snapshot_id: int | None
    planned_at: datetime
    ops: tuple[OpPlan, ...]
    orphans_evaluated: bool
    partitions: tuple[str, ...]  # the partitions rewrite_data_files would take
    partitions_excluded: dict[str, str]  # flagged partitions Iceberg would skip, with the reason
    # Partitions whose position deletes rewrite_position_delete_files compacts instead of a data rewrite.
    position_partitions: tuple[str, ...]
    position_data_bytes: int  # the data bytes a delete-applying rewrite would have rewritten there
    position_reason: str  # why the position deletes are (or are not) compacted alone
    rewrite_options: dict[str, str]
    estimate: Estimate
    guards: str  # allow, defer, hold, skip (GUARDS)
    guards_reason: str
    guards_details: dict[str, Any]
    outcome: str  # what the sensor would record now: launched, proposed, observed, deferred, held, skipped
    enforce: str  # what mode enforce would do: launch, defer, hold, nothing
    approve_command: str
    statistics: StatisticsPreview | None = None
    # How the sensor would launch it: in a run shared with other small tables or in its own.
    launch: LaunchMode | None = None

    @property
    def acting(self) -> tuple[str, ...]:
        return tuple(o.op for o in self.ops if o.act)

    @property
    def awaiting_approval(self) -> bool:
        return self.outcome in ("held", "proposed")

    @property
    def digest(self) -> str:
        """Names the plan: equal for the same table snapshot, mode, ops, partitions, options and
        estimate (not the time it was made, nor ages that grow with the clock)."""
        essence = {
            "table": self.table,
            "snapshot_id": self.snapshot_id,
            "mode": self.mode,
            "ops": list(self.acting),
            "partitions": list(self.partitions),
            "rewrite_options": self.rewrite_options,
            "rewrite_bytes": self.estimate.rewrite_bytes,
            "guards": self.guards,
        }
        if self.position_partitions:  # absent otherwise: the digests of plans without stay the same
            essence["position_partitions"] = list(self.position_partitions)
        if "expire_data" in self.acting:  # the rows it lets go (not the cut-off: it moves with the clock)
            essence["expire"] = f"{self.estimate.expire_files}:{self.estimate.expire_rows}"
        text = json.dumps(essence, sort_keys=True, separators=(",", ":"))
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16]

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape ``icelake.plan/v1`` (docs/operating.md)."""
        return {
            "schema": PLAN_SCHEMA,
            "table": self.table,
            "asset_key": "/".join(self.asset_key),
            "mode": self.mode,
            "mode_source": self.mode_source,
            "snapshot_id": self.snapshot_id,
            "planned_at": self.planned_at.isoformat(),
            "ops": [{"op": o.op, "act": o.act, "reason": o.reason, "signals": o.signals} for o in self.ops],
            "orphans_evaluated": self.orphans_evaluated,
            "partitions": list(self.partitions),
            "partitions_excluded": dict(self.partitions_excluded),
            "rewrite_options": dict(self.rewrite_options),
            "estimate": {
                "rewrite_bytes": self.estimate.rewrite_bytes,
                "rewrite_files": self.estimate.rewrite_files,
                "rewrite_groups": self.estimate.rewrite_groups,
                "max_rewrite_bytes": self.estimate.max_rewrite_bytes,
                "expirable_snapshots": self.estimate.expirable_snapshots,
                "position_delete_bytes": self.estimate.position_delete_bytes,
            },
            "position_deletes": {
                "partitions": list(self.position_partitions),
                "delete_bytes": self.estimate.position_delete_bytes,
                "data_bytes_not_rewritten": self.position_data_bytes,
                "reason": self.position_reason,
            },
            "data_expiry": {
                "rows": self.estimate.expire_rows,
                "files": self.estimate.expire_files,
                "bytes": self.estimate.expire_bytes,
                "cutoff": self.estimate.expire_cutoff,
                "metadata_only": self.estimate.expire_metadata_only,
                "first_expiry": self.estimate.first_expiry,
                "needs_approval": self.estimate.expire_needs_approval or None,
            }
            if "expire_data" in self.acting
            else None,
            "guards": {"verdict": self.guards, "reason": self.guards_reason, "details": self.guards_details},
            "outcome": self.outcome,
            "enforce": {
                "action": self.enforce,
                "ops": list(self.acting) if self.enforce != "nothing" else [],
            },
            "approve": {"awaiting": self.awaiting_approval, "command": self.approve_command},
            "statistics": self.statistics.to_json() if self.statistics else None,
            "launch": self.launch.to_json() if self.launch else None,
            "digest": self.digest,
        }


def _json_safe(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _expiry(s: dict[str, Any]) -> dict[str, Any]:
    """The Estimate's expiry fields from expire_data's signals (planning/data_retention.py)."""
    if not s:
        return {}
    return {
        "expire_rows": int(s.get("expire_rows", 0)),
        "expire_files": int(s.get("expire_files", 0)),
        "expire_bytes": int(s.get("expire_bytes", 0)),
        "expire_cutoff": s.get("cutoff"),
        "expire_metadata_only": bool(s.get("metadata_only")),
        "first_expiry": bool(s.get("first_expiry")),
        "expire_needs_approval": str(s.get("needs_approval") or ""),
    }


def statistics_preview(decided: TableDecision, stats: Any, partition_stats: bool) -> StatisticsPreview | None:
    planned, facts = decided.statistics, stats.statistics
    if planned is None:
        return None
    return StatisticsPreview(
        planned.columns,
        planned.how,
        facts.snapshot_id,
        facts.current,
        planned.rows,
        facts.rows_at,
        partition_stats and facts.partitioned,
    )


def build_plan(
    ref: TableRef,
    decided: TableDecision,
    stats: Any,
    mode: str,
    mode_source: str,
    max_rewrite_bytes: int,
    partition_stats: bool = True,
    policy: Policy | None = None,
) -> TablePlan:
    """A TablePlan from the sensor's decision (planning/table.py) on ``stats``; ``partition_stats``:
    the policy's ``statistics.partition_stats``; ``policy``: the table's, for how it would be launched."""
    rewrite = decided.rewrite
    rewrites = "rewrite_data_files" in decided.acting
    signals = {d.op: d.signals for d in decided.decisions}
    return TablePlan(
        table=str(ref),
        asset_key=tuple(asset_key_path(ref)),
        mode=mode,
        mode_source=mode_source,
        snapshot_id=stats.current_snapshot_id,
        planned_at=datetime.now(UTC),
        ops=tuple(OpPlan(d.op, d.act, d.reason, _json_safe(d.signals)) for d in decided.decisions),
        orphans_evaluated=any(d.op == "remove_orphan_files" for d in decided.decisions),
        partitions=rewrite.partitions if rewrites else (),
        partitions_excluded=dict(rewrite.excluded) if rewrites else {},
        position_partitions=rewrite.position_partitions if rewrites else (),
        position_data_bytes=rewrite.position_data_bytes if rewrites else 0,
        position_reason=rewrite.position_reason,
        rewrite_options=dict(rewrite.options) if rewrites else {},
        estimate=Estimate(
            rewrite_bytes=estimated_rewrite_bytes(stats, rewrite.partitions) if rewrites else 0,
            rewrite_files=int(signals.get("rewrite_data_files", {}).get("candidate_files", 0))
            if rewrites
            else 0,
            rewrite_groups=rewrite.groups if rewrites else 0,
            max_rewrite_bytes=max_rewrite_bytes,
            expirable_snapshots=int(signals.get("expire_snapshots", {}).get("expirable_snapshots", 0)),
            position_delete_bytes=rewrite.position_delete_bytes if rewrites else 0,
            **_expiry(signals.get("expire_data", {}) if "expire_data" in decided.acting else {}),
        ),
        guards=GUARDS[decided.verdict.action],
        guards_reason=decided.verdict.reason,
        guards_details=_json_safe(dict(decided.verdict.details)),
        outcome=str(decided.outcome),
        enforce=ENFORCE[decided.verdict.action],
        approve_command=approve_command(ref),
        statistics=statistics_preview(decided, stats, partition_stats),
        launch=None if policy is None else _launch(policy, decided, stats),
    )


def _launch(policy: Policy, decided: TableDecision, stats: Any) -> LaunchMode:
    """As the sensor decides it (planning/packing.py): a rewrite of some partitions of a partitioned
    table is a run of its own (the sensor knows it from the run request's partitions; the plan, without
    the Dagster definitions, from the partitions the rewrite takes)."""
    work = predicted_work(stats, decided.verdict)
    taken = [p for p in decided.rewrite.partitions if p and p != UNPARTITIONED]
    partitioned = "rewrite_data_files" in decided.acting and bool(taken)
    return launch_mode(policy, work, partitioned)


def plan_table(
    settings: Settings, ref: TableRef, orphans: bool = False, cache: ManifestCache | None = None
) -> TablePlan:
    """The table's plan now (see the module docstring); ``orphans``: list storage for orphan files
    too. Raises TableMissingError / CatalogUnavailableError (IcelakeError) naming the table."""
    catalog = open_catalog(settings, ref.catalog)
    table = load_table(catalog, ref)
    effective = resolve_policy(settings, ref, table.properties)
    policy = effective.policy
    stats = compute_table_stats(
        table, policy, cache if cache is not None else ManifestCache(path=default_cache_path())
    )
    removable, pending = None, None
    if orphans:
        from icelake_assets.audit.orphan_candidates import OrphanCandidates
        from icelake_assets.catalog.known_tables import known_tables
        from icelake_assets.health.orphan_phases import phases_of, removable_orphans
        from icelake_assets.health.orphans import scan_table_orphans

        listing = known_tables(settings)
        scan = scan_table_orphans(catalog, ref, table, policy.orphans.older_than_hours, listing)
        window = policy.orphans.recovery_window_hours
        store = OrphanCandidates.from_settings(settings) if window > 0 else None
        phases = phases_of(scan, store, str(ref), window, time.time())
        removable = removable_orphans(scan, phases)
        pending = phases.summary() if phases is not None else None
    decided = decide_table(stats, policy, effective.mode, removable, orphan_pending=pending)
    return build_plan(
        ref,
        decided,
        stats,
        effective.mode,
        effective.source_of("mode"),
        policy.guards.max_rewrite_bytes,
        policy.statistics.partition_stats,
        policy,
    )
