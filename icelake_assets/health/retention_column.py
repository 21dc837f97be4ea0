"""The retention column and how its values map to time (health/data_retention.py places files by it).

Values are compared in the column's own terms: microseconds (timestamp, timestamptz), days (date),
the policy's ``unit`` (int, long) or, for a string column, the text ``format`` renders (only formats
whose text sorts like time: :func:`sortable_format`). A timestamp without zone, a date and a string
hold wall time: in the policy's ``timezone`` (default UTC), so a writer storing local time loses
nothing to the offset. A long counts from the epoch, which is UTC.

No stored value may stop the table's maintenance: a value no datetime can hold (Long.MAX as an "end
of time" sentinel, a year past 9999, a string the format does not parse) raises :class:`OutOfRange`,
a ValueError naming the column and the value, never an OverflowError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform
from pyiceberg.types import DateType, IntegerType, LongType, StringType, TimestampType, TimestamptzType

from icelake_assets.settings.lifecycle_policy import RetentionPolicy
from icelake_assets.types import IcelakeError

# Native key per kind: what a bound decodes to (health/manifests.py json_value of pyiceberg's value).
ColumnKind = str  # "timestamp", "timestamptz", "date", "epoch", "string"
Key = int | str
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PER_SECOND = {"seconds": 1, "milliseconds": 1_000, "microseconds": 1_000_000}
# strftime directives whose text sorts like the time they render, in the order they must appear.
_SORTABLE = ("%Y", "%m", "%d", "%H", "%M", "%S")
# The partition grain a transform gives the cut-off (identity: every value is its own partition).
GRAINS = {HourTransform: "hour", DayTransform: "day", MonthTransform: "month", YearTransform: "year"}
_WALL_TIME = ("timestamp", "date", "string")  # kinds that store wall time in the policy's zone


class OutOfRange(IcelakeError, ValueError):
    """A value of the column that no time can hold (a sentinel, an overflow, an unparsable string)."""


def sortable_format(fmt: str) -> str | None:
    """Why strings rendered with ``fmt`` cannot be compared as text (None: they can): its directives
    must be a prefix of %Y %m %d %H %M %S in that order (each fixed-width, zero-padded), the rest
    literal text that is the same in every value."""
    directives = re.findall(r"%.", fmt)
    if not directives:
        return f"format {fmt!r} has no strftime directive"
    if tuple(directives) != _SORTABLE[: len(directives)]:
        return (
            f"format {fmt!r} does not sort as text: only %Y, %m, %d, %H, %M, %S in this order "
            "(e.g. %Y-%m-%d, %Y%m%d, %Y-%m-%d %H:%M:%S) compare like the times they render"
        )
    return None


@dataclass(frozen=True)
class RetentionColumn:
    """The retention column as the table has it: its field id, kind and how its values map to time."""

    field_id: int
    name: str
    kind: ColumnKind
    unit: str | None = None
    format: str | None = None
    zone: str = "UTC"  # the wall time's zone (timestamp without zone, date, string)

    def wall(self, when: datetime) -> datetime:
        """``when`` (aware) as the naive wall time the column stores (UTC for timestamptz and longs)."""
        local = when.astimezone(ZoneInfo(self.zone)) if self.kind in _WALL_TIME else when.astimezone(UTC)
        return local.replace(tzinfo=None)

    def key(self, when: datetime) -> Key:
        """``when`` (aware) in the column's terms."""
        wall = self.wall(when)
        if self.kind in ("timestamp", "timestamptz"):
            return _micros(wall)
        if self.kind == "date" or self.unit == "days":
            return (wall.date() - EPOCH.date()).days
        if self.kind == "epoch":
            return _micros(wall) * _PER_SECOND[self.unit or "seconds"] // 1_000_000
        return wall.strftime(self.format or "")

    def time(self, key: Key) -> datetime:
        """A value in the column's terms as an aware UTC datetime (:class:`OutOfRange` if no time is)."""
        try:
            return self._time(key)
        except (OverflowError, ValueError) as e:
            raise OutOfRange(f"{self.name} value {key!r} is not a time: {e}") from e

    def _time(self, key: Key) -> datetime:
        if isinstance(key, str):
            if self.kind != "string":
                raise ValueError(f"{key!r} is not a {self.kind} value")
            wall = datetime.strptime(key, self.format or "")
        elif self.kind in ("timestamp", "timestamptz"):
            wall = datetime(1970, 1, 1) + timedelta(microseconds=key)
        elif self.kind == "date" or self.unit == "days":
            wall = datetime(1970, 1, 1) + timedelta(days=key)
        else:
            wall = datetime(1970, 1, 1) + timedelta(
                microseconds=key * 1_000_000 // _PER_SECOND[self.unit or "seconds"]
            )
        if self.kind in _WALL_TIME:
            return wall.replace(tzinfo=ZoneInfo(self.zone)).astimezone(UTC)
        return wall.replace(tzinfo=UTC)

    def floor(self, when: datetime, grain: str | None) -> datetime:
        """``when`` lowered to the start of its partition, in the column's wall time (where the
        partition transform cuts), as an aware UTC datetime."""
        if grain not in ("hour", "day", "month", "year"):
            return when
        if self.kind in _WALL_TIME:
            zone = ZoneInfo(self.zone)
            return (
                floor_to(when.astimezone(zone).replace(tzinfo=None), grain)
                .replace(tzinfo=zone)
                .astimezone(UTC)
            )
        return floor_to(when.astimezone(UTC), grain)


