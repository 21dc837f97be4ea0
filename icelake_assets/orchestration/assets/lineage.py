"""Lineage: the assets that write each table (producers) and read it (consumers), from the table's
policy (``lineage.producers`` / ``lineage.consumers`` in the settings, or the table properties
``icelake.lineage.producers`` / ``icelake.lineage.consumers``), so the graph shows
writer → table → reader.

A key naming another maintained table links the two tables; a key naming one of the demo's assets
(demo/assets.py) builds that asset; any other key becomes an external asset (an ``AssetSpec``: shown
in the graph, never executed here). Assets defined next to this project's Definitions can use plain
``deps=[table asset key]`` instead."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dagster import AssetKey, AssetsDefinition, AssetSpec

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.demo.assets import DEMO_CONSUMERS, DEMO_PRODUCERS
from icelake_assets.orchestration.names import table_asset_key
from icelake_assets.settings import SettingsError

DEMO_BUILDERS = {**DEMO_PRODUCERS, **DEMO_CONSUMERS}


@dataclass
class Lineage:
    # Upstream asset keys of each table asset (its producers, and tables that name it as consumer).
    producers: dict[TableRef, list[AssetKey]] = field(default_factory=dict)
    # The demo assets named by some table, and external assets for every other declared key.
    assets: list[AssetsDefinition | AssetSpec] = field(default_factory=list)


def _keys(values: Sequence[str]) -> list[AssetKey]:
    return [AssetKey.from_user_string(v) for v in values]


def build_lineage(tables: Sequence[DiscoveredTable], policies: Mapping[TableRef, Any]) -> Lineage:
    """``policies``: each table's EffectivePolicy. Raises SettingsError naming the table and the key
    when a declaration cannot hold (a table producing itself, a demo asset claimed by two tables)."""
    by_key = {table_asset_key(t.ref): t.ref for t in tables}
    lineage = Lineage(producers={t.ref: [] for t in tables})
    external: dict[AssetKey, list[AssetKey]] = {}  # external key -> the tables it depends on
    demo: dict[AssetKey, TableRef] = {}

    def add_upstream(ref: TableRef, key: AssetKey) -> None:
        if key == table_asset_key(ref):
            raise SettingsError(f"lineage of {ref}: {key.to_user_string()} is the table itself")
        if key not in lineage.producers[ref]:
            lineage.producers[ref].append(key)

    def claim_demo(ref: TableRef, key: AssetKey, role: str) -> None:
        if key not in (DEMO_PRODUCERS if role == "producers" else DEMO_CONSUMERS):
            raise SettingsError(
                f"lineage of {ref}: the demo asset {key.to_user_string()} cannot be one of its {role}"
            )
        if demo.setdefault(key, ref) != ref:
            raise SettingsError(
                f"lineage: the demo asset {key.to_user_string()} is declared for both "
                f"{demo[key]} and {ref}; it serves one table"
            )

    for t in tables:
        declared = policies[t.ref].policy.lineage
        for key in _keys(declared.producers):
            add_upstream(t.ref, key)
            if key in DEMO_BUILDERS:
                claim_demo(t.ref, key, "producers")
            elif key not in by_key:
                external.setdefault(key, [])
        for key in _keys(declared.consumers):
            if key in by_key:  # a table fed from this one
                add_upstream(by_key[key], table_asset_key(t.ref))
            elif key in DEMO_BUILDERS:
                claim_demo(t.ref, key, "consumers")
            else:
                deps = external.setdefault(key, [])
                if table_asset_key(t.ref) not in deps:
                    deps.append(table_asset_key(t.ref))
    lineage.assets = [
        *(DEMO_BUILDERS[key](ref) for key, ref in demo.items()),
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
