"""A maintenance run's audit trail: one record per op, one for validation, one for a rollback,
written to the lake's audit table in one commit, counted in the Prometheus metrics, and mirrored in
the run's materialization metadata. An audit failure never fails maintenance that succeeded: it is
logged and shown in the metadata instead."""

from collections.abc import Sequence
from typing import Any

from dagster import MetadataValue, OpExecutionContext

from icelake_assets.audit.records import AuditRecord, dagster_metadata, trigger_from_tags
from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.validation import RollbackOutcome, ValidationResult
from icelake_assets.metrics import MetricsWriter
from icelake_assets.settings import Policy, Settings


def run_records(context: OpExecutionContext, ref: TableRef, state: dict[str, Any], policy: Policy,
                validation: str, reason: str, result: ValidationResult | None,
                rollback: RollbackOutcome | None, failed_partitions: Sequence[str] = (),
                effects: dict[str, Any] | None = None) -> list[AuditRecord]:
    trigger = trigger_from_tags(context.run.tags)
    partitions = tuple(context.partition_keys) if context.has_partitions else ()
    common = dict(table_name=str(ref), trigger=trigger, run_id=context.run_id, partitions=partitions,
                  partitions_reason="the run's partitions" if partitions else None)
    records = [
        AuditRecord(kind="op", op=o["op"], decision="acted" if o["acted"] else "skipped", reason=o["reason"],
                    signals=o["signals"], policy=policy.model_dump(mode="json"), results=o["result"],
                    snapshot_before=o["snapshot_before"], snapshot_after=o["snapshot_after"],
                    duration_s=o["duration_s"], **common)
        for o in state["ops"]
    ]
    records.append(AuditRecord(
        kind="validation", op="validate", decision=validation, reason=reason,
        results={**(dict(result.__dict__) if result else {}), **({"effects": effects} if effects else {})},
        failed_partitions=tuple(failed_partitions),
        snapshot_before=state["before_snapshot_id"], snapshot_after=result.after_snapshot_id if result else None,
        **common))
    if rollback is not None:
        records.append(AuditRecord(
            kind="rollback", op="validate", decision="rolled_back" if rollback.rolled_back else "refused",
            reason=rollback.reason, snapshot_before=state["before_snapshot_id"],
            rolled_back_to=state["before_snapshot_id"] if rollback.rolled_back else None, **common))
    return records


def write_run_audit(context: OpExecutionContext, settings: Settings, ref: TableRef, records: list[AuditRecord],
                    outcome: str, duration_s: float) -> dict[str, Any]:
    """Append the records and count them; returns metadata mirroring the validation record."""
    metadata: dict[str, Any] = {}
    try:
        if settings.audit.enabled:
            AuditLog.from_settings(settings).append(records)
        with MetricsWriter.from_settings(settings) as metrics:
            for record in records:
                metrics.record(record)
            metrics.run_finished(str(ref), outcome, duration_s)
        metadata["audit/records"] = MetadataValue.int(len(records))
    except Exception as err:  # the maintenance itself is done and validated: say so, don't undo it
        context.log.error(f"{ref}: audit trail not written: {err}")
        metadata["audit/error"] = MetadataValue.text(str(err)[:500])
    for record in records:
        if record.kind in ("validation", "rollback"):
            metadata.update(dagster_metadata(record))
    return metadata


def write_op_failure(context: OpExecutionContext, settings: Settings, ref: TableRef, op: str, policy: Policy | None,
                     error: BaseException, duration_s: float, snapshot_before: int | None) -> None:
    """An op that raised (Spark error, a dead JVM, a lost catalog) still leaves its audit record."""
    record = AuditRecord(
        table_name=str(ref), kind="op", op=op, decision="failed", trigger=trigger_from_tags(context.run.tags),
        run_id=context.run_id, reason=f"{type(error).__name__}: {str(error).splitlines()[0][:500] if str(error) else ''}",
        policy=policy.model_dump(mode="json") if policy else {}, snapshot_before=snapshot_before,
        duration_s=duration_s, partitions=tuple(context.partition_keys) if context.has_partitions else ())
    write_run_audit(context, settings, ref, [record], "failed", duration_s)
