"""Each Iceberg table becomes an asset whose materialization is its maintenance, a chain of ops:
expire_snapshots → remove_orphan_files → rewrite_data_files → rewrite_manifests → validate.

The tables of a group (orchestration/table_groups.py) share one graph of those ops, which maintain
the tables the run selects, one after the other (the sensor's runs select one table). Op
definitions carry the group in their names (``maintain_017__rewrite_data_files``: node definitions
must have unique names across the code location), but the graph invokes each under its short name,
so a run's steps read ``maintain_017.rewrite_data_files``.

Partitioned tables (orchestration/partitions.py) are partitioned assets. A run of one partition or a
range of them (a backfill takes ``policy.partitions.partitions_per_run`` per run) compacts only the
compaction candidates among its partitions, with a ``where`` naming exactly them; the table-wide ops
(expire, orphans, manifests) still run once per run, each only past its own threshold. A run
without a partition (e.g. the maintenance job over every table) maintains the whole table, like an
unpartitioned one. The rewrite op retries partitions that failed with exponential backoff; after
the last attempt the run validates what did commit, records a materialization for each partition
that finished, and fails naming the partitions that did not, so a backfill shows them as failed
and re-runs only them.
"""

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dagster import (
    AssetIn,
    AssetMaterialization,
    AssetObservation,
    AssetsDefinition,
    BackfillPolicy,
    Backoff,
    DagsterEventType,
    Definitions,
    Failure,
    GraphIn,
    GraphOut,
    In,
    Jitter,
    JobDefinition,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    RetryPolicy,
    graph,
    in_process_executor,
    op,
)

from icelake_assets.catalog.connection import (
    CatalogUnavailableError,
    TableMissingError,
    TableRef,
    current_snapshot_id as _current_snapshot_id,
)
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.causes import root_cause
from icelake_assets.health.findings import Finding, orphan_finding
from icelake_assets.health.scan_cost import ScanBenefit, measure_scan_cost
from icelake_assets.maintenance import runner
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
from icelake_assets.maintenance.guards import APPROVAL_TAG
from icelake_assets.maintenance.preflight import PreflightError
from icelake_assets.maintenance.validation import ValidationFailed, rollback_if_safe, validate_row_counts
from icelake_assets.orchestration.asset_display import asset_group, asset_metadata, asset_tags, describe
from icelake_assets.orchestration.audit_trail import run_records, write_op_failure, write_run_audit
from icelake_assets.orchestration.health import table_health
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.partitions import partition_key, run_scope
from icelake_assets.orchestration.resources import RUN_STATE_IO_MANAGER, IcebergSparkResource, IcelakeResource
from icelake_assets.orchestration.run_metadata import benefit_metadata, last_effective_run, run_metadata
from icelake_assets.orchestration.run_model import TABLE_TAG, earlier_run_maintaining, failure_tags
from icelake_assets.orchestration.run_state import RunState, RunStates
from icelake_assets.orchestration.table_groups import TableGroup, maintenance_job_name, maintenance_jobs
from icelake_assets.settings import PartitionsPolicy

# How often a running rewrite logs what it committed so far (ICELAKE_PROGRESS_SECONDS overrides).
REWRITE_PROGRESS_SECONDS = float(os.environ.get("ICELAKE_PROGRESS_SECONDS", "30"))
# Metadata of a retry request: each table's outcome of the attempt that asks for the retry.
ATTEMPT_METADATA = "icelake/attempt_outcomes"
MAINTENANCE_JOB = "icelake_maintenance"


def _load(icelake: IcelakeResource, ref: TableRef):
    try:
        return icelake.load_table(ref)
    except (TableMissingError, CatalogUnavailableError) as err:
        raise Failure(description=str(err), allow_retries=isinstance(err, CatalogUnavailableError)) from err


def selected_tables(context: OpExecutionContext, group: TableGroup) -> list[DiscoveredTable]:
    """The group's tables this run maintains: a run selects a subset of the group's assets; a run of
    a maintenance job (tables the project defines: no asset) names its table in its tag, or none
    for every table of the group."""
    if context.has_assets_def:
        keys = context.selected_asset_keys
        return [t for t in group.tables if table_asset_key(t.ref) in keys]
    named = context.run.tags.get(TABLE_TAG)
    return [t for t in group.tables if named is None or str(t.ref) == named]


