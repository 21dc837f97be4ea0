"""What a maintenance run shows people: the materialization's summary (markdown, first in the
metadata), its numbers under short keys the UI plots, its change in words, and the last run that
acted when this one did nothing. Rendering only: the run's work and validation are in assets.py."""

import time
from dataclasses import dataclass
from typing import Any

from dagster import AssetKey, DagsterInstance, MetadataValue, TimestampMetadataValue

from icelake_assets.health.scan_cost import ScanBenefit
from icelake_assets.maintenance.results.base import count_of
from icelake_assets.maintenance.results.models import (
    ExpireResult,
    ManifestResult,
    OpResult,
    OrphanResult,
    RewriteResult,
    StatisticsResult,
)
from icelake_assets.orchestration.assets.run_state import RunState
from icelake_assets.orchestration.display import human_bytes, human_duration, md_cell, readable

# Short metadata keys (the UI's key column is narrow, and a long key pushes the values aside).
_OP_ALIAS = {
    "expire_snapshots": "expire",
    "remove_orphan_files": "orphans",
    "rewrite_data_files": "rewrite",
    "rewrite_manifests": "manifests",
    "compute_statistics": "statistics",
}
# The table's measures before and after a run: stats summary key -> metadata group.
_MEASURES = {
    "data_files": "files",
    "small_files": "small_files",
    "snapshots": "snapshots",
    "manifests": "manifests",
    "data_bytes": "bytes",
    "delete_files": "deletes",
}
# How many materializations back to look for the last run that acted (each no-op run carries it on).
_HISTORY = 100
NOTHING_TO_DO = "nothing to do"


@dataclass(frozen=True)
class LastEffective:
    """The newest earlier run of a table where an op acted: what a run that did nothing points to."""

    run_id: str
    at: float  # Unix timestamp of its materialization
    change: str  # what it did and what moved (its `change`), in human units


def last_effective_run(instance: DagsterInstance, key: AssetKey) -> LastEffective | None:
    """From the asset's materializations, newest first: the first run that acted, or what the first
    run that did nothing recorded as such (runs that do nothing carry it on)."""
    for record in instance.fetch_materializations(key, limit=_HISTORY).records:
        mat = record.asset_materialization
        md = mat.metadata if mat is not None else {}
        acted = md.get("ops/acted") or md.get("ops_acted")  # ops_acted: runs recorded before the rename
        if acted is not None and acted.value != "none":
            change = md.get("change")
            return LastEffective(record.run_id, record.timestamp, str(change.value) if change else "")
        if "last_effective_run" in md:
            at, change = md.get("last_effective_at"), md.get("last_effective_change")
            return LastEffective(
                str(md["last_effective_run"].value),
                at.value if isinstance(at, TimestampMetadataValue) else 0.0,
                str(change.value) if change else "",
            )
    return None


def op_metrics(o: OpResult) -> dict[str, int | None]:
    """The numbers of an op's result worth plotting, by metadata key (None: the op did not measure it)."""
    if isinstance(o, ExpireResult):
        return {
            "snapshots/expired": o.snapshots_expired,
            "snapshots/forecast": o.snapshots_forecast,
            "snapshots/mismatches": o.forecast_mismatches,
            "snapshots/lists_deleted": o.deleted_manifest_lists_count,
        }
    if isinstance(o, OrphanResult):
        return {
            "orphans/found": o.scan.orphans_found,
            "orphans/removed": o.orphans_removed if o.acted else None,
            "bytes/orphans": o.bytes_found if o.acted else None,
            "orphans/hidden": o.scan.hidden_files,
            "orphans/skipped": o.scan.skipped_other_tables,
        }
    if isinstance(o, RewriteResult):
        return {
            "files/rewritten": o.rewritten_data_files_count,
            "files/added": o.added_data_files_count,
            "files/failed": o.failed_data_files_count,
            "bytes/rewritten": o.rewritten_bytes_count,
            "deletes/compacted": (
                count_of(o.position_deletes.procedure, "rewritten_delete_files_count")
                if o.position_deletes is not None
                else None
            ),
        }
    if isinstance(o, ManifestResult):
        return {
            "manifests/rewritten": o.rewritten_manifests_count,
            "manifests/added": o.added_manifests_count,
        }
    if isinstance(o, StatisticsResult):
        return {
            "statistics/columns": len(o.ndv) if o.acted else None,
            "statistics/bytes": o.statistics_bytes,
        }
    return {}


