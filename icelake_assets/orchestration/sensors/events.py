"""The maintenance sensor's conversions of a table's plan (planning/table.py) into what Dagster and
the audit take: run requests, the asset observation, the audit record; and the same for a table that
could not be evaluated, held back by the launch order, or summed up in the tick's skip reason."""

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from dagster import (
    AddDynamicPartitionsRequest,
    AssetKey,
    AssetObservation,
    DynamicPartitionsDefinition,
    MetadataValue,
    PartitionsDefinition,
    RunRequest,
    SensorEvaluationContext,
    TimeWindowPartitionsDefinition,
)

from icelake_assets.audit.records import AuditRecord
from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.causes import describe
from icelake_assets.health.overview import TableBenefit
from icelake_assets.health.stats import TableStats
from icelake_assets.orchestration.assets.graph import table_asset_key
from icelake_assets.orchestration.runs.run_tags import TABLE_TAG, shared_run_tags
from icelake_assets.orchestration.tables.partitions import (
    dynamic_partition_requests,
    offending_partition_keys,
)
from icelake_assets.planning.outcome import Outcome
from icelake_assets.planning.packing import LaunchMode, PredictedWork, launch_mode, predicted_work
from icelake_assets.planning.priority import Rank
from icelake_assets.planning.stale_runs import max_runtime_seconds
from icelake_assets.planning.table import TablePlan
from icelake_assets.private_api import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    MAX_RUNTIME_SECONDS_TAG,
    PRIORITY_TAG,
)
from icelake_assets.settings import OPERATIONS, Policy

TRIGGER_TAG = "icelake/trigger"
SIGNAL_TAG = "icelake/signal"
OPS_TAG = "icelake/ops"
RANK_TAG = "icelake/priority_rank"  # "<rank>/<tables wanting a run>" in the tick that requested it


@dataclass(frozen=True)
class TableEvaluation:
    ref: TableRef
    outcome: Outcome  # planning/outcome.py says what each means
    reason: str
    run_requests: tuple[RunRequest, ...] = ()
    observation: AssetObservation | None = None
    audit: AuditRecord | None = None
    dynamic_requests: tuple[AddDynamicPartitionsRequest, ...] = ()
    benefit: TableBenefit | None = None  # the overview's view of the table, for the launch order
    # This tick's orphan scan found files to remove (TablePlan.orphans_pending).
    orphans_pending: bool = False
    # A launched table's predicted work and whether it may share a run (planning/packing.py).
    work: PredictedWork = PredictedWork(0, 0)
    launch: LaunchMode | None = None


def _observation(key: AssetKey, stats: TableStats, reason: str, outcome: str) -> AssetObservation:
    numbers = {
        **stats.summary(),
        "candidate_partitions": len(stats.compaction_candidates),
        "recent_writer_commits": getattr(stats, "recent_writer_commits", 0),
    }
    metadata: dict[str, Any] = {f"health/{k}": MetadataValue.int(int(v)) for k, v in numbers.items()}
    metadata["sensor/outcome"] = MetadataValue.text(str(outcome))  # plain text: Dagster serializes it
    metadata["sensor/reason"] = MetadataValue.text(reason)
    return AssetObservation(asset_key=key, metadata=metadata)


def _run_requests(
    table: DiscoveredTable,
    pdef: PartitionsDefinition | None,
    stats: TableStats,
    ops: Sequence[str],
    tags: dict[str, str],
) -> list[RunRequest]:
    """One run per table, so one Spark application: the range of its offending time partitions (the
    rewrite takes only the candidates within it), the offending partition of a dynamic asset when
    there is one, or else the whole table (table-wide ops, several dynamic or multi-dimension keys)."""
    key = table_asset_key(table.ref)
    keys = (
        offending_partition_keys(table, stats, pdef)
        if pdef is not None and "rewrite_data_files" in ops
        else []
    )
    if isinstance(pdef, TimeWindowPartitionsDefinition):
        # Keys of periods the loaded definitions do not know yet (a new day's first rows, before the
        # code location reloads) would fail the run at launch ("partition key range end ... is after
        # the partitions definition end time"): the run covers the known ones, or the whole table.
        known = [k for k in keys if pdef.has_partition_key(k)]
        keys = known if len(known) == len(keys) else []
    if keys and isinstance(pdef, TimeWindowPartitionsDefinition) and len(keys) > 1:
        # Keys are Iceberg's own time values (2024-01-03, 2024-01-03-05, ...): they sort by time.
        return [
            RunRequest(
                asset_selection=[key],
                tags={
                    **tags,
                    ASSET_PARTITION_RANGE_START_TAG: min(keys),
                    ASSET_PARTITION_RANGE_END_TAG: max(keys),
                },
            )
        ]
    if len(keys) == 1:
        return [RunRequest(asset_selection=[key], partition_key=keys[0], tags=tags)]
    return [RunRequest(asset_selection=[key], tags=tags)]


def _audit(ref: TableRef, decision: str, reason: str, **fields: Any) -> AuditRecord:
    return AuditRecord(
        table_name=str(ref), kind="decision", decision=decision, trigger="sensor", reason=reason, **fields
    )