def _record_maintained(
    context: OpExecutionContext, ref: TableRef, metadata: dict[str, Any], partition: str | None = None
) -> None:
    """What a run did to a table it does not own as an asset (the project's code defines it): an
    observation on the project's key, which no automation takes for new data (a materialization
    would start the project's downstream assets)."""
    context.log_event(
        AssetObservation(asset_key=table_asset_key(ref), partition=partition, metadata=metadata)
    )


def _refuse_if_another_run_maintains(context: OpExecutionContext, ref: TableRef, pool: str) -> None:
    """One run at a time per table, also where pools are applied per op (orchestration/run_model.py)."""
    other = earlier_run_maintaining(context.instance, context.run_id, table_asset_key(ref), pool)
    if other is not None:
        said = f"{ref}: run {other} is maintaining this table; this run stops before any commit"
        context.instance.add_run_tags(context.run_id, failure_tags(str(ref), "concurrent_run", said))
        raise Failure(description=said, allow_retries=False)


def _op_step(
    group: TableGroup,
    name: str,
    work: Callable[..., runner.OpOutcome],
    first: bool,
    *,
    after_upstream: bool = False,
    work_kwargs: Callable[[OpExecutionContext, DiscoveredTable, RunState], dict[str, Any]] | None = None,
    wants_retry: Callable[[OpExecutionContext, DiscoveredTable, runner.OpOutcome], bool] | None = None,
    retry_policy: RetryPolicy | None = None,
):
    """A Dagster op around one runner function, for every table of the run in turn; it appends each
    table's outcome to that table's state.

    ``work_kwargs`` adds run-dependent arguments (the rewrite's partition scope); ``wants_retry`` sees
    an outcome and asks for the op to be retried under ``retry_policy`` (after every table had its
    turn). ``after_upstream``: the first op waits on a Nothing input fed by the table's producer
    assets (lineage). A table whose op fails is left out of the later ops and fails the run at
    validation; with a single table (the sensor's runs) the op fails at once, as Dagster shows best."""

    def one_table(
        context: OpExecutionContext,
        icelake: IcelakeResource,
        icelake_spark: IcebergSparkResource,
        dt: DiscoveredTable,
        state: RunState | None,
    ) -> tuple[RunState, str | None]:
        ref = dt.ref
        table = _load(icelake, ref)
        policy = icelake.policy(table)
        if state is None:
            _refuse_if_another_run_maintains(context, ref, group.pool)
            snap = table.current_snapshot()
            state = RunState(
                table=str(ref),
                before_snapshot_id=snap.snapshot_id if snap else None,
                before=icelake.stats(table, policy).summary(),
            )
        extra = work_kwargs(context, dt, state) if work_kwargs else {}
        started = time.perf_counter()
        try:
            outcome = work(
                lambda: icelake_spark.session_for(ref, table),
                ref,
                table,
                policy,
                lambda t: icelake.stats(t, policy),
                **extra,
            )
        except Failure:
            raise
        except Exception as err:  # e.g. a dead JVM: the run fails, but not without its audit record
            write_op_failure(
                context,
                icelake.settings,
                ref,
                name,
                policy,
                err,
                time.perf_counter() - started,
                _current_snapshot_id(table),
            )
            cause = root_cause(err)
            # A pre-flight refusal (nothing committed) is told in its own words, naming the table.
            refused = isinstance(err, PreflightError)
            said = str(err) if refused else f"{ref} {name} failed: {cause}"
            tag = str(err) if refused else str(cause)
            context.instance.add_run_tags(context.run_id, failure_tags(str(ref), cause.kind, tag))
            raise Failure(description=said, allow_retries=False) from err
        outcome.attempt = context.retry_number + 1
        verb = "acted" if outcome.acted else "skipped"
        context.log.info(f"{ref} {name} {verb}: {outcome.reason} ({outcome.duration_s:.2f}s)")
        # Before the outcome is recorded: wants_retry may add to its result (Dagster partition keys).
        retry = bool(wants_retry and wants_retry(context, dt, outcome))
        return state.with_op(outcome.to_dict()), (f"{ref}: {outcome.reason}" if retry else None)

    def body(
        context: OpExecutionContext,
        icelake: IcelakeResource,
        icelake_spark: IcebergSparkResource,
        states: RunStates | None,
    ) -> RunStates:
        states = states or RunStates()
        tables = selected_tables(context, group)
        # A retry starts from the op's input again: the earlier attempts' outcomes (their commits
        # included) come back from the event log, so validation and audit cover every attempt.
        earlier = earlier_attempts(context) if context.retry_number else {}
        retry: list[str] = []
        attempt: dict[str, dict[str, Any]] = {}
        for dt in tables:
            key = str(dt.ref)
            if key in states.errors:
                continue
            before = states.tables.get(key)
            for outcome in earlier.get(key, ()):
                before = before.with_op(outcome) if before is not None else None
            try:
                state, retry_reason = one_table(context, icelake, icelake_spark, dt, before)
            except Exception as err:
                if len(tables) == 1:
                    raise
                context.log.error(f"{dt.ref} {name} failed; the run's other tables go on: {err}")
                states = states.with_error(key, f"{name} failed: {err}")
                continue
            states = states.with_table(key, state)
            attempt[key] = {**state.ops[-1], "table": key}
            if retry_reason:
                retry.append(retry_reason)
        if retry:
            max_retries = retry_policy.max_retries if retry_policy else 0
            for dt in tables:  # a retry request carries no metadata: the event log keeps the outcomes
                if (done := attempt.get(str(dt.ref))) is not None:
                    context.log_event(
                        AssetObservation(
                            asset_key=table_asset_key(dt.ref),
                            description=f"{name} attempt {context.retry_number + 1}: {done['reason']}",
                            metadata={ATTEMPT_METADATA: MetadataValue.json(done)},
                        )
                    )
            raise Failure(
                description=f"{'; '.join(retry)}; retrying (attempt {context.retry_number + 1} of {max_retries})",
                allow_retries=True,
            )
        return states

    description = f"{name} on each table of the run; acts only when its own threshold is crossed"
    if first:

        @op(
            name=f"{group.name}__{name}",
            out=Out(RunStates, io_manager_key=RUN_STATE_IO_MANAGER),
            description=description,
            tags={"icelake/op": name},
            pool=group.pool,
            ins={"upstream": In(Nothing)} if after_upstream else None,
        )
        def first_op(
            context: OpExecutionContext, icelake: IcelakeResource, icelake_spark: IcebergSparkResource
        ):
            return body(context, icelake, icelake_spark, None)

        return first_op

    @op(
        name=f"{group.name}__{name}",
        ins={"state": In(RunStates)},
        out=Out(RunStates, io_manager_key=RUN_STATE_IO_MANAGER),
        description=description,
        tags={"icelake/op": name},
        retry_policy=retry_policy,
        pool=group.pool,
    )
    def next_op(
        context: OpExecutionContext,
        state: RunStates,
        icelake: IcelakeResource,
        icelake_spark: IcebergSparkResource,
    ):
        return body(context, icelake, icelake_spark, state)

    return next_op