def _position_numbers(o: RewriteResult) -> str:
    pd = o.position_deletes
    assert pd is not None
    if pd.error:
        return f"position deletes not compacted ({pd.error})"
    return (
        f"{pd.delete_files_before} → {pd.delete_files_after} position delete files in {len(pd.partitions)} "
        f"partitions ({human_bytes(pd.estimated_bytes)} instead of {human_bytes(pd.data_bytes_not_rewritten)} "
        "of data rewritten)"
    )


def _op_numbers(o: OpResult) -> str:
    """What an op that acted did, numbers first, each naming what it counts (an op counts what it
    found at its turn: the manifest rewrite sees the manifests the data rewrite left)."""
    if isinstance(o, ExpireResult):
        return f"{o.snapshots_expired or 0} of {o.snapshots_before or 0} snapshots expired"
    if isinstance(o, OrphanResult):
        return f"{o.orphans_removed} orphan files removed ({human_bytes(o.bytes_found)})"
    if isinstance(o, RewriteResult) and o.position_deletes is not None and not o.partitions_rewritten:
        return _position_numbers(o)
    if isinstance(o, RewriteResult):
        failed = o.failed_names()
        attempts = o.merged_attempts or 0
        position = f"; {_position_numbers(o)}" if o.position_deletes is not None else ""
        return (
            f"{o.rewritten_data_files_count or 0} → {o.added_data_files_count or 0} data files "
            f"({human_bytes(o.rewritten_bytes_count or 0)} rewritten)"
            + (f", {len(failed)} partitions not compacted" if failed else "")
            + (f" in {attempts} attempts" if attempts > 1 else "")
            + position
        )
    if isinstance(o, ManifestResult):
        return f"{o.rewritten_manifests_count or 0} → {o.added_manifests_count or 0} manifests rewritten"
    if isinstance(o, StatisticsResult):
        if o.error:
            return f"no statistics ({o.error})"
        parts = " and partition statistics" if o.partition_statistics_file else ""
        return f"NDV sketches of {len(o.ndv)} columns{parts} for snapshot {o.statistics_snapshot_id}"
    return o.reason


# The table's measures a run compares (start → end of the whole run), each naming what it counts.
_MOVES = (
    ("data_files", "data files"),
    ("snapshots", "snapshots"),
    ("manifests", "manifests in the current snapshot"),
)


def _moves(before: dict[str, int], after: dict[str, int], changed_only: bool) -> list[str]:
    moved = [
        f"{before[k]:,} → {after[k]:,} {label}"
        for k, label in _MOVES
        if not changed_only or before[k] != after[k]
    ]
    if not changed_only or before["data_bytes"] != after["data_bytes"]:
        moved.append(f"{human_bytes(before['data_bytes'])} → {human_bytes(after['data_bytes'])} of data")
    return moved


def _change(ops: list[OpResult], before: dict[str, int], after: dict[str, int]) -> str:
    """What the ops that acted did, and which of the table's measures moved over the whole run."""
    moved = _moves(before, after, changed_only=True)
    did = "; ".join(f"{o.op}: {_op_numbers(o)}" for o in ops if o.acted)
    return did + (f"; table, start → end of run: {', '.join(moved)}" if moved else "")


