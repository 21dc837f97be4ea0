"""The maintenance ops of a table group: one Dagster op per maintenance function of
maintenance/ops/runner.py, run for every table of the run in turn (orchestration/assets/graph.py assembles
them into the group's graph), with the retry of failed partitions and the one-run-per-table guard."""

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from dagster import (
    AssetObservation,
    Backoff,
    DagsterEventType,
    Failure,
    In,
    Jitter,
    MetadataValue,
    Nothing,
    OpExecutionContext,
    Out,
    RetryPolicy,
    op,
)

from icelake_assets import private_api
from icelake_assets.catalog.connection import (
    CatalogUnavailableError,
    TableMissingError,
    TableRef,
    current_snapshot_id as _current_snapshot_id,
)
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.causes import root_cause
from icelake_assets.maintenance.ops import rewrite
from icelake_assets.maintenance.ops.chain import REWRITE_OP
from icelake_assets.maintenance.results.base import OpResult
from icelake_assets.maintenance.results.codec import decode_result, encode
from icelake_assets.maintenance.spark import fencing
from icelake_assets.maintenance.spark.commit_tags import tag_session, untag_session
from icelake_assets.maintenance.spark.preflight import PreflightError
from icelake_assets.orchestration.assets.audit_trail import write_op_failure
from icelake_assets.orchestration.assets.run_state import RunState, RunStates
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import RUN_STATE_IO_MANAGER, IcebergSparkResource, IcelakeResource
from icelake_assets.orchestration.runs.model import TABLE_TAG, earlier_run_maintaining, failure_tags
from icelake_assets.orchestration.tables.partitions import partition_key, run_scope
from icelake_assets.orchestration.tables.table_groups import TableGroup
from icelake_assets.planning.guards import APPROVAL_TAG
from icelake_assets.settings import PartitionsPolicy

# How often a running rewrite logs what it committed so far (ICELAKE_PROGRESS_SECONDS overrides).
REWRITE_PROGRESS_SECONDS = float(os.environ.get("ICELAKE_PROGRESS_SECONDS", "30"))
# Metadata of a retry request: each table's outcome of the attempt that asks for the retry.
ATTEMPT_METADATA = "icelake/attempt_outcomes"


def load_table_of_run(icelake: IcelakeResource, ref: TableRef, context: OpExecutionContext | None = None):
    """The table, or the op fails naming why (retried when its catalog is down, not when it is gone;
    a catalog down is an outage, not the table's failure: the sensor retries it soon)."""
    try:
        return icelake.load_table(ref)
    except (TableMissingError, CatalogUnavailableError) as err:
        # Its kind by the cause's class (causes.py): a catalog down is an outage, a catalog refusing the
        # maintenance identity (401) is "auth", which counts as the table's failure once repeated.
        kind = root_cause(err).kind if isinstance(err, CatalogUnavailableError) else None
        if kind is not None and context is not None:
            context.instance.add_run_tags(context.run_id, failure_tags(str(ref), kind, str(err)))
        raise Failure(description=str(err), allow_retries=kind == "outage") from err


def selected_tables(context: OpExecutionContext, group: TableGroup) -> list[DiscoveredTable]:
    """The group's tables this run maintains: a run selects a subset of the group's assets; a run of
    a maintenance job (tables the project defines: no asset) names its table in its tag, or none
    for every table of the group."""
    if context.has_assets_def:
        keys = context.selected_asset_keys
        return [t for t in group.tables if table_asset_key(t.ref) in keys]
    named = context.run.tags.get(TABLE_TAG)
    return [t for t in group.tables if named is None or str(t.ref) == named]


def record_maintained(
    context: OpExecutionContext, ref: TableRef, metadata: dict[str, Any], partition: str | None = None
) -> None:
    """What a run did to a table it does not own as an asset (the project's code defines it): an
    observation on the project's key, which no automation takes for new data (a materialization
    would start the project's downstream assets)."""
    context.log_event(
        AssetObservation(asset_key=table_asset_key(ref), partition=partition, metadata=metadata)
    )