def earlier_attempts(context: OpExecutionContext) -> dict[str, list[dict[str, Any]]]:
    """This step's earlier attempts in this run, oldest first: each table's op outcome, as the
    attempt recorded it (an observation of the table) before asking for its retry."""
    step_key = context.get_step_execution_context().step.key
    records = context.instance.get_records_for_run(
        context.run_id, of_type=DagsterEventType.ASSET_OBSERVATION, limit=10_000
    ).records
    out: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is None or event.step_key != step_key:
            continue
        entry = event.asset_observation_data.asset_observation.metadata.get(ATTEMPT_METADATA)
        if entry is not None and isinstance(entry.value, dict):
            out.setdefault(entry.value["table"], []).append(entry.value)
    return out


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
    table = _load(icelake, ref)
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
    health = table_health(
        icelake, table, ref, context.instance, after_stats, removed, _scanned_orphans(state, policy)
    )
    # A run that did nothing points to the last one that did (its before/after stays findable).
    last = None if state.acted() else last_effective_run(context.instance, table_asset_key(ref))
    metadata = run_metadata(state, after_stats, result, effects, outcome, health, policy, last)
    benefit = _scan_benefit(table, state)
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


def _scan_benefit(table, state: RunState) -> ScanBenefit | None:
    """A full scan's cost on the snapshot the run started from and on the current one (proof of
    benefit), when an op acted; None when nothing changed or the run started on an empty table."""
    start = state.ops[0]["snapshot_before"] if state.ops else None
    if not state.acted() or start is None:
        return None
    return ScanBenefit(measure_scan_cost(table, start), measure_scan_cost(table))


def _validate_op(group: TableGroup):
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
                _record_maintained(context, dt.ref, metadata)
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
                _record_maintained(context, ref, metadata, partition=key)
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


