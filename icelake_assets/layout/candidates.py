"""Candidate layouts and a sample laid out as each would write it: rows grouped by the table's current
partition spec (a file never spans partitions; sorting happens within each partition), ordered by the
candidate, cut into files of a fixed row count, each file's Iceberg metrics (value, null and NaN
counts, lower and upper bounds, strings truncated to 16 characters like Iceberg's default
``truncate(16)`` metrics mode) as a pyiceberg ``DataFile`` the inclusive-metrics evaluator reads."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.conversions import to_bytes
from pyiceberg.manifest import DataFile, DataFileContent, FileFormat
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import PrimitiveType, StringType

from icelake_assets.layout.filters import PredicateKind
from icelake_assets.layout.mining import TableUsage

Strategy = Literal["current", "sort", "zorder"]
# Ranks are scaled to this many bits per column before interleaving (4 columns fill 64 bits).
ZORDER_BITS = 16
ZORDER_MAX_COLUMNS = 4
BOUND_CHARS = 16
PART = "__icelake_partition"


@dataclass(frozen=True)
class Candidate:
    """``current``: the table's sort order (``keys``; arrival order when empty); ``sort``: sorted by
    ``keys`` ascending (nulls first, Iceberg's default); ``zorder``: interleaved bits of the keys' ranks."""

    strategy: Strategy
    keys: tuple[str, ...]
    descending: tuple[bool, ...] = ()

    @property
    def name(self) -> str:
        if self.strategy == "current":
            return f"current ({', '.join(self.keys) or 'arrival order'})"
        return f"{self.strategy}({', '.join(self.keys)})"


@dataclass(frozen=True)
class LaidOut:
    candidate: Candidate
    files: tuple[DataFile, ...]


def candidates(
    usage: TableUsage, current: Candidate, available: Sequence[str], max_keys: int = 3
) -> tuple[Candidate, ...]:
    """The current layout; a sort on each ordering of 1 to ``max_keys`` of the most filtered columns
    (selective kinds only, columns the sample has, no transform); a z-order of the range-filtered ones
    among the most filtered, when there are two or more (z-order only helps several columns at once)."""
    top = [
        c.column for c in usage.columns if c.selective_scans and c.column in available and not c.transforms
    ][:max_keys]
    found: list[Candidate] = [current]
    for n in range(1, len(top) + 1):
        for keys in itertools.permutations(top, n):
            sort = Candidate("sort", keys)
            if sort.keys != current.keys or any(current.descending):
                found.append(sort)
    ranged = [c for c in top if (u := usage.column(c)) is not None and u.scans_of(PredicateKind.RANGE)]
    if len(ranged) >= 2:
        found.append(Candidate("zorder", tuple(ranged[:ZORDER_MAX_COLUMNS])))
    return tuple(found)


def partition_ids(sample: pa.Table, schema: Schema, spec: PartitionSpec) -> np.ndarray:
    """One integer per row naming its partition under ``spec`` (all 0 when unpartitioned)."""
    keys: list[np.ndarray] = []
    for field in spec.fields:
        source = schema.find_field(field.source_id)
        if source.name not in sample.column_names:
            continue
        values = field.transform.pyarrow_transform(source.field_type)(sample.column(source.name))
        encoded = (
            pc.dictionary_encode(values).combine_chunks()
            if isinstance(values, pa.ChunkedArray)
            else (pc.dictionary_encode(values))
        )
        keys.append(pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False))
    if not keys:
        return np.zeros(sample.num_rows, dtype=np.int64)
    _, inverse = np.unique(np.stack(keys, axis=1), axis=0, return_inverse=True)
    return np.asarray(inverse, dtype=np.int64).reshape(-1)


def zorder_values(sample: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """Each row's z-value: its dense rank on every key scaled to :data:`ZORDER_BITS` bits, the bits
    interleaved (most significant first), so rows close on all keys at once sort close together."""
    scaled: list[np.ndarray] = []
    for key in keys[:ZORDER_MAX_COLUMNS]:
        ranks = pc.rank(sample.column(key), sort_keys=[("", "ascending", "at_start")], tiebreaker="dense")
        r = ranks.to_numpy().astype(np.uint64) - np.uint64(1)
        top = max(int(r.max()) if len(r) else 0, 1)
        scaled.append((r * np.uint64((1 << ZORDER_BITS) - 1)) // np.uint64(top))
    z = np.zeros(sample.num_rows, dtype=np.uint64)
    for bit in range(ZORDER_BITS - 1, -1, -1):
        for column in scaled:
            z = (z << np.uint64(1)) | ((column >> np.uint64(bit)) & np.uint64(1))
    return z


def order(sample: pa.Table, parts: np.ndarray, candidate: Candidate) -> np.ndarray:
    """Row indices in the candidate's order, partition by partition (a stable sort: arrival order
    stays as the sample has it)."""
    table = sample.append_column(PART, pa.array(parts))
    sort_keys: list[tuple[str, str, str]] = [(PART, "ascending", "at_start")]
    if candidate.strategy == "zorder":
        table = table.append_column("__z", pa.array(zorder_values(sample, candidate.keys)))
        sort_keys.append(("__z", "ascending", "at_start"))
    else:
        descending = candidate.descending or (False,) * len(candidate.keys)
        for key, desc in zip(candidate.keys, descending, strict=True):
            sort_keys.append((key, "descending" if desc else "ascending", "at_start"))
    return np.asarray(pc.sort_indices(table, sort_keys=sort_keys))


def file_ranges(parts_in_order: np.ndarray, rows_per_file: int) -> list[tuple[int, int]]:
    """(start, stop) of each file: a partition's rows cut every ``rows_per_file`` rows."""
    ranges: list[tuple[int, int]] = []
    edges = np.flatnonzero(np.diff(parts_in_order)) + 1
    bounds = [0, *edges.tolist(), len(parts_in_order)]
    for start, stop in itertools.pairwise(bounds):
        ranges += [(s, min(s + rows_per_file, stop)) for s in range(start, stop, rows_per_file)]
    return ranges


