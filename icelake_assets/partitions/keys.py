"""Partition values as partition key strings that Dagster accepts, and back; the naming of a table's
dimensions. Free of Dagster: orchestration/tables/partitions.py wraps these in Dagster's key and definition
types."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import cast
from urllib.parse import unquote

from icelake_assets.partitions.layout import LayoutField, PartitionFilterError, PartitionLayout, time_window
from icelake_assets.partitions.values import PartitionValues
from icelake_assets.types import TableRef

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


# -- keys of a table's partitions ------------------------------------------------------------------------

_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9_]")


def dimension_name(f: LayoutField) -> str:
    """The Dagster dimension name of a partition field (its Iceberg name, made name-safe)."""
    return _UNSAFE_NAME.sub("_", f.name)


def dynamic_partitions_name(ref: TableRef, f: LayoutField) -> str:
    return f"{ref.safe_name}__{dimension_name(f)}"


def dimension_key(f: LayoutField, value: str | None) -> str | None:
    """The key of one dimension's value (None: it has none)."""
    if f.kind == "time":
        return value  # time partitions have no null key: rows with a null time are whole-table work
    return value_key(value)


def key_parts(layout: PartitionLayout, values: PartitionValues) -> dict[str, str] | None:
    """The key of each dimension of one partition by dimension name, in the dimensions' order (None
    when it has none, e.g. a null time value)."""
    dims = layout.dimensions
    subs = [dimension_key(d, v) for d, v in zip(dims, values, strict=False)]
    if not dims or any(s is None for s in subs):
        return None
    return {dimension_name(d): cast(str, s) for d, s in zip(dims, subs, strict=False)}


def values_of_key(
    layout: PartitionLayout, key: str, parts: Mapping[str, str] | None = None
) -> PartitionValues:
    """Inverse of :func:`key_parts`: the dimension values a key stands for. A key of two dimensions
    is split as Dagster writes a multi-partition key (parts joined by ``|`` in the order of the
    sorted dimension names) unless its ``parts`` are given."""
    dims = layout.dimensions
    if not dims:
        raise PartitionFilterError(f"{layout.table} is not partitioned: no key {key!r}")
    if len(dims) == 1:
        parts = {dimension_name(dims[0]): key}
    elif parts is None:
        parts = dict(zip(sorted(dimension_name(d) for d in dims), key.split("|"), strict=False))
    out: list[str | None] = []
    for d in dims:
        sub = parts.get(dimension_name(d))
        if sub is None:
            raise PartitionFilterError(f"{layout.table}: key {key!r} has no {d.name} part")
        if d.kind == "time":
            time_window(d.transform, sub)  # validates the format, with an error naming it
            out.append(sub)
        else:
            out.append(key_value(sub))
    return tuple(out)
