"""Partition scope of a maintenance run: which Iceberg partitions it covers and the Spark ``where``
that restricts ``rewrite_data_files`` to them. Free of Dagster (orchestration/partitions.py maps
these values to Dagster partition keys).

Vocabulary:

* a table's :class:`PartitionLayout` describes its current (default) spec, the fields of every
  spec that still has live files, and, per time field, its earliest partition;
* its *dimensions* (:func:`dimension_fields`) are the fields a run can be scoped by: the only field;
  two fields when at most one is a time field; else the first time field, else the first field;
* a partition is addressed by its dimensions' values as Iceberg's *human strings*
  (``to_human_string``: ``2024-01-03`` for day, ``2024-01-03-05`` for hour, ``2024-01`` for month,
  ``2024`` for year, the value itself for identity/truncate, the bucket number for bucket),
  ``None`` for null.

Filters are written on the *source columns* (``ts >= TIMESTAMP '…' AND ts < TIMESTAMP '…'``,
``col = '…'``, ``catalog.system.bucket(16, col) = 3``) rather than on partition tuples, so Iceberg
projects them onto every spec of the table. Evolved specs, explicitly:

* the definition follows the *current* spec (what writers produce now);
* files of an older spec are in a partition of the run when that spec has the dimension's field
  (same source column and transform) or a finer time transform of the same column
  (old ``day`` files count in the current ``month`` partition that holds their day);
* files of an older spec without that field (e.g. written before the table was partitioned, or at a
  coarser time grain) belong to no single partition: only whole-table (non-partitioned) runs
  compact them. A scoped ``where`` may still select such a file when its column bounds overlap the
  scope; Iceberg then rewrites the whole file into the current spec (rows are kept, never lost).
"""

from __future__ import annotations

import calendar
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import unquote, unquote_plus

from icelake_assets.catalog.partition_layout import (  # the model, re-exported for callers
    EPOCH as EPOCH,
    GRAIN,
    TIME_FORMATS,
    UNPARTITIONED,
    LayoutField,
    PartitionLayout,
    dimension_fields as dimension_fields,
    format_time,
    partition_layout as partition_layout,
)
from icelake_assets.maintenance.procedures import quote_identifier, sql_string
from icelake_assets.types import IcelakeError

PartitionValues = tuple[str | None, ...]  # one human string (None: null) per dimension


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


# -- values of health's partitions ------------------------------------------------------------------


def parse_label(label: str) -> list[tuple[str, str]]:
    """``name=value/...`` (pyiceberg's partition_to_path, both parts quote_plus'ed) → [(name, value)]."""
    if label == UNPARTITIONED or not label:
        return []
    out = []
    for part in label.split("/"):
        name, sep, value = part.partition("=")
        if not sep:
            raise PartitionFilterError(f"partition label {label!r}: {part!r} is not name=value")
        out.append((unquote_plus(name), unquote_plus(value)))
    return out


def partition_values(
    layout: PartitionLayout, label: str, spec_id: int | None = None, raw: Sequence[Any] = ()
) -> tuple[PartitionValues, ...]:
    """The dimension values one partition of health's stats (label, its spec and raw values) may stand
    for; empty when that spec lacks a dimension (see the module notes on evolved specs).

    Usually one. A label cannot tell a null from the string ``'null'`` (both are ``null``; health keys
    its partitions by label, so the two may be merged and ``raw`` is then that of either), so a string
    value ``null`` stands for both."""
    dims = layout.dimensions
    if not dims:
        return ()
    spec_fields = layout.specs.get(spec_id if spec_id is not None else layout.spec_id)
    parsed = parse_label(label)
    if spec_fields is None or len(parsed) != len(spec_fields):
        return ()
    options: list[list[str | None]] = []
    for dim in dims:
        pos = _matching_position(spec_fields, dim)
        if pos is None:
            return ()
        value = parsed[pos][1]
        if value == "null" and dim.base_type == "string" and dim.kind in ("identity", "truncate"):
            options.append(["null", None])
        elif value == "null" and (not raw or (pos < len(raw) and raw[pos] is None)):
            options.append([None])  # no other value of these types reads 'null'
        elif spec_fields[pos].transform != dim.transform:  # an older, finer time grain: inside one of ours
            options.append([format_time(dim.transform, time_window(spec_fields[pos].transform, value)[0])])
        else:
            options.append([value])
    return tuple(itertools.product(*options))


