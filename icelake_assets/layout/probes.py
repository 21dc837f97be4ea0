"""Concrete probe predicates for a recorded filter, drawn from a sample of the table's rows.

Scan reports carry sanitized literals (``(hash-…)``, ``(4-digit-int)``, ``(date-7-days-ago)``), never
the queried values, so the replay cannot re-run a recorded filter as it was. It runs probes of the
same shape instead: each probe anchors on one sample row drawn uniformly (so values are weighted by
how many rows hold them, as real lookups tend to be), and every sanitized literal becomes a value of
the sample that agrees with what the literal still tells:

- equality / IN / not-eq / not-in: the anchor row's value (more sample values for the rest of an IN
  list); for a number, a value with the literal's digit count when the sample has one;
- a range bound relative to the scan's day or hour (``(date-7-days-ago)``): the column's newest sample
  value (the data's "now") moved by that offset, so ``ts >= (date-7-days-ago)`` reads the last 7 days;
- a lower and an upper bound on one column in one conjunction: a window, relative as above when both
  literals are, else a window holding :data:`RANGE_FRACTION` of the sample's non-null values at a
  random place; any other single bound: a random sample value;
- starts-with: the first :data:`PREFIX_CHARS` characters of the anchor's value (a hash hides the length);
- a predicate on a transform (``day(ts)``), on a column the sample lacks, or of an unknown operator:
  true (might match every file), which no candidate layout changes.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from functools import cached_property
from typing import Any

import pyarrow as pa
from pyiceberg import expressions as ix

from icelake_assets.layout.filters import (
    Always,
    And,
    Filter,
    LiteralKind,
    Not,
    Or,
    Predicate,
    PredicateKind,
    SanitizedLiteral,
)

RANGE_FRACTION = 0.02
PREFIX_CHARS = 4
LOWER_OPS = frozenset({"gt", "gt-eq"})
UPPER_OPS = frozenset({"lt", "lt-eq"})


def _digits(value: Any) -> int | None:
    """Iceberg's digit count of a number (``(int)log10(|v|) + 1``, 1 for zero)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    magnitude = abs(value)
    return 1 if magnitude < 1 else len(str(int(magnitude)))


@dataclass
class _Column:
    values: list[Any]  # one per sample row, None for null

    @cached_property
    def present(self) -> list[Any]:
        return [v for v in self.values if v is not None]

    @cached_property
    def ordered(self) -> list[Any]:
        return sorted(self.present)

    @cached_property
    def by_digits(self) -> dict[int | None, list[Any]]:
        groups: dict[int | None, list[Any]] = {}
        for v in self.present:
            groups.setdefault(_digits(v), []).append(v)
        return groups


