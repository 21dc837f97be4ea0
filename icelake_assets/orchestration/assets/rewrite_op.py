"""The rewrite op of a table group's graph: scoped to the run's partitions, retried while partitions
fail. Apart from ops.py, which runs any op's work for every table of a run: this module knows the
rewrite's arguments (its descriptor's ``partition_scope`` input)."""

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from dagster import Backoff, Jitter, OpDefinition, OpExecutionContext, RetryPolicy

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.maintenance.ops.chain import REWRITE_OP, MaintenanceOp
from icelake_assets.maintenance.results.base import OpResult
from icelake_assets.orchestration.assets.ops import TableOpStep
from icelake_assets.orchestration.assets.run_state import RunState
from icelake_assets.orchestration.tables.partitions import partition_key, run_scope
from icelake_assets.orchestration.tables.table_groups import TableGroup
from icelake_assets.planning.guards import is_approved
from icelake_assets.policies import EffectivePolicy
from icelake_assets.settings import PartitionsPolicy

# How often a running rewrite logs what it committed so far (ICELAKE_PROGRESS_SECONDS overrides).
REWRITE_PROGRESS_SECONDS = float(os.environ.get("ICELAKE_PROGRESS_SECONDS", "30"))


def rewrite_step(
    group: TableGroup, policies: Mapping[TableRef, EffectivePolicy], op: MaintenanceOp[Any]
) -> OpDefinition:
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
            "approved": is_approved(context.run.tags),
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

    return TableOpStep(
        group,
        op.name,
        op.work,
        work_kwargs=scope,
        annotate=keys,
        wants_retry=wants_retry,
        retry_policy=retry,
    ).definition(first=False)


def partitions_policy(effective: EffectivePolicy | None) -> PartitionsPolicy:
    return effective.policy.partitions if effective is not None else PartitionsPolicy()
