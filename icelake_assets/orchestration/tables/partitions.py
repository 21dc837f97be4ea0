"""Iceberg partitions as Dagster partitions, so users backfill partitions ("compact March") and
sensors request only the partitions that need it.

Mapping of a table's current spec (the dimensions of :func:`~icelake_assets.partitions.layout.
dimension_fields`; the Dagster-free part, values and key strings, is icelake_assets/partitions/):

* hour / day / month / year → time-window partitions, UTC, from the table's earliest live partition
  to its latest (the current period when data reaches it), so every partition holds data. Keys are Iceberg's own partition values
  (``2024-01-03``, ``2024-01-03-05``, ``2024-01``, ``2024``), the ones in the table's storage paths;
* identity / bucket / truncate → dynamic partitions named ``<table safe name>__<field>`` whose keys
  are the table's partition values (:func:`~icelake_assets.partitions.keys.value_key`:
  the value itself, quotes / unicode / SQL keywords included; ``~null`` for null);
* two dimensions of which at most one is a time field → a multi-partition definition;
  more fields → the first time field alone (else the first field); no field → unpartitioned.

Dynamic keys follow the table through the ``icelake_partition_keys`` sensor
(:func:`build_partition_keys_sensor`), which adds the keys of partitions that appeared since its
last tick. Keys are never deleted: a partition that was emptied keeps its materialization history,
and a run over a partition without files simply has nothing to compact. Sensors that request runs
for dynamic keys add the missing ones in the same ``SensorResult`` (:func:`dynamic_partition_requests`);
scripts and tests can call :func:`register_partition_keys`.

The time-window start and end are read when the definitions load: data written later outside them
becomes a partition when the definitions are reloaded; until then whole-table runs cover it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from dagster import (
    AddDynamicPartitionsRequest,
    DagsterInstance,
    DailyPartitionsDefinition,
    DefaultSensorStatus,
    DynamicPartitionsDefinition,
    HourlyPartitionsDefinition,
    MonthlyPartitionsDefinition,
    MultiPartitionKey,
    MultiPartitionsDefinition,
    OpExecutionContext,
    PartitionsDefinition,
    SensorDefinition,
    SensorEvaluationContext,
    SensorResult,
    SkipReason,
    TimeWindowPartitionsDefinition,
    sensor,
)
from pyiceberg.table import Table

from icelake_assets.catalog.connection import TableRef
from icelake_assets.catalog.discovery import DiscoveredTable
from icelake_assets.health.stats import TableStats
from icelake_assets.orchestration.resources import IcelakeResource
from icelake_assets.partitions.filters import PartitionScope
from icelake_assets.partitions.keys import (
    dimension_name,
    dynamic_partitions_name,
    key_parts,
    value_key,
    values_of_key,
)
from icelake_assets.partitions.layout import (
    LayoutField,
    PartitionLayout,
    format_time,
    partition_layout,
    time_window,
)
from icelake_assets.partitions.values import PartitionValues, partition_values

PARTITION_KEYS_SENSOR = "icelake_partition_keys"


# -- definitions ---------------------------------------------------------------------------------------


def _time_def(f: LayoutField, now: datetime) -> TimeWindowPartitionsDefinition:
    fmt = {"hour": "%Y-%m-%d-%H", "day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}[f.transform]
    current = format_time(f.transform, now)
    start = f.earliest if f.earliest and f.earliest <= current else current  # human strings sort by time
    # The partitions span the data: from its earliest period to its latest (a table of 30 days of 2024
    # has 30 partitions, not every day since, all "missing" and out of the backfill dialog's range).
    # Data up to now: end_offset=1 makes the period in progress a partition too (writers add small
    # files there).
    end: dict = {"end_offset": 1}
    if f.latest and start <= f.latest < current:
        end = {"end_date" if f.transform != "year" else "end": time_window(f.transform, f.latest)[1]}
    if f.transform == "hour":
        return HourlyPartitionsDefinition(start_date=start, fmt=fmt, **end)
    if f.transform == "day":
        return DailyPartitionsDefinition(start_date=start, fmt=fmt, **end)
    if f.transform == "month":
        return MonthlyPartitionsDefinition(start_date=start, fmt=fmt, **end)
    return TimeWindowPartitionsDefinition(cron_schedule="0 0 1 1 *", start=start, fmt=fmt, **end)


def _dimension_def(ref: TableRef, f: LayoutField, now: datetime) -> PartitionsDefinition:
    if f.kind == "time":
        return _time_def(f, now)
    return DynamicPartitionsDefinition(name=dynamic_partitions_name(ref, f))


def partitions_def_for(table: DiscoveredTable, now: datetime | None = None) -> PartitionsDefinition | None:
    """The Dagster partitions of a discovered table (None: unpartitioned, or no usable field)."""
    layout = table.layout
    if layout is None or not layout.dimensions:
        return None
    now = now or datetime.now(UTC)
    dims = layout.dimensions
    if len(dims) == 1:
        return _dimension_def(table.ref, dims[0], now)
    return MultiPartitionsDefinition({dimension_name(d): _dimension_def(table.ref, d, now) for d in dims})


# -- keys <-> partition values ------------------------------------------------------------------------


def partition_key(layout: PartitionLayout, values: PartitionValues) -> str | None:
    """The Dagster key of one partition (None when it has none, e.g. a null time value)."""
    parts = key_parts(layout, values)
    if parts is None:
        return None
    if len(layout.dimensions) == 1:
        return next(iter(parts.values()))
    return MultiPartitionKey(parts)


def key_values(layout: PartitionLayout, key: str) -> PartitionValues:
    """Inverse of :func:`partition_key`: the dimension values a Dagster key stands for."""
    parts = key.keys_by_dimension if isinstance(key, MultiPartitionKey) else None
    return values_of_key(layout, key, parts)


def run_scope(
    context: OpExecutionContext, layout: PartitionLayout | None, catalog: str
) -> PartitionScope | None:
    """The partitions of the op's run (one key or a range from a backfill), or None for a
    non-partitioned run, which maintains the whole table."""
    if layout is None or not layout.dimensions or not context.has_partitions:
        return None
    return PartitionScope(layout, catalog, frozenset(key_values(layout, k) for k in context.partition_keys))


def _layout_of(table: DiscoveredTable | Table) -> PartitionLayout | None:
    if isinstance(table, DiscoveredTable):
        return table.layout
    return partition_layout(table, with_earliest=False)


def offending_partition_keys(
    table: DiscoveredTable | Table, stats: TableStats, partitions_def: PartitionsDefinition | None = None
) -> list[str]:
    """Dagster keys of the table's compaction candidates, for sensors that request only those.

    Candidates that map to no key are left out: partitions of an older spec without the
    dimension's field, and null time values (only a whole-table run compacts them). With
    ``partitions_def``, keys of time partitions it does not hold yet (written before its start) are
    left out too."""
    layout = _layout_of(table)
    if layout is None or not layout.dimensions:
        return []
    keys: set[str] = set()
    for label in stats.compaction_candidates:
        ps = stats.partitions.get(label)
        for values in partition_values(layout, label, ps.spec_id if ps else None, ps.values if ps else ()):
            key = partition_key(layout, values)
            if key is not None and _time_key_held(layout, partitions_def, values):
                keys.add(key)
    return sorted(keys)


def _time_key_held(
    layout: PartitionLayout, partitions_def: PartitionsDefinition | None, values: PartitionValues
) -> bool:
    if partitions_def is None:
        return True
    defs = (
        [d.partitions_def for d in partitions_def.partitions_defs]
        if isinstance(partitions_def, MultiPartitionsDefinition)
        else [partitions_def]
    )
    windows = [d for d in defs if isinstance(d, TimeWindowPartitionsDefinition)]
    for dim, value in zip(layout.dimensions, values, strict=False):
        if dim.kind == "time" and windows and value is not None:
            begins = time_window(dim.transform, value)[0]
            end = windows[0].end
            if begins < windows[0].start or (end is not None and begins >= end):
                return False
    return True


# -- dynamic keys ---------------------------------------------------------------------------------------


def table_dynamic_keys(
    ref: TableRef, layout: PartitionLayout | None, stats: TableStats
) -> dict[str, set[str]]:
    """Per dynamic partitions definition of the table, the keys of its live partitions."""
    if layout is None:
        return {}
    dims = layout.dimensions
    dynamic = [(i, d) for i, d in enumerate(dims) if d.kind != "time"]
    out: dict[str, set[str]] = {dynamic_partitions_name(ref, d): set() for _, d in dynamic}
    for label, ps in stats.partitions.items():
        if ps.data_files == 0:
            continue
        for values in partition_values(layout, label, ps.spec_id, ps.values):
            for i, d in dynamic:
                out[dynamic_partitions_name(ref, d)].add(value_key(values[i]))
    return out


def dynamic_partition_requests(
    table: DiscoveredTable, stats: TableStats, instance: DagsterInstance, keys: Iterable[str] | None = None
) -> list[AddDynamicPartitionsRequest]:
    """Requests adding the table's dynamic keys the instance does not have yet: every live partition,
    or only those of ``keys`` (Dagster keys, e.g. from :func:`offending_partition_keys`)."""
    layout = table.layout
    if layout is None:
        return []
    if keys is None:
        wanted = table_dynamic_keys(table.ref, layout, stats)
    else:
        wanted = {}
        dims = layout.dimensions
        for key in keys:
            for d, v in zip(dims, key_values(layout, key), strict=False):
                if d.kind != "time":
                    wanted.setdefault(dynamic_partitions_name(table.ref, d), set()).add(value_key(v))
    requests = []
    for name, present in sorted(wanted.items()):
        new = sorted(present - set(instance.get_dynamic_partitions(name)))
        if new:
            requests.append(AddDynamicPartitionsRequest(partitions_def_name=name, partition_keys=new))
    return requests


def register_partition_keys(
    instance: DagsterInstance, table: DiscoveredTable, stats: TableStats
) -> dict[str, list[str]]:
    """Add the table's missing dynamic keys to ``instance`` now; returns what was added per definition."""
    added = {}
    for req in dynamic_partition_requests(table, stats, instance):
        instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
        added[req.partitions_def_name] = list(req.partition_keys)
    return added


