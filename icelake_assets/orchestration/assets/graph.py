"""Each Iceberg table becomes an asset whose materialization is its maintenance, a chain of ops:
expire_snapshots → remove_orphan_files → rewrite_data_files → rewrite_manifests → compute_statistics
→ validate.

The tables of a group (orchestration/tables/table_groups.py) share one graph of those ops, which maintain
the tables the run selects, one after the other (the sensor's runs select one table). Op
definitions carry the group in their names (``maintain_017__rewrite_data_files``: node definitions
must have unique names across the code location), but the graph invokes each under its short name,
so a run's steps read ``maintain_017.rewrite_data_files``.

Partitioned tables (orchestration/tables/partitions.py) are partitioned assets. A run of one partition or a
range of them (a backfill takes ``policy.partitions.partitions_per_run`` per run) compacts only the
compaction candidates among its partitions, with a ``where`` naming exactly them; the table-wide ops
(expire, orphans, manifests) still run once per run, each only past its own threshold. A run
without a partition (e.g. the maintenance job over every table) maintains the whole table, like an
unpartitioned one. The rewrite op retries partitions that failed with exponential backoff; after
the last attempt the run validates what did commit, records a materialization for each partition
that finished, and fails naming the partitions that did not, so a backfill shows them as failed
and re-runs only them.

The ops live in orchestration/assets/ops.py, the last one (validation, rollback, audit, what
the UI shows of a run) in orchestration/assets/validation.py; this module assembles them.
"""

from collections.abc import Mapping, Sequence
from typing import Any

from dagster import (
    AssetIn,
    AssetsDefinition,
    BackfillPolicy,
    Definitions,
    GraphIn,
    GraphOut,
    JobDefinition,
    Nothing,
    OpDefinition,
    OpExecutionContext,
    graph,
    in_process_executor,
)

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.maintenance.ops import chain
from icelake_assets.maintenance.ops.chain import MaintenanceOp
from icelake_assets.orchestration.assets.description import asset_group, asset_metadata, asset_tags, describe
from icelake_assets.orchestration.assets.ops import TableOpStep, WorkKwargs
from icelake_assets.orchestration.assets.rewrite_op import partitions_policy, rewrite_step
from icelake_assets.orchestration.assets.run_state import RunState
from icelake_assets.orchestration.assets.validation import validate_op
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.orchestration.tables.table_groups import (
    TableGroup,
    maintenance_job_name,
    maintenance_jobs,
)
from icelake_assets.planning.guards import is_approved
from icelake_assets.policies import EffectivePolicy

MAINTENANCE_JOB = "icelake_maintenance"


def run_inputs(op: MaintenanceOp[Any]) -> WorkKwargs:
    """What the run gives ``op`` besides the table (its descriptor's ``inputs``), from the run's
    resources and the state the ops before it left."""

    def kwargs(context: OpExecutionContext, dt: DiscoveredTable, state: RunState) -> dict[str, Any]:
        given: dict[str, Any] = {}
        for name in op.inputs:
            if name == "orphan_scan":  # every known table's files are left alone
                given["scan_orphans"] = context.resources.icelake.scan_orphans
            elif name == "orphan_candidates":  # two-phase removal: what earlier runs recorded
                given["candidates"] = context.resources.icelake.orphan_candidates()
                given["run_id"] = context.run_id
            elif name == "data_commits":  # the manifests consolidate a partial-progress rewrite
                given["rewrite_commits"] = state.rewrite_commits()
            elif name == "rewritten_snapshots":  # statistics follow the snapshots the run committed
                given["rewrite_commits"] = state.rewrote()
            elif name == "run_id":  # names the run's restore point
                given["run_id"] = context.run_id
            elif name == "approval":  # an operator approved the run (icelake approve, the launchpad)
                given["approved"] = is_approved(context.run.tags)
        return given

    return kwargs


def op_steps(
    group: TableGroup, policies: Mapping[TableRef, EffectivePolicy], after_upstream: bool
) -> list[OpDefinition]:
    """One op definition per maintenance op of the chain (maintenance/ops/chain.py), in its order;
    the rewrite has its partition scope and retries (rewrite_op.py)."""
    steps = []
    for i, op in enumerate(chain.MAINTENANCE_OPS):
        if "partition_scope" in op.inputs:
            steps.append(rewrite_step(group, policies, op))
        else:
            step = TableOpStep(group, op.name, op.work, work_kwargs=run_inputs(op) if op.inputs else None)
            steps.append(step.definition(first=i == 0, after_upstream=after_upstream and i == 0))
    return steps


def _group_graph(group: TableGroup, policies: Mapping[TableRef, EffectivePolicy]):
    """The group's graph of ops (one output per table) and its producers' inputs (lineage)."""
    # Producers (lineage) feed one fanned-in Nothing input of the first op.
    ins = {f"producer_{i}": AssetIn(key, dagster_type=Nothing) for i, key in enumerate(group.producers)}
    first, *later = op_steps(group, policies, after_upstream=bool(ins))
    validate = validate_op(group)
    names = {t.ref.safe_name: t for t in group.tables}

    # A named graph: a graph named after an asset key would refuse e.g. o'brien or café.
    @graph(name=group.name, ins={name: GraphIn() for name in ins}, out={n: GraphOut() for n in names})
    def maintained_tables(**upstream):
        # Each op runs under its short name (steps read `<graph>.rewrite_data_files`): invocation
        # names need be unique only within this graph, op definitions across the code location.
        def short(op_def):
            return op_def.alias(op_def.name.removeprefix(f"{group.name}__"))

        state = short(first)(upstream=list(upstream.values())) if upstream else short(first)()
        for step in later:
            state = short(step)(state)
        done = short(validate)(state)
        return {next(iter(names)): done} if len(names) == 1 else dict(done._asdict())

    return maintained_tables, ins


def build_group_asset(
    group: TableGroup, policies: Mapping[TableRef, EffectivePolicy] | None = None
) -> AssetsDefinition:
    """The maintenance of a group of tables (orchestration/tables/table_groups.py): one graph of ops, one
    asset per table. ``policies``: each table's EffectivePolicy, shown as metadata, owners and tags;
    its ``partitions`` part sets the backfill policy and the rewrite's retries. The group's
    ``producers`` (lineage, single-table groups) are upstream in the graph, and maintenance runs after
    them when both are in one run."""
    policies = policies or {}
    maintained_tables, ins = _group_graph(group, policies)
    names = {t.ref.safe_name: t for t in group.tables}
    per_run = min(partitions_policy(policies.get(t.ref)).partitions_per_run for t in group.tables)

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


def build_group_job(group: TableGroup, policies: Mapping[TableRef, EffectivePolicy]) -> JobDefinition:
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
    groups: Sequence[TableGroup],
    policies: Mapping[TableRef, EffectivePolicy],
    defined_by_project: bool = False,
) -> Definitions:
    """This module's part of the code location: one maintenance asset definition per table group, and
    the whole-table maintenance jobs (:func:`~icelake_assets.orchestration.tables.table_groups.maintenance_jobs`);
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