def _upper_text(text: str) -> str | None:
    """The shortest bound above every string starting with ``text[:16]`` (None: no such bound)."""
    if len(text) <= BOUND_CHARS:
        return text
    head = text[:BOUND_CHARS]
    for i in range(len(head) - 1, -1, -1):
        if ord(head[i]) < 0x10FFFF:
            return head[:i] + chr(ord(head[i]) + 1)
    return None


def _metrics(column: pa.Array, field_id: int, kind: PrimitiveType, out: dict[str, dict[int, Any]]) -> None:
    out["values"][field_id] = len(column)
    out["nulls"][field_id] = column.null_count
    if pa.types.is_floating(column.type):
        nans = pc.is_nan(column)
        out["nans"][field_id] = int(pc.sum(nans).as_py() or 0)
        column = pc.filter(column, pc.invert(pc.fill_null(nans, False)))
    stats = pc.min_max(column)
    low, high = stats["min"].as_py(), stats["max"].as_py()
    if low is None:
        return
    if isinstance(kind, StringType):
        low, high = low[:BOUND_CHARS], _upper_text(high)
    out["lower"][field_id] = to_bytes(kind, low)
    if high is not None:
        out["upper"][field_id] = to_bytes(kind, high)


def lay_out(
    sample: pa.Table, schema: Schema, parts: np.ndarray, candidate: Candidate, rows_per_file: int
) -> LaidOut:
    """The sample written as ``candidate`` would write it, as files' metrics (of the sample's columns)."""
    indices = order(sample, parts, candidate)
    ordered = sample.take(pa.array(indices))
    fields = [(schema.find_field(n), ordered.column(n).combine_chunks()) for n in sample.column_names]
    files: list[DataFile] = []
    for number, (start, stop) in enumerate(file_ranges(parts[indices], max(1, rows_per_file))):
        out: dict[str, dict[int, Any]] = {"values": {}, "nulls": {}, "nans": {}, "lower": {}, "upper": {}}
        for field, column in fields:
            if isinstance(field.field_type, PrimitiveType):
                _metrics(column.slice(start, stop - start), field.field_id, field.field_type, out)
        files.append(
            DataFile.from_args(
                content=DataFileContent.DATA,
                file_path=f"replay/{number}.parquet",
                file_format=FileFormat.PARQUET,
                partition=Record(),
                record_count=stop - start,
                file_size_in_bytes=0,
                value_counts=out["values"],
                null_value_counts=out["nulls"],
                nan_value_counts=out["nans"],
                lower_bounds=out["lower"],
                upper_bounds=out["upper"],
            )
        )
    return LaidOut(candidate, tuple(files))
