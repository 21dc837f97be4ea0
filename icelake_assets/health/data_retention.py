"""Row retention from metadata alone: which data files hold rows past the retention cut-off.

The retention column's lower and upper bounds in the manifests' data file entries (read through the
manifest cache, like the sort column's) place every live data file against the cut-off: wholly past
it (upper bound < cut-off: a metadata-only delete drops it), straddling it (lower bound < cut-off ≤
upper bound: its expired rows are unknown without a scan, the file is rewritten, its rows count as an
upper bound) or kept. A file without bounds on the column (metrics off, all nulls) cannot be placed.

The cut-off is ``now - keep_days`` (or the newest value of the column, its greatest upper bound,
minus ``keep_days`` with ``since: newest``), lowered to the boundary of the table's partitions when
the default spec partitions by the column with an hour/day/month/year transform: expiry then drops
whole partitions, and rows live at most one partition longer than ``keep_days``.

Values are compared in the column's own terms: microseconds (timestamp, timestamptz), days (date),
the policy's ``unit`` (int, long) or, for a string column, the text ``format`` renders (only formats
whose text sorts like time: :func:`sortable_format`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from pyiceberg.table import Table
from pyiceberg.transforms import DayTransform, HourTransform, IdentityTransform, MonthTransform, YearTransform
from pyiceberg.types import DateType, IntegerType, LongType, StringType, TimestampType, TimestamptzType

from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.manifests import ManifestSummary
from icelake_assets.settings.lifecycle_policy import RetentionPolicy
from icelake_assets.types import SNAPSHOT_OP

EXPIRE_DATA = "expire_data"  # the op whose commits carry it (planning/op_plans.py)

# Native key per kind: what a bound decodes to (health/manifests.py json_value of pyiceberg's value).
ColumnKind = str  # "timestamp", "timestamptz", "date", "epoch", "string"
Key = int | str
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PER_SECOND = {"seconds": 1, "milliseconds": 1_000, "microseconds": 1_000_000}
# strftime directives whose text sorts like the time they render, in the order they must appear.
_SORTABLE = ("%Y", "%m", "%d", "%H", "%M", "%S")
# The partition grain a transform gives the cut-off (identity: every value is its own partition).
GRAINS = {HourTransform: "hour", DayTransform: "day", MonthTransform: "month", YearTransform: "year"}


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

    def key(self, when: datetime) -> Key:
        """``when`` (aware, UTC) in the column's terms."""
        if self.kind in ("timestamp", "timestamptz"):
            return _micros(when)
        if self.kind == "date":
            return (when.date() - EPOCH.date()).days
        if self.kind == "epoch":
            if self.unit == "days":
                return (when.date() - EPOCH.date()).days
            return _micros(when) * _PER_SECOND[self.unit or "seconds"] // 1_000_000
        return when.strftime(self.format or "")

    def time(self, key: Key) -> datetime:
        """A value in the column's terms as an aware UTC datetime (ValueError if unreadable)."""
        if isinstance(key, str):
            if self.kind != "string":
                raise ValueError(f"{key!r} is not a {self.kind} value")
            return datetime.strptime(key, self.format or "").replace(tzinfo=UTC)
        if self.kind in ("timestamp", "timestamptz"):
            return EPOCH + timedelta(microseconds=key)
        if self.kind == "date" or self.unit == "days":
            return EPOCH + timedelta(days=key)
        return EPOCH + timedelta(microseconds=key * 1_000_000 // _PER_SECOND[self.unit or "seconds"])


def _micros(when: datetime) -> int:
    delta = when - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def retention_column(table: Table, policy: RetentionPolicy) -> RetentionColumn | str:
    """The policy's column on ``table``, or why it cannot serve (missing, or a type the policy's
    ``unit`` / ``format`` does not fit)."""
    name = policy.column or ""
    try:
        field = table.schema().find_field(name)
    except ValueError:
        return f"the table has no column {name!r}"
    ftype, unit, fmt = field.field_type, policy.unit, policy.format
    timely = {TimestampType: "timestamp", TimestamptzType: "timestamptz", DateType: "date"}
    kind = next((k for t, k in timely.items() if isinstance(ftype, t)), None)
    if kind is not None:
        if unit or fmt:
            return f"column {name!r} is a {ftype}: 'unit' and 'format' are for long and string columns"
        return RetentionColumn(field.field_id, name, kind)
    if isinstance(ftype, (IntegerType, LongType)):
        if not unit:
            return f"column {name!r} is a {ftype}: retention needs its 'unit' (seconds, milliseconds, ...)"
        return RetentionColumn(field.field_id, name, "epoch", unit=unit)
    if isinstance(ftype, StringType):
        if not fmt:
            return f"column {name!r} is a string: retention needs its 'format' (e.g. %Y-%m-%d)"
        if why := sortable_format(fmt):
            return f"column {name!r}: {why}"
        return RetentionColumn(field.field_id, name, "string", format=fmt)
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


@dataclass(frozen=True)
class RetentionFacts:
    """Where a table's data files stand against its retention cut-off (see the module docstring).
    ``problem``: why retention cannot be evaluated (a missing column, a type the policy does not
    fit): the finding fails naming it. ``expired_before``: a commit of an earlier ``expire_data`` is
    still in the table's snapshots (a first expiry waits for approval)."""

    column: str
    keep_days: float
    since: str
    problem: str | None = None
    kind: str = ""
    cutoff: str | None = None  # ISO 8601 (UTC) of the cut-off: rows older than it are expired
    cutoff_key: Key | None = None  # the cut-off in the column's terms (what the predicate compares)
    grain: str | None = None  # the partition grain the cut-off was lowered to
    newest: str | None = None  # the column's newest value (max upper bound), ISO
    expired_files: int = 0
    expired_rows: int = 0
    expired_bytes: int = 0
    straddling_files: int = 0
    straddling_rows: int = 0  # the straddling files' rows: an upper bound of their expired rows
    straddling_bytes: int = 0
    unbounded_files: int = 0  # no bounds on the column: cannot be placed (a delete scans them)
    unbounded_bytes: int = 0
    data_files: int = 0
    expired_before: bool = False

    @property
    def files(self) -> int:
        return self.expired_files + self.straddling_files

    @property
    def rows(self) -> int:
        """Rows past the cut-off, at most (the straddling files' rows counted whole)."""
        return self.expired_rows + self.straddling_rows

    @property
    def bytes(self) -> int:
        return self.expired_bytes + self.straddling_bytes

    @property
    def metadata_only(self) -> bool:
        """Every file with expired rows is wholly past the cut-off: the delete drops files, writes none."""
        return self.straddling_files == 0 and self.unbounded_files == 0


def expired_before(table: Table, op: str, op_key: str) -> bool:
    """A snapshot of the table carries ``op`` under ``op_key`` (the run's commit tags)."""
    return any(s.summary.get(op_key) == op for s in table.metadata.snapshots if s.summary is not None)


def place_files(
    facts: RetentionFacts, col: RetentionColumn, summaries: Sequence[ManifestSummary], now: datetime
) -> RetentionFacts:
    """``facts`` with the cut-off and every live data file placed against it."""
    lows: list[Key | None] = []
    highs: list[Key | None] = []
    rows: list[int] = []
    sizes: list[int] = []
    for s in summaries:
        for i in range(len(s)):
            if int(s.content[i]) != 0:
                continue
            lows.append(s.lower[i] if s.lower else None)
            highs.append(s.upper[i] if s.upper else None)
            rows.append(int(s.records[i]))
            sizes.append(int(s.size[i]))
    known = [h for h in highs if h is not None]
    newest = max(known) if known else None  # one kind per column
    newest_time = None
    if newest is not None:
        try:
            newest_time = col.time(newest)
        except ValueError:
            if facts.since == "newest":
                return _problem(facts, f"the newest value {newest!r} of {col.name!r} cannot be read")
    if facts.since == "newest":
        if newest_time is None:
            return _with(facts, col, data_files=len(rows))  # no bounds: nothing placed
        start = newest_time
    else:
        start = now
    cutoff = floor_to(start - timedelta(days=facts.keep_days), facts.grain)
    key = col.key(cutoff)
    out = {"expired": [0, 0, 0], "straddling": [0, 0, 0], "unbounded": [0, 0, 0]}
    for lo, hi, r, b in zip(lows, highs, rows, sizes, strict=True):
        if lo is None or hi is None:
            kind = "unbounded"
        elif hi < key:  # type: ignore[operator]
            kind = "expired"
        elif lo < key:  # type: ignore[operator]
            kind = "straddling"
        else:
            continue
        out[kind][0] += 1
        out[kind][1] += r
        out[kind][2] += b
    return _with(
        facts,
        col,
        cutoff=cutoff.isoformat(),
        cutoff_key=key,
        newest=newest_time.isoformat() if newest_time else None,
        expired_files=out["expired"][0],
        expired_rows=out["expired"][1],
        expired_bytes=out["expired"][2],
        straddling_files=out["straddling"][0],
        straddling_rows=out["straddling"][1],
        straddling_bytes=out["straddling"][2],
        unbounded_files=out["unbounded"][0],
        unbounded_bytes=out["unbounded"][2],
        data_files=len(rows),
    )


def _with(facts: RetentionFacts, col: RetentionColumn, **values: object) -> RetentionFacts:
    return replace(facts, kind=col.kind, **values)  # type: ignore[arg-type]


def _problem(facts: RetentionFacts, why: str) -> RetentionFacts:
    return replace(facts, problem=why)


def retention_facts(
    table: Table, policy: RetentionPolicy, cache: ManifestCache, now: float
) -> RetentionFacts | None:
    """The table's retention facts at ``now`` (epoch s), None when retention is off. The column's
    bounds are read through ``cache`` (each manifest once per column, like the sort column's)."""
    if not policy.enabled or policy.keep_days is None:
        return None
    facts = RetentionFacts(
        policy.column or "",
        policy.keep_days,
        policy.since,
        expired_before=expired_before(table, EXPIRE_DATA, SNAPSHOT_OP),
    )
    col = retention_column(table, policy)
    if isinstance(col, str):
        return _problem(facts, col)
    facts = replace(facts, grain=partition_grain(table, col.field_id))
    snap = table.current_snapshot()
    summaries = cache.summaries(table, cache.manifest_list(table, snap), col.field_id) if snap else []
    return place_files(facts, col, summaries, datetime.fromtimestamp(now, UTC))
