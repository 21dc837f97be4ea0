"""What a maintenance run shows people: the materialization's summary (markdown, first in the
metadata), its numbers under short keys the UI plots, its change in words, and the last run that
acted when this one did nothing. Rendering only: the run's work and validation are in assets.py."""

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dagster import AssetKey, DagsterInstance, MetadataValue, TimestampMetadataValue

from icelake_assets.health.overview import TableHealth
from icelake_assets.health.scan_cost import ScanBenefit
from icelake_assets.health.stats import TableStats
from icelake_assets.maintenance.ops.chain import op_named
from icelake_assets.maintenance.results.base import MetadataItem, OpResult
from icelake_assets.maintenance.results.effect import OpEffect
from icelake_assets.maintenance.verify.validation import ValidationResult
from icelake_assets.orchestration.assets.run_state import RunState
from icelake_assets.orchestration.display import human_bytes, human_duration, md_cell, readable
from icelake_assets.settings import Policy

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


def _value(item: MetadataItem) -> MetadataValue:
    if item.kind == "path":
        return MetadataValue.path(str(item.value))
    if item.kind == "json":
        return MetadataValue.json(item.value)  # type: ignore[arg-type]  # lists and dicts of JSON values
    return MetadataValue.int(int(item.value))  # type: ignore[call-overload]  # counts


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
    did = "; ".join(f"{o.op}: {o.did()}" for o in ops if o.acted)
    return did + (f"; table, start → end of run: {', '.join(moved)}" if moved else "")


def _summary(
    ops: list[OpResult],
    effects: Mapping[str, OpEffect],
    before: dict[str, int],
    after: dict[str, int],
    validation: ValidationResult,
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
                what = o.did() if o.acted else f"skipped: {o.reason}"
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
    after_stats: TableStats,
    validation: ValidationResult,
    effects: Sequence[OpEffect],
    outcome: str | None,
    health: TableHealth,
    policy: Policy,
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
        alias = op_named(o.op).alias  # short keys: the UI's key column is narrow
        did = "acted" if o.acted else "skipped"
        md[f"why/{alias}"] = MetadataValue.text(f"{did}: {readable(o.reason)}")
        if (e := by_op.get(o.op)) is not None:
            md[f"effect/{alias}"] = MetadataValue.text(f"{e.effect}: {e.reason}")
        md[f"time/{alias}"] = MetadataValue.float(round(o.duration_s, 3))
        for key, value in o.metrics().items():
            if value is not None:
                md[key] = MetadataValue.int(value)
        for item in o.metadata_items():
            md[item.key] = _value(item)
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