def build_partition_keys_sensor(
    tables: Sequence[DiscoveredTable], interval_seconds: int = 300
) -> SensorDefinition | None:
    """The sensor keeping the dynamic keys of identity/bucket/truncate-partitioned tables in step with
    their partitions (None when no table needs one). Metadata only: no Spark, no run launched."""
    dynamic = [
        t for t in tables if t.layout is not None and any(d.kind != "time" for d in t.layout.dimensions)
    ]
    if not dynamic:
        return None

    @sensor(
        name=PARTITION_KEYS_SENSOR,
        minimum_interval_seconds=interval_seconds,
        default_status=DefaultSensorStatus.RUNNING,
        description="Adds the partition keys of identity/bucket/truncate-partitioned tables as their "
        "partitions appear (Iceberg metadata only)",
    )
    def partition_keys_sensor(context: SensorEvaluationContext, icelake: IcelakeResource):
        requests, failed = [], []
        for t in dynamic:
            try:
                tbl = icelake.load_table(t.ref)
                requests += dynamic_partition_requests(t, icelake.stats(tbl), context.instance)
            except Exception as err:  # one unreadable table must not stop the others' keys
                failed.append(str(t.ref))
                context.log.warning(f"{t.ref}: partition keys not synchronized: {err}")
        if not requests:
            return SkipReason("no new partition" + (f" (unreadable: {', '.join(failed)})" if failed else ""))
        return SensorResult(dynamic_partitions_requests=requests)

    return partition_keys_sensor