def _micros(wall: datetime) -> int:
    delta = wall - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def retention_column(table: Table, policy: RetentionPolicy) -> RetentionColumn | str:
    """The policy's column on ``table``, or why it cannot serve (missing, or a type the policy's
    ``unit`` / ``format`` does not fit)."""
    name = policy.column or ""
    try:
        field = table.schema().find_field(name)
    except ValueError:
        return f"the table has no column {name!r}"
    ftype, unit, fmt, zone = field.field_type, policy.unit, policy.format, policy.timezone
    timely = {TimestampType: "timestamp", TimestamptzType: "timestamptz", DateType: "date"}
    kind = next((k for t, k in timely.items() if isinstance(ftype, t)), None)
    if kind is not None:
        if unit or fmt:
            return f"column {name!r} is a {ftype}: 'unit' and 'format' are for long and string columns"
        return RetentionColumn(field.field_id, name, kind, zone=zone)
    if isinstance(ftype, (IntegerType, LongType)):
        if not unit:
            return f"column {name!r} is a {ftype}: retention needs its 'unit' (seconds, milliseconds, ...)"
        return RetentionColumn(field.field_id, name, "epoch", unit=unit, zone=zone)
    if isinstance(ftype, StringType):
        if not fmt:
            return f"column {name!r} is a string: retention needs its 'format' (e.g. %Y-%m-%d)"
        if why := sortable_format(fmt):
            return f"column {name!r}: {why}"
        return RetentionColumn(field.field_id, name, "string", format=fmt, zone=zone)
    return f"column {name!r} is a {ftype}: retention needs a timestamp, date, long or string column"


def partition_grain(table: Table, field_id: int) -> str | None:
    """How the default spec partitions the column: "hour", "day", "month", "year", "identity", or
    None when it does not (the cut-off then stays where keep_days puts it)."""
    for f in table.spec().fields:
        if f.source_id != field_id:
            continue
        if isinstance(f.transform, IdentityTransform):
            return "identity"
        for transform, grain in GRAINS.items():
            if isinstance(f.transform, transform):
                return grain
    return None


def floor_to(when: datetime, grain: str | None) -> datetime:
    """``when`` lowered to the start of its partition (hour, day, month, year)."""
    if grain == "hour":
        return when.replace(minute=0, second=0, microsecond=0)
    if grain == "day":
        return when.replace(hour=0, minute=0, second=0, microsecond=0)
    if grain == "month":
        return when.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if grain == "year":
        return when.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    return when