def _summary(
    ops: list[OpResult],
    effects: dict[str, Any],
    before: dict[str, int],
    after: dict[str, int],
    validation,
    outcome: str | None,
    last: LastEffective | None,
) -> str:
    """Markdown, first in the metadata: what this run did, in short lines with the numbers first
    (the UI's metadata column is narrow; a long line is cut). Under 1000 characters, the UI shows
    it inline (longer markdown hides behind a button), so cells are cut to fit."""
    total = human_duration(sum(o.duration_s for o in ops))
    acted = [o.op for o in ops if o.acted]
    text = ""
    for limit in (60, 40, 24):
        if not acted:
            lines = [f"**Nothing to do** · {total}", ""]
            lines += [f"- {o.op}: {md_cell(o.reason, limit)}" for o in ops]
            lines += [
                "",
                f"Table now: {after['data_files']:,} data files · {after['snapshots']:,} snapshots · "
                f"{after['manifests']:,} manifests · {human_bytes(after['data_bytes'])} · "
                f"{validation.rows_after:,} rows",
            ]
            if last is not None:
                when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(last.at))
                lines += [
                    "",
                    f"Last run that acted: [{last.run_id[:8]}](/runs/{last.run_id}), {when}: "
                    f"{md_cell(last.change, 160)}",
                ]
            else:
                lines += ["", "No earlier run of this table acted."]
        else:
            lines = [
                f"**{len(acted)} of {len(ops)} ops acted** · {outcome or 'effect unknown'} · {total}",
                "",
                "| op | what it did | effect | time |",
                "|---|---|---|---|",
            ]
            for o in ops:
                e = effects.get(o.op)
                what = _op_numbers(o) if o.acted else f"skipped: {o.reason}"
                lines.append(
                    f"| {o.op} | {md_cell(what, limit)} | {e.effect if e else ''} | {human_duration(o.duration_s)} |"
                )
            lines += ["", "Table, start → end of the run:", ""]
            lines += [f"- {m}" for m in _moves(before, after, changed_only=False)]
            lines.append(f"- {validation.rows_before:,} → {validation.rows_after:,} rows")
        text = "\n".join(lines)
        if len(text) < 1000:
            break
    return text


