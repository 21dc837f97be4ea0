"""Tables grouped for Dagster: one maintenance graph, one set of check ops and one concurrency pool
per group instead of per table, so a code location of 10,000 tables loads in seconds.

Every table keeps its own asset (key, description, metadata, partitions, checks, history); what
tables of a group share is the *definition* of the ops that maintain them, which are written for any
subset of the group's tables (a run selects the tables it maintains; the sensor's runs select one).

A table's pool is chosen by a stable hash of its name among ``automation.maintenance_pools``; its
group is its pool plus what Dagster requires to be equal within one multi-asset:

* unpartitioned tables of a pool: one group, ``maintain_017``;
* time-partitioned tables of a pool with the same grain and first partition: ``maintain_017_day_2024_01_01``
  (a group's partitions run from that first partition to the latest of its tables);
* a table with dynamic or multi-dimensional partitions, or with producer assets (lineage, whose
  dependencies are per table), is a group of its own: ``maintain__<table safe name>``.

Group names never depend on the clock or on other tables' data, so a run worker that loads the
definitions later finds the same graph the code server showed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from dagster import (
    AssetKey,
    AssetsDefinition,
    AssetSelection,
    PartitionsDefinition,
    define_asset_job,
    in_process_executor,
)

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.orchestration.runs.pools import pool_index, pool_name
from icelake_assets.orchestration.tables.partitions import partitions_def_for
from icelake_assets.private_api import UnresolvedAssetJobDefinition

_UNSAFE = re.compile(r"[^A-Za-z0-9]+")


@dataclass(frozen=True)
class TableGroup:
    name: str  # the maintenance graph's name; its ops are <name>__<op>
    pool: str
    tables: tuple[DiscoveredTable, ...]
    partitions_def: PartitionsDefinition | None = None
    producers: tuple[AssetKey, ...] = ()  # lineage: assets that write the (single) table

    @property
    def refs(self) -> list[TableRef]:
        return [t.ref for t in self.tables]


def _time_group_key(table: DiscoveredTable) -> tuple[str, str] | None:
    """(grain, first partition) of a table partitioned by one time field; None otherwise."""
    layout = table.layout
    if layout is None or len(layout.dimensions) != 1 or layout.dimensions[0].kind != "time":
        return None
    dim = layout.dimensions[0]
    return dim.transform, dim.earliest or ""


def _merged(tables: Sequence[DiscoveredTable]) -> DiscoveredTable:
    """A stand-in table whose time partitions cover every table of a time group: the group's first
    partition (equal for all) to the latest partition of any of them."""
    first = tables[0]
    assert first.layout is not None
    latest = max((t.layout.dimensions[0].latest or "" for t in tables if t.layout), default="") or None
    dim = replace(first.layout.dimensions[0], latest=latest)
    fields = tuple(dim if f.name == dim.name else f for f in first.layout.fields)
    return replace(first, layout=replace(first.layout, fields=fields))


def group_tables(
    tables: Sequence[DiscoveredTable],
    pools: int,
    producers: Mapping[TableRef, Sequence[AssetKey]] | None = None,
    now: datetime | None = None,
) -> list[TableGroup]:
    """The groups of ``tables`` (see the module docstring), in a stable order."""
    now = now or datetime.now(UTC)
    producers = producers or {}
    buckets: dict[tuple[str, ...], list[DiscoveredTable]] = {}
    singles: list[TableGroup] = []
    for t in tables:
        index = pool_index(t.ref, pools)
        pool = pool_name(t.ref, pools)
        upstream = tuple(producers.get(t.ref, ()))
        pdef = partitions_def_for(t, now)
        time_key = _time_group_key(t)
        if upstream or (pdef is not None and time_key is None):
            singles.append(TableGroup(f"maintain__{t.ref.safe_name}", pool, (t,), pdef, upstream))
            continue
        key = (f"{index:03d}",) if pdef is None else (f"{index:03d}", *time_key)  # type: ignore[misc]
        buckets.setdefault(key, []).append(t)
    # One partitions definition per (grain, first partition) across pools, so that the groups of
    # every pool share one whole-table job (:func:`maintenance_jobs`).
    by_time: dict[tuple[str, ...], list[DiscoveredTable]] = {}
    for key, members in buckets.items():
        if len(key) > 1:
            by_time.setdefault(key[1:], []).extend(members)
    time_defs = {k: partitions_def_for(_merged(members), now) for k, members in by_time.items()}
    groups = []
    for key, members in sorted(buckets.items()):
        name = "maintain_" + "_".join(_UNSAFE.sub("_", part).strip("_") for part in key)
        pdef = None if len(key) == 1 else time_defs[key[1:]]
        groups.append(TableGroup(name, pool_name(members[0].ref, pools), tuple(members), pdef))
    return groups + sorted(singles, key=lambda g: g.name)


# -- whole-table jobs -------------------------------------------------------------------------------

_POOLED = re.compile(r"maintain_\d{3}_(.+)")


def maintenance_job_name(asset: AssetsDefinition, name: str) -> str:
    """The whole-table maintenance job of a group's asset among :func:`maintenance_jobs` ``name``:
    ``name`` for unpartitioned tables, ``<name>__day_2024_01_01`` for time groups (every pool's group
    of that grain and first partition), ``<name>__maintain__<table>`` for a group of its own."""
    if asset.partitions_def is None:
        return name
    group = asset.node_def.name
    pooled = _POOLED.fullmatch(group)
    return f"{name}__{pooled.group(1) if pooled else group}"


def maintenance_jobs(
    assets: Sequence[AssetsDefinition], name: str, description: str = ""
) -> list[UnresolvedAssetJobDefinition]:
    """Whole-table maintenance jobs. Dagster refuses a job over assets with different partitions
    definitions (the code location then fails to load), so one job per partitions definition (named
    by :func:`maintenance_job_name`); a run of a partitioned job without a partition key maintains
    its tables whole. Partition runs and backfills use the assets' implicit jobs. Few jobs matter:
    Dagster resolves each over the whole asset graph when the code location loads."""
    by_job: dict[str, list[AssetsDefinition]] = {}
    for a in assets:
        by_job.setdefault(maintenance_job_name(a, name), []).append(a)
    jobs = []
    for job, members in by_job.items():
        if len({a.partitions_def for a in members}) > 1:  # not expected: same grain and start
            raise ValueError(f"job {job}: its tables' partitions differ")
        keys = sorted(k for a in members for k in a.keys)
        tables = ", ".join(k.to_user_string() for k in keys[:3]) + (" …" if len(keys) > 3 else "")
        jobs.append(
            define_asset_job(
                job,
                executor_def=in_process_executor,
                selection=AssetSelection.assets(*members),
                description=description
                if members[0].partitions_def is None
                else f"{description} (partitioned: {tables})",
            )
        )
    return jobs
