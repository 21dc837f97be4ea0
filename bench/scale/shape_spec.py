"""The shape of a code location, read from its loaded RepositoryDefinition (for bench/scale/bare_shapes.py).

    python -m bench.scale.shape_spec icelake_assets.definitions shape.json

What Dagster resolves when it loads the product, without what the product does inside its ops: each
graph-backed multi-asset (a table group's maintenance: its graph's ops in order and its outputs'
asset keys and partitions), each op-backed asset (lake-wide: its keys, their dependencies), each
asset-check op (its check keys in order) and each job (the asset keys and check keys it executes).
Written as JSON for the bare module's fresh processes, and compared whole: the bare same-shape
repository must read back to the product's spec.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dagster import (
    AssetChecksDefinition,
    DynamicPartitionsDefinition,
    GraphDefinition,
    PartitionsDefinition,
    RepositoryDefinition,
    StaticPartitionsDefinition,
    TimeWindowPartitionsDefinition,
)

KeyPath = tuple[str, ...]
CheckRef = tuple[KeyPath, str]  # (asset key path, check name)


@dataclass(frozen=True)
class PartitionsSpec:
    kind: str  # time_window, static or dynamic: the public class to rebuild it with
    args: tuple[tuple[str, Any], ...]  # that class's keyword arguments

    def build(self) -> PartitionsDefinition:
        kwargs = dict(self.args)
        if self.kind == "time_window":
            return TimeWindowPartitionsDefinition(**kwargs)
        if self.kind == "static":
            return StaticPartitionsDefinition(list(kwargs["partition_keys"]))
        return DynamicPartitionsDefinition(name=kwargs["name"])


@dataclass(frozen=True)
class GroupSpec:
    """A graph-backed multi-asset whose graph is a chain of ops, the last one giving every output."""

    graph: str
    ops: tuple[tuple[str, str], ...]  # (invocation name in the graph, op definition name), in order
    outputs: tuple[tuple[str, KeyPath], ...]  # graph output name -> asset key
    partitions: PartitionsSpec | None
    can_subset: bool


@dataclass(frozen=True)
class AssetOpSpec:
    """An op-backed asset definition (e.g. the lake-wide overview)."""

    op: str
    assets: tuple[tuple[KeyPath, tuple[KeyPath, ...]], ...]  # (key, its dependencies)
    partitions: PartitionsSpec | None


@dataclass(frozen=True)
class CheckOpSpec:
    op: str
    checks: tuple[CheckRef, ...]  # in the op's output order
    can_subset: bool


@dataclass(frozen=True)
class JobSpec:
    name: str
    assets: tuple[KeyPath, ...]  # sorted
    checks: tuple[CheckRef, ...]  # sorted


@dataclass(frozen=True)
class ShapeSpec:
    groups: tuple[GroupSpec, ...]
    asset_ops: tuple[AssetOpSpec, ...]
    check_ops: tuple[CheckOpSpec, ...]
    jobs: tuple[JobSpec, ...]  # Dagster's implicit asset job included
    # each sorted by name

    @property
    def table_keys(self) -> list[KeyPath]:
        return [key for g in self.groups for _, key in g.outputs]

    @property
    def check_keys(self) -> list[CheckRef]:
        return [c for op in self.check_ops for c in op.checks]

    def job(self, name: str) -> JobSpec:
        return next(j for j in self.jobs if j.name == name)

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self)))

    @staticmethod
    def read(path: str | Path) -> ShapeSpec:
        return from_json(json.loads(Path(path).read_text()))


# -- from a repository -------------------------------------------------------------------------------


class UnsupportedShape(ValueError):
    """The repository holds a definition the bare module cannot reproduce: the spec would lie."""


def partitions_spec(pdef: PartitionsDefinition | None) -> PartitionsSpec | None:
    if pdef is None:
        return None
    if isinstance(pdef, TimeWindowPartitionsDefinition):
        fmt = pdef.fmt
        end = pdef.end.strftime(fmt) if pdef.end is not None else None
        args = {
            "cron_schedule": pdef.cron_schedule,
            "start": pdef.start.strftime(fmt),
            "fmt": fmt,
            "timezone": pdef.timezone,
            "end_offset": pdef.end_offset,
            "end": end,
        }
        return PartitionsSpec("time_window", tuple(args.items()))
    if isinstance(pdef, StaticPartitionsDefinition):
        return PartitionsSpec("static", (("partition_keys", tuple(pdef.get_partition_keys())),))
    if isinstance(pdef, DynamicPartitionsDefinition) and pdef.name:
        return PartitionsSpec("dynamic", (("name", pdef.name),))
    raise UnsupportedShape(f"partitions {pdef!r}")


def _group(asset: Any) -> GroupSpec:
    graph: GraphDefinition = asset.node_def
    nodes = list(graph.nodes_in_topological_order)
    last = nodes[-1].name
    chained = all(len(n.input_dict) == (0 if i == 0 else 1) for i, n in enumerate(nodes))
    if (
        graph.input_mappings
        or not chained
        or any(m.maps_from.node_name != last for m in graph.output_mappings)
    ):
        raise UnsupportedShape(f"graph {graph.name}: not a chain of ops feeding the outputs from the last")
    return GroupSpec(
        graph=graph.name,
        ops=tuple((n.name, n.definition.name) for n in nodes),
        outputs=tuple((name, tuple(key.path)) for name, key in asset.keys_by_output_name.items()),
        partitions=partitions_spec(asset.partitions_def),
        can_subset=asset.can_subset,
    )


def _asset_op(asset: Any) -> AssetOpSpec:
    return AssetOpSpec(
        op=asset.node_def.name,
        assets=tuple(
            (tuple(s.key.path), tuple(tuple(d.asset_key.path) for d in s.deps)) for s in asset.specs
        ),
        partitions=partitions_spec(asset.partitions_def),
    )


def _check_op(checks: Any) -> CheckOpSpec:
    return CheckOpSpec(
        op=checks.node_def.name,
        checks=tuple((tuple(s.asset_key.path), s.name) for s in checks.check_specs),
        can_subset=checks.can_subset,
    )


def _job(job: Any) -> JobSpec:
    # The job's nodes and the (subsetted) definitions they execute: what its runs can select. (Its
    # asset layer: no public API lists what a resolved job executes.)
    executed = [d.assets_def for d in job.asset_layer.data]
    return JobSpec(
        name=job.name,
        assets=tuple(sorted(tuple(k.path) for a in executed for k in a.keys)),
        checks=tuple(sorted((tuple(c.asset_key.path), c.name) for a in executed for c in a.check_keys)),
    )


def spec_of(repo: RepositoryDefinition) -> ShapeSpec:
    groups: list[GroupSpec] = []
    asset_ops: list[AssetOpSpec] = []
    check_ops: list[CheckOpSpec] = []
    for a in repo.asset_graph.assets_defs:
        if isinstance(a, AssetChecksDefinition):
            check_ops.append(_check_op(a))
        elif not a.is_executable or a.check_keys:
            raise UnsupportedShape(
                f"{a.node_def.name if a.is_executable else a.keys}: external or with checks"
            )
        elif isinstance(a.node_def, GraphDefinition):
            groups.append(_group(a))
        else:
            asset_ops.append(_asset_op(a))
    jobs = sorted((_job(j) for j in repo.get_all_jobs()), key=lambda j: j.name)
    # Sorted by name: the asset graph's order is not the definitions' order.
    return ShapeSpec(
        tuple(sorted(groups, key=lambda g: g.graph)),
        tuple(sorted(asset_ops, key=lambda a: a.op)),
        tuple(sorted(check_ops, key=lambda c: c.op)),
        tuple(jobs),
    )


# -- JSON ------------------------------------------------------------------------------------------


def _tuples(value: Any) -> Any:
    """JSON arrays back to the tuples the frozen dataclasses hold (so specs compare equal)."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _keys(value: list[list[str]]) -> tuple[KeyPath, ...]:
    return tuple(map(tuple, value))