def _requested_partitions(requests: Sequence[RunRequest]) -> list[str]:
    out = []
    for r in requests:
        if r.partition_key:
            out.append(str(r.partition_key))
        elif ASSET_PARTITION_RANGE_START_TAG in r.tags:
            out.append(f"{r.tags[ASSET_PARTITION_RANGE_START_TAG]}...{r.tags[ASSET_PARTITION_RANGE_END_TAG]}")
    return out


def table_evaluation(
    context: SensorEvaluationContext,
    table: DiscoveredTable,
    pdef: PartitionsDefinition | None,
    stats: TableStats,
    policy: Policy,
    plan: TablePlan,
) -> TableEvaluation:
    """The plan in Dagster's terms: a launched table's run requests (only the partitions the rewrite
    takes: Iceberg would skip the others), its observation and, unless observed, its audit record."""
    ref, verdict = table.ref, plan.verdict
    run_requests: list[RunRequest] = []
    dynamic: list[AddDynamicPartitionsRequest] = []
    work, launch = PredictedWork(0, 0), None
    if plan.outcome == Outcome.LAUNCHED:
        planned = replace(stats, compaction_candidates=list(plan.rewrite.partitions))
        tags = {
            TABLE_TAG: str(ref),
            TRIGGER_TAG: "sensor",
            SIGNAL_TAG: verdict.reason[:200],
            OPS_TAG: ",".join(verdict.ops),
            # Run monitoring's backstop behind the run leases, from the bytes the run plans to rewrite.
            MAX_RUNTIME_SECONDS_TAG: str(
                max_runtime_seconds(int(verdict.details.get("estimated_rewrite_bytes", 0)))
            ),
        }
        run_requests = _run_requests(table, pdef, planned, verdict.ops, tags)
        work = predicted_work(stats, verdict)
        partitioned = any(r.partition_key or ASSET_PARTITION_RANGE_START_TAG in r.tags for r in run_requests)
        launch = launch_mode(policy, work, partitioned)
        keys = [k for r in run_requests if (k := r.partition_key)]
        if keys and isinstance(pdef, DynamicPartitionsDefinition):
            dynamic = dynamic_partition_requests(table, stats, context.instance, keys=keys)
    audit = None
    if plan.record is not None:
        audit = _audit(
            ref,
            plan.record,
            plan.reason,
            signals={d.op: d.signals for d in plan.decisions},
            policy=policy.model_dump(mode="json"),
            partitions=tuple(_requested_partitions(run_requests)),
            partitions_reason="compaction candidates" if run_requests else None,
            writer_check={k: v for k, v in verdict.details.items() if "writer" in k or "quiet" in k},
            cost_estimate_bytes=int(verdict.details.get("estimated_rewrite_bytes", 0)),
            snapshot_before=stats.current_snapshot_id,
        )
    return TableEvaluation(
        ref,
        plan.outcome,
        plan.reason,
        run_requests=tuple(run_requests),
        observation=_observation(table_asset_key(ref), stats, plan.reason, plan.outcome),
        audit=audit,
        dynamic_requests=tuple(dynamic),
        benefit=plan.priority,
        orphans_pending=plan.orphans_pending,
        work=work,
        launch=launch,
    )


def error_evaluation(
    ref: TableRef, err: Exception, context: SensorEvaluationContext, said: bool = False
) -> TableEvaluation:
    """A table that cannot be evaluated (missing or corrupt metadata, unreadable storage, dropped, its
    catalog unreachable): an error outcome for it alone; the tick goes on with the others. ``said``:
    the tick's log already said why (a catalog unreachable is said once for all its tables)."""
    reason = describe(err)
    if not said:
        context.log.warning(f"{ref}: not evaluated: {reason}")
    observation = AssetObservation(
        asset_key=table_asset_key(ref),
        metadata={"sensor/outcome": MetadataValue.text("error"), "sensor/reason": MetadataValue.text(reason)},
    )
    return TableEvaluation(
        ref, Outcome.ERROR, reason, observation=observation, audit=_audit(ref, "error", reason)
    )


def _defer(evaluation: TableEvaluation, outcome: Outcome, reason: str, **metadata: Any) -> TableEvaluation:
    """A launch turned into a deferral: no run, observation and audit (decision ``deferred``) say why."""
    observation = evaluation.observation
    if observation is not None:
        md = {**observation.metadata, **metadata}
        md["sensor/outcome"], md["sensor/reason"] = (
            MetadataValue.text(str(outcome)),
            MetadataValue.text(reason),
        )
        observation = AssetObservation(asset_key=observation.asset_key, metadata=md)
    audit = evaluation.audit
    if audit is not None:
        audit = replace(audit, decision="deferred", reason=reason, partitions=(), partitions_reason=None)
    return replace(
        evaluation,
        outcome=outcome,
        reason=reason,
        run_requests=(),
        dynamic_requests=(),
        observation=observation,
        audit=audit,
    )


