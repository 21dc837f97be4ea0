"""Bare Dagster code locations for bench/scale/definitions_bench.py: what Dagster itself costs.

    BARE_SHAPE=spec.json BARE_KIND=same     python -m bench.scale.load_child load bench.scale.bare_shapes
    BARE_SHAPE=spec.json BARE_KIND=minimal  python -m bench.scale.load_child load bench.scale.bare_shapes

``$BARE_SHAPE`` is a spec the bench extracted from the product's loaded repository (bench/scale/shape_spec.py).

* ``same`` (the default): the product's objects with trivial op bodies: per table group a
  graph-backed multi-asset (``AssetsDefinition.from_graph``) with the same asset keys, partitions
  and chain of ops (same op and invocation names), one ``@multi_asset_check`` op per check op of the
  product with the same check keys, the lake-wide op-backed assets with their dependencies, and the
  same jobs over the same asset and check keys. No descriptions, metadata, tags, owners, group
  names, pools, backfill policies, resources, sensors or schedules: what Dagster needs to resolve
  the same graph and jobs, and the in-process executor the product's jobs use (a multiprocess
  executor would load the definitions again in each step's process).
* ``minimal``: Dagster's floor for the same tables: per table group one ``@multi_asset`` of
  ``AssetSpec``s (same keys and partitions) with one check per table, ``can_subset=True``; no
  lake-wide asset and no job besides Dagster's implicit one.

The module's ``defs`` is built when it is imported, from the environment: a run worker (a fresh
process that inherits it) finds the same shape as the code server did. (No ``from __future__
import annotations``: Dagster reads the ``context`` annotations at definition time.)
"""

import os
from collections.abc import Iterator, Sequence
from functools import cache

from dagster import (
    AssetCheckExecutionContext,
    AssetCheckKey,
    AssetCheckResult,
    AssetChecksDefinition,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    AssetSpec,
    Definitions,
    GraphOut,
    In,
    MaterializeResult,
    Nothing,
    OpExecutionContext,
    Out,
    Output,
    PartitionsDefinition,
    define_asset_job,
    graph,
    in_process_executor,
    multi_asset,
    multi_asset_check,
    op,
)

from bench.scale.shape_spec import AssetOpSpec, CheckOpSpec, GroupSpec, JobSpec, PartitionsSpec, ShapeSpec

SPEC_ENV = "BARE_SHAPE"
KIND_ENV = "BARE_KIND"
MINIMAL_CHECK = "check"


@cache  # one object per partitions definition, as the product shares its groups' definitions
def _partitions(spec: PartitionsSpec | None) -> PartitionsDefinition | None:
    return spec.build() if spec is not None else None


# -- same shape ------------------------------------------------------------------------------------


def _step(name: str, first: bool):
    @op(name=name, ins={} if first else {"after": In(Nothing)}, out=Out(Nothing))
    def step() -> None:
        return None

    return step


def _last_step(name: str, first: bool, outputs: Sequence[str]):
    ins = {} if first else {"after": In(Nothing)}

    @op(name=name, ins=ins, out={o: Out(Nothing, is_required=False) for o in outputs})
    def last(context: OpExecutionContext) -> Iterator[Output]:
        for output in context.selected_output_names:
            yield Output(None, output)

    return last


def group_asset(spec: GroupSpec) -> AssetsDefinition:
    """The group's maintenance: its ops chained under their invocation names, every output from the last."""
    outputs = [name for name, _ in spec.outputs]
    *steps, (last_alias, last_name) = spec.ops
    ops = [_step(name, i == 0).alias(alias) for i, (alias, name) in enumerate(steps)]
    last = _last_step(last_name, not steps, outputs).alias(last_alias)

    @graph(name=spec.graph, out={o: GraphOut() for o in outputs})
    def chain():
        done = None
        for step in ops:
            done = step() if done is None else step(done)
        results = last() if done is None else last(done)
        return {outputs[0]: results} if len(outputs) == 1 else dict(results._asdict())

    return AssetsDefinition.from_graph(
        chain,
        keys_by_output_name={name: AssetKey(key) for name, key in spec.outputs},
        partitions_def=_partitions(spec.partitions),
        can_subset=spec.can_subset,
    )


