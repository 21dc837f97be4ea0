"""A table's layout as the product changes it: its sort keys, the last change the product made and
what it predicted, and the change itself (issue 52, item 4).

The change itself is one metadata commit: the table's default sort order becomes the chosen columns
(so Spark's writers follow it from their next commit) and, in the same transaction, table properties
record what was chosen and when (``icelake.layout.*``): a crash cannot leave a sort order without
its reason, and the next choice reads the last change from the table itself. The data is not moved
here: the new order makes the table's files overlap on its first sort column, which is the
``layout_drift`` finding, so the maintenance loop rewrites them with the sort strategy behind the
cost guard, validation and rollback like any rewrite (planning/layout.py).

Refused when the table changed layout less than ``layout.min_days_between_changes`` ago (a
recommendation must not flip keys back and forth), unless forced. Its callers audit it
(audit/layout_records.py, op ``change_layout``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pyiceberg.table import Table
from pyiceberg.table.sorting import SortOrder
from pyiceberg.transforms import IdentityTransform

from icelake_assets.types import IcelakeError, TableRef

CHANGE_LAYOUT = "change_layout"
CHANGED_AT = "icelake.layout.changed-at"
KEYS = "icelake.layout.keys"
PREVIOUS_KEYS = "icelake.layout.previous-keys"
PREDICTED = "icelake.layout.predicted"


class LayoutChangeRefused(IcelakeError, ValueError):
    """The change is not made (too soon after the last, an unknown column): names why."""


@dataclass(frozen=True)
class LayoutChange:
    """A layout change made: the sort keys before and after, when, and what was predicted."""

    table: str
    old_keys: tuple[str, ...]
    new_keys: tuple[str, ...]
    changed_at: datetime
    predicted: Mapping[str, Any]
    forced: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "icelake.layout_change/v1",
            "table": self.table,
            "old_keys": list(self.old_keys),
            "new_keys": list(self.new_keys),
            "changed_at": self.changed_at.isoformat(),
            "predicted": dict(self.predicted),
            "forced": self.forced,
        }


def sort_keys(table: Table) -> tuple[str, ...]:
    """The table's current sort columns, in order (identity transforms by name, others as
    ``transform(column)``); empty when unsorted."""
    order: SortOrder = table.sort_order()
    schema = table.schema()
    keys = []
    for f in order.fields:
        name = schema.find_column_name(f.source_id) or str(f.source_id)
        keys.append(name if isinstance(f.transform, IdentityTransform) else f"{f.transform}({name})")
    return tuple(keys)


def last_change(table: Table) -> datetime | None:
    """When the product last changed the table's layout (its own property), or None."""
    text = table.properties.get(CHANGED_AT)
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None  # an edited property is not a change the product made: it does not hold one back
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def predicted_skipped(table: Table) -> float | None:
    """The share of data files the last change predicted its filters would skip (None: no change or
    no prediction recorded)."""
    try:
        value = json.loads(table.properties.get(PREDICTED) or "{}").get("skipped_fraction")
    except (ValueError, AttributeError):
        return None
    return float(value) if isinstance(value, int | float) else None


def change_layout(
    table: Table,
    ref: TableRef,
    new_keys: Sequence[str],
    *,
    min_days_between_changes: float,
    predicted: Mapping[str, Any] | None = None,
    force: bool = False,
    now: datetime | None = None,
) -> LayoutChange:
    """Set ``new_keys`` (column names, ascending) as the table's sort order and record it in the same
    commit. Raises :class:`LayoutChangeRefused` naming the cause, before any commit."""
    now = now or datetime.now(UTC)
    keys = tuple(new_keys)
    if not keys:
        raise LayoutChangeRefused(f"{ref}: no sort columns given")
    columns = set(table.schema().column_names)
    missing = [k for k in keys if k not in columns]
    if missing:
        raise LayoutChangeRefused(f"{ref}: no column {', '.join(missing)} in the table's schema")
    old = sort_keys(table)
    if old == keys:
        raise LayoutChangeRefused(f"{ref} is already sorted by {', '.join(keys)}")
    last = last_change(table)
    if last is not None and not force and now - last < timedelta(days=min_days_between_changes):
        raise LayoutChangeRefused(
            f"{ref} changed layout on {last:%Y-%m-%d %H:%M} UTC; layout.min_days_between_changes is "
            f"{min_days_between_changes:g}: not before {last + timedelta(days=min_days_between_changes):%Y-%m-%d}"
            " (force to override)"
        )
    prediction = dict(predicted or {})
    with table.transaction() as tx:
        with tx.update_sort_order() as order:
            for key in keys:
                order.asc(key, IdentityTransform())
        tx.set_properties(
            {
                CHANGED_AT: now.isoformat(),
                KEYS: ",".join(keys),
                PREVIOUS_KEYS: ",".join(old),
                PREDICTED: json.dumps(prediction, sort_keys=True, default=str),
            }
        )
    return LayoutChange(str(ref), old, keys, now, prediction, force)
