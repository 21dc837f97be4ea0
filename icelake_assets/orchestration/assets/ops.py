"""The maintenance ops of a table group: one Dagster op per maintenance function of
maintenance/ops/chain.py, run for every table of the run in turn (orchestration/assets/graph.py assembles
them into the group's graph), with the retry of failed partitions and the one-run-per-table guard."""

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, NoReturn

from dagster import (
    AssetObservation,
    DagsterError,
    DagsterEventType,
    Failure,
    In,
    MetadataValue,
    Nothing,
    OpDefinition,
    OpExecutionContext,
    Out,
    RetryPolicy,
    RetryRequested,
    op,
)
from pyiceberg.table import Table

from icelake_assets.catalog.connection import (
    CatalogUnavailableError,
    TableMissingError,
    TableRef,
    current_snapshot_id as _current_snapshot_id,
)
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.causes import RedactedCause, describe, root_cause
from icelake_assets.maintenance.results.base import OpResult
from icelake_assets.maintenance.results.codec import decode_result, encode
from icelake_assets.maintenance.spark import fencing
from icelake_assets.maintenance.spark.commit_tags import tag_session, untag_session
from icelake_assets.maintenance.spark.preflight import PreflightError
from icelake_assets.orchestration.assets import table_concurrency as at_once
from icelake_assets.orchestration.assets.audit_trail import write_op_failure
from icelake_assets.orchestration.assets.commit_gate import (
    no_retry_after_terminate,
    refuse_if_another_run_maintains,
    stop_if_fenced,
    wait_for_stopped_runs,
)
from icelake_assets.orchestration.assets.run_state import RunState, RunStates
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.resources import RUN_STATE_IO_MANAGER, IcebergSparkResource, IcelakeResource
from icelake_assets.orchestration.runs.run_tags import failure_tags, named_tables
from icelake_assets.orchestration.tables.table_groups import TableGroup
from icelake_assets.settings import Policy, redact_message

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
        # Its message hides the catalog's own secrets only (catalog/connection.error_text), not the
        # other secrets a driver's error may echo; the chain's messages (the driver's error under a
        # TableUnreadableError) none: both are told redacted (causes.py).
        told = redact_message(str(err))
        if kind is not None and context is not None:
            context.instance.add_run_tags(context.run_id, failure_tags(str(ref), kind, told))
        raise Failure(description=told, allow_retries=kind == "outage") from RedactedCause.of(err)


@contextlib.contextmanager
def _errors_told_redacted() -> Iterator[None]:
    """What an op raises reaches Dagster's event log, which keeps every message of an exception's chain:
    a Failure goes on from a redacted stand-in of its cause (causes.RedactedCause); an error our code
    did not catch becomes a Failure told as causes.py tells it. Retries stay Dagster's: an uncaught
    error is retried under the op's retry policy (allow_retries), a DagsterError is not."""
    try:
        yield
    except RetryRequested:
        raise
    except Failure as failure:
        if failure.__cause__ is not None or not failure.__suppress_context__:
            chained = failure.__cause__ or failure.__context__
            failure.__cause__ = RedactedCause.of(chained) if chained is not None else None
            failure.__suppress_context__ = True
        raise
    except Exception as err:
        stand_in = RedactedCause.of(err)
        raise Failure(
            description=str(stand_in), allow_retries=not isinstance(err, DagsterError)
        ) from stand_in


def selected_tables(context: OpExecutionContext, group: TableGroup) -> list[DiscoveredTable]:
    """The group's tables this run maintains: a run selects a subset of the group's assets; a run of
    a maintenance job (tables the project defines: no asset) names its tables in its tags, or none
    for every table of the group."""
    if context.has_assets_def:
        keys = context.selected_asset_keys
        return [t for t in group.tables if table_asset_key(t.ref) in keys]
    named = named_tables(context.run.tags)
    return [t for t in group.tables if named is None or str(t.ref) in named]


def record_maintained(
    context: OpExecutionContext, ref: TableRef, metadata: dict[str, Any], partition: str | None = None
) -> None:
    """What a run did to a table it does not own as an asset (the project's code defines it): an
    observation on the project's key, which no automation takes for new data (a materialization
    would start the project's downstream assets)."""
    context.log_event(
        AssetObservation(asset_key=table_asset_key(ref), partition=partition, metadata=metadata)
    )


WorkKwargs = Callable[[OpExecutionContext, DiscoveredTable, RunState], dict[str, Any]]


class _RunSpark:
    """The work's Spark session, opened when the work asks for it: its commits name this run, op and
    attempt (maintenance/spark/commit_tags.py); the tags end with the op (one session per run)."""

    def __init__(
        self,
        context: OpExecutionContext,
        resource: IcebergSparkResource,
        ref: TableRef,
        table: Table,
        op_name: str,
    ) -> None:
        self._context = context
        self._resource = resource
        self._ref = ref
        self._table = table
        self._op_name = op_name
        self._tagged: Any = None  # the last session opened: its tags are cleared when the op ends

    def __call__(self) -> Any:
        with at_once.opening_session():  # tables at once: one thread opens (or attaches) it
            session = self._resource.spark_session
        session = self._resource.session_for(self._ref, self._table)  # each table's own pre-flight
        tag_session(session, self._context.run_id, self._op_name, self._context.retry_number + 1)
        attached = self._resource.attachment
        at_once.enter_pool(session, attached.job_group if attached else None, str(self._ref))
        self._tagged = session
        return session

    def untag(self) -> None:
        # Tables maintained at once share the session and its tags: the last of them clears them.
        if self._tagged is not None and not at_once.keep_tags(self._tagged):
            with contextlib.suppress(Exception):  # a dead JVM has no tags left to clear
                untag_session(self._tagged)


