"""Iceberg expression JSON as ExpressionParser writes it for a sanitized scan filter: every operator,
terms as names, references and transforms, sanitized literals and what each still tells."""

from __future__ import annotations

from datetime import timedelta

import pytest

from icelake_assets.layout.filters import (
    Always,
    And,
    FilterError,
    LiteralKind,
    Not,
    Or,
    Predicate,
    PredicateKind,
    SanitizedLiteral,
    parse_filter,
    predicates,
    render,
)

LITERAL_OPS = {
    "eq": PredicateKind.EQUALITY,
    "not-eq": PredicateKind.NEGATION,
    "lt": PredicateKind.RANGE,
    "lt-eq": PredicateKind.RANGE,
    "gt": PredicateKind.RANGE,
    "gt-eq": PredicateKind.RANGE,
    "starts-with": PredicateKind.STARTS_WITH,
    "not-starts-with": PredicateKind.NEGATION,
}
UNARY_OPS = {
    "is-null": PredicateKind.IS_NULL,
    "not-null": PredicateKind.NEGATION,
    "is-nan": PredicateKind.IS_NAN,
    "not-nan": PredicateKind.NEGATION,
}


def test_true_and_false():
    assert parse_filter(True) == Always(True)
    assert parse_filter("false") == Always(False)
    assert parse_filter({"type": "literal", "value": True}) == Always(True)


@pytest.mark.parametrize(("op", "kind"), sorted(LITERAL_OPS.items()))
def test_every_literal_operator(op, kind):
    node = parse_filter({"type": op, "term": "x", "value": "(2-digit-int)"})
    assert node == Predicate(
        "x", op, kind, (SanitizedLiteral("(2-digit-int)", LiteralKind.NUMBER, 2, "int"),)
    )


@pytest.mark.parametrize(("op", "kind"), sorted(UNARY_OPS.items()))
def test_every_unary_operator(op, kind):
    assert parse_filter({"type": op, "term": "x"}) == Predicate("x", op, kind)


@pytest.mark.parametrize(("op", "kind"), [("in", PredicateKind.IN), ("not-in", PredicateKind.NEGATION)])
def test_set_operators_keep_each_literal(op, kind):
    node = parse_filter({"type": op, "term": "city", "values": ["(hash-1a2b3c4d)", "(hash-00ff00ff)"]})
    assert isinstance(node, Predicate) and node.kind is kind
    assert [lit.hash for lit in node.literals] == ["1a2b3c4d", "00ff00ff"]
    assert render(node) == f"city {op} ((hash-1a2b3c4d), (hash-00ff00ff))"


@pytest.mark.parametrize(
    ("text", "kind", "offset"),
    [
        ("(date-today)", LiteralKind.DATE, timedelta(0)),
        ("(date-7-days-ago)", LiteralKind.DATE, timedelta(days=-7)),
        ("(date-3-days-from-now)", LiteralKind.DATE, timedelta(days=3)),
        ("(date)", LiteralKind.DATE, None),
        ("(timestamp-about-now)", LiteralKind.TIMESTAMP, timedelta(0)),
        ("(timestamp-3-hours-ago)", LiteralKind.TIMESTAMP, timedelta(hours=-3)),
        ("(timestamp-12-days-ago)", LiteralKind.TIMESTAMP, timedelta(days=-12)),
        ("(timestamp-2-hours-from-now)", LiteralKind.TIMESTAMP, timedelta(hours=2)),
        ("(timestamp)", LiteralKind.TIMESTAMP, None),
    ],
)
def test_relative_dates_and_timestamps_tell_their_offset(text, kind, offset):
    literal = SanitizedLiteral.parse(text)
    assert (literal.kind, literal.offset) == (kind, offset)


def test_numbers_hashes_times_and_plain_values():
    assert SanitizedLiteral.parse("(3-digit-float)").digits == 3
    assert SanitizedLiteral.parse("(3-digit-float)").number_type == "float"
    assert SanitizedLiteral.parse("(time)").kind is LiteralKind.TIME
    assert SanitizedLiteral.parse("(hash-deadbeef)").hash == "deadbeef"
    # A body that kept its values (not sanitized): the value itself, wrapped or not.
    assert SanitizedLiteral.parse(42) == SanitizedLiteral("42", LiteralKind.VALUE, value=42)
    assert SanitizedLiteral.parse({"type": "literal", "value": "abc"}).value == "abc"


def test_terms_as_reference_and_transform():
    ref = parse_filter({"type": "eq", "term": {"type": "reference", "term": "id"}, "value": 1})
    assert isinstance(ref, Predicate) and (ref.column, ref.transform) == ("id", None)
    day = parse_filter(
        {
            "type": "eq",
            "term": {"type": "transform", "transform": "day", "term": "ts"},
            "value": "(5-digit-int)",
        }
    )
    assert isinstance(day, Predicate) and (day.column, day.transform) == ("ts", "day")
    assert render(day) == "day(ts) eq (5-digit-int)"
    same = parse_filter(
        {"type": "eq", "term": {"type": "transform", "transform": "identity", "term": "ts"}, "value": 1}
    )
    assert isinstance(same, Predicate) and same.transform is None


def test_nested_and_or_not():
    doc = {
        "type": "and",
        "left": {"type": "gt-eq", "term": "ts", "value": "(date-7-days-ago)"},
        "right": {
            "type": "or",
            "left": {"type": "eq", "term": "city", "value": "(hash-1a2b3c4d)"},
            "right": {"type": "not", "child": {"type": "eq", "term": "kind", "value": "(1-digit-int)"}},
        },
    }
    node = parse_filter(doc)
    assert isinstance(node, And) and isinstance(node.right, Or) and isinstance(node.right.right, Not)
    found = predicates(node)
    assert [(p.column, p.kind) for p in found] == [
        ("ts", PredicateKind.RANGE),
        ("city", PredicateKind.EQUALITY),
        ("kind", PredicateKind.NEGATION),  # eq under not skips no more than not-eq
    ]
    assert render(node) == (
        "(ts gt-eq (date-7-days-ago) and (city eq (hash-1a2b3c4d) or not (kind eq (1-digit-int))))"
    )
    assert parse_filter(__import__("json").dumps(doc)) == node


def test_an_unknown_operator_is_kept_as_other():
    node = parse_filter(
        {"type": "and", "left": {"type": "st-contains", "term": "geo", "value": "x"}, "right": True}
    )
    assert isinstance(node, And) and isinstance(node.left, Predicate)
    assert (node.left.op, node.left.kind) == ("st-contains", PredicateKind.OTHER)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"type": "and", "left": True}, "'right'"),
        ({"type": "eq", "value": 1}, "'term'"),
        ({"type": "eq", "term": 3, "value": 1}, "not a term"),
        ([1, 2], "an expression is"),
        ("{not json", "not JSON"),
        ({"type": "in", "term": "x", "values": "(hash-1)"}, "must be a list"),
    ],
)
def test_a_malformed_document_is_an_error_naming_the_node(doc, message):
    with pytest.raises(FilterError, match=message):
        parse_filter(doc)