def _matching_position(spec_fields: Sequence[LayoutField], dim: LayoutField) -> int | None:
    """Position of ``dim``'s field in another spec: same column and transform, else (time fields)
    the same column at a finer grain."""
    same = [i for i, f in enumerate(spec_fields) if f.same_column(dim) and f.transform == dim.transform]
    if same:
        return same[0]
    if dim.kind == "time":
        finer = [
            i
            for i, f in enumerate(spec_fields)
            if f.same_column(dim) and f.kind == "time" and GRAIN[f.transform] < GRAIN[dim.transform]
        ]
        if finer:
            return max(finer, key=lambda i: GRAIN[spec_fields[i].transform])
    return None


# -- Spark literals and predicates ---------------------------------------------------------------------


def _column(f: LayoutField) -> str:
    return ".".join(quote_identifier(p) for p in f.source)


def _timestamp_literal(f: LayoutField, moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    if f.base_type == "date":
        return f"DATE {sql_string(utc.strftime('%Y-%m-%d'))}"
    text = utc.strftime("%Y-%m-%d %H:%M:%S.%f")
    if f.base_type == "timestamptz":  # an instant: the offset makes it independent of the session zone
        return f"TIMESTAMP {sql_string(text + '+00:00')}"
    return f"TIMESTAMP_NTZ {sql_string(text)}"  # Iceberg 'timestamp' is Spark's TIMESTAMP_NTZ


def _typed_literal(f: LayoutField, value: str) -> str:
    """``value`` (a human string of the source type) as a Spark literal of that type."""
    t = f.base_type
    try:
        if t == "string":
            return sql_string(value)
        if t in ("int", "long"):
            return str(int(value))
        if t == "boolean":
            if value not in ("true", "false"):
                raise ValueError(value)
            return value
        if t == "decimal":
            return f"CAST({sql_string(str(Decimal(value)))} AS {f.source_type.replace(' ', '').upper()})"
        if t == "date":
            return f"DATE {sql_string(date.fromisoformat(value).isoformat())}"
        if t in ("timestamp", "timestamptz"):
            moment = datetime.fromisoformat(value)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
            return _timestamp_literal(f, moment)
    except (ValueError, InvalidOperation):
        raise PartitionFilterError(
            f"partition field {f.name!r}: {value!r} is not a {f.source_type} value"
        ) from None
    raise PartitionFilterError(
        f"partition field {f.name!r}: {f.transform} on {f.source_type} cannot be filtered"
    )


def field_predicate(f: LayoutField, value: str | None, catalog: str) -> str:
    """A Spark predicate selecting exactly the rows of one partition value of ``f``."""
    col = _column(f)
    if value is None:
        return f"{col} IS NULL"  # every transform maps null to null
    if f.kind == "time":
        start, end = time_window(f.transform, value)
        return time_range_predicate(f, start, end)
    if f.kind == "identity":
        return f"{col} = {_typed_literal(f, value)}"
    fn = f"{quote_identifier(catalog)}.system"
    if f.kind == "bucket":
        try:
            bucket = int(value)
        except ValueError:
            raise PartitionFilterError(
                f"partition field {f.name!r}: bucket {value!r} is not a number"
            ) from None
        return f"{fn}.bucket({f.width}, {col}) = {bucket}"
    if f.kind == "truncate":
        return f"{fn}.truncate({f.width}, {col}) = {_typed_literal(f, value)}"
    raise PartitionFilterError(f"partition field {f.name!r}: transform {f.transform} cannot be filtered")


def time_range_predicate(f: LayoutField, start: datetime, end: datetime) -> str:
    """``col >= start AND col < end`` on the source column of time field ``f``; Iceberg projects it
    onto the partitions (and the column bounds of files of other specs)."""
    col = _column(f)
    return f"{col} >= {_timestamp_literal(f, start)} AND {col} < {_timestamp_literal(f, end)}"


def _merged_ranges(f: LayoutField, values: Iterable[str]) -> list[tuple[datetime, datetime]]:
    """Adjacent time partitions merged into [start, end) ranges (a 30-day scope is one predicate)."""
    ranges: list[tuple[datetime, datetime]] = []
    for start, end in sorted(time_window(f.transform, v) for v in set(values)):
        if ranges and ranges[-1][1] >= start:
            ranges[-1] = (ranges[-1][0], max(end, ranges[-1][1]))
        else:
            ranges.append((start, end))
    return ranges


def where_clause(layout: PartitionLayout, catalog: str, partitions: Iterable[PartitionValues]) -> str:
    """The Spark ``where`` selecting exactly ``partitions`` (dimension values, see the module notes)."""
    dims = layout.dimensions
    wanted = sorted(set(partitions), key=lambda p: tuple("" if v is None else v for v in p))
    if not dims:
        raise PartitionFilterError(f"{layout.table} has no partition field a run can be scoped by")
    if not wanted:
        raise PartitionFilterError(f"{layout.table}: no partition selected")
    for p in wanted:
        if len(p) != len(dims):
            raise PartitionFilterError(
                f"{layout.table}: {p!r} does not give one value per dimension "
                f"({', '.join(d.name for d in dims)})"
            )
    time_pos = next((i for i, d in enumerate(dims) if d.kind == "time"), None)
    groups: dict[tuple[str | None, ...], list[str | None]] = {}
    for p in wanted:
        rest = tuple(v for i, v in enumerate(p) if i != time_pos)
        groups.setdefault(rest, []).append(p[time_pos] if time_pos is not None else None)
    others = [d for i, d in enumerate(dims) if i != time_pos]
    terms = []
    for rest, times in groups.items():
        preds = [field_predicate(d, v, catalog) for d, v in zip(others, rest, strict=False)]
        if time_pos is not None:
            tf = dims[time_pos]
            alts = [
                time_range_predicate(tf, s, e)
                for s, e in _merged_ranges(tf, [t for t in times if t is not None])
            ]
            if None in times:
                alts.append(field_predicate(tf, None, catalog))
            preds.append(alts[0] if len(alts) == 1 else "(" + " OR ".join(f"({a})" for a in alts) + ")")
        terms.append(" AND ".join(preds))
    return terms[0] if len(terms) == 1 else " OR ".join(f"({t})" for t in terms)


# -- the scope of one run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionScope:
    """The partitions one run maintains: dimension values, the table layout and its Spark catalog."""

    layout: PartitionLayout
    catalog: str
    partitions: frozenset[PartitionValues]

    def __post_init__(self) -> None:
        if not self.partitions:
            raise PartitionFilterError(f"{self.layout.table}: a partition scope needs at least one partition")

    def values_of(
        self, label: str, spec_id: int | None = None, raw: Sequence[Any] = ()
    ) -> list[PartitionValues]:
        """The scope's partitions a partition of health's stats stands for (usually one or none)."""
        return [v for v in partition_values(self.layout, label, spec_id, raw) if v in self.partitions]

    def contains(self, label: str, spec_id: int | None = None, raw: Sequence[Any] = ()) -> bool:
        return bool(self.values_of(label, spec_id, raw))

    def where(self, partitions: Iterable[PartitionValues] | None = None) -> str:
        """The filter of ``partitions`` (default: the whole scope)."""
        return where_clause(self.layout, self.catalog, self.partitions if partitions is None else partitions)

    def describe(self, limit: int = 5) -> str:
        shown = sorted("|".join("null" if v is None else v for v in p) for p in self.partitions)
        more = f" … (+{len(shown) - limit})" if len(shown) > limit else ""
        return f"{len(shown)} partition(s): {', '.join(shown[:limit])}{more}"


# -- Dagster-safe keys of non-time values --------------------------------------------------------------

# Dagster refuses these in partition keys ("..." separates ranges in the UI; '|' separates the
# dimensions of a multi-partition key); a value holding one is escaped.
_KEY_UNSAFE = ("...", "\a", "\b", "\f", "\n", "\r", "\t", "\v", "\0", "|")
NULL_KEY = "~null"
_ESCAPED = "~s:"
_KEEP = re.compile(r"[A-Za-z0-9_\-]")


def value_key(value: str | None) -> str:
    """A partition key for a value: the value itself when Dagster accepts it (quotes, unicode and SQL
    keywords included), ``~null`` for null, else ``~s:`` + its UTF-8 bytes percent-encoded.
    Values starting with ``~`` are escaped too, so :func:`key_value` is exact."""
    if value is None:
        return NULL_KEY
    if (
        value
        and not value.startswith("~")
        and not any(s in value for s in _KEY_UNSAFE)
        and value == value.strip()
        and value.isprintable()
    ):
        return value
    return _ESCAPED + "".join(
        c if _KEEP.fullmatch(c) else "".join(f"%{b:02X}" for b in c.encode()) for c in value
    )


def key_value(key: str) -> str | None:
    """Inverse of :func:`value_key`."""
    if key == NULL_KEY:
        return None
    if key.startswith(_ESCAPED):
        # every character outside [A-Za-z0-9_-] was percent-encoded, '%' included: unquote is exact
        return unquote(key[len(_ESCAPED) :], errors="strict")
    return key