def _rewrite_step(group: TableGroup, policies: Mapping[TableRef, Any]):
    """The rewrite op: scoped to the run's partitions, retried with exponential backoff while
    partitions of a table fail (up to the most retries any table's policy allows, each table within
    its own); on its last attempt it hands the failures on (validation runs first)."""
    by_ref = {t.ref: _partitions_policy(policies.get(t.ref)) for t in group.tables}
    worst = max(by_ref.values(), key=lambda p: p.max_retries)
    retry = (
        RetryPolicy(
            max_retries=worst.max_retries,
            delay=worst.retry_delay_seconds,
            backoff=Backoff.EXPONENTIAL,
            jitter=Jitter.PLUS_MINUS,
        )
        if worst.max_retries
        else None
    )

    def scope(context: OpExecutionContext, dt: DiscoveredTable, state: RunState) -> dict[str, Any]:
        return {
            "scope": run_scope(context, dt.layout, dt.ref.catalog),
            "approved": context.run.tags.get(APPROVAL_TAG, "").lower() == "true",
            "say": lambda text: context.log.info(f"{dt.ref}: {text}"),
            "progress_every_s": REWRITE_PROGRESS_SECONDS,
        }

    def wants_retry(context: OpExecutionContext, dt: DiscoveredTable, outcome: runner.OpOutcome) -> bool:
        res, layout = outcome.result, dt.layout
        if "failed_partition_values" in res and layout is not None:
            res["partition_keys_failed"] = sorted(
                {
                    str(k)
                    for v in res["failed_partition_values"]
                    if (k := partition_key(layout, tuple(v))) is not None
                }
            )
            res["partition_keys_rewritten"] = sorted(
                {
                    str(k)
                    for v in res.get("rewritten_partition_values", [])
                    if (k := partition_key(layout, tuple(v))) is not None
                }
            )
        failed = res.get("partitions_failed") or res.get("error")
        # The same plan under the same permissions fails the same way: no retry.
        denied = res.get("error_kind") == "access_denied"
        return bool(failed) and not denied and context.retry_number < by_ref[dt.ref].max_retries

    return _op_step(
        group,
        "rewrite_data_files",
        runner.rewrite_data_files,
        first=False,
        work_kwargs=scope,
        wants_retry=wants_retry,
        retry_policy=retry,
    )


def _rewrite_commits(context: OpExecutionContext, dt: DiscoveredTable, state: RunState) -> dict[str, Any]:
    """The manifest op consolidates what a partial-progress rewrite of this run committed."""
    return {"rewrite_commits": state.rewrite_commits()}


def _partitions_policy(effective: Any) -> PartitionsPolicy:
    return effective.policy.partitions if effective is not None else PartitionsPolicy()


def _group_graph(group: TableGroup, policies: Mapping[TableRef, Any]):
    """The group's graph of ops (one output per table) and its producers' inputs (lineage)."""
    # Producers (lineage) feed one fanned-in Nothing input of the first op.
    ins = {f"producer_{i}": AssetIn(key, dagster_type=Nothing) for i, key in enumerate(group.producers)}
    expire = _op_step(
        group, "expire_snapshots", runner.expire_snapshots, first=True, after_upstream=bool(ins)
    )
    # The orphan scan needs every known table (their files are never orphans of this one).
    orphans = _op_step(
        group,
        "remove_orphan_files",
        lambda spark, r, t, p, stats_fn, icelake: runner.remove_orphan_files(
            spark, r, t, p, lambda tbl: icelake.scan_orphans(r, tbl, p)
        ),
        first=False,
        work_kwargs=lambda context, dt, state: {"icelake": context.resources.icelake},
    )
    rewrite = _rewrite_step(group, policies)
    manifests = _op_step(
        group, "rewrite_manifests", runner.rewrite_manifests, first=False, work_kwargs=_rewrite_commits
    )
    validate = _validate_op(group)
    names = {t.ref.safe_name: t for t in group.tables}

    # A named graph: a graph named after an asset key would refuse e.g. o'brien or café.
    @graph(name=group.name, ins={name: GraphIn() for name in ins}, out={n: GraphOut() for n in names})
    def maintained_tables(**upstream):
        # Each op runs under its short name (steps read `<graph>.rewrite_data_files`): invocation
        # names need be unique only within this graph, op definitions across the code location.
        def short(op_def):
            return op_def.alias(op_def.name.removeprefix(f"{group.name}__"))

        first = short(expire)(upstream=list(upstream.values())) if upstream else short(expire)()
        done = short(validate)(short(manifests)(short(rewrite)(short(orphans)(first))))
        return {next(iter(names)): done} if len(names) == 1 else dict(done._asdict())

    return maintained_tables, ins


