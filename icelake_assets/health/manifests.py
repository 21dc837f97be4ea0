"""Reading manifests for health: only the fields health needs, into compact per-manifest columns.

pyiceberg's ``fetch_manifest_entry`` materializes every field of every entry (column sizes, value
counts, bounds ...), which costs more than Spark's whole ``files`` query. Health needs five fields,
so manifests are read with a *projected* Avro read schema through pyiceberg's own readers
(health/manifest_avro.py).

On 20,000 entries in 20 pyiceberg-written manifests: 1.2 s with ``fetch_manifest_entry``, 0.28 s here
(BENCHMARKS.md, Health).
"""

from __future__ import annotations

import datetime as _dt
import decimal
import json
import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyiceberg.conversions import from_bytes
from pyiceberg.io import FileIO
from pyiceberg.manifest import ManifestContent, ManifestEntryStatus, ManifestFile
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.typedef import Record
from pyiceberg.types import (
    BinaryType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    LongType,
    PrimitiveType,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

from icelake_assets.health.manifest_avro import PATHS, PROJECTIONS, ProjectedAvroFile
from icelake_assets.partitions.layout import UNPARTITIONED


@dataclass(frozen=True)
class ManifestMeta:
    """One manifest as the manifest list describes it (no manifest read needed)."""

    path: str
    length: int
    spec_id: int
    content: int  # 0 data, 1 deletes
    added_snapshot_id: int | None
    files: int  # live entries: added + existing

    @classmethod
    def of(cls, m: ManifestFile) -> ManifestMeta:
        content = m.content.value if isinstance(m.content, ManifestContent) else int(m.content or 0)
        files = (m.added_files_count or 0) + (m.existing_files_count or 0)
        return cls(
            m.manifest_path,
            int(m.manifest_length),
            int(m.partition_spec_id),
            content,
            m.added_snapshot_id,
            files,
        )


@dataclass(frozen=True)
class ManifestSummary:
    """The live entries of one manifest as columns (index i = one file).

    ``part`` indexes ``labels`` / ``values`` (the distinct partitions of this manifest). ``lower`` /
    ``upper`` hold the bounds of the column ``bounds_field`` (sortable JSON values, None when absent).
    ``referenced`` (delete manifests only): for each entry, the one data file a position delete file
    points into (its ``file_path`` bounds are equal, as Iceberg's file-scoped deletes write them),
    None when it may point into several or the entry is no position delete."""

    spec_id: int
    labels: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]
    part: np.ndarray  # int32
    content: np.ndarray  # int8: 0 data, 1 position deletes, 2 equality deletes
    size: np.ndarray  # int64
    records: np.ndarray  # int64
    bounds_field: int | None = None
    lower: tuple[Any, ...] = ()
    upper: tuple[Any, ...] = ()
    referenced: tuple[str | None, ...] = ()

    def __len__(self) -> int:
        return len(self.size)

    @property
    def nbytes(self) -> int:
        columns = self.part.nbytes + self.content.nbytes + self.size.nbytes + self.records.nbytes
        objects = 2 * 48 * len(self.lower) + 120 * len(self.referenced)  # bounds, paths: Python objects
        return int(columns) + 64 * len(self.labels) + objects

    # A compact, pickle-free encoding for the disk cache: a JSON header, then the raw columns.
    def to_bytes(self) -> bytes:
        header = json.dumps(
            {
                "spec_id": self.spec_id,
                "labels": self.labels,
                "values": self.values,
                "n": len(self),
                "bounds_field": self.bounds_field,
                "lower": self.lower,
                "upper": self.upper,
                "referenced": self.referenced,
            },
            separators=(",", ":"),
        ).encode()
        return b"".join(
            [
                struct.pack("<I", len(header)),
                header,
                self.part.astype("<i4").tobytes(),
                self.content.astype("<i1").tobytes(),
                self.size.astype("<i8").tobytes(),
                self.records.astype("<i8").tobytes(),
            ]
        )

    @classmethod
    def from_bytes(cls, blob: bytes) -> ManifestSummary:
        (hlen,) = struct.unpack_from("<I", blob)
        h = json.loads(blob[4 : 4 + hlen])
        n, at = h["n"], 4 + hlen
        part = np.frombuffer(blob, "<i4", n, at)
        at += 4 * n
        content = np.frombuffer(blob, "<i1", n, at)
        at += n
        size = np.frombuffer(blob, "<i8", n, at)
        at += 8 * n
        records = np.frombuffer(blob, "<i8", n, at)
        return cls(
            h["spec_id"],
            tuple(h["labels"]),
            tuple(tuple(v) for v in h["values"]),
            part,
            content,
            size,
            records,
            h["bounds_field"],
            tuple(h["lower"]),
            tuple(h["upper"]),
            tuple(h.get("referenced", ())),
        )


