"""``icelake restore TABLE --to TAG``: set a table back to a restore point, through Dagster.

1. The table and the tag are read (an unknown table or tag is an error naming it, and the tags the
   table has); commits by writers after the tag's snapshot refuse the restore, naming each (snapshot
   id, operation, time), and so do retention expiries after it (``expire_data``: the restore would
   bring back the rows they removed), naming each (snapshot id, time, cut-off, rows), unless
   ``force`` (maintenance/verify/restore.py, the rollback's guard).
2. One run of the ``icelake_restore`` job (orchestration/assets/restore_job.py) restores it in this
   process, recorded in the Dagster instance of ``$DAGSTER_HOME`` (the UI's runs list shows it): the
   run checks again (a writer may have committed since), commits with pyiceberg under the requirement
   that main has not moved and the run's fence, and writes the audit record (kind ``rollback``: the
   tag, the snapshot, the commits dropped, the expiries undone)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from dagster import DagsterInstance, Definitions

from icelake_assets.catalog.connection import load_table, open_catalog
from icelake_assets.maintenance.verify.restore import RestoreCheck, RestoreRefused, restore_check
from icelake_assets.orchestration.assets.restore_job import RESTORE_JOB, RESTORE_OP, restore_job
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.orchestration.sensors.maintenance import TABLE_TAG, TRIGGER_TAG
from icelake_assets.settings import Settings
from icelake_assets.types import IcelakeError, TableRef

RESTORE_SCHEMA = "icelake.restore/v1"


class RestoreFailed(IcelakeError, RuntimeError):
    """The restore run failed (its error names why: refused meanwhile, the catalog, the audit)."""


@dataclass(frozen=True)
class Restore:
    table: str
    run_id: str
    check: RestoreCheck
    forced: bool

    def to_json(self) -> dict[str, Any]:
        return {"schema": RESTORE_SCHEMA, "table": self.table, "run_id": self.run_id, "forced": self.forced}


def _instance() -> DagsterInstance:
    """The lake's Dagster instance (``$DAGSTER_HOME``); without one, an ephemeral instance (the run
    is audited, but no UI lists it)."""
    return DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else DagsterInstance.ephemeral()


def restore_table(
    settings: Settings,
    ref: TableRef,
    tag: str,
    force: bool = False,
    by: str = "",
    instance: DagsterInstance | None = None,
) -> Restore:
    """Restore ``ref`` to ``tag`` (see the module docstring). Raises UnknownRestorePoint, RestoreRefused
    (writers' commits or retention expiries without ``force``), RestoreFailed (the run failed)."""
    table = load_table(open_catalog(settings, ref.catalog), ref)  # TableMissingError names the table
    check = restore_check(table, tag)
    if (why := check.refusal()) and not force:
        raise RestoreRefused(why)
    defs = Definitions(
        jobs=[restore_job], resources={"icelake": IcelakeResource(config_path=settings.source)}
    )
    config = {"table": str(ref), "tag": tag, "force": force, "requested_by": by}
    own = instance is None
    instance = _instance() if instance is None else instance
    try:
        result = defs.resolve_job_def(RESTORE_JOB).execute_in_process(
            run_config={"ops": {RESTORE_OP: {"config": config}}},
            instance=instance,
            tags={TABLE_TAG: str(ref), TRIGGER_TAG: "manual"},
            raise_on_error=False,
        )
    finally:
        if own:
            instance.dispose()
    if not result.success:
        failures = [e.step_failure_data.error for e in result.all_events if e.is_step_failure]
        why = (
            "; ".join((f.message.strip() if f is not None else "unknown error") for f in failures)
            or "the run failed"
        )
        raise RestoreFailed(f"the restore of {ref} to {tag} failed (run {result.run_id}): {why}")
    return Restore(str(ref), result.run_id, check, force)