def asset_op(spec: AssetOpSpec) -> AssetsDefinition:
    specs = [AssetSpec(AssetKey(key), deps=[AssetKey(d) for d in deps]) for key, deps in spec.assets]

    @multi_asset(name=spec.op, specs=specs, partitions_def=_partitions(spec.partitions))
    def lake_wide() -> None:
        return None

    return lake_wide


def check_op(spec: CheckOpSpec) -> AssetChecksDefinition:
    specs = [AssetCheckSpec(name, asset=AssetKey(key)) for key, name in spec.checks]

    @multi_asset_check(name=spec.op, specs=specs, can_subset=spec.can_subset)
    def checks(context: AssetCheckExecutionContext) -> Iterator[AssetCheckResult]:
        for key in context.selected_asset_check_keys:
            yield AssetCheckResult(asset_key=key.asset_key, check_name=key.name, passed=True)

    return checks


def job_selection(job: JobSpec, checks_of: dict[AssetKey, set[AssetCheckKey]]) -> AssetSelection:
    """The job's exact keys, selected as the product does: assets with their checks where that is
    what the job holds (the maintenance jobs), checks by key for the rest."""
    keys = [AssetKey(k) for k in job.assets]
    wanted = {AssetCheckKey(AssetKey(k), name) for k, name in job.checks}
    implied = set().union(*(checks_of.get(k, set()) for k in keys))
    assets = AssetSelection.assets(*keys)
    if not implied <= wanted:
        assets, implied = assets.without_checks(), set()
    extra = sorted(wanted - implied, key=lambda c: (c.asset_key.path, c.name))
    if not keys:
        return AssetSelection.checks(*extra)
    return assets | AssetSelection.checks(*extra) if extra else assets


def same_shape(spec: ShapeSpec) -> Definitions:
    checks = [check_op(c) for c in spec.check_ops]
    checks_of: dict[AssetKey, set[AssetCheckKey]] = {}
    for c in spec.check_ops:
        for key, name in c.checks:
            checks_of.setdefault(AssetKey(key), set()).add(AssetCheckKey(AssetKey(key), name))
    jobs = [
        define_asset_job(j.name, selection=job_selection(j, checks_of))
        for j in spec.jobs
        if not j.name.startswith("__")  # Dagster's implicit asset job: made by Dagster
    ]
    return Definitions(
        assets=[*(group_asset(g) for g in spec.groups), *(asset_op(a) for a in spec.asset_ops)],
        asset_checks=checks,
        jobs=jobs,
        executor=in_process_executor,
    )


# -- minimal shape ---------------------------------------------------------------------------------


def minimal_group(spec: GroupSpec) -> AssetsDefinition:
    keys = [AssetKey(key) for _, key in spec.outputs]

    @multi_asset(
        name=spec.graph,
        specs=[AssetSpec(k) for k in keys],
        check_specs=[AssetCheckSpec(MINIMAL_CHECK, asset=k) for k in keys],
        partitions_def=_partitions(spec.partitions),
        can_subset=True,
    )
    def tables(context: AssetExecutionContext) -> Iterator[MaterializeResult | AssetCheckResult]:
        for key in context.selected_asset_keys:
            yield MaterializeResult(asset_key=key)
        for check in context.selected_asset_check_keys:
            yield AssetCheckResult(asset_key=check.asset_key, check_name=check.name, passed=True)

    return tables


def minimal_shape(spec: ShapeSpec) -> Definitions:
    return Definitions(assets=[minimal_group(g) for g in spec.groups], executor=in_process_executor)


def from_environment() -> Definitions | None:
    path = os.environ.get(SPEC_ENV)
    if not path:
        return None
    kind = os.environ.get(KIND_ENV, "same")
    if kind not in ("same", "minimal"):
        raise ValueError(f"${KIND_ENV}={kind!r}: same or minimal")
    spec = ShapeSpec.read(path)
    return same_shape(spec) if kind == "same" else minimal_shape(spec)


defs = from_environment()
