"""``icelake audit [TABLE] [--since ISO|24h] [--limit N]``: the audit trail in time order, read through
the audit log (audit/store.py), as records (JSON ``icelake.audit/v1``) or a table printed with rich."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import Any

from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.settings import Settings
from icelake_assets.types import TableRef

AUDIT_SCHEMA = "icelake.audit/v1"
_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``24h``, ``30m``, ``7d``, ``90s``, ``2w`` (that long ago) or an ISO 8601 time (UTC when it names
    no zone)."""
    now = now or datetime.now(UTC)
    if m := _RELATIVE.match(text):
        return now - timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"invalid --since {text!r}: expected an ISO time (2026-01-31T12:00Z) or an age (24h, 30m, 7d)"
        ) from None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


@dataclass(frozen=True)
class AuditTrail:
    log: str  # the audit table, catalog.namespace.table
    table: str | None
    since: datetime | None
    limit: int | None
    records: tuple[AuditRecord, ...]  # oldest first

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape ``icelake.audit/v1`` (docs/operating.md)."""
        return {
            "schema": AUDIT_SCHEMA,
            "log": self.log,
            "table": self.table,
            "since": self.since.isoformat() if self.since else None,
            "limit": self.limit,
            "records": [record_json(r) for r in self.records],
        }


def record_json(record: AuditRecord) -> dict[str, Any]:
    """Every field of the record, times in ISO 8601, lists for partitions."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, tuple):
            value = list(value)
        elif f.name in ("signals", "policy", "results", "writer_check") and value is not None:
            value = dict(value)
        out[f.name] = value
    return out


def read_trail(
    settings: Settings, table: TableRef | None = None, since: datetime | None = None, limit: int | None = None
) -> AuditTrail:
    """The records of ``table`` (all tables when None) at or after ``since``, oldest first; with
    ``limit`` the most recent ``limit`` of them (still oldest first)."""
    if limit is not None and limit < 1:
        raise ValueError(f"invalid --limit {limit}: expected a number of records >= 1")
    log = AuditLog.from_settings(settings)
    records = log.records(table=str(table) if table else None, since=since)
    if limit is not None:
        records = records[-limit:]
    return AuditTrail(log.name, str(table) if table else None, since, limit, tuple(records))


def _summary(r: AuditRecord) -> str:
    parts = [r.reason] if r.reason else []
    if r.cost_estimate_bytes:
        parts.append(f"estimate {r.cost_estimate_bytes:,} bytes")
    if r.partitions:
        parts.append(f"partitions {', '.join(r.partitions[:5])}{' …' if len(r.partitions) > 5 else ''}")
    approval = r.results.get("approval") if isinstance(r.results, dict) else None
    if approval:
        parts.append(f"approved by {approval.get('approved_by')} (plan {approval.get('plan_digest')})")
    return "; ".join(parts)


def print_trail(trail: AuditTrail) -> None:
    """The trail as a table on the terminal (rich: wraps long reasons to the terminal's width)."""
    from rich.console import Console
    from rich.table import Table

    title = f"audit trail of {trail.table or 'every table'} ({trail.log})"
    if trail.since:
        title += f" since {trail.since:%Y-%m-%d %H:%M:%S} UTC"
    table = Table(title=title, show_lines=False)
    for name in ("recorded at (UTC)", "table", "kind", "op", "decision", "trigger", "run", "what"):
        table.add_column(name, overflow="fold")
    for r in trail.records:
        table.add_row(
            f"{r.recorded_at:%Y-%m-%d %H:%M:%S}",
            r.table_name,
            r.kind,
            r.op or "",
            r.decision,
            r.trigger,
            (r.run_id or "")[:8],
            _summary(r),
        )
    console = Console()
    console.print(table)
    if not trail.records:
        console.print("no records")
