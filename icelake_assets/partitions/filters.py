"""The Spark ``where`` of a run's partition scope: predicates on the source columns of a table's
dimensions, every identifier and value quoted (see :mod:`icelake_assets.partitions` for the vocabulary
and evolved specs)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from icelake_assets.partitions.layout import LayoutField, PartitionFilterError, PartitionLayout, time_window
from icelake_assets.partitions.quoting import quote_identifier, sql_string
from icelake_assets.partitions.values import PartitionValues, partition_values


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


def excluding_clause(
    layout: PartitionLayout, catalog: str, partitions: Iterable[PartitionValues]
) -> str | None:
    """A ``where`` selecting every file but those of ``partitions`` of the current spec, or None.

    Only when the current spec is identity fields alone: Iceberg projects ``col <> v`` exactly onto
    identity partitions (those of ``partitions`` are pruned), while no file's column bounds can rule a
    ``<>`` out, so files of an older spec without these fields are all selected by it (unless a column
    holds only nulls). A time range's negation could be ruled out by bounds: None there."""
    dims = layout.dimensions
    if not dims or len(dims) != len(layout.fields) or any(f.kind != "identity" for f in dims):
        return None
    return f"NOT ({where_clause(layout, catalog, partitions)})"


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
