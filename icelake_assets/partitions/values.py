"""The partition values a partition of health's stats (its label, spec and raw values) stands for,
as dimension values of the table's current spec (see :mod:`icelake_assets.partitions`)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote_plus

from icelake_assets.partitions.layout import (
    GRAIN,
    UNPARTITIONED,
    LayoutField,
    PartitionFilterError,
    PartitionLayout,
    format_time,
    time_window,
)

PartitionValues = tuple[str | None, ...]  # one human string (None: null) per dimension


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
