"""The last op of a maintenance run: each table's validation (row counts, the cross-engine proof),
automatic rollback, effects, proof of benefit, audit, and the materialization (or, for a table the
project defines, the observation) that shows it in Dagster."""

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from dagster import (
    AssetMaterialization,
    Failure,
    In,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    op,
)

from icelake_assets.catalog.connection import (
    TableRef,
    current_snapshot_id as _current_snapshot_id,
)
from icelake_assets.health.findings import Finding
from icelake_assets.health.scan_cost import ScanBenefit, measure_scan_cost
from icelake_assets.maintenance.cross_engine import CrossEngineError, cross_engine_check
from icelake_assets.maintenance.effect import (
    OUTCOME_SNAPSHOT_TAG,
    OUTCOME_TABLE_TAG,
    OUTCOME_TAG,
    POLICY_HASH_TAG,
    policy_hash,
    run_outcome,
    verify_effects,
)
from icelake_assets.maintenance.scan_probe import probe_scan
from icelake_assets.maintenance.validation import ValidationFailed, rollback_if_safe, validate_row_counts
from icelake_assets.orchestration.audit_trail import run_records, write_run_audit
from icelake_assets.orchestration.health import run_orphans_metadata, table_health
from icelake_assets.orchestration.maintenance_ops import load_table_of_run, record_maintained, selected_tables
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcebergSparkResource, IcelakeResource
from icelake_assets.orchestration.run_metadata import benefit_metadata, last_effective_run, run_metadata
from icelake_assets.orchestration.run_model import failure_tags
from icelake_assets.orchestration.run_state import RunState, RunStates
from icelake_assets.orchestration.table_groups import TableGroup
from icelake_assets.planning.orphans import orphan_finding


def _scanned_orphans(state: RunState, policy) -> Finding | None:
    """The orphan finding of this run's own storage scan (what its orphan op left), if it scanned."""
    for o in state.merged_ops():
        res = o["result"]
        if o["op"] == "remove_orphan_files" and "listed_files" in res:
            left = int(res.get("orphans_found", 0)) - int(res.get("orphans_removed", 0))
            left_bytes = 0 if left <= 0 else int(res.get("bytes_found", 0))
            return orphan_finding(
                max(0, left),
                left_bytes,
                policy,
                hidden_files=int(res.get("hidden_files", 0)),
                skipped=res.get("skipped_reasons") or {},
                refused=res.get("refused"),
                deferred=res.get("deferred"),
            )
    return None


def _rewrite_failure(state: RunState) -> dict[str, Any] | None:
    """The rewrite's result when some of its partitions did not compact (or Spark failed)."""
    for outcome in state.merged_ops():  # the last attempt's failures: earlier ones were retried
        res = outcome["result"]
        if outcome["op"] == "rewrite_data_files" and (res.get("partitions_failed") or res.get("error")):
            return res
    return None


