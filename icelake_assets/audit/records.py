"""One audit record per maintenance decision and per op, and its mirror in Dagster metadata and tags.

A record explains an action afterwards: what triggered it, what the signals and the policy were,
which partitions were chosen and why, what the writer and cost guards saw, the snapshots before and
after, what the op returned, and how validation and rollback ended. Records are immutable and
validated on construction, so a bad value fails where it is produced, not in the audit table.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum
from pathlib import PurePath
from typing import Any, Literal, get_args

from icelake_assets.catalog.connection import TableRef

Trigger = Literal["sensor", "schedule", "backfill", "manual", "agent"]
Kind = Literal["decision", "op", "validation", "rollback", "recovery", "agent"]

# The decisions each kind of record may carry: for kind "decision" whether a run is launched; for an
# op whether it acted; for validation and rollback their outcome.
DECISIONS: dict[str, frozenset[str]] = {
    # proposed: the table's mode is propose, so the sensor recorded the run it would have launched.
    # error: the table could not be evaluated (unreadable metadata or storage, dropped, catalog down).
    "decision": frozenset({"launched", "proposed", "deferred", "held", "skipped", "error"}),
    "op": frozenset({"acted", "skipped", "failed"}),
    "validation": frozenset({"passed", "partial", "failed"}),
    "rollback": frozenset({"rolled_back", "refused", "failed"}),
    # What the sensor did after a crash (orchestration/runs/recovery.py): run_failed, a run in progress
    # whose worker was gone; worker_lost, a run Dagster failed after its worker was killed; reconciled,
    # a commit of a run that never recorded it, matched by its run id.
    "recovery": frozenset({"run_failed", "worker_lost", "reconciled"}),
    # A call of an `icelake mcp` tool (agents/): op is the tool, results.agent the identity; answered,
    # refused by a guard (results.guard names it) or failed (bad input, catalog down).
    "agent": frozenset({"answered", "refused", "failed"}),
}
TRIGGERS: frozenset[str] = frozenset(get_args(Trigger))

_OP_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_TAG_PART = re.compile(r"[^A-Za-z0-9_.-]")
TAG_PREFIX = "icelake"
_MAX_TAG_VALUE = 255


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    if isinstance(value, PurePath):
        return str(value)
    if hasattr(value, "to_dict"):
        return value.to_dict()
    raise TypeError(f"{type(value).__name__} {value!r} is not JSON-serializable")


def _finite(value: Any) -> Any:
    """NaN and infinities are not JSON: keep them readable as strings instead of failing the audit."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def to_json_value(name: str, value: Any) -> Any:
    """``value`` as plain JSON data (dicts, lists, str, int, float, bool, None); fails naming the field."""
    try:
        return json.loads(json.dumps(_finite(value), default=_json_default, allow_nan=False))
    except (TypeError, ValueError) as err:
        raise ValueError(f"audit record field {name!r}: {err}") from None


