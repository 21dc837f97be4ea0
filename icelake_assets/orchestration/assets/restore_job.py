"""The restore job: one run sets a table back to a restore point (``icelake restore TABLE --to TAG``,
operate/restore.py). The run checks again what ``icelake restore`` checked (writers may have committed
since), restores with the rollback's guard (maintenance/verify/restore.py), and audits a ``rollback``
record with the tag, the snapshot, the commits it dropped and the retention expiries it undid, refused
or done. The restore acts as an op does (maintenance/spark/fencing.py ``acting``): a run judged dead or
terminated before the commit stops without committing.

No ``from __future__ import annotations``: Dagster reads the op's config class from its annotation."""

import time

from dagster import Config, Failure, MetadataValue, OpExecutionContext, job, op

from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.writer import write_audit
from icelake_assets.catalog.connection import TableRef
from icelake_assets.maintenance.spark import fencing
from icelake_assets.maintenance.verify.restore import RestoreRefused, restore_to_tag
from icelake_assets.orchestration.assets.ops import stop_if_fenced
from icelake_assets.orchestration.resources import IcelakeResource

RESTORE_JOB = "icelake_restore"
RESTORE_OP = "restore_to_tag"


class RestoreConfig(Config):
    table: str  # catalog.namespace.table
    tag: str
    force: bool = False  # drop writers' commits after the tag, undo retention expiries after it
    requested_by: str = ""


@op(name=RESTORE_OP, description="Sets a table's main branch back to a restore-point tag, audited")
def restore_to_tag_op(context: OpExecutionContext, config: RestoreConfig, icelake: IcelakeResource) -> None:
    ref = TableRef.parse(config.table)
    table = icelake.load_table(ref)
    started = time.perf_counter()
    asked = {"tag": config.tag, "force": config.force, "requested_by": config.requested_by}
    try:
        with fencing.acting():  # its commit is checked against the run's fence, as an op's
            check = restore_to_tag(table, config.tag, config.force)
    except fencing.RunFencedError as err:  # nothing committed; as an op, no audit record
        stop_if_fenced(context, err)
        raise
    except RestoreRefused as err:
        error = _audit(icelake, ref, context.run_id, "refused", str(err), {"restore": asked}, started)
        raise Failure(description=str(err) + (f" (audit not written: {error})" if error else "")) from err
    table.refresh()
    after = table.current_snapshot()
    done = check.current != check.snapshot_id
    reason = (
        f"restored to {config.tag} (snapshot {check.snapshot_id}), {len(check.dropped)} commits dropped "
        f"({len(check.writers)} by writers)"
        + (f"; forced, undoing {check.undone()}" if check.expiries else "")
        if done
        else f"already at {config.tag} (snapshot {check.snapshot_id}): nothing to restore"
    )
    error = _audit(
        icelake,
        ref,
        context.run_id,
        "rolled_back",
        reason,
        {"restore": {**asked, **check.to_dict()}},
        started,
        before=check.current,
        after=after.snapshot_id if after else None,
        to=check.snapshot_id,
    )
    context.log.info(reason)
    if error:  # the table is restored: said, not raised
        context.log.warning(f"{ref}: the restore was not written to the audit: {error}")
    context.add_output_metadata(
        {
            "restore/tag": config.tag,
            "restore/snapshot": MetadataValue.int(check.snapshot_id),
            "restore/dropped": MetadataValue.json([c.to_dict() for c in check.dropped]),
            "restore/rows_brought_back": MetadataValue.int(check.rows_brought_back),
        }
    )


def _audit(
    icelake: IcelakeResource,
    ref: TableRef,
    run_id: str,
    decision: str,
    reason: str,
    results: dict[str, object],
    started: float,
    before: int | None = None,
    after: int | None = None,
    to: int | None = None,
) -> str | None:
    """Writes the record; the audit's error, if any."""
    record = AuditRecord(
        table_name=str(ref),
        kind="rollback",
        decision=decision,
        trigger="manual",
        reason=reason,
        run_id=run_id,
        op=RESTORE_OP,
        snapshot_before=before,
        snapshot_after=after,
        rolled_back_to=to,
        results=results,
        duration_s=time.perf_counter() - started,
    )
    return write_audit(icelake.settings, [record]).error


@job(name=RESTORE_JOB, description="Restores one table to a restore point (`icelake restore`)")
def restore_job() -> None:
    restore_to_tag_op()
