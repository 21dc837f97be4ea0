"""Lineage: the assets that write each table (producers) and read it (consumers), from the table's
policy (``lineage.producers`` / ``lineage.consumers`` in the settings, or the table properties
``icelake.lineage.producers`` / ``icelake.lineage.consumers``), so the graph shows
writer → table → reader.

A key naming another maintained table links the two tables; a key one of the registered lineage
builders knows builds that asset (the demo's writer and consumer, demo/assets.py: the demo registers
them, orchestration does not import the demo); any other key becomes an external asset (an
``AssetSpec``: shown in the graph, never executed here). Assets defined next to this project's
Definitions can use plain ``deps=[table asset key]`` instead."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dagster import AssetKey, AssetsDefinition, AssetSpec

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.policies import EffectivePolicy
from icelake_assets.settings import SettingsError

AssetBuilder = Callable[[TableRef], AssetsDefinition]


@dataclass(frozen=True)
class LineageBuilders:
    """Assets built for the table whose lineage names their key, by role: a writer only makes sense
    upstream of its table, a reader downstream."""

    producers: Mapping[AssetKey, AssetBuilder] = field(default_factory=dict)
    consumers: Mapping[AssetKey, AssetBuilder] = field(default_factory=dict)

    def by_key(self) -> dict[AssetKey, AssetBuilder]:
        return {**self.producers, **self.consumers}


# By who registered them. The layers above orchestration register theirs when imported (the demo:
# demo/__init__.py), so orchestration builds their assets without importing them.
_REGISTERED: dict[str, LineageBuilders] = {}


def register_lineage_builders(owner: str, builders: LineageBuilders) -> None:
    _REGISTERED[owner] = builders


def registered_lineage_builders() -> LineageBuilders:
    return LineageBuilders(
        producers={k: b for r in _REGISTERED.values() for k, b in r.producers.items()},
        consumers={k: b for r in _REGISTERED.values() for k, b in r.consumers.items()},
    )


@dataclass
class Lineage:
    # Upstream asset keys of each table asset (its producers, and tables that name it as consumer).
    producers: dict[TableRef, list[AssetKey]] = field(default_factory=dict)
    # The built assets named by some table, and external assets for every other declared key.
    assets: list[AssetsDefinition | AssetSpec] = field(default_factory=list)


def _keys(values: Sequence[str]) -> list[AssetKey]:
    return [AssetKey.from_user_string(v) for v in values]


def build_lineage(
    tables: Sequence[DiscoveredTable],
    policies: Mapping[TableRef, EffectivePolicy],
    builders: LineageBuilders | None = None,
) -> Lineage:
    """``policies``: each table's EffectivePolicy; ``builders``: default, the registered ones. Raises
    SettingsError naming the table and the key when a declaration cannot hold (a table producing
    itself, a demo asset claimed by two tables)."""
    builders = registered_lineage_builders() if builders is None else builders
    buildable = builders.by_key()
    by_key = {table_asset_key(t.ref): t.ref for t in tables}
    lineage = Lineage(producers={t.ref: [] for t in tables})
    external: dict[AssetKey, list[AssetKey]] = {}  # external key -> the tables it depends on
    built: dict[AssetKey, TableRef] = {}  # each built asset's table

    def add_upstream(ref: TableRef, key: AssetKey) -> None:
        if key == table_asset_key(ref):
            raise SettingsError(f"lineage of {ref}: {key.to_user_string()} is the table itself")
        if key not in lineage.producers[ref]:
            lineage.producers[ref].append(key)

    def claim_built(ref: TableRef, key: AssetKey, role: str) -> None:
        if key not in (builders.producers if role == "producers" else builders.consumers):
            raise SettingsError(
                f"lineage of {ref}: the demo asset {key.to_user_string()} cannot be one of its {role}"
            )
        if built.setdefault(key, ref) != ref:
            raise SettingsError(
                f"lineage: the demo asset {key.to_user_string()} is declared for both "
                f"{built[key]} and {ref}; it serves one table"
            )

    for t in tables:
        declared = policies[t.ref].policy.lineage
        for key in _keys(declared.producers):
            add_upstream(t.ref, key)
            if key in buildable:
                claim_built(t.ref, key, "producers")
            elif key not in by_key:
                external.setdefault(key, [])
        for key in _keys(declared.consumers):
            if key in by_key:  # a table fed from this one
                add_upstream(by_key[key], table_asset_key(t.ref))
            elif key in buildable:
                claim_built(t.ref, key, "consumers")
            else:
                deps = external.setdefault(key, [])
                if table_asset_key(t.ref) not in deps:
                    deps.append(table_asset_key(t.ref))
    lineage.assets = [
        *(buildable[key](ref) for key, ref in built.items()),
        *(
            AssetSpec(
                key,
                deps=deps,
                group_name="lineage",
                description="Declared in icelake lineage; defined outside this project.",
            )
            for key, deps in external.items()
        ),
    ]
    return lineage