def _checks(value: list[list[Any]]) -> tuple[CheckRef, ...]:
    # Not _tuples: the jobs hold every check several times over (a tenth of a second per 1,000 tables).
    return tuple((tuple(key), name) for key, name in value)


def _partitions(data: dict | None) -> PartitionsSpec | None:
    return PartitionsSpec(data["kind"], _tuples(data["args"])) if data else None


def from_json(data: dict[str, Any]) -> ShapeSpec:
    return ShapeSpec(
        groups=tuple(
            GroupSpec(
                g["graph"],
                _tuples(g["ops"]),
                tuple((name, tuple(key)) for name, key in g["outputs"]),
                _partitions(g["partitions"]),
                g["can_subset"],
            )
            for g in data["groups"]
        ),
        asset_ops=tuple(
            AssetOpSpec(a["op"], _tuples(a["assets"]), _partitions(a["partitions"]))
            for a in data["asset_ops"]
        ),
        check_ops=tuple(
            CheckOpSpec(c["op"], _checks(c["checks"]), c["can_subset"]) for c in data["check_ops"]
        ),
        jobs=tuple(JobSpec(j["name"], _keys(j["assets"]), _checks(j["checks"])) for j in data["jobs"]),
    )


def main(module: str, out: str) -> None:
    """``python -m bench.scale.shape_spec MODULE OUT``: load MODULE as the code server does, write its spec
    (a fresh process per lake: a module imported once keeps its first Definitions)."""
    from bench.scale.load_child import load_repository

    started = time.perf_counter()
    spec = spec_of(load_repository(module))
    spec.write(Path(out))
    print("RESULT " + json.dumps({"seconds": time.perf_counter() - started}), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