def dumps(value: Any) -> str:
    """Compact, key-sorted JSON as stored in the audit table."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class AuditRecord:
    """One decision (launched, deferred, held, skipped) or one op / validation / rollback outcome.

    ``table_name`` is ``catalog.namespace.table``. JSON fields (signals, policy, writer_check, results)
    take any JSON-serializable mapping (datetimes, enums, sets, pydantic ``model_dump()`` output, objects
    with ``to_dict``); they are normalized to plain JSON on construction so a record read back from
    the audit table compares equal to the one written.
    """

    table_name: str
    kind: Kind
    decision: str
    trigger: Trigger
    reason: str = ""
    run_id: str | None = None
    op: str | None = None
    signals: Mapping[str, Any] = field(default_factory=dict)
    policy: Mapping[str, Any] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()
    partitions_reason: str | None = None
    failed_partitions: tuple[str, ...] = ()
    writer_check: Mapping[str, Any] | None = None
    cost_estimate_bytes: int | None = None
    snapshot_before: int | None = None
    snapshot_after: int | None = None
    results: Mapping[str, Any] = field(default_factory=dict)
    rolled_back_to: int | None = None
    duration_s: float | None = None
    recorded_at: datetime = field(default_factory=_utcnow)
    record_id: str = field(default_factory=_new_id)

    def __post_init__(self) -> None:
        set_ = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (frozen dataclass)
        if isinstance(self.table_name, TableRef):
            set_("table_name", str(self.table_name))
        if not isinstance(self.table_name, str):
            raise ValueError(
                f"audit record table_name must be 'catalog.namespace.table', got {self.table_name!r}"
            )
        TableRef.parse(self.table_name)  # raises a ValueError naming the bad identifier
        if self.kind not in DECISIONS:
            raise ValueError(f"audit record kind must be one of {sorted(DECISIONS)}, got {self.kind!r}")
        if self.decision not in DECISIONS[self.kind]:
            raise ValueError(
                f"audit record of kind {self.kind!r}: decision must be one of {sorted(DECISIONS[self.kind])}, "
                f"got {self.decision!r}"
            )
        if self.trigger not in TRIGGERS:
            raise ValueError(f"audit record trigger must be one of {sorted(TRIGGERS)}, got {self.trigger!r}")
        if self.kind == "op" and not self.op:
            raise ValueError("audit record of kind 'op' needs the op name")
        if self.op is not None and not _OP_NAME.match(self.op):
            raise ValueError(f"audit record op must be a name of letters, digits and '_', got {self.op!r}")
        if not isinstance(self.reason, str):
            raise ValueError(f"audit record reason must be text, got {type(self.reason).__name__}")
        if not isinstance(self.recorded_at, datetime) or self.recorded_at.tzinfo is None:
            raise ValueError(
                f"audit record recorded_at must be a timezone-aware datetime, got {self.recorded_at!r}"
            )
        set_("recorded_at", self.recorded_at.astimezone(UTC))
        if not isinstance(self.record_id, str) or not self.record_id:
            raise ValueError(f"audit record record_id must be a non-empty string, got {self.record_id!r}")
        for name in ("partitions", "failed_partitions"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(p, str) for p in value):
                raise ValueError(f"audit record {name} must be a sequence of partition names, got {value!r}")
            set_(name, tuple(value))
        for name in ("cost_estimate_bytes", "snapshot_before", "snapshot_after", "rolled_back_to"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"audit record {name} must be an integer or None, got {value!r}")
        if self.cost_estimate_bytes is not None and self.cost_estimate_bytes < 0:
            raise ValueError(f"audit record cost_estimate_bytes must be >= 0, got {self.cost_estimate_bytes}")
        if self.duration_s is not None:
            if (
                isinstance(self.duration_s, bool)
                or not isinstance(self.duration_s, (int, float))
                or not math.isfinite(self.duration_s)
                or self.duration_s < 0
            ):
                raise ValueError(
                    f"audit record duration_s must be a finite number >= 0, got {self.duration_s!r}"
                )
            set_("duration_s", float(self.duration_s))
        for name in ("signals", "policy", "results", "writer_check"):
            value = getattr(self, name)
            if value is None and name == "writer_check":
                continue
            if not isinstance(value, Mapping):
                raise ValueError(f"audit record {name} must be a mapping, got {type(value).__name__}")
            set_(name, to_json_value(name, value))

    @property
    def ref(self) -> TableRef:
        return TableRef.parse(self.table_name)


AUDIT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(AuditRecord))


def trigger_from_tags(tags: Mapping[str, str]) -> Trigger:
    """The trigger of a Dagster run from its tags: a sensor, a schedule, a backfill, else manual."""
    if tags.get("dagster/backfill"):
        return "backfill"
    if tags.get("dagster/sensor_name"):
        return "sensor"
    if tags.get("dagster/schedule_name"):
        return "schedule"
    return "manual"


def _tag_key(name: str) -> str:
    return f"{TAG_PREFIX}/{_TAG_PART.sub('_', name)[:63]}"


def _tag_value(value: Any) -> str:
    text = value if isinstance(value, str) else dumps(value)
    return text if len(text) <= _MAX_TAG_VALUE else text[: _MAX_TAG_VALUE - 1] + "…"


def dagster_tags(record: AuditRecord) -> dict[str, str]:
    """Short string tags for a RunRequest or run: ``icelake/<field>`` plus ``icelake/signal.<name>``
    for every scalar signal, so runs can be filtered by decision, trigger and signal in the UI.

    Values are cut to 255 characters; the full record lives in the audit table (``icelake/audit_record``)."""
    tags = {
        _tag_key("table"): record.table_name,
        _tag_key("trigger"): record.trigger,
        _tag_key("kind"): record.kind,
        _tag_key("decision"): record.decision,
        _tag_key("audit_record"): record.record_id,
    }
    if record.op:
        tags[_tag_key("op")] = record.op
    if record.reason:
        tags[_tag_key("reason")] = _tag_value(record.reason)
    for name in ("cost_estimate_bytes", "snapshot_before", "snapshot_after", "rolled_back_to"):
        value = getattr(record, name)
        if value is not None:
            tags[_tag_key(name)] = str(value)
    if record.partitions:
        tags[_tag_key("partitions")] = _tag_value(list(record.partitions))
    for name, value in sorted(record.signals.items()):
        if isinstance(value, (str, int, float, bool)):
            tags[_tag_key(f"signal.{name}")] = _tag_value(value if isinstance(value, str) else dumps(value))
    return tags


def sequence_of_records(records: AuditRecord | Sequence[AuditRecord]) -> list[AuditRecord]:
    """Accept one record or a sequence; anything else is refused with its type."""
    items = [records] if isinstance(records, AuditRecord) else list(records)
    for r in items:
        if not isinstance(r, AuditRecord):
            raise TypeError(f"expected AuditRecord, got {type(r).__name__}")
    return items
