"""The product's own loop over a lake on S3, in a process of its own (test_s3_rest.py runs it): the code
location's definitions, one real maintenance-sensor tick, the runs it requests executed on a real Dagster
instance (Spark over S3A from the settings alone), then a second tick. Prints one JSON line.

A live Spark session cannot take the S3A jars, and other test files share the test process's session:
hence the process of its own (as s3_spark_job.py).

    python -m icelake_assets_tests.catalog.s3_dagster_job SETTINGS DAGSTER_HOME [TABLE_TO_ROLL_BACK]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from dagster import DagsterInstance

from icelake_assets.audit.store import AuditLog
from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.maintenance.verify.cross_engine import duckdb_read
from icelake_assets.maintenance.verify.validation import rollback_if_safe
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.settings import load_settings
from icelake_assets_tests.conftest import sensor_tick


def _value(metadata: dict, key: str):
    value = metadata.get(key)
    return getattr(value, "value", value)


def _current_snapshots(settings) -> dict[str, int | None]:
    out = {}
    for name in settings.catalogs:
        catalog = open_catalog(settings, name)
        for ns in catalog.list_namespaces():
            for identifier in catalog.list_tables(ns):
                snap = catalog.load_table(identifier).current_snapshot()
                out[".".join((name, *identifier))] = snap.snapshot_id if snap else None
    return out


def _roll_back(settings, name: str, before: int | None) -> dict:
    """Validation's automatic rollback (maintenance/validation.rollback_if_safe) of the run's commits on
    one table, committed through the REST catalog; the rows must be what they were before the run."""
    catalog_name, namespace, table_name = name.split(".")
    table = load_table(open_catalog(settings, catalog_name), TableRef(catalog_name, (namespace,), table_name))
    rows = table.scan().to_arrow().num_rows
    outcome = rollback_if_safe(table, before)
    table.refresh()
    current = table.current_snapshot()
    return {
        "rolled_back": outcome.rolled_back,
        "reason": outcome.reason,
        "at_before": current is not None and current.snapshot_id == before,
        "rows_equal": table.scan().to_arrow().num_rows == rows,
    }


def main(path: str, home: str, roll_back: str = "") -> dict:
    settings = load_settings(path)
    out: dict = {"runs": [], "tables": {}}
    before = _current_snapshots(settings)
    Path(home).mkdir(parents=True, exist_ok=True)
    with DagsterInstance.local_temp(home) as instance:
        defs = build_definitions(settings)
        tick = sensor_tick(defs, settings, instance)
        out["requested"] = sorted(r.tags.get("icelake/table", "") for r in tick.run_requests)
        for request in tick.run_requests:
            job = (
                defs.resolve_job_def(request.job_name)
                if request.job_name
                else defs.resolve_implicit_global_asset_job_def()
            )
            result = job.execute_in_process(
                instance=instance,
                asset_selection=request.asset_selection,
                tags=request.tags,
                raise_on_error=False,
            )
            [materialization] = [e.materialization for e in result.get_asset_materialization_events()] or [
                None
            ]
            md = dict(materialization.metadata) if materialization else {}
            out["runs"].append(
                {
                    "table": request.tags.get("icelake/table"),
                    "success": result.success,
                    "outcome": _value(md, "outcome"),
                    "validation": _value(md, "validation"),
                    "cross_engine": _value(md, "cross_engine"),
                    "checks": {e.check_name: e.passed for e in result.get_asset_check_evaluations()},
                    "failures": [
                        str(e.event_specific_data.error.message)[:2000]
                        for e in result.all_events
                        if e.is_step_failure and e.event_specific_data is not None
                    ],
                }
            )
        after = sensor_tick(defs, settings, instance, cursor=tick.cursor)
        out["requested_after"] = len(after.run_requests)
    if roll_back:
        out["rollback"] = _roll_back(settings, roll_back, before.get(roll_back))
    for catalog_name in settings.catalogs:
        catalog = open_catalog(settings, catalog_name)
        for ns in catalog.list_namespaces():
            for identifier in catalog.list_tables(ns):
                ref = TableRef(catalog_name, tuple(identifier[:-1]), identifier[-1])
                table = load_table(catalog, ref)
                files = sum(1 for _ in table.inspect.files().to_pylist()) if table.current_snapshot() else 0
                out["tables"][str(ref)] = {
                    "location": table.metadata.location,
                    "files": files,
                    "snapshots": len(table.metadata.snapshots),
                    "duckdb_rows": (
                        duckdb_read(table, "id", "sum").rows
                        if table.current_snapshot() and "id" in table.schema().column_names
                        else None
                    ),
                }
    out["audit"] = [
        {"table": r.table_name, "kind": r.kind, "op": r.op, "decision": r.decision}
        for r in AuditLog.from_settings(settings).records()
    ]
    return out


if __name__ == "__main__":
    print(json.dumps(main(*sys.argv[1:4]), default=str))