def run_metadata(
    state: RunState,
    after_stats,
    validation,
    effects,
    outcome: str | None,
    health,
    policy,
    last: LastEffective | None,
) -> dict[str, Any]:
    """The materialization's metadata: a summary for people first, then numbers (plotted by the UI)
    under short keys grouped by measure (``files/before``, ``bytes/rewritten``, ``time/rewrite``).

    ``*/before`` numbers appear only when an op acted: a run that did nothing shows no pair that
    reads like a change (a writer may have committed meanwhile), and points to ``last_effective_run``
    instead. ``*/after`` (the table as the run left it) is on every run, so its plots have no gaps."""
    ops = state.merged_ops()  # a retried op's attempts as one
    before, after = state.before, after_stats.summary()
    acted = [o for o in ops if o.acted]
    by_op = {e.op: e for e in effects}
    md: dict[str, Any] = {
        "summary": MetadataValue.md(_summary(ops, by_op, before, after, validation, outcome, last)),
        "outcome": MetadataValue.text(outcome or NOTHING_TO_DO),
        "ops/acted": MetadataValue.text(", ".join(o.op for o in acted) or "none"),
        "ops/ineffective": MetadataValue.int(sum(1 for e in effects if e.effect == "ineffective")),
    }
    if acted:
        md["change"] = MetadataValue.text(_change(ops, before, after))
    elif last is not None:
        md["last_effective_run"] = MetadataValue.dagster_run(last.run_id)
        md["last_effective_at"] = MetadataValue.timestamp(last.at)
        md["last_effective_change"] = MetadataValue.text(last.change)
    for key, group in _MEASURES.items():
        if acted:
            md[f"{group}/before"] = MetadataValue.int(int(before[key]))
        md[f"{group}/after"] = MetadataValue.int(int(after[key]))
    if acted:
        md["rows/before"] = MetadataValue.int(validation.rows_before)
    md["rows/after"] = MetadataValue.int(validation.rows_after)
    md["rows/by_writers"] = MetadataValue.int(validation.writer_rows_since)
    md["rows/spark_counted"] = MetadataValue.int(validation.spark_counted_snapshots)
    # estimated: no rewrite ran and the table has delete files; the rows are data rows (deletes not applied).
    md["validation"] = MetadataValue.text(
        f"rows match: {validation.rows_before:,} before, {validation.rows_after:,} after "
        f"({validation.writer_rows_since:,} by writers meanwhile); "
        + ("data rows, delete files not applied" if validation.estimated else "live rows")
    )
    for o in ops:
        alias = _OP_ALIAS.get(o.op, o.op)
        did = "acted" if o.acted else "skipped"
        md[f"why/{alias}"] = MetadataValue.text(f"{did}: {readable(o.reason)}")
        if (e := by_op.get(o.op)) is not None:
            md[f"effect/{alias}"] = MetadataValue.text(f"{e.effect}: {e.reason}")
        md[f"time/{alias}"] = MetadataValue.float(round(o.duration_s, 3))
        for key, value in op_metrics(o).items():
            if value is not None:
                md[key] = MetadataValue.int(value)
        if isinstance(o, RewriteResult) and o.acted:
            # Dagster keys in partitioned runs, Iceberg partition labels in whole-table runs.
            for kind, names in (("rewritten", o.rewritten_names()), ("failed", o.failed_names())):
                md[f"partitions/{kind}"] = MetadataValue.int(len(names))
                md[f"partitions/{kind}_keys"] = MetadataValue.json(list(names))
        if isinstance(o, StatisticsResult) and o.acted and o.statistics_file:
            md["statistics/file"] = MetadataValue.path(o.statistics_file)
            md["statistics/ndv"] = MetadataValue.json(dict(o.ndv))
            if o.partition_statistics_file:
                md["statistics/partition_file"] = MetadataValue.path(o.partition_statistics_file)
    md["time/total"] = MetadataValue.float(round(sum(o.duration_s for o in ops), 3))
    md["health/score"] = MetadataValue.int(health.score.score)
    md["health/status"] = MetadataValue.text(health.status.value)
    # What the run added to the table, with its bound: partial progress commits at most
    # max-commits times, plus one manifest rewrite.
    md["snapshots/added"] = MetadataValue.int(validation.rewrite_snapshots)
    md["snapshots/max_added"] = MetadataValue.int(policy.small_files.partial_progress_max_commits + 1)
    if acted:
        md["snapshot_id/before"] = MetadataValue.text(str(validation.before_snapshot_id))
    md["snapshot_id/after"] = MetadataValue.text(str(validation.after_snapshot_id))
    return md


def benefit_metadata(benefit: ScanBenefit) -> dict[str, Any]:
    """Proof of benefit (health/scan_cost.py): what a full scan cost before and after the run, plotted
    under ``scan/`` (what a reader opens) and ``plan/`` (what planning reads: manifests, metadata bytes, seconds), and in words."""
    md: dict[str, Any] = {"benefit": MetadataValue.text(benefit.describe())}
    for side, cost in (("before", benefit.before), ("after", benefit.after)):
        md[f"scan/files_{side}"] = MetadataValue.int(cost.files_opened)
        md[f"scan/bytes_{side}"] = MetadataValue.int(cost.data_bytes)
        md[f"plan/manifests_{side}"] = MetadataValue.int(cost.manifests)
        md[f"plan/bytes_{side}"] = MetadataValue.int(cost.metadata_bytes)
        md[f"plan/seconds_{side}"] = MetadataValue.float(cost.plan_seconds)
    if benefit.probe_seconds is not None:
        md["scan/query_seconds_before"] = MetadataValue.float(benefit.probe_seconds[0])
        md["scan/query_seconds_after"] = MetadataValue.float(benefit.probe_seconds[1])
    return md
