"""A table's partition layout: its current spec's fields, the fields of every spec that still has
live files, and, per time field, its earliest partition (see :mod:`icelake_assets.partitions` for
the vocabulary); the time values of its partitions. Read from pyiceberg metadata only: discovery,
health and maintenance share it."""

from __future__ import annotations

import calendar
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from pyiceberg.conversions import from_bytes
from pyiceberg.manifest import ManifestContent
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.types import PrimitiveType, StructType

from icelake_assets.types import IcelakeError

UNPARTITIONED = "<unpartitioned>"  # the label health gives files of an unpartitioned spec
# Iceberg human-string formats of the time transforms (UTC), coarsest last.
TIME_FORMATS = {"hour": "%Y-%m-%d-%H", "day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}
GRAIN = {"hour": 0, "day": 1, "month": 2, "year": 3}
# Source types a partition value can be written back into a Spark literal for.
_IDENTITY_TYPES = ("string", "int", "long", "date", "boolean", "timestamp", "timestamptz", "decimal")
_TRUNCATE_TYPES = ("string", "int", "long", "decimal")
_TIME_SOURCE_TYPES = ("date", "timestamp", "timestamptz")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class LayoutField:
    """One partition field, with what a filter on it needs."""

    name: str
    source_id: int
    source: tuple[str, ...]  # column path (nested structs), each part quoted separately in SQL
    source_type: str  # Iceberg type name: timestamp, timestamptz, date, string, long, decimal(9, 2) ...
    transform: str  # identity, day, bucket[16], truncate[4], void ...
    earliest: str | None = None  # time fields: the earliest live partition (human string)
    latest: str | None = None  # time fields: the latest live partition (human string)

    @property
    def kind(self) -> str:
        """time, identity, bucket, truncate, void or unknown."""
        t = self.transform.split("[")[0]
        return (
            "time"
            if t in TIME_FORMATS
            else t
            if t in ("identity", "bucket", "truncate", "void")
            else "unknown"
        )

    @property
    def width(self) -> int:
        """N of bucket[N] / truncate[N]."""
        return int(self.transform[self.transform.index("[") + 1 : -1])

    @property
    def base_type(self) -> str:
        return self.source_type.split("(")[0]

    @property
    def filterable(self) -> bool:
        """Whether a value of this field can be written as a Spark filter (else it is no dimension)."""
        if self.kind == "time":
            return self.base_type in _TIME_SOURCE_TYPES
        if self.kind == "identity":
            return self.base_type in _IDENTITY_TYPES
        if self.kind == "truncate":
            return self.base_type in _TRUNCATE_TYPES
        return self.kind == "bucket"

    def same_column(self, other: LayoutField) -> bool:
        return self.source_id == other.source_id


@dataclass(frozen=True)
class PartitionLayout:
    table: str
    spec_id: int  # the current (default) spec
    fields: tuple[LayoutField, ...]  # of the current spec
    # every spec by id (not hashed: a mapping)
    specs: Mapping[int, tuple[LayoutField, ...]] = field(default_factory=dict, hash=False)
    live_spec_ids: tuple[int, ...] = ()  # specs that still hold live files

    @property
    def evolved(self) -> bool:
        """Live files were written under another spec than the current one."""
        return any(s != self.spec_id for s in self.live_spec_ids)

    @property
    def dimensions(self) -> tuple[LayoutField, ...]:
        return dimension_fields(self)


def dimension_fields(layout: PartitionLayout) -> tuple[LayoutField, ...]:
    """The fields a run is scoped by: one field; two when at most one is a time field (Dagster's
    multi-partitions allow one time dimension); else the first time field, else the first field.
    Void, unknown and unfilterable fields never are (a table of only those runs whole-table)."""
    usable = [f for f in layout.fields if f.filterable]
    times = [f for f in usable if f.kind == "time"]
    if len(usable) <= 1 or (len(usable) == 2 and len(times) <= 1):
        return tuple(usable)
    return (times[0],) if times else (usable[0],)


# -- layout from pyiceberg metadata ------------------------------------------------------------------


def _column_path(
    struct: StructType | Schema, field_id: int, prefix: tuple[str, ...] = ()
) -> tuple[str, ...] | None:
    for f in struct.fields:
        if f.field_id == field_id:
            return (*prefix, f.name)
        if isinstance(f.field_type, StructType):
            found = _column_path(f.field_type, field_id, (*prefix, f.name))
            if found:
                return found
    return None


def _spec_fields(table: Table, spec_id: int) -> tuple[LayoutField, ...]:
    schema = table.schema()
    out = []
    for f in table.specs()[spec_id].fields:
        path = _column_path(schema, f.source_id)
        if path is None:  # the source column was dropped: this field can no longer be filtered
            out.append(LayoutField(f.name, f.source_id, (), "dropped", "unknown"))
            continue
        out.append(
            LayoutField(f.name, f.source_id, path, str(schema.find_type(f.source_id)), str(f.transform))
        )
    return tuple(out)


def _ordinal_start(transform: str, ordinal: int) -> datetime:
    """Start (UTC) of the ``ordinal``-th hour/day/month/year since the epoch (Iceberg's time values)."""
    if transform == "hour":
        return EPOCH + timedelta(hours=ordinal)
    if transform == "day":
        return EPOCH + timedelta(days=ordinal)
    if transform == "month":
        return datetime(1970 + ordinal // 12, ordinal % 12 + 1, 1, tzinfo=UTC)
    return datetime(1970 + ordinal, 1, 1, tzinfo=UTC)


def partition_layout(table: Table, with_earliest: bool = True) -> PartitionLayout:
    """The layout of ``table``; ``with_earliest`` reads the current manifest list (one file) for the
    earliest partition of each time field, from the manifests' partition summaries."""
    md = table.metadata
    specs = {spec_id: _spec_fields(table, spec_id) for spec_id in table.specs()}
    current = specs[md.default_spec_id]
    snap = table.current_snapshot()
    if len(specs) == 1 and not (with_earliest and any(f.kind == "time" for f in current)):
        # One spec and no time bound to find: the manifest list (one file read per table, the most
        # of discovery's time at 10,000 tables) would only tell that the one spec holds the files.
        live_only = (md.default_spec_id,) if snap is not None else ()
        return PartitionLayout(".".join(table.name()), md.default_spec_id, current, specs, live_only)
    manifests = snap.manifests(table.io) if snap is not None else []
    live = tuple(
        sorted(
            {
                m.partition_spec_id
                for m in manifests
                if m.content == ManifestContent.DATA
                and ((m.added_files_count or 0) + (m.existing_files_count or 0)) > 0
            }
        )
    )
    if with_earliest:
        current = tuple(
            LayoutField(
                f.name,
                f.source_id,
                f.source,
                f.source_type,
                f.transform,
                _bound(table, f, manifests, specs),
                _bound(table, f, manifests, specs, latest=True),
            )
            if f.kind == "time"
            else f
            for f in current
        )
    return PartitionLayout(".".join(table.name()), md.default_spec_id, current, specs, live)


def _bound(
    table: Table,
    dim: LayoutField,
    manifests: Sequence[Any],
    specs: Mapping[int, tuple[LayoutField, ...]],
    latest: bool = False,
) -> str | None:
    """The earliest (``latest``: the latest) partition of time field ``dim``: min lower (max upper)
    bound in the manifests' partition summaries, over every spec with that column at the same or a
    finer grain."""
    starts = []
    for m in manifests:
        if m.content != ManifestContent.DATA or not m.partitions:
            continue
        spec = table.specs()[m.partition_spec_id]
        for pos, f in enumerate(specs[m.partition_spec_id]):
            if f.kind != "time" or not f.same_column(dim) or GRAIN[f.transform] > GRAIN[dim.transform]:
                continue
            bound = m.partitions[pos].upper_bound if latest else m.partitions[pos].lower_bound
            if bound is None:
                continue
            result_type = spec.fields[pos].transform.result_type(table.schema().find_type(f.source_id))
            ordinal = from_bytes(cast(PrimitiveType, result_type), bound)
            starts.append(_ordinal_start(f.transform, int(ordinal)))
    return format_time(dim.transform, (max if latest else min)(starts)) if starts else None


# -- time values ---------------------------------------------------------------------------------


def format_time(transform: str, moment: datetime) -> str:
    """The human string of the hour/day/month/year holding ``moment`` (UTC)."""
    return moment.astimezone(UTC).strftime(TIME_FORMATS[transform])


class PartitionFilterError(IcelakeError, ValueError):
    """A partition that cannot be turned into a filter; the message names the table, field and value."""


def time_window(transform: str, value: str) -> tuple[datetime, datetime]:
    """[start, end) in UTC of a time partition given as Iceberg's human string."""
    try:
        start = datetime.strptime(value, TIME_FORMATS[transform]).replace(tzinfo=UTC)
    except (KeyError, ValueError):
        raise PartitionFilterError(
            f"{value!r} is not a {transform} partition (expected {TIME_FORMATS.get(transform, '?')})"
        ) from None
    if transform == "hour":
        return start, start + timedelta(hours=1)
    if transform == "day":
        return start, start + timedelta(days=1)
    if transform == "month":
        return start, start + timedelta(days=calendar.monthrange(start.year, start.month)[1])
    return start, start.replace(year=start.year + 1)
