"""Each Iceberg table becomes a graph-backed asset whose materialization is its maintenance:
expire_snapshots → remove_orphan_files → rewrite_data_files → rewrite_manifests → validate.

Op names carry the table (Dagster needs node names unique within a job that spans several tables).
"""


from typing import Any, Callable

from dagster import (
    AssetKey,
    AssetsDefinition,
    Failure,
    In,
    MetadataValue,
    OpExecutionContext,
    Out,
    Output,
    graph_asset,
    op,
)

from icelake_assets.catalog.connection import CatalogUnavailableError, TableMissingError, TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.maintenance import runner
from icelake_assets.maintenance.validation import ValidationFailed, validate_row_counts
from icelake_assets.orchestration.resources import IcebergSparkResource, IcelakeResource

# Numbers from each op's procedure result worth plotting, by op.
_RESULT_METRICS = {
    "expire_snapshots": ("snapshots_before", "snapshots_after", "deleted_data_files_count",
                         "deleted_manifest_files_count", "deleted_manifest_lists_count"),
    "remove_orphan_files": ("orphans_found", "orphans_removed", "bytes_found"),
    "rewrite_data_files": ("rewritten_data_files_count", "added_data_files_count", "rewritten_bytes_count",
                           "failed_data_files_count", "data_files_before", "data_files_after",
                           "small_files_before", "small_files_after"),
    "rewrite_manifests": ("rewritten_manifests_count", "added_manifests_count", "manifests_before",
                          "manifests_after"),
}


def table_asset_key(ref: TableRef) -> AssetKey:
    return AssetKey(ref.asset_key_path)


def _load(icelake: IcelakeResource, ref: TableRef):
    try:
        return icelake.load_table(ref)
    except (TableMissingError, CatalogUnavailableError) as err:
        raise Failure(description=str(err), allow_retries=isinstance(err, CatalogUnavailableError)) from err


def _op_step(ref: TableRef, name: str, work: Callable[..., runner.OpOutcome], first: bool):
    """A Dagster op around one runner function; it appends its outcome to the run's state."""

    def body(context: OpExecutionContext, icelake: IcelakeResource, pyspark: IcebergSparkResource,
             state: dict[str, Any] | None) -> dict[str, Any]:
        table = _load(icelake, ref)
        policy = icelake.policy(table)
        if state is None:
            snap = table.current_snapshot()
            state = {"table": str(ref), "before_snapshot_id": snap.snapshot_id if snap else None,
                     "before": _stats_summary(icelake.stats(table, policy)), "ops": []}
        outcome = work(lambda: pyspark.spark_session, ref, table, policy, lambda t: icelake.stats(t, policy))
        verb = "acted" if outcome.acted else "skipped"
        context.log.info(f"{ref} {name} {verb}: {outcome.reason} ({outcome.duration_s:.2f}s)")
        return {**state, "ops": [*state["ops"], outcome.to_dict()]}

    description = f"{name} on {ref}; acts only when its own threshold is crossed"
    if first:
        @op(name=f"{ref.safe_name}__{name}", out=Out(dict), description=description, tags={"icelake/op": name})
        def first_op(context: OpExecutionContext, icelake: IcelakeResource, pyspark: IcebergSparkResource):
            return body(context, icelake, pyspark, None)

        return first_op

    @op(name=f"{ref.safe_name}__{name}", ins={"state": In(dict)}, out=Out(dict), description=description,
        tags={"icelake/op": name})
    def next_op(context: OpExecutionContext, state: dict, icelake: IcelakeResource, pyspark: IcebergSparkResource):
        return body(context, icelake, pyspark, state)

    return next_op


def _stats_summary(stats) -> dict[str, int]:
    return {"data_files": stats.data_files, "small_files": stats.small_files, "snapshots": stats.snapshots,
            "manifests": stats.manifests, "records": stats.records, "data_bytes": stats.data_bytes,
            "delete_files": stats.position_delete_files + stats.equality_delete_files}