def _refuse_if_another_run_maintains(context: OpExecutionContext, ref: TableRef, pool: str) -> None:
    """One run at a time per table, also where pools are applied per op (orchestration/runs/model.py)."""
    other = earlier_run_maintaining(context.instance, context.run_id, table_asset_key(ref), pool)
    if other is not None:
        said = f"{ref}: run {other} is maintaining this table; this run stops before any commit"
        context.instance.add_run_tags(context.run_id, failure_tags(str(ref), "concurrent_run", said))
        raise Failure(description=said, allow_retries=False)


def stop_if_fenced(context: OpExecutionContext, err: BaseException | None = None) -> None:
    """A fenced run (maintenance/spark/fencing.py) stops here: terminated, it ends CANCELED (the interrupt
    Dagster raises itself on Terminate); judged dead or without a lease, it fails saying why."""
    reason = fencing.fenced()
    if reason is None:
        return
    context.log.warning(f"this run stops before its next commit: {reason}")
    if fencing.was_canceled():
        raise private_api.DagsterExecutionInterruptedError() from err
    raise Failure(
        description=f"this run stops before its next commit: {reason}", allow_retries=False
    ) from err


def op_step(
    group: TableGroup,
    name: str,
    work: Callable[..., OpResult],
    first: bool,
    *,
    after_upstream: bool = False,
    work_kwargs: Callable[[OpExecutionContext, DiscoveredTable, RunState], dict[str, Any]] | None = None,
    annotate: Callable[[DiscoveredTable, OpResult], OpResult] | None = None,
    wants_retry: Callable[[OpExecutionContext, DiscoveredTable, OpResult], bool] | None = None,
    retry_policy: RetryPolicy | None = None,
):
    """A Dagster op around one runner function, for every table of the run in turn; it appends each
    table's outcome to that table's state.

    ``work_kwargs`` adds run-dependent arguments (the rewrite's partition scope); ``annotate`` adds
    what only orchestration knows to an outcome (Dagster partition keys) before it is recorded;
    ``wants_retry`` sees an outcome and asks for the op to be retried under ``retry_policy`` (after
    every table had its turn). ``after_upstream``: the first op waits on a Nothing input fed by the table's producer
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
        stop_if_fenced(context)
        table = load_table_of_run(icelake, ref, context)
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

        tagged: list[Any] = []

        def spark():  # its commits name this run, op and attempt (maintenance/spark/commit_tags.py)
            session = icelake_spark.session_for(ref, table)
            tag_session(session, context.run_id, name, context.retry_number + 1)
            tagged.append(session)
            return session

        try:
            with fencing.acting():
                outcome = work(
                    spark,
                    ref,
                    table,
                    policy,
                    lambda t: icelake.stats(t, policy),
                    **extra,
                )
        except Failure:
            raise
        except Exception as err:  # e.g. a dead JVM: the run fails, but not without its audit record
            if fencing.fenced() is not None:  # its Spark work was stopped by the fence, on purpose
                stop_if_fenced(context, err)
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
        finally:
            for session in tagged[-1:]:  # one session per run: the op's tags end with the op
                with contextlib.suppress(Exception):  # a dead JVM has no tags left to clear
                    untag_session(session)
        stop_if_fenced(context)  # fenced meanwhile: the run ends here, its op is not retried
        outcome = replace(outcome, attempt=context.retry_number + 1)
        verb = "acted" if outcome.acted else "skipped"
        context.log.info(f"{ref} {name} {verb}: {outcome.reason} ({outcome.duration_s:.2f}s)")
        if annotate is not None:
            outcome = annotate(dt, outcome)
        retry = bool(wants_retry and wants_retry(context, dt, outcome))
        return state.with_op(outcome), (f"{ref}: {outcome.reason}" if retry else None)

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
        attempt: dict[str, OpResult] = {}
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
            attempt[key] = state.ops[-1]
            if retry_reason:
                retry.append(retry_reason)
        if retry:
            max_retries = retry_policy.max_retries if retry_policy else 0
            for dt in tables:  # a retry request carries no metadata: the event log keeps the outcomes
                if (done := attempt.get(key := str(dt.ref))) is not None:
                    context.log_event(
                        AssetObservation(
                            asset_key=table_asset_key(dt.ref),
                            description=f"{name} attempt {context.retry_number + 1}: {done.reason}",
                            metadata={
                                ATTEMPT_METADATA: MetadataValue.json({"table": key, "result": encode(done)})
                            },
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


def earlier_attempts(context: OpExecutionContext) -> dict[str, list[OpResult]]:
    """This step's earlier attempts in this run, oldest first: each table's op outcome, as the
    attempt recorded it (an observation of the table) before asking for its retry."""
    step_key = context.get_step_execution_context().step.key
    records = context.instance.get_records_for_run(
        context.run_id, of_type=DagsterEventType.ASSET_OBSERVATION, limit=10_000
    ).records
    out: dict[str, list[OpResult]] = {}
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is None or event.step_key != step_key:
            continue
        entry = event.asset_observation_data.asset_observation.metadata.get(ATTEMPT_METADATA)
        if entry is not None and isinstance(entry.value, dict) and "result" in entry.value:
            out.setdefault(str(entry.value["table"]), []).append(decode_result(entry.value["result"]))
    return out


def rewrite_step(group: TableGroup, policies: Mapping[TableRef, Any]):
    """The rewrite op: scoped to the run's partitions, retried with exponential backoff while
    partitions of a table fail (up to the most retries any table's policy allows, each table within
    its own); on its last attempt it hands the failures on (validation runs first)."""
    by_ref = {t.ref: partitions_policy(policies.get(t.ref)) for t in group.tables}
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

    def keys(dt: DiscoveredTable, outcome: OpResult) -> OpResult:
        """The Dagster partition keys of the partitions the rewrite failed and finished."""
        layout = dt.layout
        rewritten = REWRITE_OP.own(outcome)
        if rewritten.failed_partition_values is None or layout is None:
            return outcome

        def named(values: tuple[tuple[str | None, ...], ...]) -> tuple[str, ...]:
            return tuple(sorted({str(k) for v in values if (k := partition_key(layout, v)) is not None}))

        return replace(
            rewritten,
            partition_keys_failed=named(rewritten.failed_partition_values),
            partition_keys_rewritten=named(rewritten.rewritten_partition_values or ()),
        )

    def wants_retry(context: OpExecutionContext, dt: DiscoveredTable, outcome: OpResult) -> bool:
        # The same plan under the same permissions fails the same way: no retry.
        rewritten = REWRITE_OP.own(outcome)
        if rewritten.error_kind == "access_denied":
            return False
        return rewritten.failed and context.retry_number < by_ref[dt.ref].max_retries

    return op_step(
        group,
        "rewrite_data_files",
        rewrite.rewrite_data_files,
        first=False,
        work_kwargs=scope,
        annotate=keys,
        wants_retry=wants_retry,
        retry_policy=retry,
    )


def rewrite_commits(context: OpExecutionContext, dt: DiscoveredTable, state: RunState) -> dict[str, Any]:
    """The manifest op consolidates what a partial-progress rewrite of this run committed."""
    return {"rewrite_commits": state.rewrite_commits()}


def statistics_follow(context: OpExecutionContext, dt: DiscoveredTable, state: RunState) -> dict[str, Any]:
    """The statistics op follows the snapshots this run's rewrites committed."""
    return {"rewrite_commits": state.rewrote()}


def partitions_policy(effective: Any) -> PartitionsPolicy:
    return effective.policy.partitions if effective is not None else PartitionsPolicy()
