"""Held and proposed tables in the UI: what they wait for and how to approve them without typing a tag.

- The maintenance sensor's observation of a held or proposed table (its asset's *Events*, and the
  latest observation's metadata) carries ``sensor/waits_for`` (the guard or the mode),
  ``sensor/estimate_bytes`` and ``sensor/approve``: the ``icelake approve`` command and a link to the
  launchpad of the table's maintenance job with the table selected and ``icelake/approved=true``
  filled in (planning/approval.py).
- The lake overview lists every table that waits (held, proposed, deferred) with the same columns
  (``waiting`` and the counts ``tables/held``, ``tables/proposed``, ``tables/deferred``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import AssetObservation, MetadataValue

from icelake_assets.audit.loop_state import load_loop_snapshot
from icelake_assets.audit.metrics import MetricsWriter
from icelake_assets.catalog.connection import TableRef
from icelake_assets.health.overview import TableHealth
from icelake_assets.planning.approval import approval_markdown, waiting_markdown
from icelake_assets.planning.table import decide_table
from icelake_assets.settings import Mode, Settings

WAITING = ("held", "proposed", "deferred")


def waits_for(outcome: str) -> str:
    return {"held": "approval: the rewrite is over the cost cap", "proposed": "approval: mode propose"}.get(
        outcome, "writers to be quiet"
    )


def approval_observation(
    observation: AssetObservation, ref: TableRef, outcome: str, estimate: int, job: str | None
) -> AssetObservation:
    """The sensor's observation of a held or proposed table, with how to approve it."""
    metadata = {
        **observation.metadata,
        "sensor/waits_for": MetadataValue.text(waits_for(outcome)),
        "sensor/estimate_bytes": MetadataValue.int(estimate),
        "sensor/approve": MetadataValue.md(approval_markdown(ref, job)),
    }
    return AssetObservation(asset_key=observation.asset_key, metadata=metadata)


def waiting_row(
    ref: TableRef, health: TableHealth, mode: Mode, job: str | None
) -> tuple[TableRef, str, str, int, str | None] | None:
    """The overview's row of a table that waits, from the sensor's own decision (no orphan listing)."""
    decided = decide_table(health.stats, health.policy, mode)
    if decided.outcome not in WAITING:
        return None
    estimate = int(decided.verdict.details.get("estimated_rewrite_bytes", 0))
    return ref, str(decided.outcome), decided.verdict.reason, estimate, job


def waiting_metadata(rows: Sequence[tuple[TableRef, str, str, int, str | None]]) -> dict[str, Any]:
    """The overview's metadata of the tables that wait (counts always present, so the UI plots them)."""
    counts = {o: sum(1 for r in rows if r[1] == o) for o in WAITING}
    metadata: dict[str, Any] = {f"tables/{o}": MetadataValue.int(n) for o, n in counts.items()}
    if rows:
        metadata["waiting"] = MetadataValue.md(waiting_markdown(rows))
    return metadata


def lag_metadata(settings: Settings, tables: Sequence[TableRef], shown: int = 50) -> dict[str, Any]:
    """How long each table has waited for maintenance (since its finding was first seen failing), as
    the maintenance sensor last exported it (audit/loop_state.py, written each tick): the longest wait
    (always present, so the UI plots it) and the longest-waiting tables."""
    folder = MetricsWriter(settings.metrics.textfile_dir, textfile=False).multiprocess_dir
    snapshot = load_loop_snapshot(folder)
    ours = {str(t) for t in tables}
    lags = [lag for lag in (snapshot.lags if snapshot else ()) if lag.table in ours]
    metadata: dict[str, Any] = {
        "tables/max_wait_minutes": MetadataValue.float(
            round(max((x.seconds for x in lags), default=0) / 60, 1)
        )
    }
    if lags:
        rows = [f"| {lag.table} | {lag.outcome} | {lag.seconds / 60:.1f} |" for lag in lags[:shown]]
        more = [f"\n{len(lags) - shown} more waiting"] if len(lags) > shown else []
        metadata["waiting_time"] = MetadataValue.md(
            "\n".join(["| table | sensor's decision | waiting (min) |", "|---|---|---|", *rows, *more])
        )
    return metadata


def job_of(fix_jobs: Mapping[TableRef, str] | None, ref: TableRef) -> str | None:
    return fix_jobs.get(ref) if fix_jobs else None