class ProbeMaker:
    """Probes for the filters of one table, from its sample. Seeded: the same sample and seed give the
    same probes, so every candidate layout is judged on the same queries."""

    def __init__(self, sample: pa.Table, seed: int = 0) -> None:
        self.rows = sample.num_rows
        self.rng = random.Random(seed)
        self._table = sample
        self._columns: dict[str, _Column] = {}

    def probes(self, node: Filter, n: int) -> list[ix.BooleanExpression]:
        return [self._expression(node, self.rng.randrange(self.rows)) for _ in range(n)] if self.rows else []

    def _column(self, name: str) -> _Column | None:
        if name not in self._columns:
            if name not in self._table.column_names:
                return None
            self._columns[name] = _Column(self._table.column(name).to_pylist())
        column = self._columns[name]
        return column if column.present else None

    def _expression(self, node: Filter, anchor: int) -> ix.BooleanExpression:
        if isinstance(node, Always):
            return ix.AlwaysTrue() if node.value else ix.AlwaysFalse()
        if isinstance(node, Not):
            return ix.Not(self._expression(node.child, anchor))
        if isinstance(node, Or):
            return ix.Or(self._expression(node.left, anchor), self._expression(node.right, anchor))
        if isinstance(node, And):
            return self._conjunction(node, anchor)
        return self._predicate(node, anchor)

    def _conjunction(self, node: And, anchor: int) -> ix.BooleanExpression:
        parts: list[Filter] = []
        stack: list[Filter] = [node]
        while stack:
            item = stack.pop()
            if isinstance(item, And):
                stack += [item.right, item.left]
            else:
                parts.append(item)
        ranges = [
            p for p in parts if isinstance(p, Predicate) and p.kind is PredicateKind.RANGE and not p.transform
        ]
        windows: dict[str, tuple[Any, Any]] = {}
        for column in {p.column for p in ranges}:
            ops = {p.op for p in ranges if p.column == column}
            if ops & LOWER_OPS and ops & UPPER_OPS and (col := self._column(column)) is not None:
                lows = [p.literals[0] for p in ranges if p.column == column and p.op in LOWER_OPS]
                highs = [p.literals[0] for p in ranges if p.column == column and p.op in UPPER_OPS]
                windows[column] = self._window(col, lows[0], highs[0])
        out: list[ix.BooleanExpression] = []
        for part in parts:
            if isinstance(part, Predicate) and part.column in windows and part in ranges:
                low, high = windows[part.column]
                out.append(_range(part.op, part.column, low if part.op in LOWER_OPS else high))
            else:
                out.append(self._expression(part, anchor))
        return ix.And(*out) if len(out) > 1 else out[0]

    def _predicate(self, p: Predicate, anchor: int) -> ix.BooleanExpression:
        col = self._column(p.column)
        if p.transform or p.kind is PredicateKind.OTHER or col is None:
            return ix.AlwaysTrue()
        name, op = p.column, p.op
        unary: dict[str, Callable[..., ix.BooleanExpression]] = {
            "is-null": ix.IsNull,
            "not-null": ix.NotNull,
            "is-nan": ix.IsNaN,
            "not-nan": ix.NotNaN,
        }
        if op in unary:
            if op in ("is-nan", "not-nan") and not isinstance(col.present[0], float):
                return ix.AlwaysTrue()  # NaN predicates on a non-float column do not bind
            return unary[op](term=name)
        literal = p.literals[0] if p.literals else SanitizedLiteral("", LiteralKind.VALUE)
        if op in ("eq", "not-eq"):
            value = self._value(col, literal, anchor)
            return ix.EqualTo(term=name, value=value) if op == "eq" else ix.NotEqualTo(term=name, value=value)
        if op in ("in", "not-in"):
            values = {self._value(col, literal, anchor)}
            values |= {self._value(col, lit, self.rng.randrange(self.rows)) for lit in p.literals[1:]}
            return ix.In(term=name, literals=values) if op == "in" else ix.NotIn(term=name, literals=values)
        if op in ("starts-with", "not-starts-with"):
            text = self._value(col, literal, anchor)
            if not isinstance(text, str):
                return ix.AlwaysTrue()
            prefix = text[:PREFIX_CHARS]
            return (
                ix.StartsWith(term=name, value=prefix)
                if op == "starts-with"
                else ix.NotStartsWith(term=name, value=prefix)
            )
        if op in LOWER_OPS | UPPER_OPS:
            return _range(op, name, self._bound(col, literal))
        return ix.AlwaysTrue()

    def _value(self, col: _Column, literal: SanitizedLiteral, anchor: int) -> Any:
        value = col.values[anchor]
        if (
            literal.kind is LiteralKind.VALUE
            and literal.value is not None
            and type(literal.value) is type(value)
        ):
            return literal.value  # an unsanitized literal of the column's type: the value itself
        if literal.kind is LiteralKind.NUMBER and _digits(value) != literal.digits:
            matching = col.by_digits.get(literal.digits)
            if matching:
                return self.rng.choice(matching)
        return value if value is not None else self.rng.choice(col.present)

    def _relative(self, col: _Column, literal: SanitizedLiteral) -> Any | None:
        newest = col.ordered[-1]
        if literal.offset is None or not isinstance(newest, date):
            return None
        return newest + literal.offset  # a date column moves by whole days (hours are dropped)

    def _bound(self, col: _Column, literal: SanitizedLiteral) -> Any:
        relative = self._relative(col, literal)
        if relative is not None:
            return relative
        return self._value(col, literal, self.rng.randrange(self.rows))

    def _window(self, col: _Column, low: SanitizedLiteral, high: SanitizedLiteral) -> tuple[Any, Any]:
        a, b = self._relative(col, low), self._relative(col, high)
        if a is not None and b is not None:
            return (a, b) if a <= b else (b, a)
        ordered = col.ordered
        width = max(1, int(RANGE_FRACTION * len(ordered)))
        start = self.rng.randrange(max(1, len(ordered) - width))
        return ordered[start], ordered[min(start + width, len(ordered) - 1)]


def _range(op: str, name: str, value: Any) -> ix.BooleanExpression:
    kinds: dict[str, Callable[..., ix.BooleanExpression]] = {
        "lt": ix.LessThan,
        "lt-eq": ix.LessThanOrEqual,
        "gt": ix.GreaterThan,
        "gt-eq": ix.GreaterThanOrEqual,
    }
    return kinds[op](term=name, value=value)
