"""Iceberg expression JSON (``ExpressionParser``) → typed filters: a tree of and/or/not over predicates,
each predicate a column (optionally under a transform), an operator and the literals as the scan
report sanitized them (``ExpressionUtil.sanitize``), with what a sanitized literal still tells.

An operator this module does not know (a newer Iceberg, an engine's extension) is kept as a predicate
of kind ``other`` rather than raised: one odd filter among thousands of reports must not stop a
table's mining, and the replay treats ``other`` as "might match every file", the safe side of
inclusive metrics. A document that is not an expression at all (an ``and`` without ``right``, a
predicate without ``term``) raises :class:`FilterError` naming what is missing."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import timedelta
from enum import StrEnum
from typing import Any

from icelake_assets.types import IcelakeError


class FilterError(IcelakeError, ValueError):
    """A filter document that is not Iceberg expression JSON: names the node at fault."""


class PredicateKind(StrEnum):
    EQUALITY = "equality"
    IN = "in"
    RANGE = "range"
    IS_NULL = "is-null"
    IS_NAN = "is-nan"
    STARTS_WITH = "starts-with"
    # not-eq, not-in, not-null, not-nan, not-starts-with: rarely skip a file (only a constant one).
    NEGATION = "negation"
    OTHER = "other"


KIND_OF_OP: dict[str, PredicateKind] = {
    "eq": PredicateKind.EQUALITY,
    "in": PredicateKind.IN,
    "lt": PredicateKind.RANGE,
    "lt-eq": PredicateKind.RANGE,
    "gt": PredicateKind.RANGE,
    "gt-eq": PredicateKind.RANGE,
    "is-null": PredicateKind.IS_NULL,
    "is-nan": PredicateKind.IS_NAN,
    "starts-with": PredicateKind.STARTS_WITH,
    "not-eq": PredicateKind.NEGATION,
    "not-in": PredicateKind.NEGATION,
    "not-null": PredicateKind.NEGATION,
    "not-nan": PredicateKind.NEGATION,
    "not-starts-with": PredicateKind.NEGATION,
}
UNARY_OPS = frozenset({"is-null", "not-null", "is-nan", "not-nan"})
SET_OPS = frozenset({"in", "not-in"})


class LiteralKind(StrEnum):
    NUMBER = "number"  # (N-digit-int) / (N-digit-float)
    DATE = "date"  # (date-today), (date-N-days-ago|from-now), (date) when 90 days or more away
    TIMESTAMP = "timestamp"  # (timestamp-about-now), (timestamp-N-hours|days-ago|from-now), (timestamp)
    TIME = "time"
    HASH = "hash"  # strings, uuids, decimals, binaries: equal hashes are equal values
    VALUE = "value"  # not sanitized (a REST body or a test kept the value): usable as it is


_NUMBER = re.compile(r"\((\d+)-digit-(int|float)\)")
_DATE = re.compile(r"\(date(?:-(today)|-(\d+)-days-(ago|from-now))?\)")
_TIMESTAMP = re.compile(r"\(timestamp(?:-(about-now)|-(\d+)-(hours|days)-(ago|from-now))?\)")
_HASH = re.compile(r"\(hash-([0-9a-f]+)\)")


@dataclass(frozen=True)
class SanitizedLiteral:
    """One literal as reported. ``offset`` is signed (negative: in the past of the scan's planning)
    and None when the literal is far (90 days or more) or not a date/timestamp."""

    text: str
    kind: LiteralKind
    digits: int | None = None
    number_type: str | None = None
    offset: timedelta | None = None
    hash: str | None = None
    value: Any = None

    @staticmethod
    def parse(raw: Any) -> SanitizedLiteral:
        if isinstance(raw, dict) and raw.get("type") == "literal":
            raw = raw.get("value")
        if not isinstance(raw, str):
            return SanitizedLiteral(json.dumps(raw), LiteralKind.VALUE, value=raw)
        if m := _NUMBER.fullmatch(raw):
            return SanitizedLiteral(raw, LiteralKind.NUMBER, digits=int(m[1]), number_type=m[2])
        if m := _DATE.fullmatch(raw):
            return SanitizedLiteral(raw, LiteralKind.DATE, offset=_offset(m[1], m[2], "days", m[3]))
        if m := _TIMESTAMP.fullmatch(raw):
            return SanitizedLiteral(raw, LiteralKind.TIMESTAMP, offset=_offset(m[1], m[2], m[3], m[4]))
        if raw == "(time)":
            return SanitizedLiteral(raw, LiteralKind.TIME)
        if m := _HASH.fullmatch(raw):
            return SanitizedLiteral(raw, LiteralKind.HASH, hash=m[1])
        return SanitizedLiteral(raw, LiteralKind.VALUE, value=raw)


def _offset(now: str | None, count: str | None, unit: str | None, direction: str | None) -> timedelta | None:
    if now:
        return timedelta(0)
    if count is None:
        return None
    delta = timedelta(days=int(count)) if unit == "days" else timedelta(hours=int(count))
    return -delta if direction == "ago" else delta


@dataclass(frozen=True)
class Predicate:
    column: str
    op: str  # Iceberg's operation name: eq, lt-eq, not-in, ...
    kind: PredicateKind
    literals: tuple[SanitizedLiteral, ...] = ()
    transform: str | None = None  # day, bucket[16], ... when the term is a transform of the column

    def render(self) -> str:
        term = f"{self.transform}({self.column})" if self.transform else self.column
        if self.op in SET_OPS:
            return f"{term} {self.op} ({', '.join(lit.text for lit in self.literals)})"
        return " ".join([term, self.op, *(lit.text for lit in self.literals)])


@dataclass(frozen=True)
class Always:
    value: bool


@dataclass(frozen=True)
class Not:
    child: Filter


@dataclass(frozen=True)
class And:
    left: Filter
    right: Filter


@dataclass(frozen=True)
class Or:
    left: Filter
    right: Filter


Filter = Always | Not | And | Or | Predicate


def parse_filter(doc: Any) -> Filter:
    """The typed filter of a report's ``filter`` (JSON text or the decoded document)."""
    if isinstance(doc, str | bytes):
        try:
            doc = json.loads(doc)
        except ValueError as err:
            raise FilterError(f"filter is not JSON: {err}") from err
    return _node(doc, "filter")


def _node(doc: Any, where: str) -> Filter:
    if isinstance(doc, bool):
        return Always(doc)
    if not isinstance(doc, dict) or not isinstance(doc.get("type"), str):
        raise FilterError(f"{where}: an expression is true, false or an object with a 'type', got {doc!r}")
    op = doc["type"].lower().replace("_", "-")
    if op == "literal":
        return Always(bool(doc.get("value")))
    if op == "not":
        return Not(_node(_field(doc, "child", where), f"{where}.child"))
    if op in ("and", "or"):
        left = _node(_field(doc, "left", where), f"{where}.left")
        right = _node(_field(doc, "right", where), f"{where}.right")
        return And(left, right) if op == "and" else Or(left, right)
    column, transform = _term(_field(doc, "term", where), where)
    if "values" in doc:
        values = doc["values"]
        if not isinstance(values, list):
            raise FilterError(f"{where}: 'values' of {op} must be a list, got {values!r}")
        literals = tuple(SanitizedLiteral.parse(v) for v in values)
    elif "value" in doc:
        literals = (SanitizedLiteral.parse(doc["value"]),)
    else:
        literals = ()
    return Predicate(column, op, KIND_OF_OP.get(op, PredicateKind.OTHER), literals, transform)


def _field(doc: dict[str, Any], name: str, where: str) -> Any:
    if name not in doc:
        raise FilterError(f"{where}: a {doc['type']!r} expression needs {name!r}")
    return doc[name]


def _term(term: Any, where: str) -> tuple[str, str | None]:
    """A plain name, a ``reference`` object or a ``transform`` object (its source column)."""
    if isinstance(term, str) and term:
        return term, None
    if isinstance(term, dict):
        if term.get("type") == "reference" and isinstance(term.get("term"), str):
            return term["term"], None
        if term.get("type") == "transform" and isinstance(term.get("transform"), str):
            column, _ = _term(term.get("term"), where)
            transform = term["transform"]
            return column, None if transform == "identity" else transform
    raise FilterError(f"{where}: not a term: {term!r}")


def predicates(node: Filter, negated: bool = False) -> tuple[Predicate, ...]:
    """The filter's predicates, left to right; one under an odd number of ``not`` is of kind
    ``negation`` whatever its operator (``not (x = ?)`` skips no more than ``x != ?``)."""
    if isinstance(node, Predicate):
        flip = negated and node.kind is not PredicateKind.OTHER
        return (replace(node, kind=PredicateKind.NEGATION) if flip else node,)
    if isinstance(node, Not):
        return predicates(node.child, not negated)
    if isinstance(node, And | Or):
        return predicates(node.left, negated) + predicates(node.right, negated)
    return ()


def render(node: Filter) -> str:
    """A one-line reading of the filter, for tables and logs."""
    if isinstance(node, Always):
        return "true" if node.value else "false"
    if isinstance(node, Predicate):
        return node.render()
    if isinstance(node, Not):
        return f"not ({render(node.child)})"
    word = "and" if isinstance(node, And) else "or"
    return f"({render(node.left)} {word} {render(node.right)})"