def ranked(evaluation: TableEvaluation, rank: Rank, slots: str, held: str | None = None) -> TableEvaluation:
    """A table wanting a run, placed in the launch order: within the free slots its run requests carry
    ``dagster/priority`` (the run queue starts the most beneficial first) and its rank; past them, or
    ``held`` back by its pool (planning/packing.py), it becomes ``queued_by_priority``."""
    extra = {
        "sensor/priority_rank": MetadataValue.int(rank.rank),
        "sensor/benefit_files": MetadataValue.int(rank.benefit),
        "sensor/launch_rule": MetadataValue.text(str(rank.rule)),
        # Since its finding was first seen failing (the lag the overview and Prometheus show too).
        "sensor/waiting_minutes": MetadataValue.float(round(rank.waited_seconds / 60, 1)),
    }
    if rank.queued:
        why = (
            f"{held}: packed once it frees"
            if held
            else f"the free run slots went to higher-ranked tables ({slots})"
        )
        return _defer(
            evaluation,
            Outcome.QUEUED_BY_PRIORITY,
            f"{rank.why}; {why}; ranked again on the next tick",
            **extra,
        )
    tags = {PRIORITY_TAG: str(rank.priority), RANK_TAG: f"{rank.rank}/{rank.of}"}
    observation, audit = evaluation.observation, evaluation.audit
    return replace(
        evaluation,
        run_requests=tuple(r.with_replaced_attrs(tags={**r.tags, **tags}) for r in evaluation.run_requests),
        observation=None
        if observation is None
        else AssetObservation(asset_key=observation.asset_key, metadata={**observation.metadata, **extra}),
        audit=None if audit is None else replace(audit, reason=f"{rank.why}; {audit.reason}"),
    )


def shared_run_request(evaluations: Sequence[TableEvaluation]) -> RunRequest:
    """One run for several small tables (planning/packing.py), best-ranked first: every table
    selected (or named, for jobs without assets), its tags saying which tables it carries; its
    priority the best of theirs, its runtime bound their sum. Each table's request is whole-table."""
    first = evaluations[0].run_requests[0]
    requests = [e.run_requests[0] for e in evaluations]
    tables = [str(e.ref) for e in evaluations]
    acting = {op for r in requests for op in r.tags.get(OPS_TAG, "").split(",") if op}
    signals = "; ".join(
        f"{e.ref}: {r.tags.get(SIGNAL_TAG, '')}" for e, r in zip(evaluations, requests, strict=True)
    )
    tags = {k: v for k, v in first.tags.items() if k != TABLE_TAG}
    tags.update(shared_run_tags(tables))
    tags[SIGNAL_TAG] = f"{len(tables)} small tables: {signals}"[:200]
    tags[OPS_TAG] = ",".join(op for op in OPERATIONS if op in acting)
    tags[MAX_RUNTIME_SECONDS_TAG] = str(sum(int(r.tags.get(MAX_RUNTIME_SECONDS_TAG, 0)) for r in requests))
    if any(PRIORITY_TAG in r.tags for r in requests):
        tags[PRIORITY_TAG] = str(max(int(r.tags.get(PRIORITY_TAG, 0)) for r in requests))
    selection = (
        None if first.asset_selection is None else [k for r in requests for k in r.asset_selection or ()]
    )
    return RunRequest(job_name=first.job_name, asset_selection=selection, tags=tags)


def in_shared_run(evaluation: TableEvaluation, tables: Sequence[str]) -> TableEvaluation:
    """A table packed into a run with ``tables``: its observation and audit record say so."""
    others = len(tables) - 1
    said = f"maintained in one run with {others} other small table(s)"
    observation, audit = evaluation.observation, evaluation.audit
    extra = {"sensor/shared_run_tables": MetadataValue.json(list(tables))}
    return replace(
        evaluation,
        observation=None
        if observation is None
        else AssetObservation(asset_key=observation.asset_key, metadata={**observation.metadata, **extra}),
        audit=None if audit is None else replace(audit, reason=f"{audit.reason}; {said}"),
    )


_SUMMARY_MAX = 900


def tick_summary(results: Sequence[TableEvaluation], total: int, visited: int) -> str:
    """Why a tick launched nothing, for its skip reason: the outcomes, then each table that is not
    simply fine with its reason (deferred, held, errors first)."""
    if not results:
        return f"nothing changed in the {visited} of {total} tables visited: no metadata to read"
    counts: dict[str, int] = {}
    for r in results:
        counts[str(r.outcome)] = counts.get(str(r.outcome), 0) + 1
    head = f"{len(results)} of {total} tables evaluated, no run: " + ", ".join(
        f"{n} {outcome}" for outcome, n in sorted(counts.items(), key=lambda kv: -kv[1])
    )
    details = [f"{r.ref} {r.outcome}: {r.reason}" for r in results if r.outcome != Outcome.SKIPPED]
    text = head + (" | " + "; ".join(details) if details else "")
    return text if len(text) <= _SUMMARY_MAX else text[: _SUMMARY_MAX - 1] + "…"
