"""The last op of a maintenance run: each table's validation (row counts, the cross-engine proof),
automatic rollback, effects, proof of benefit, audit, and the materialization (or, for a table the
project defines, the observation) that shows it in Dagster."""

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

from icelake_assets.audit.metrics import one_textfile_write
from icelake_assets.catalog.connection import (
    TableRef,
    current_snapshot_id as _current_snapshot_id,
)
from icelake_assets.causes import root_cause
from icelake_assets.maintenance.results.models import RewriteResult
from icelake_assets.maintenance.spark import fencing
from icelake_assets.maintenance.verify import post_run
from icelake_assets.orchestration.assets.audit_trail import run_records, write_run_audit
from icelake_assets.orchestration.assets.ops import load_table_of_run, record_maintained, selected_tables
from icelake_assets.orchestration.assets.run_metadata import (
    benefit_metadata,
    last_effective_run,
    run_metadata,
)
from icelake_assets.orchestration.assets.run_state import RunState, RunStates
from icelake_assets.orchestration.checks.health import run_orphans_metadata, table_health
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import IcebergSparkResource, IcelakeResource
from icelake_assets.orchestration.runs.run_tags import TABLES_TAG, failure_tags
from icelake_assets.orchestration.tables.table_groups import TableGroup


def _validate_table(
    context: OpExecutionContext,
    icelake: IcelakeResource,
    icelake_spark: IcebergSparkResource,
    ref: TableRef,
    state: RunState,
) -> dict[str, Any]:
    """Row-count parity of one table between the snapshots before and after its maintenance, the
    closed loop's effects, the audit (decided in maintenance/verify/post_run.py); returns the
    materialization's metadata or raises Failure."""
    table = load_table_of_run(icelake, ref)
    policy = icelake.policy(table)
    start = post_run.baseline(state.ops, _current_snapshot_id(table))
    state = replace(state, before_snapshot_id=start.snapshot_id)
    duration = post_run.duration_s(state.ops)
    spark = lambda: icelake_spark.spark_session  # noqa: E731
    cross_engine = policy.loop.cross_engine_check and bool(state.acted())
    rows = post_run.check_rows(spark, ref, table, start, cross_engine, context.log.info)
    if rows.cross_engine is not None:
        state = replace(state, cross_engine=rows.cross_engine)
    if rows.mismatch:
        with fencing.acting():  # a fenced run rolls nothing back (the new run may have committed)
            rollback = post_run.roll_back(table, start)
        records = run_records(context, ref, state, policy, "failed", rows.mismatch, rows.result, rollback)
        write_run_audit(context, icelake.settings, ref, records, post_run.failed_outcome(rollback), duration)
        table.refresh()
        current = table.current_snapshot()
        advice = post_run.recovery_advice(ref, rollback, state.before_snapshot_id)
        raise Failure(
            description=f"{rows.mismatch}. {advice} Current snapshot: {current.snapshot_id if current else None}",
            metadata={
                "before_snapshot_id": str(state.before_snapshot_id),
                "current_snapshot_id": str(current.snapshot_id if current else None),
                "rolled_back": bool(rollback and rollback.rolled_back),
            },
            allow_retries=False,
        )
    result = rows.result
    assert result is not None  # no result: the mismatch above raised
    after_stats = icelake.stats(table, policy)
    context.log.info(f"{ref} validated: {result.rows_before} rows before, {result.rows_after} after")
    merged = state.merged_ops()
    others = post_run.commits_by_others(table, merged, context.run_id)
    report = post_run.judge(merged, after_stats, policy, others)
    scanned = report.scanned_orphans
    health = table_health(icelake, table, ref, context.instance, after_stats, report.orphans_removed, scanned)
    # A run that did nothing points to the last one that did (its before/after stays findable).
    last = None if state.acted() else last_effective_run(context.instance, table_asset_key(ref))
    effects = list(report.effects)
    metadata = run_metadata(state, after_stats, result, effects, report.outcome, health, policy, last)
    if scanned is not None:
        metadata.update(run_orphans_metadata(scanned))
    benefit = post_run.scan_benefit(table, state.ops, policy, spark, ref)
    if benefit is not None:
        metadata.update(benefit_metadata(benefit))
        (context.log.warning if benefit.nil else context.log.info)(f"{ref} benefit: {benefit.describe()}")
    if state.cross_engine is not None:
        metadata["cross_engine"] = MetadataValue.text(state.cross_engine)
    state = replace(state, ops=post_run.with_effects(state.ops, effects))
    shared = TABLES_TAG in context.run.tags  # a run of several tables: each outcome under its own keys
    if tags := report.outcome_tags(ref, result.after_snapshot_id, policy, shared):
        context.instance.add_run_tags(context.run_id, tags)
    for e in report.effects:
        if e.effect in ("ineffective", "overtaken"):
            (context.log.warning if e.effect == "ineffective" else context.log.info)(
                f"{ref} {e.op} {e.effect}: {e.reason}"
            )
    failure = report.failure
    records = run_records(
        context,
        ref,
        state,
        policy,
        report.validation_decision,
        report.validation_reason(),
        result,
        None,
        [str(f) for f in report.failed_partitions],
        effects=report.audit_effects(benefit),
    )
    audit = write_run_audit(context, icelake.settings, ref, records, report.run_outcome, duration)
    # The full records are in the audit table: here only whether they were written, and where.
    metadata.update({k: v for k, v in audit.items() if k in ("audit/records", "audit/error")})
    metadata["audit/record_id"] = MetadataValue.text(records[-1].record_id)
    metadata["trigger"] = MetadataValue.text(records[-1].trigger)
    if failure is not None:
        if failure.error:
            kind = str(failure.error_kind or "error")
            context.instance.add_run_tags(context.run_id, failure_tags(str(ref), kind, str(failure.error)))
        _fail_partitions(context, ref, failure, metadata)
    if (ineffective := report.fails_as_ineffective(policy)) is not None:
        raise Failure(description=f"{ref}: {ineffective}", metadata=metadata, allow_retries=False)
    return metadata


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
        with one_textfile_write():  # each table's audit counts at once; the textfile once per step
            for dt in tables:
                key = str(dt.ref)
                if key in state.errors:
                    failures.append(
                        Failure(description=f"{dt.ref}: {state.errors[key]}", allow_retries=False)
                    )
                    continue
                try:
                    metadata = _validate_table(context, icelake, icelake_spark, dt.ref, state.tables[key])
                except Failure as failure:
                    failures.append(failure)
                    continue
                except Exception as err:  # e.g. the Spark driver or the store gone mid-validation
                    failures.append(_unvalidated(context, dt.ref, err))
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


