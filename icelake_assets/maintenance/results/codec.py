"""One round trip for every op result: a result as plain JSON and back, derived from its dataclass
fields and their types (no hand-written reader per op). The run state (between a run's ops, across
an upgrade) and a retried op's earlier attempts travel in this form; the audit keeps each result's
``details()``, the shape it has always recorded.

A result is ``{"op": <op name>, "fields": {...}}``; nested dataclasses (the orphan scan, the
rewrite's delete work) are their fields; tuples are lists. A field the JSON does not carry takes its
default, so state written before a field was added still loads."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar, Union, cast

from icelake_assets.maintenance.results import (  # declare the ops' result classes
    expire_data as expire_data,
    models as models,
    restore_points as restore_points,
)
from icelake_assets.maintenance.results.base import RESULT_CLASSES, OpResult

T = TypeVar("T")


def encode(value: object) -> Any:
    """Plain JSON (dicts, lists, strings, numbers, booleans, None) of a result or any part of it."""
    if type(value) in RESULT_CLASSES.values():  # an op result names its op, which names its class
        return {"op": cast(OpResult, value).op, "fields": _fields(value)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields(value)
    if isinstance(value, Mapping):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    return value


def _fields(value: object) -> dict[str, Any]:
    return {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}  # type: ignore[arg-type]


def decode_result(data: Mapping[str, Any]) -> OpResult:
    """The result ``encode`` wrote; an unknown op names the ops known."""
    cls = RESULT_CLASSES.get(str(data.get("op")))
    if cls is None:
        raise ValueError(f"unknown maintenance op {data.get('op')!r} (known: {', '.join(RESULT_CLASSES)})")
    return _build(cls, data["fields"])


def decode(cls: type[T], data: Mapping[str, Any]) -> T:
    """A dataclass (a run's state, say) that ``encode`` wrote, op results in it included."""
    return _build(cls, data)


def _build(cls: type[T], data: Mapping[str, Any]) -> T:
    hints = typing.get_type_hints(cls)
    kwargs = {
        f.name: _decode(hints[f.name], data[f.name])
        for f in dataclasses.fields(cls)  # type: ignore[arg-type]
        if f.init and f.name in data
    }
    return cls(**kwargs)


def _decode(hint: Any, value: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin in (Union, types.UnionType):
        if value is None:
            return None
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        # A union of scalars (a procedure row's cell) keeps the JSON value; one other type decodes.
        return _decode(options[0], value) if len(options) == 1 else value
    if hint is OpResult or hint in RESULT_CLASSES.values():
        return decode_result(value)  # the op names its class
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return _build(hint, value)
    if origin is tuple:
        args = typing.get_args(hint)
        item = args[0] if args else Any
        return tuple(_decode(item, v) for v in value)
    if origin in (dict, Mapping, typing.Mapping) or hint in (dict, Mapping):
        args = typing.get_args(hint)
        item = args[1] if len(args) == 2 else Any
        return {str(k): _decode(item, v) for k, v in value.items()}
    if origin is typing.Literal or hint is Any or isinstance(hint, typing.TypeVar):
        return value
    if hint in (int, float, str, bool):
        return hint(value)
    return value


__all__ = ["RESULT_CLASSES", "decode", "decode_result", "encode"]
