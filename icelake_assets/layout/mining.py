"""A table's scan reports mined: which columns its queries filter, how (equality, IN, range, IS NULL,
starts-with...), how often, how selective the current layout is for them (the reports' own skipped
data files), the projected columns, and the queries that read the most bytes.

Reports whose filters are the same document (same columns, operators and sanitized literals: equal
hashes are equal values) are one *query shape*; the replay predicts files read per shape, weighted
by how often it ran and the bytes it read."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from icelake_assets.layout.filters import (
    Always,
    Filter,
    FilterError,
    PredicateKind,
    parse_filter,
    predicates,
    render,
)
from icelake_assets.layout.reports import ScanReport

# Kinds that can make a scan skip files on a well-laid-out table (negations almost never do).
SELECTIVE_KINDS = frozenset(
    {
        PredicateKind.EQUALITY,
        PredicateKind.IN,
        PredicateKind.RANGE,
        PredicateKind.IS_NULL,
        PredicateKind.STARTS_WITH,
    }
)


@dataclass(frozen=True)
class KindCount:
    kind: PredicateKind
    scans: int


@dataclass(frozen=True)
class ColumnUsage:
    """One filtered column: the scans filtering on it (once per scan however many predicates), by
    kind, the bytes those scans read and the share of listed files they skipped."""

    column: str
    scans: int
    kinds: tuple[KindCount, ...]
    bytes_read: int
    skipped_ratio: float
    transforms: tuple[str, ...] = ()

    @property
    def selective_scans(self) -> int:
        return sum(k.scans for k in self.kinds if k.kind in SELECTIVE_KINDS)

    def scans_of(self, kind: PredicateKind) -> int:
        return sum(k.scans for k in self.kinds if k.kind is kind)


@dataclass(frozen=True)
class QueryShape:
    """The reports of one filter document. ``weight``: scans × mean bytes read (scans alone when the
    engine reported no bytes), what the replay weighs its predictions by."""

    key: str
    filter: Filter
    text: str
    scans: int
    bytes_read: int
    files_read: int
    files_considered: int

    @property
    def skipped_ratio(self) -> float:
        return 1 - self.files_read / self.files_considered if self.files_considered else 0.0

    @property
    def weight(self) -> float:
        return float(self.bytes_read) if self.bytes_read > 0 else float(self.scans)


@dataclass(frozen=True)
class ProjectedColumn:
    column: str
    scans: int


@dataclass(frozen=True)
class TableUsage:
    table_name: str
    reports: int
    unparsed: int  # reports whose filter was not an expression (kept out of every count below)
    unfiltered: int  # scans with no filter (``true``): nothing a layout can skip for them
    files_read: int
    files_considered: int
    bytes_read: int
    columns: tuple[ColumnUsage, ...]  # most filtered first
    shapes: tuple[QueryShape, ...]  # most bytes read first
    projected: tuple[ProjectedColumn, ...]

    @property
    def measured_skipped_ratio(self) -> float:
        """The share of listed data files the scans skipped, over all reports (0 when none listed)."""
        return 1 - self.files_read / self.files_considered if self.files_considered else 0.0

    def top_shapes(self, n: int = 10) -> tuple[QueryShape, ...]:
        return self.shapes[:n]

    def column(self, name: str) -> ColumnUsage | None:
        return next((c for c in self.columns if c.column == name), None)


def same_table(report_name: str, table: str) -> bool:
    """A report names its table as its engine's catalog does (``spark_catalog.ns.t``, ``ns.t``): it is
    ``table`` (``catalog.ns.t``) when one dotted name ends the other, case-insensitively."""
    a, b = report_name.lower(), table.lower()
    return a == b or a.endswith("." + b) or b.endswith("." + a)


def _shape_key(doc: Any) -> str:
    if isinstance(doc, str | bytes):
        try:
            doc = json.loads(doc)
        except ValueError:
            return str(doc)
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))


def mine(reports: Iterable[ScanReport], table: str) -> TableUsage:
    """``table``'s usage from the reports naming it (others are ignored)."""
    own = [r for r in reports if same_table(r.table_name, table)]
    unparsed = unfiltered = 0
    shapes: dict[str, list[ScanReport]] = defaultdict(list)
    filters: dict[str, Filter] = {}
    for report in own:
        key = _shape_key(report.filter)
        if key not in filters:
            try:
                filters[key] = parse_filter(report.filter)
            except FilterError:
                unparsed += 1
                continue
        shapes[key].append(report)
    kinds: dict[str, Counter[PredicateKind]] = defaultdict(Counter)
    scans: Counter[str] = Counter()
    transforms: dict[str, set[str]] = defaultdict(set)
    column_bytes: Counter[str] = Counter()
    column_files: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for key, group in shapes.items():
        node = filters[key]
        if isinstance(node, Always):
            unfiltered += len(group)
            continue
        found = predicates(node)
        for column in {p.column for p in found}:
            scans[column] += len(group)
            column_bytes[column] += sum(r.total_file_size_bytes for r in group)
            column_files[column][0] += sum(r.result_data_files for r in group)
            column_files[column][1] += sum(r.considered_data_files for r in group)
        for column, kind in {(p.column, p.kind) for p in found}:
            kinds[column][kind] += len(group)
        for p in found:
            if p.transform:
                transforms[p.column].add(p.transform)
    columns = tuple(
        sorted(
            (
                ColumnUsage(
                    column=c,
                    scans=n,
                    kinds=tuple(KindCount(k, m) for k, m in kinds[c].most_common()),
                    bytes_read=column_bytes[c],
                    skipped_ratio=1 - column_files[c][0] / column_files[c][1] if column_files[c][1] else 0.0,
                    transforms=tuple(sorted(transforms[c])),
                )
                for c, n in scans.items()
            ),
            key=lambda u: (-u.selective_scans, -u.scans, -u.bytes_read, u.column),
        )
    )
    projected = Counter(name for r in own for name in r.projected_field_names)
    parsed = [r for group in shapes.values() for r in group]
    return TableUsage(
        table_name=table,
        reports=len(own),
        unparsed=unparsed,
        unfiltered=unfiltered,
        files_read=sum(r.result_data_files for r in parsed),
        files_considered=sum(r.considered_data_files for r in parsed),
        bytes_read=sum(r.total_file_size_bytes for r in parsed),
        columns=columns,
        shapes=tuple(
            sorted(
                (_shape(key, filters[key], group) for key, group in shapes.items()),
                key=lambda s: (-s.bytes_read, -s.scans, s.key),
            )
        ),
        projected=tuple(
            ProjectedColumn(c, n) for c, n in sorted(projected.items(), key=lambda i: (-i[1], i[0]))
        ),
    )


def _shape(key: str, node: Filter, group: list[ScanReport]) -> QueryShape:
    return QueryShape(
        key=key,
        filter=node,
        text=render(node),
        scans=len(group),
        bytes_read=sum(r.total_file_size_bytes for r in group),
        files_read=sum(r.result_data_files for r in group),
        files_considered=sum(r.considered_data_files for r in group),
    )