def json_value(value: Any) -> Any:
    """A JSON-safe value that sorts like the original within one type (used for partitions and bounds)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, (_dt.date, _dt.time)):
        return value.isoformat()
    return str(value)


# Types whose Iceberg single-value serialization decodes to something that orders correctly.
_ORDERED = (
    IntegerType,
    LongType,
    FloatType,
    DoubleType,
    DateType,
    TimeType,
    TimestampType,
    TimestamptzType,
    StringType,
    DecimalType,
    UUIDType,
    FixedType,
    BinaryType,
)


def bound_decoder(schema: Schema, field_id: int | None):
    """A function from an Iceberg bound (bytes) to a sortable JSON value, or None if not orderable."""
    if field_id is None:
        return None
    try:
        ftype = schema.find_type(field_id)
    except ValueError:
        return None
    if not isinstance(ftype, _ORDERED) or not isinstance(ftype, PrimitiveType):
        return None

    def decode(raw: bytes | None) -> Any:
        return None if raw is None else json_value(from_bytes(ftype, raw))

    return decode


def read_manifest(
    io: FileIO,
    meta: ManifestMeta,
    spec: PartitionSpec | None,
    schema: Schema,
    bounds_field: int | None = None,
) -> ManifestSummary:
    """Read one manifest's live entries (added and existing; deleted entries are history)."""
    decode = bound_decoder(schema, bounds_field)
    with_bounds = decode is not None
    deletes = meta.content != 0  # the data files position deletes point into (their file_path bounds)
    referenced: list[str | None] = []
    labels: dict[tuple[Any, ...], int] = {}
    part: list[int] = []
    content: list[int] = []
    size: list[int] = []
    records: list[int] = []
    lower: list[Any] = []
    upper: list[Any] = []
    deleted = ManifestEntryStatus.DELETED.value
    with ProjectedAvroFile(io.new_input(meta.path), PROJECTIONS[with_bounds or deletes]) as reader:
        for entry in reader.entries():
            if entry[0] == deleted:
                continue
            df = entry[1]
            key = tuple(df[1]._data) if isinstance(df[1], Record) else ()
            idx = labels.get(key)
            if idx is None:
                idx = labels[key] = len(labels)
            part.append(idx)
            content.append(df[0] or 0)  # v1 manifests have no content field: data
            records.append(df[2])
            size.append(df[3])
            if deletes:
                referenced.append(_referenced(df) if df[0] == 1 else None)
            if with_bounds:
                lo, hi = df[4], df[5]
                lower.append(decode(lo.get(bounds_field)) if lo else None)
                upper.append(decode(hi.get(bounds_field)) if hi else None)
    keys = list(labels)
    return ManifestSummary(
        spec_id=meta.spec_id,
        labels=tuple(partition_label(spec, schema, k) for k in keys),
        values=tuple(tuple(json_value(v) for v in k) for k in keys),
        part=np.asarray(part, dtype=np.int32),
        content=np.asarray(content, dtype=np.int8),
        size=np.asarray(size, dtype=np.int64),
        records=np.asarray(records, dtype=np.int64),
        bounds_field=bounds_field if with_bounds else None,
        lower=tuple(lower),
        upper=tuple(upper),
        referenced=tuple(referenced),
    )


# The file_path column of position delete files (Iceberg's reserved MetadataColumns.DELETE_FILE_PATH).
DELETE_FILE_PATH_ID = 2147483546


def _referenced(df: Any) -> str | None:
    """The one data file a position delete file points into, from its file_path bounds."""
    lo, hi = df[4], df[5]
    low = lo.get(DELETE_FILE_PATH_ID) if lo else None
    if low is None or low != (hi.get(DELETE_FILE_PATH_ID) if hi else None):
        return None
    return bytes(low).decode("utf-8", "replace")


def live_file_paths(io: FileIO, manifest_path: str) -> list[str]:
    """Paths of the live (added or existing) files of one manifest, reading nothing else."""
    deleted = ManifestEntryStatus.DELETED.value
    with ProjectedAvroFile(io.new_input(manifest_path), PATHS) as reader:
        return [entry[1][0] for entry in reader.entries() if entry[0] != deleted]


def partition_label(spec: PartitionSpec | None, schema: Schema, values: Sequence[Any]) -> str:
    """``name=value/...`` as Iceberg lays partitions out on storage; unpartitioned tables have one label."""
    if spec is None or spec.is_unpartitioned() or not values:
        return UNPARTITIONED
    try:
        return spec.partition_to_path(Record(*values), schema)
    except Exception:  # a column dropped since: fall back to the raw values rather than fail the health read
        return "/".join(f"{f.name}={v}" for f, v in zip(spec.fields, values, strict=False))