def _validate_table(
    context: OpExecutionContext,
    icelake: IcelakeResource,
    icelake_spark: IcebergSparkResource,
    ref: TableRef,
    state: RunState,
) -> dict[str, Any]:
    """Row-count parity of one table between the snapshots before and after its maintenance, the
    closed loop's effects, the audit; returns the materialization's metadata or raises Failure."""
    table = load_table_of_run(icelake, ref)
    policy = icelake.policy(table)
    # Baseline: the snapshot current when the first rewrite started. Expiry and orphan removal
    # change no rows, and expiry may remove the run's first snapshot when a writer committed since.
    rewrites = [o for o in state.ops if o["acted"] and o["op"] in ("rewrite_data_files", "rewrite_manifests")]
    acted = bool(rewrites)
    baseline = rewrites[0]["snapshot_before"] if acted else _current_snapshot_id(table)
    state = replace(state, before_snapshot_id=baseline)
    duration = sum(float(o["duration_s"]) for o in state.ops)
    result, mismatch = None, None
    try:
        # Without a rewrite of ours no row can have changed: summaries suffice, no JVM needed.
        # With one, Spark counts the live rows of snapshots that carry delete files.
        result = validate_row_counts(
            (lambda: icelake_spark.spark_session) if acted else None, ref, table, baseline, real_counts=acted
        )
        if not result.ok:
            mismatch = result.mismatch(ref)
        elif policy.loop.cross_engine_check and state.acted():
            # Proof by a second and third engine: Spark, pyiceberg and DuckDB agree on the result.
            cross = cross_engine_check(icelake_spark.spark_session, ref, table)
            context.log.info(f"{ref} cross-engine read: {cross.describe()}")
            state = replace(state, cross_engine=cross.describe())
            if not cross.ok:
                mismatch = f"{ref}: engines disagree after maintenance: {cross.describe()}"
    except (ValidationFailed, CrossEngineError) as err:
        mismatch = str(err)
    if mismatch:
        # Undo our rewrites when nothing else came after them; otherwise leave the ids to recover.
        rollback = rollback_if_safe(table, state.before_snapshot_id) if acted else None
        records = run_records(context, ref, state, policy, "failed", mismatch, result, rollback)
        write_run_audit(
            context,
            icelake.settings,
            ref,
            records,
            "rolled_back" if rollback and rollback.rolled_back else "failed",
            duration,
        )
        table.refresh()
        current = table.current_snapshot()
        if rollback and rollback.rolled_back:
            advice = f"Rolled back automatically: {rollback.reason}."
        else:
            advice = (
                f"Not rolled back ({rollback.reason if rollback else 'nothing of ours to undo'}). Recover "
                f"with CALL {ref.catalog}.system.rollback_to_snapshot('{'.'.join(ref.identifier)}', "
                f"{state.before_snapshot_id}) once the writers' rows are accounted for."
            )
        raise Failure(
            description=f"{mismatch}. {advice} Current snapshot: {current.snapshot_id if current else None}",
            metadata={
                "before_snapshot_id": str(state.before_snapshot_id),
                "current_snapshot_id": str(current.snapshot_id if current else None),
                "rolled_back": bool(rollback and rollback.rolled_back),
            },
            allow_retries=False,
        )
    assert result is not None  # no result: the mismatch above raised
    after_stats = icelake.stats(table, policy)
    context.log.info(f"{ref} validated: {result.rows_before} rows before, {result.rows_after} after")
    # The closed loop: did each op fix what triggered it? (metadata only, incremental cache)
    effects = verify_effects(state.merged_ops(), after_stats, policy)
    outcome = run_outcome(effects)
    removed = any(e.op == "remove_orphan_files" and e.effect == "effective" for e in effects)
    scanned = _scanned_orphans(state, policy)
    health = table_health(icelake, table, ref, context.instance, after_stats, removed, scanned)
    # A run that did nothing points to the last one that did (its before/after stays findable).
    last = None if state.acted() else last_effective_run(context.instance, table_asset_key(ref))
    metadata = run_metadata(state, after_stats, result, effects, outcome, health, policy, last)
    if scanned is not None:
        metadata.update(run_orphans_metadata(scanned))
    benefit = _scan_benefit(table, state, policy, lambda: icelake_spark.spark_session, ref)
    if benefit is not None:
        metadata.update(benefit_metadata(benefit))
        (context.log.warning if benefit.nil else context.log.info)(f"{ref} benefit: {benefit.describe()}")
    if state.cross_engine is not None:
        metadata["cross_engine"] = MetadataValue.text(state.cross_engine)
    by_op = {e.op: e for e in effects}
    state = replace(
        state,
        ops=tuple(
            {
                **o,
                "result": {
                    **o["result"],
                    "effect": by_op[o["op"]].effect,
                    "effect_reason": by_op[o["op"]].reason,
                },
            }
            if o["op"] in by_op
            else o
            for o in state.ops
        ),
    )
    if outcome is not None:
        context.instance.add_run_tags(
            context.run_id,
            {
                OUTCOME_TAG: outcome,
                OUTCOME_TABLE_TAG: str(ref),
                OUTCOME_SNAPSHOT_TAG: str(result.after_snapshot_id),
                POLICY_HASH_TAG: policy_hash(policy),
            },
        )
    ineffective = [e for e in effects if e.effect == "ineffective"]
    for e in ineffective:
        context.log.warning(f"{ref} {e.op} ineffective: {e.reason}")
    failure = _rewrite_failure(state)
    failed = (
        list(failure.get("partition_keys_failed", failure.get("partitions_failed", []))) if failure else []
    )
    effect_note = f"; ineffective: {', '.join(e.op for e in ineffective)}" if ineffective else ""
    records = run_records(
        context,
        ref,
        state,
        policy,
        "partial" if failure else "passed",
        "rows match" + (f"; {len(failed)} partitions not compacted" if failure else "") + effect_note,
        result,
        None,
        [str(f) for f in failed],
        effects={
            "outcome": outcome,
            "ops": [e.to_dict() for e in effects],
            **({"benefit": benefit.to_dict()} if benefit is not None else {}),
        },
    )
    audit = write_run_audit(
        context, icelake.settings, ref, records, "partial" if failure else "succeeded", duration
    )
    # The full records are in the audit table: here only whether they were written, and where.
    metadata.update({k: v for k, v in audit.items() if k in ("audit/records", "audit/error")})
    metadata["audit/record_id"] = MetadataValue.text(records[-1].record_id)
    metadata["trigger"] = MetadataValue.text(records[-1].trigger)
    if failure is not None:
        if failure.get("error"):
            kind = str(failure.get("error_kind") or "error")
            context.instance.add_run_tags(context.run_id, failure_tags(str(ref), kind, str(failure["error"])))
        _fail_partitions(context, ref, failure, metadata)
    if ineffective and policy.loop.on_ineffective == "fail":
        raise Failure(
            description=f"{ref}: maintenance was ineffective (loop.on_ineffective: fail): "
            + "; ".join(f"{e.op}: {e.reason}" for e in ineffective),
            metadata=metadata,
            allow_retries=False,
        )
    return metadata


