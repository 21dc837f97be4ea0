"""Row retention from metadata alone: which data files hold rows past the retention cut-off.

The retention column's lower and upper bounds in the manifests' data file entries (read through the
manifest cache, like the sort column's) place every live data file against the cut-off: wholly past
it (upper bound < cut-off: a metadata-only delete drops it), straddling it (lower bound < cut-off ≤
upper bound: its expired rows are unknown without a scan, the file is rewritten, its rows count as an
upper bound) or kept. A file without bounds on the column (metrics off, all nulls) cannot be placed.

The cut-off is ``now - keep_days`` (or the newest value of the column minus ``keep_days`` with
``since: newest``), lowered to the boundary of the table's partitions when the default spec
partitions by the column with an hour/day/month/year transform: expiry then drops whole partitions,
and rows live at most one partition longer than ``keep_days``. How values map to time:
health/retention_column.py.

Values dated after now plus ``future_skew_days`` (a clock bug, a test row, Long.MAX as "end of
time") never count as the newest: a file whose upper bound lies past that limit offers its lower
bound instead (an earlier newest, so an earlier cut-off: fewer rows go); a newest within the skew
counts as now, so no row younger than ``keep_days`` is ever past the cut-off. They are reported
(``future_*``), and a value no time can hold is named, never raised: every other check goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from pyiceberg.table import Table

from icelake_assets.health.cache import ManifestCache
from icelake_assets.health.manifests import ManifestSummary
from icelake_assets.health.retention_column import (
    Key,
    OutOfRange,
    RetentionColumn,
    partition_grain,
    retention_column,
)
from icelake_assets.settings.lifecycle_policy import RetentionPolicy
from icelake_assets.types import (
    SNAPSHOT_OP,
    SNAPSHOT_RETENTION_CUTOFF,
    SNAPSHOT_RETENTION_KEEP_DAYS,
    SNAPSHOT_RETENTION_POLICY,
)

EXPIRE_DATA = "expire_data"  # the op whose commits carry it (planning/op_plans.py)


@dataclass(frozen=True)
class LastExpiry:
    """The table's latest expire_data commit still in its metadata, and what it was bound by (None
    for a commit made before expiries recorded it: the next expiry then needs approval again)."""

    snapshot_id: int
    committed_at: datetime
    policy_digest: str | None = None
    keep_days: float | None = None
    cutoff: datetime | None = None  # the cut-off before it was lowered to a partition boundary


def last_expiry(table: Table) -> LastExpiry | None:
    """The newest snapshot an expire_data committed (its summary names the op)."""
    latest = None
    for snap in table.metadata.snapshots:
        summary = snap.summary
        if summary is None or summary.get(SNAPSHOT_OP) != EXPIRE_DATA:
            continue
        if latest is None or snap.timestamp_ms > latest.timestamp_ms:
            latest = snap
    if latest is None or latest.summary is None:
        return None
    props = latest.summary
    try:
        keep = float(props.get(SNAPSHOT_RETENTION_KEEP_DAYS) or "nan")
        cutoff = datetime.fromisoformat(props.get(SNAPSHOT_RETENTION_CUTOFF) or "")
    except ValueError:
        keep, cutoff = float("nan"), None
    return LastExpiry(
        latest.snapshot_id,
        datetime.fromtimestamp(latest.timestamp_ms / 1000, UTC),
        props.get(SNAPSHOT_RETENTION_POLICY),
        None if keep != keep else keep,
        cutoff,
    )


@dataclass(frozen=True)
class RetentionFacts:
    """Where a table's data files stand against its retention cut-off (see the module docstring).
    ``problem``: why retention cannot be evaluated (a missing column, a type the policy does not
    fit, a newest value no time can hold): the finding fails naming it. ``last``: the latest earlier
    ``expire_data`` commit still in the table's snapshots and what bound it (planning decides from
    it whether this expiry needs approval)."""

    column: str
    keep_days: float
    since: str
    problem: str | None = None
    kind: str = ""
    as_of: str | None = None  # ISO of the "now" the facts were read at
    cutoff: str | None = None  # ISO 8601 (UTC) of the cut-off: rows older than it are expired
    raw_cutoff: str | None = None  # the cut-off before it was lowered to a partition boundary
    cutoff_key: Key | None = None  # the cut-off in the column's terms (what the predicate compares)
    grain: str | None = None  # the partition grain the cut-off was lowered to
    newest: str | None = None  # the column's newest value not past the future limit, ISO
    expired_files: int = 0
    expired_rows: int = 0
    expired_bytes: int = 0
    straddling_files: int = 0
    straddling_rows: int = 0  # the straddling files' rows: an upper bound of their expired rows
    straddling_bytes: int = 0
    unbounded_files: int = 0  # no bounds on the column: cannot be placed (a delete scans them)
    unbounded_bytes: int = 0
    data_files: int = 0
    data_rows: int = 0  # rows of the live data files (before row-level deletes)
    future_limit: str | None = None  # now + future_skew_days, ISO: values past it are "after now"
    future_files: int = 0  # files whose upper bound is past the limit
    future_rows: int = 0  # their rows: an upper bound of the rows dated after now
    future_value: str | None = None  # the greatest such value, as the column holds it
    last: LastExpiry | None = None

    @property
    def expired_before(self) -> bool:
        """An earlier expire_data commit is still in the table's snapshots."""
        return self.last is not None

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