def _run_metadata(state: dict[str, Any], after: dict[str, int], validation) -> dict[str, Any]:
    md: dict[str, Any] = {}
    for outcome in state["ops"]:
        name = outcome["op"]
        md[f"{name}/acted"] = MetadataValue.bool(outcome["acted"])
        md[f"{name}/reason"] = MetadataValue.text(outcome["reason"])
        md[f"{name}/duration_s"] = MetadataValue.float(float(outcome["duration_s"]))
        for key in _RESULT_METRICS.get(name, ()):
            value = outcome["result"].get(key)
            if isinstance(value, (int, float)):
                md[f"{name}/{key}"] = MetadataValue.int(int(value))
    for key, value in state["before"].items():
        md[f"before/{key}"] = MetadataValue.int(value)
    for key, value in after.items():
        md[f"after/{key}"] = MetadataValue.int(value)
    md["before_snapshot_id"] = MetadataValue.text(str(validation.before_snapshot_id))
    md["after_snapshot_id"] = MetadataValue.text(str(validation.after_snapshot_id))
    md["validation/rows_before"] = MetadataValue.int(validation.rows_before)
    md["validation/rows_after"] = MetadataValue.int(validation.rows_after)
    md["validation/writer_rows_since"] = MetadataValue.int(validation.writer_rows_since)
    md["ops_acted"] = MetadataValue.text(", ".join(o["op"] for o in state["ops"] if o["acted"]) or "none")
    return md


def _validate_op(ref: TableRef):
    @op(name=f"{ref.safe_name}__validate", ins={"state": In(dict)}, out=Out(dict),
        description=f"row-count parity of {ref} between the snapshots before and after maintenance",
        tags={"icelake/op": "validate"})
    def validate(context: OpExecutionContext, state: dict, icelake: IcelakeResource, pyspark: IcebergSparkResource):
        table = _load(icelake, ref)
        acted = any(o["acted"] for o in state["ops"])
        try:
            # Without any commit of ours the table is untouched: summaries suffice, no JVM needed.
            result = validate_row_counts(pyspark.spark_session if acted else None, ref, table,
                                         state["before_snapshot_id"], real_counts=acted)
        except ValidationFailed as err:
            raise Failure(description=str(err)) from err
        if not result.ok:
            raise Failure(
                description=(
                    f"{ref}: row count after maintenance is {result.rows_after}, expected {result.rows_expected} "
                    f"({result.rows_before} before + {result.writer_rows_since} from writers). Recover with "
                    f"CALL {ref.catalog}.system.rollback_to_snapshot('{'.'.join(ref.identifier)}', "
                    f"{result.before_snapshot_id}); current snapshot {result.after_snapshot_id}"
                ),
                metadata={"before_snapshot_id": str(result.before_snapshot_id),
                          "after_snapshot_id": str(result.after_snapshot_id)},
            )
        after = _stats_summary(icelake.stats(table))
        context.log.info(f"{ref} validated: {result.rows_before} rows before, {result.rows_after} after")
        return Output({**state, "after": after, "validation": result.__dict__},
                      metadata=_run_metadata(state, after, result))

    return validate


def build_table_asset(table: DiscoveredTable) -> AssetsDefinition:
    ref = table.ref
    expire = _op_step(ref, "expire_snapshots", runner.expire_snapshots, first=True)
    orphans = _op_step(ref, "remove_orphan_files",
                       lambda spark, r, t, p, stats_fn: runner.remove_orphan_files(spark, r, t, p), first=False)
    rewrite = _op_step(ref, "rewrite_data_files", runner.rewrite_data_files, first=False)
    manifests = _op_step(ref, "rewrite_manifests", runner.rewrite_manifests, first=False)
    validate = _validate_op(ref)

    @graph_asset(
        key=table_asset_key(ref),
        group_name=ref.namespace_name.replace(".", "_") or "default",
        kinds={"iceberg", "spark"},
        description=_describe(table),
        metadata=_asset_metadata(table),
        tags={"icelake/catalog": ref.catalog},
    )
    def maintained_table():
        return validate(manifests(rewrite(orphans(expire()))))

    return maintained_table


def _describe(table: DiscoveredTable) -> str:
    comment = table.properties.get("comment") or table.properties.get("description")
    lines = [comment or f"Iceberg table `{table.ref}`.", "",
             "Materializing runs its maintenance on Spark: expire_snapshots → remove_orphan_files → "
             "rewrite_data_files → rewrite_manifests → validate. Each op acts only past its own threshold."]
    return "\n".join(lines)


def _asset_metadata(table: DiscoveredTable) -> dict[str, Any]:
    return {
        "location": MetadataValue.path(table.location),
        "format_version": MetadataValue.int(table.format_version),
        "partition_spec": MetadataValue.text(table.partition_spec),
        "sort_order": MetadataValue.text(table.sort_order),
        "current_snapshot_id": MetadataValue.text(str(table.current_snapshot_id)),
    }
