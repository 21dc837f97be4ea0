"""``layout_from_queries``: the layout chosen from a table's scan reports, as an asset check (issue 52).

Only when the lake collects scan reports (``scan_reports.dir``). It fails (WARN) when the choice
recommends a change: the best candidate's predicted gain passes ``layout.min_predicted_gain``, its
rewrite pays for itself in the reports' window and fits the cost guard (layout/choice.py). The
prediction and the last change's measured effect are its metadata, with the command that applies
it. The ``icelake_scan_reports`` sensor reports it after an ingest (sensors/scan_reports.py); a run
of the check (the UI's "Execute") chooses again."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dagster import (
    AssetCheckEvaluation,
    AssetCheckExecutionContext,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSeverity,
    AssetCheckSpec,
    MetadataValue,
)

from icelake_assets.audit.layout_records import layout_change_record, layout_proposed_record
from icelake_assets.audit.records import Trigger
from icelake_assets.audit.scan_report_reads import load_reports
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.layout.table_choice import LayoutReport, layout_report
from icelake_assets.layout.table_layout import LayoutChange, LayoutChangeRefused, change_layout
from icelake_assets.orchestration.checks.group_ops import group_checks
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.policies import resolve_policy
from icelake_assets.settings import Settings
from icelake_assets.types import TableRef

LAYOUT_CHECK = "layout_from_queries"
LAYOUT_CHECKS_OP = "icelake_layout_checks"
SENSOR_BY = "icelake_scan_reports"  # who applied a change the sensor made (layout.auto)
_DESCRIPTION = (
    "The sort key chosen by replaying the table's recorded scans on a sample: fails when a change is "
    "predicted to skip enough more files to pay for its rewrite (docs/layout.md)"
)


def apply_command(ref: TableRef) -> str:
    return f"icelake layout apply {ref}"


def layout_check_result(ref: TableRef, report: LayoutReport) -> AssetCheckResult:
    """The check's result from one choice (the sensor turns it into a run-less evaluation)."""
    choice = report.choice
    metadata: dict[str, MetadataValue] = {
        "recommend": MetadataValue.bool(choice.recommend),
        "reason": MetadataValue.text(choice.reason),
        "sort_keys_now": MetadataValue.text(", ".join(choice.old_keys) or "none"),
        "sort_keys_chosen": MetadataValue.text(", ".join(choice.new_keys) or "none"),
        "strategy": MetadataValue.text(choice.strategy or "none"),
        "files_read_per_query_now": MetadataValue.float(round(choice.files_read_before, 2)),
        "files_read_per_query_chosen": MetadataValue.float(round(choice.files_read_after, 2)),
        "predicted_gain": MetadataValue.float(round(choice.predicted_gain, 4)),
        "scan_reports": MetadataValue.int(choice.reports_used),
    }
    if report.effect is not None:
        metadata["last_change"] = MetadataValue.text(report.effect.verdict)
    if choice.recommend:
        metadata["apply"] = MetadataValue.md(f"`{apply_command(ref)}`")
    return AssetCheckResult(
        asset_key=table_asset_key(ref),
        check_name=LAYOUT_CHECK,
        passed=not choice.recommend,
        severity=AssetCheckSeverity.WARN,
        description=choice.reason,
        metadata=metadata,
    )


@dataclass(frozen=True)
class AppliedLayout:
    report: LayoutReport
    change: LayoutChange


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
    report: LayoutReport | None = None,
    *,
    keys: Sequence[str] = (),
    force: bool = False,
    by: str = "",
    trigger: Trigger = "manual",
    now: datetime | None = None,
) -> AppliedLayout:
    """Apply ``report``'s choice (None: choose again now) or ``keys``: the sort order, then its audit
    record. Raises :class:`LayoutChangeRefused` naming why nothing changed."""
    now = now or datetime.now(UTC)
    if report is None:
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
    change = change_layout(
        table,
        ref,
        keys,
        min_days_between_changes=policy.layout.min_days_between_changes,
        predicted=prediction(report)
        if tuple(keys) == choice.new_keys
        else {"keys_given_by": by or "operator"},
        force=force,
        now=now,
    )
    if settings.audit.enabled:  # after the commit: the table's own properties name the change if this fails
        AuditLog.from_settings(settings).append(layout_change_record(change, trigger, by))
    return AppliedLayout(report, change)


@dataclass(frozen=True)
class LayoutOutcome:
    """What the sensor did for one table: the check's evaluation, a line for its log, and the change
    it applied (``layout.auto`` in mode enforce) if any."""

    evaluation: AssetCheckEvaluation
    summary: str
    applied: LayoutChange | None = None


def choose_for_table(settings: Settings, ref: TableRef, now: datetime | None = None) -> LayoutOutcome:
    """The sensor's choice for one table that gained reports: the check's evaluation; a recommended
    sort applied in mode enforce with ``layout.auto``, else audited as proposed."""
    now = now or datetime.now(UTC)
    report = layout_report(settings, ref, load_reports(settings, ref, now), now)
    choice, applied = report.choice, None
    summary = ("recommend: " if choice.recommend else "keep the layout: ") + choice.reason
    if choice.recommend:
        policy = report.policy  # read with the table by the choice: not loaded again
        if policy.mode == "enforce" and policy.layout.auto and choice.strategy == "sort":
            try:
                applied = apply_layout(settings, ref, report, by=SENSOR_BY, trigger="sensor", now=now).change
                summary = f"applied: sort order {', '.join(applied.new_keys)} ({choice.reason})"
            except LayoutChangeRefused as err:  # a writer changed the order meanwhile, or too soon
                summary = f"not applied: {err}"
        elif settings.audit.enabled:
            AuditLog.from_settings(settings).append(
                layout_proposed_record(str(ref), choice.reason, prediction(report))
            )
            summary += f" (waits for: {apply_command(ref)})"
    result = layout_check_result(ref, report)
    metadata = dict(result.metadata or {})
    if applied is not None:
        metadata["applied"] = MetadataValue.text(summary)
    evaluation = AssetCheckEvaluation(
        asset_key=table_asset_key(ref),
        check_name=LAYOUT_CHECK,
        passed=result.passed if applied is None else True,
        severity=AssetCheckSeverity.WARN,
        description=summary,
        metadata=metadata,
    )
    return LayoutOutcome(evaluation, summary, applied)


def build_layout_checks(tables: Sequence[DiscoveredTable]) -> AssetChecksDefinition:
    """One op evaluating ``layout_from_queries`` for the tables a run selects."""

    def evaluate(
        context: AssetCheckExecutionContext, icelake: IcelakeResource, t: DiscoveredTable, selected: set[str]
    ) -> Iterable[AssetCheckResult]:
        settings = icelake.settings
        report = layout_report(settings, t.ref, load_reports(settings, t.ref))
        return [layout_check_result(t.ref, report)]

    return group_checks(
        LAYOUT_CHECKS_OP,
        tables,
        lambda t: [AssetCheckSpec(LAYOUT_CHECK, asset=table_asset_key(t.ref), description=_DESCRIPTION)],
        evaluate,
        "The layout chosen from each table's scan reports",
    )