def build_group_asset(group: TableGroup, policies: Mapping[TableRef, Any] | None = None) -> AssetsDefinition:
    """The maintenance of a group of tables (orchestration/table_groups.py): one graph of ops, one
    asset per table. ``policies``: each table's EffectivePolicy, shown as metadata, owners and tags;
    its ``partitions`` part sets the backfill policy and the rewrite's retries. The group's
    ``producers`` (lineage, single-table groups) are upstream in the graph, and maintenance runs after
    them when both are in one run."""
    policies = policies or {}
    maintained_tables, ins = _group_graph(group, policies)
    names = {t.ref.safe_name: t for t in group.tables}
    per_run = min(_partitions_policy(policies.get(t.ref)).partitions_per_run for t in group.tables)

    # from_graph, not @graph_multi_asset: per-table groups (namespaces), and no second AssetSpec per table.
    return AssetsDefinition.from_graph(
        maintained_tables,
        keys_by_input_name={name: i.key for name, i in ins.items() if i.key is not None},
        keys_by_output_name={n: table_asset_key(t.ref) for n, t in names.items()},
        group_names_by_output_name={n: asset_group(t.ref) for n, t in names.items()},
        descriptions_by_output_name={n: describe(t) for n, t in names.items()},
        metadata_by_output_name={n: asset_metadata(t, policies.get(t.ref)) for n, t in names.items()},
        tags_by_output_name={n: asset_tags(t.ref, policies.get(t.ref)) for n, t in names.items()},
        owners_by_output_name={
            n: list(p.owners) for n, t in names.items() if (p := policies.get(t.ref)) is not None and p.owners
        },
        partitions_def=group.partitions_def,
        backfill_policy=BackfillPolicy.multi_run(per_run) if group.partitions_def else None,
        can_subset=True,
    )


def group_job_name(group: TableGroup) -> str:
    """The maintenance job of a group whose tables the project defines (no asset of the product)."""
    return f"{MAINTENANCE_JOB}__{group.name}"


def build_group_job(group: TableGroup, policies: Mapping[TableRef, Any]) -> JobDefinition:
    """The maintenance of a group of tables whose assets the project's own code defines: the same
    graph as a job, each table chosen by the run's ``icelake/table`` tag (every table of the group
    without one), what it did recorded as observations on the project's keys."""
    maintained_tables, _ = _group_graph(group, policies)
    tables = ", ".join(str(t.ref) for t in group.tables[:3]) + (" …" if len(group.tables) > 3 else "")
    return maintained_tables.to_job(
        name=group_job_name(group),
        executor_def=in_process_executor,
        partitions_def=group.partitions_def,
        description=f"Maintenance of {tables} (tables your project defines: observations, no materialization)",
        tags={"icelake/maintenance": "job"},
    )


def maintenance_definitions(
    groups: Sequence[TableGroup], policies: Mapping[TableRef, Any], defined_by_project: bool = False
) -> Definitions:
    """This module's part of the code location: one maintenance asset definition per table group, and
    the whole-table maintenance jobs (:func:`~icelake_assets.orchestration.table_groups.maintenance_jobs`);
    ``defined_by_project``: the project defines the tables' assets, so one maintenance job per group
    and no asset (:func:`build_group_job`)."""
    if defined_by_project:
        return Definitions(jobs=[build_group_job(g, policies) for g in groups])
    assets = [build_group_asset(g, policies) for g in groups]
    return Definitions(
        assets=assets,
        jobs=maintenance_jobs(
            assets, MAINTENANCE_JOB, description="Maintenance of every table, then its checks"
        ),
    )


def fix_jobs_of(groups: Sequence[TableGroup], maintenance: Definitions) -> dict[TableRef, str]:
    """Each table's whole-table maintenance job (linked from its failing checks); ``maintenance`` is
    :func:`maintenance_definitions` of ``groups``."""
    assets = [a for a in maintenance.assets or () if isinstance(a, AssetsDefinition)]
    if not assets:  # tables the project defines: one job per group
        return {t.ref: group_job_name(g) for g in groups for t in g.tables}
    return {
        t.ref: maintenance_job_name(a, MAINTENANCE_JOB)
        for g, a in zip(groups, assets, strict=True)
        for t in g.tables
    }
