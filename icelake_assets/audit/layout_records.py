"""The audit records of layout choices (issue 52): a change made (op ``change_layout``, acted) and a
change recommended but left for an operator (decision ``proposed``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from icelake_assets.audit.records import AuditRecord, Trigger
from icelake_assets.layout.table_layout import CHANGE_LAYOUT, LayoutChange

__all__ = ["CHANGE_LAYOUT", "layout_change_record", "layout_proposed_record"]


def layout_change_record(change: LayoutChange, trigger: Trigger, by: str) -> AuditRecord:
    old, new = ", ".join(change.old_keys) or "none", ", ".join(change.new_keys)
    return AuditRecord(
        table_name=change.table,
        kind="op",
        op=CHANGE_LAYOUT,
        decision="acted",
        trigger=trigger,
        reason=f"sort order {old} -> {new}" + (" (forced)" if change.forced else ""),
        results={
            "old_keys": list(change.old_keys),
            "new_keys": list(change.new_keys),
            "predicted": dict(change.predicted),
            "by": by,
        },
        recorded_at=change.changed_at,
    )


def layout_proposed_record(table: str, reason: str, choice: Mapping[str, Any]) -> AuditRecord:
    """A recommended change that waits for ``icelake layout apply`` (mode propose, or auto off)."""
    return AuditRecord(
        table_name=table,
        kind="decision",
        op=CHANGE_LAYOUT,
        decision="proposed",
        trigger="sensor",
        reason=reason,
        results={"choice": dict(choice)},
    )
