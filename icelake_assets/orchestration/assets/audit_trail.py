"""A maintenance run's audit trail: one record per op, one for validation, one for a rollback,
written to the lake's audit table in one commit, counted in the Prometheus metrics, and mirrored in
the run's materialization metadata. An audit failure never fails maintenance that succeeded: it is
logged and shown in the metadata instead."""

from collections.abc import Sequence
from typing import Any

from dagster import MetadataValue, OpExecutionContext

from icelake_assets.audit.records import AuditRecord, trigger_from_tags
from icelake_assets.audit.writer import RunFinished, write_audit
from icelake_assets.catalog.connection import TableRef
from icelake_assets.causes import describe
from icelake_assets.maintenance.verify.validation import RollbackOutcome, ValidationResult
from icelake_assets.orchestration.assets.run_state import RunState
from icelake_assets.settings import Policy, Settings


def run_records(
    context: OpExecutionContext,
    ref: TableRef,
    state: RunState,
    policy: Policy,
    validation: str,
    reason: str,
    result: ValidationResult | None,
    rollback: RollbackOutcome | None,
    failed_partitions: Sequence[str] = (),
    effects: dict[str, Any] | None = None,
) -> list[AuditRecord]:
    trigger = trigger_from_tags(context.run.tags)
    partitions = tuple(context.partition_keys) if context.has_partitions else ()
    common: dict[str, Any] = dict(
        table_name=str(ref),
        trigger=trigger,
        run_id=context.run_id,
        partitions=partitions,
        partitions_reason="the run's partitions" if partitions else None,
    )
    records = [
        AuditRecord(
            kind="op",
            op=o.op,
            decision="acted" if o.acted else "skipped",
            reason=o.reason,
            signals=dict(o.signals),
            policy=policy.model_dump(mode="json"),
            results={**o.details(), "attempt": o.attempt},
            snapshot_before=o.snapshot_before,
            snapshot_after=o.snapshot_after,
            duration_s=o.duration_s,
            **common,
        )
        for o in state.ops
    ]
    records.append(
        AuditRecord(
            kind="validation",
            op="validate",
            decision=validation,
            reason=reason,
            results={
                **(dict(result.__dict__) if result else {}),
                **({"effects": effects} if effects else {}),
            },
            failed_partitions=tuple(failed_partitions),
            snapshot_before=state.before_snapshot_id,
            snapshot_after=result.after_snapshot_id if result else None,
            **common,
        )
    )
    if rollback is not None:
        records.append(
            AuditRecord(
                kind="rollback",
                op="validate",
                decision="rolled_back" if rollback.rolled_back else "refused",
                reason=rollback.reason,
                snapshot_before=state.before_snapshot_id,
                rolled_back_to=state.before_snapshot_id if rollback.rolled_back else None,
                **common,
            )
        )
    return records


def write_run_audit(
    context: OpExecutionContext,
    settings: Settings,
    ref: TableRef,
    records: list[AuditRecord],
    outcome: str,
    duration_s: float,
) -> dict[str, Any]:
    """Append the records and count them (audit/writer.py); returns metadata mirroring the
    validation record. An audit failure is logged and shown, never raised: the maintenance itself
    is done and validated."""
    metadata: dict[str, Any] = {}
    written = write_audit(settings, records, run=RunFinished(str(ref), outcome, duration_s))
    if written.error is None:
        metadata["audit/records"] = MetadataValue.int(len(records))
    else:
        context.log.error(f"{ref}: audit trail not written: {written.error}")
        metadata["audit/error"] = MetadataValue.text(written.error[:500])
    for record in records:
        if record.kind in ("validation", "rollback"):
            metadata.update(dagster_metadata(record))
    return metadata


def write_op_failure(
    context: OpExecutionContext,
    settings: Settings,
    ref: TableRef,
    op: str,
    policy: Policy | None,
    error: BaseException,
    duration_s: float,
    snapshot_before: int | None,
) -> None:
    """An op that raised (Spark error, a dead JVM, a lost catalog) still leaves its audit record."""
    record = AuditRecord(
        table_name=str(ref),
        kind="op",
        op=op,
        decision="failed",
        trigger=trigger_from_tags(context.run.tags),
        run_id=context.run_id,
        reason=describe(error),
        policy=policy.model_dump(mode="json") if policy else {},
        snapshot_before=snapshot_before,
        duration_s=duration_s,
        partitions=tuple(context.partition_keys) if context.has_partitions else (),
    )
    write_run_audit(context, settings, ref, [record], "failed", duration_s)


def _metadata_prefix(record: AuditRecord) -> str:
    return f"audit/{record.op or record.kind}/"


def dagster_metadata(record: AuditRecord, prefix: str | None = None) -> dict[str, Any]:
    """The record as Dagster metadata (for materializations, observations, outputs, check results).

    Keys are ``audit/<op or kind>/<field>`` unless ``prefix`` is given; numbers are Int/Float metadata
    so the UI plots them, JSON fields are JSON metadata. Absent (None/empty) fields are left out.
    """
    p = _metadata_prefix(record) if prefix is None else prefix
    md: dict[str, Any] = {
        f"{p}decision": MetadataValue.text(record.decision),
        f"{p}trigger": MetadataValue.text(record.trigger),
        f"{p}kind": MetadataValue.text(record.kind),
        f"{p}table": MetadataValue.text(record.table_name),
        f"{p}recorded_at": MetadataValue.timestamp(record.recorded_at),
        f"{p}record_id": MetadataValue.text(record.record_id),
    }
    if record.reason:
        md[f"{p}reason"] = MetadataValue.text(record.reason)
    if record.run_id:
        md[f"{p}run_id"] = MetadataValue.text(record.run_id)
    for name in ("signals", "policy", "results", "writer_check"):
        value = getattr(record, name)
        if value:
            md[f"{p}{name}"] = MetadataValue.json(value)
    if record.partitions:
        md[f"{p}partitions"] = MetadataValue.json(list(record.partitions))
        md[f"{p}partition_count"] = MetadataValue.int(len(record.partitions))
    if record.partitions_reason:
        md[f"{p}partitions_reason"] = MetadataValue.text(record.partitions_reason)
    if record.failed_partitions:
        md[f"{p}failed_partitions"] = MetadataValue.json(list(record.failed_partitions))
    md[f"{p}failed_partition_count"] = MetadataValue.int(len(record.failed_partitions))
    for name in ("cost_estimate_bytes", "snapshot_before", "snapshot_after", "rolled_back_to"):
        value = getattr(record, name)
        if value is not None:
            md[f"{p}{name}"] = MetadataValue.int(value)
    if record.duration_s is not None:
        md[f"{p}duration_s"] = MetadataValue.float(record.duration_s)
    return md