class TableOpStep:
    """A Dagster op around one op's work (its descriptor: maintenance/ops/chain.py), for every table of
    the run in turn; it appends each table's outcome to that table's state.

    ``work_kwargs`` adds run-dependent arguments (the rewrite's partition scope); ``annotate`` adds
    what only orchestration knows to an outcome (Dagster partition keys) before it is recorded;
    ``wants_retry`` sees an outcome and asks for the op to be retried under ``retry_policy`` (after
    every table had its turn). A table whose op fails is left out of the later ops and fails the run
    at validation; with a single table (the sensor's runs) the op fails at once, as Dagster shows best."""

    def __init__(
        self,
        group: TableGroup,
        name: str,
        work: Callable[..., OpResult],
        *,
        work_kwargs: WorkKwargs | None = None,
        annotate: Callable[[DiscoveredTable, OpResult], OpResult] | None = None,
        wants_retry: Callable[[OpExecutionContext, DiscoveredTable, OpResult], bool] | None = None,
        retry_policy: RetryPolicy | None = None,
    ) -> None:
        self.group, self.name, self.work = group, name, work
        self.work_kwargs, self.annotate, self.wants_retry = work_kwargs, annotate, wants_retry
        self.retry_policy = retry_policy

    def definition(self, first: bool, after_upstream: bool = False) -> OpDefinition:
        """The op: the first of the graph starts the tables' states (``after_upstream``: it waits on a
        Nothing input fed by the table's producer assets, lineage); the others carry them on."""
        common: dict[str, Any] = {
            "name": f"{self.group.name}__{self.name}",
            "out": Out(RunStates, io_manager_key=RUN_STATE_IO_MANAGER),
            "description": f"{self.name} on each table of the run; acts only when its own threshold is crossed",
            "tags": {"icelake/op": self.name},
            "pool": self.group.pool,
        }
        if first:

            @op(**common, ins={"upstream": In(Nothing)} if after_upstream else None)
            def first_op(
                context: OpExecutionContext, icelake: IcelakeResource, icelake_spark: IcebergSparkResource
            ):
                return self.run(context, icelake, icelake_spark, None)

            return first_op

        @op(**common, ins={"state": In(RunStates)}, retry_policy=self.retry_policy)
        def next_op(
            context: OpExecutionContext,
            state: RunStates,
            icelake: IcelakeResource,
            icelake_spark: IcebergSparkResource,
        ):
            return self.run(context, icelake, icelake_spark, state)

        return next_op

    def run(
        self,
        context: OpExecutionContext,
        icelake: IcelakeResource,
        icelake_spark: IcebergSparkResource,
        states: RunStates | None,
    ) -> RunStates:
        """Every table of the run not failed before, in turn; then the retry, if one asked for it. A
        fenced run stops here (no table's error is caught for it) and asks for no retry."""
        with no_retry_after_terminate(context), _errors_told_redacted():
            stop_if_fenced(context)
            states = self._each_table(context, icelake, icelake_spark, states)
            stop_if_fenced(context)
            return states

    def _each_table(
        self,
        context: OpExecutionContext,
        icelake: IcelakeResource,
        icelake_spark: IcebergSparkResource,
        states: RunStates | None,
    ) -> RunStates:
        states = states or RunStates()
        tables = selected_tables(context, self.group)
        # A retry starts from the op's input again: the earlier attempts' outcomes (their commits
        # included) come back from the event log, so validation and audit cover every attempt.
        earlier = earlier_attempts(context) if context.retry_number else {}
        retry: list[str] = []
        attempt: dict[str, OpResult] = {}
        skipped: list[str] = []
        start = states

        def maintain(dt: DiscoveredTable) -> tuple[RunState, str | None]:
            before = start.tables.get(key := str(dt.ref))
            for outcome in earlier.get(key, ()):
                before = before.with_op(outcome) if before is not None else None
            return self._maintain(context, icelake, icelake_spark, dt, before)

        # Each table not failed before, what it returned or raised, in the tables' order (one after
        # another, or automation.table_concurrency at a time: table_concurrency.py).
        todo = [dt for dt in tables if str(dt.ref) not in states.errors]
        at_most = icelake.settings.automation.table_concurrency
        for dt, done in at_once.outcomes(
            todo, maintain, at_most, lambda e: at_once.fence_if_terminated(context, e)
        ):
            key = str(dt.ref)
            if isinstance(done, Exception):
                if len(tables) == 1 or fencing.fenced() is not None:
                    raise done
                # A Failure's description is told already (redacted, causes.py); any other error is not.
                told = str(done) if isinstance(done, Failure) else describe(done)
                context.log.error(f"{dt.ref} {self.name} failed; the run's other tables go on: {told}")
                states = states.with_error(key, f"{self.name} failed: {told}")
                continue
            state, retry_reason = done
            states = states.with_table(key, state)
            attempt[key] = done = state.ops[-1]
            if not done.acted:
                skipped.append(f"{dt.ref}: {done.reason} ({done.duration_s:.2f}s)")
            if retry_reason:
                retry.append(retry_reason)
        if skipped:
            # One line for the tables it skipped (every log line is an event-log write; most ops skip
            # most tables of a shared run); a table it acted on has its own line.
            context.log.info(f"{self.name} skipped {len(skipped)} table(s): " + "; ".join(skipped))
        if retry:
            stop_if_fenced(context)  # a fenced run's partial rewrite is not retried
            self._ask_for_retry(context, tables, attempt, retry)
        return states

    def _maintain(
        self,
        context: OpExecutionContext,
        icelake: IcelakeResource,
        icelake_spark: IcebergSparkResource,
        dt: DiscoveredTable,
        state: RunState | None,
    ) -> tuple[RunState, str | None]:
        """One table: its state with this op's outcome, and why it asks for a retry (None: it does not)."""
        ref = dt.ref
        stop_if_fenced(context)
        table = load_table_of_run(icelake, ref, context)
        policy = icelake.policy(table)
        if state is None:
            refuse_if_another_run_maintains(context, ref, self.group.pool)
            wait_for_stopped_runs(context, ref, self.group.pool)
            snap = table.current_snapshot()
            before = icelake.stats(table, policy).summary()
            state = RunState(
                table=str(ref), before_snapshot_id=snap.snapshot_id if snap else None, before=before
            )
        extra = self.work_kwargs(context, dt, state) if self.work_kwargs else {}
        outcome = self._work(context, icelake, icelake_spark, ref, table, policy, extra)
        stop_if_fenced(context)  # fenced meanwhile: the run ends here, its op is not retried
        outcome = replace(outcome, attempt=context.retry_number + 1)
        if outcome.acted:
            context.log.info(f"{ref} {self.name} acted: {outcome.reason} ({outcome.duration_s:.2f}s)")
        if self.annotate is not None:
            outcome = self.annotate(dt, outcome)
        retry = bool(self.wants_retry and self.wants_retry(context, dt, outcome))
        return state.with_op(outcome), (f"{ref}: {outcome.reason}" if retry else None)

    def _work(
        self,
        context: OpExecutionContext,
        icelake: IcelakeResource,
        icelake_spark: IcebergSparkResource,
        ref: TableRef,
        table: Table,
        policy: Policy,
        extra: dict[str, Any],
    ) -> OpResult:
        """The op's work on the table; a failure fails the op, but not without its audit record."""
        started = time.perf_counter()
        spark = _RunSpark(context, icelake_spark, ref, table, self.name)
        try:
            with fencing.acting():
                return self.work(spark, ref, table, policy, lambda t: icelake.stats(t, policy), **extra)
        except Failure:
            raise
        except Exception as err:  # e.g. a dead JVM
            if fencing.fenced() is not None:  # its Spark work was stopped by the fence, on purpose
                stop_if_fenced(context, err)
            elapsed = time.perf_counter() - started
            write_op_failure(
                context, icelake.settings, ref, self.name, policy, err, elapsed, _current_snapshot_id(table)
            )
            cause = root_cause(err)
            # A pre-flight refusal (nothing committed) is told in its own words, naming the table.
            refused = isinstance(err, PreflightError)
            said = redact_message(str(err)) if refused else f"{ref} {self.name} failed: {cause}"
            tag = said if refused else str(cause)
            context.instance.add_run_tags(context.run_id, failure_tags(str(ref), cause.kind, tag))
            raise Failure(description=said, allow_retries=False) from RedactedCause.of(err)
        finally:
            spark.untag()

    def _ask_for_retry(
        self,
        context: OpExecutionContext,
        tables: Sequence[DiscoveredTable],
        attempt: Mapping[str, OpResult],
        reasons: Sequence[str],
    ) -> NoReturn:
        """A retry request carries no metadata: each table's outcome of this attempt goes to the event
        log first (earlier_attempts reads it back on the retry)."""
        max_retries = self.retry_policy.max_retries if self.retry_policy else 0
        for dt in tables:
            if (done := attempt.get(key := str(dt.ref))) is not None:
                context.log_event(
                    AssetObservation(
                        asset_key=table_asset_key(dt.ref),
                        description=f"{self.name} attempt {context.retry_number + 1}: {done.reason}",
                        metadata={
                            ATTEMPT_METADATA: MetadataValue.json({"table": key, "result": encode(done)})
                        },
                    )
                )
        raise Failure(
            description=f"{'; '.join(reasons)}; retrying (attempt {context.retry_number + 1} of {max_retries})",
            allow_retries=True,
        )


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