def _unvalidated(context: OpExecutionContext, ref: TableRef, err: Exception) -> Failure:
    """A validation that could not finish: the run fails naming the table and the cause, with the
    cause's kind in the run's tags (an outage is retried soon, not after the table's backoff). The
    run's commits carry its id: the sensor reconciles them into the audit, rows checked against
    their parent (runs/recovery.py)."""
    cause = root_cause(err)
    context.instance.add_run_tags(context.run_id, failure_tags(str(ref), cause.kind, str(cause)))
    return Failure(
        description=f"{ref} validate failed: {cause}; the run's commits are reconciled into the audit "
        "by the sensor, their rows checked against their parent",
        allow_retries=False,
    )


def _fail_partitions(
    context: OpExecutionContext, ref: TableRef, failure: RewriteResult, metadata: dict[str, Any]
) -> None:
    """After validation: materialize the partitions of the run that finished, then fail naming the rest."""
    failed = list(failure.failed_names())
    done: list[str] = []
    if context.has_partitions:
        keys = list(context.partition_keys)
        # A Spark error that left no measurable partition behind: no partition is known good.
        done = [] if failure.error and not failed else [k for k in keys if k not in set(failed)]
        failed = [k for k in keys if k not in set(done)]
        for key in done:
            if context.has_assets_def:
                context.log_event(
                    AssetMaterialization(asset_key=table_asset_key(ref), partition=key, metadata=metadata)
                )
            else:
                record_maintained(context, ref, metadata, partition=key)
    cause = f" ({failure.error})" if failure.error else ""
    raise Failure(
        description=(
            f"{ref}: {len(failed)} partition(s) not compacted after every retry{cause}: "
            f"{', '.join(map(str, failed[:20]))}{' …' if len(failed) > 20 else ''}. What finished is "
            f"committed and validated ({len(done)} partition(s) recorded); re-run the failed ones."
        ),
        metadata={
            "partitions_failed": MetadataValue.json(failed),
            "partitions_done": MetadataValue.json(done),
            "failed_data_files_count": MetadataValue.int(failure.failed_data_files_count or 0),
        },
        allow_retries=False,
    )