def _scan_benefit(
    table, state: RunState, policy, spark: Callable[[], Any], ref: TableRef
) -> ScanBenefit | None:
    """A full scan's cost on the snapshot the run started from and on the current one (proof of
    benefit), when an op acted; None when nothing changed or the run started on an empty table.
    With ``loop.scan_probe``, a full-scan query is timed on both too, if the table is small enough."""
    start = state.ops[0]["snapshot_before"] if state.ops else None
    if not state.acted() or start is None:
        return None
    benefit = ScanBenefit(measure_scan_cost(table, start), measure_scan_cost(table))
    bounded = max(benefit.before.data_bytes, benefit.after.data_bytes) <= policy.loop.scan_probe_max_bytes
    if policy.loop.scan_probe and bounded and benefit.after.snapshot_id is not None:
        probe = probe_scan(spark(), ref, start, benefit.after.snapshot_id)
        benefit = replace(benefit, probe_seconds=(probe.before_seconds, probe.after_seconds))
    return benefit


def validate_op(group: TableGroup):
    # Nothing: the maintained table is the asset's value. An IO-managed output cannot be stored for a
    # range of partitions (a backfill run of several partitions).
    @op(
        name=f"{group.name}__validate",
        ins={"state": In(RunStates)},
        out={t.ref.safe_name: Out(Nothing, is_required=False) for t in group.tables},
        description="row-count parity of each table of the run between the snapshots before and after "
        "maintenance; one output (materialization) per table",
        tags={"icelake/op": "validate"},
        pool=group.pool,
    )
    def validate(
        context: OpExecutionContext,
        state: RunStates,
        icelake: IcelakeResource,
        icelake_spark: IcebergSparkResource,
    ):
        tables = selected_tables(context, group)
        failures: list[Failure] = []
        for dt in tables:
            key = str(dt.ref)
            if key in state.errors:
                failures.append(Failure(description=f"{dt.ref}: {state.errors[key]}", allow_retries=False))
                continue
            try:
                metadata = _validate_table(context, icelake, icelake_spark, dt.ref, state.tables[key])
            except Failure as failure:
                failures.append(failure)
                continue
            if not context.has_assets_def:
                record_maintained(context, dt.ref, metadata)
            yield Output(None, output_name=dt.ref.safe_name, metadata=metadata)
        if len(failures) == 1:
            raise failures[0]
        if failures:
            raise Failure(
                description=f"{len(failures)} of {len(tables)} tables failed: "
                + " | ".join(f.description or "" for f in failures),
                allow_retries=False,
            )

    return validate


def _fail_partitions(
    context: OpExecutionContext, ref: TableRef, failure: dict[str, Any], metadata: dict[str, Any]
) -> None:
    """After validation: materialize the partitions of the run that finished, then fail naming the rest."""
    failed = list(failure.get("partition_keys_failed", failure.get("partitions_failed", [])))
    done: list[str] = []
    if context.has_partitions:
        keys = list(context.partition_keys)
        # A Spark error that left no measurable partition behind: no partition is known good.
        done = [] if failure.get("error") and not failed else [k for k in keys if k not in set(failed)]
        failed = [k for k in keys if k not in set(done)]
        for key in done:
            if context.has_assets_def:
                context.log_event(
                    AssetMaterialization(asset_key=table_asset_key(ref), partition=key, metadata=metadata)
                )
            else:
                record_maintained(context, ref, metadata, partition=key)
    cause = f" ({failure['error']})" if failure.get("error") else ""
    raise Failure(
        description=(
            f"{ref}: {len(failed)} partition(s) not compacted after every retry{cause}: "
            f"{', '.join(map(str, failed[:20]))}{' …' if len(failed) > 20 else ''}. What finished is "
            f"committed and validated ({len(done)} partition(s) recorded); re-run the failed ones."
        ),
        metadata={
            "partitions_failed": MetadataValue.json(failed),
            "partitions_done": MetadataValue.json(done),
            "failed_data_files_count": MetadataValue.int(int(failure.get("failed_data_files_count", 0))),
        },
        allow_retries=False,
    )