@dataclass(frozen=True)
class _File:
    low: Key | None
    high: Key | None
    rows: int
    size: int


def _data_files(summaries: Sequence[ManifestSummary]) -> list[_File]:
    out = []
    for s in summaries:
        for i in range(len(s)):
            if int(s.content[i]) == 0:
                out.append(
                    _File(
                        s.lower[i] if s.lower else None,
                        s.upper[i] if s.upper else None,
                        int(s.records[i]),
                        int(s.size[i]),
                    )
                )
    return out


def _shown(col: RetentionColumn, key: Key) -> str:
    """A value as a time where one can hold it, else as stored (a sentinel, a year past 9999)."""
    try:
        return col.time(key).isoformat()
    except OutOfRange:
        return repr(key)


def place_files(
    facts: RetentionFacts,
    col: RetentionColumn,
    summaries: Sequence[ManifestSummary],
    now: datetime,
    future_skew_days: float = 1.0,
) -> RetentionFacts:
    """``facts`` with the cut-off and every live data file placed against it."""
    files = _data_files(summaries)
    limit_time = now + timedelta(days=future_skew_days)
    limit = col.key(limit_time)
    future = [f for f in files if f.high is not None and f.high > limit]  # type: ignore[operator]
    facts = _with(
        facts,
        col,
        as_of=now.isoformat(),
        data_files=len(files),
        data_rows=sum(f.rows for f in files),
        future_limit=limit_time.isoformat(),
        future_files=len(future),
        future_rows=sum(f.rows for f in future),
        future_value=_shown(col, max(f.high for f in future if f.high is not None)) if future else None,
    )
    # The newest value not after the limit: a file reaching past it offers its lower bound instead.
    candidates = [
        f.high if f.high <= limit else f.low  # type: ignore[operator]
        for f in files
        if f.high is not None and f.low is not None and f.low <= limit  # type: ignore[operator]
    ]
    newest = max(candidates) if candidates else None
    newest_time = None
    if newest is not None:
        try:
            newest_time = col.time(newest)
        except OutOfRange as e:
            if facts.since == "newest":
                return _problem(facts, f"the newest value of {col.name!r} cannot be read: {e}")
    if facts.since == "newest":
        if newest_time is None:
            return facts  # no bounds: nothing placed
        start = min(newest_time, now)  # a value within the skew never puts rows of keep_days past it
    else:
        start = now
    try:
        raw = start - timedelta(days=facts.keep_days)
        cutoff = col.floor(raw, facts.grain)
        key = col.key(cutoff)
    except (OverflowError, ValueError) as e:
        return _problem(facts, f"no cut-off {facts.keep_days:g} days before {start.isoformat()}: {e}")
    out = {"expired": [0, 0, 0], "straddling": [0, 0, 0], "unbounded": [0, 0, 0]}
    for f in files:
        if f.low is None or f.high is None:
            kind = "unbounded"
        elif f.high < key:  # type: ignore[operator]
            kind = "expired"
        elif f.low < key:  # type: ignore[operator]
            kind = "straddling"
        else:
            continue
        out[kind][0] += 1
        out[kind][1] += f.rows
        out[kind][2] += f.size
    return replace(
        facts,
        cutoff=cutoff.isoformat(),
        raw_cutoff=raw.isoformat(),
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
    facts = RetentionFacts(policy.column or "", policy.keep_days, policy.since, last=last_expiry(table))
    col = retention_column(table, policy)
    if isinstance(col, str):
        return _problem(facts, col)
    facts = replace(facts, grain=partition_grain(table, col.field_id))
    snap = table.current_snapshot()
    summaries = cache.summaries(table, cache.manifest_list(table, snap), col.field_id) if snap else []
    when = datetime.fromtimestamp(now, UTC)
    return place_files(facts, col, summaries, when, policy.future_skew_days)
