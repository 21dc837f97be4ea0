"""The chaos soak's retention table at the end (bench/soak/retention.py; issue 50, item 9): its rows
against its writer's ledger and the policy, and the data_retention finding it fails by design.

Asserted (:func:`check_retention`): 0 rows lost outside what the policy expires (every ledger row
dated at or after the newest non-future value written minus ``keep_days`` minus CHECK_SLACK_MS is in
the table exactly once, as pyiceberg and DuckDB read it; older ones may be gone), every far-future
and sentinel row is still there, and the ``data_retention`` finding names them (rows dated after
now, and the greatest value). That finding fails by design while they are in the table: it is the
one finding the heal accepts on this table (:func:`expected_finding`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from bench.soak.checks import HealthCheck, Outcome, RowCheck, check_ids
from bench.soak.lake import CATALOG, NAMESPACE
from bench.soak.retention import (
    DAY_MS,
    KEEP_DAYS,
    LONG_MAX,
    TABLE,
    Approval,
    full_name,
    ledger_file,
    ledger_values,
)
from bench.soak.writers import LedgerState, read_ledger

# "One partition/slack": the table is not partitioned by the column (no partition grain lowers the
# cut-off), so this only absorbs clock differences between the writer and the expiry's "now".
CHECK_SLACK_MS = 3_600_000


def is_future(value: int, now_ms: int, skew_days: float = 1.0) -> bool:
    return value > now_ms + skew_days * DAY_MS


def kept_floor(values: dict[int, int], now_ms: int) -> int | None:
    """The value from which every row must be kept: the newest non-future value the writer tried
    (any expiry's ``since: newest`` saw at most it) minus ``keep_days`` minus CHECK_SLACK_MS."""
    present = [v for v in values.values() if not is_future(v, now_ms)]
    return max(present) - KEEP_DAYS * DAY_MS - CHECK_SLACK_MS if present else None


def policy_ledger(ledger: LedgerState, values: dict[int, int], floor: int | None, now_ms: int) -> LedgerState:
    """The writer's ledger with the rows the policy may have expired (committed, not future, older
    than ``floor``) as deletes of unknown outcome: present once or absent, both fine."""
    if floor is None:
        return ledger
    expirable = frozenset(
        i for i in ledger.appended | ledger.maybe_appended if (v := values.get(i)) is not None and v < floor
    )
    expirable = frozenset(i for i in expirable if not is_future(values[i], now_ms))
    return replace(ledger, maybe_deleted=ledger.maybe_deleted | expirable)


@dataclass(frozen=True)
class RetentionCheck:
    rows: tuple[RowCheck, ...]
    floor: str  # the kept floor, ISO
    expired: int  # committed rows the policy removed (absent, older than the floor)
    kept: int  # committed rows that had to stay
    future: tuple[int, ...]  # committed far-future and sentinel ids
    future_missing: tuple[int, ...]
    finding: str  # the data_retention finding's summary
    finding_rows: int  # its future_rows metric
    finding_ok: bool

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows) and not self.future_missing and self.finding_ok

    def describe(self) -> str:
        return (
            f"{self.kept} rows to keep (at or after {self.floor}), {self.expired} expired by the policy; "
            f"{len(self.future)} far-future/sentinel rows, missing {list(self.future_missing)[:8]}; "
            f"data_retention: {self.finding} (future_rows {self.finding_rows})"
            + "".join(f"; {r.engine}: {r.describe()}" for r in self.rows if not r.ok)
        )


def check_retention(
    folder: Path, table, counts: dict[str, dict[int, int]], finding, now: float | None = None
) -> RetentionCheck:
    """``counts``: engine -> id -> rows (pyiceberg, DuckDB); ``finding``: the table's data_retention
    finding now (a health Finding)."""
    now_ms = int((now or time.time()) * 1000)
    values = ledger_values(ledger_file(folder))
    ledger = read_ledger(ledger_file(folder))
    floor = kept_floor(values, now_ms)
    checked = policy_ledger(ledger, values, floor, now_ms)
    rows = tuple(check_ids(full_name(), engine, checked, c) for engine, c in counts.items())
    first = next(iter(counts.values()), {})
    committed = ledger.appended
    future = tuple(sorted(i for i in committed if is_future(values.get(i, 0), now_ms)))
    missing = tuple(i for i in future if first.get(i, 0) == 0)
    expired = sum(1 for i in checked.maybe_deleted - ledger.maybe_deleted if first.get(i, 0) == 0)
    kept = len(checked.appended - checked.deleted - checked.maybe_deleted)
    summary = finding.summary if finding is not None else "no data_retention finding"
    future_rows = int((finding.metrics or {}).get("future_rows", 0)) if finding is not None else 0
    named = finding is not None and "dated after now" in summary and future_rows >= len(future)
    if any(values.get(i) == LONG_MAX for i in future):
        named = named and str(LONG_MAX) in summary  # the greatest value, as the column holds it
    elif future:
        named = named and "2099" in summary
    finding_ok = named if future else finding is not None and finding.passed
    floor_iso = "-" if floor is None else datetime.fromtimestamp(floor / 1000, UTC).isoformat()
    return RetentionCheck(rows, floor_iso, expired, kept, future, missing, summary, future_rows, finding_ok)


def expected_finding(failing: str) -> bool:
    """The finding the table fails by design while its far-future and sentinel rows are kept."""
    return failing.startswith("data_retention:") and "dated after now" in failing


def health_check(settings, catalog, known) -> HealthCheck:
    """The table's health as bench/soak/checks.py check_health reads it, the future-values finding
    set apart as expected (the heal waits for the rest)."""
    from bench.soak.checks import check_health
    from icelake_assets.catalog.connection import TableRef

    health = check_health(settings, catalog, TableRef(CATALOG, (NAMESPACE,), TABLE), known)
    expected = tuple(f for f in health.failing if expected_finding(f))
    failing = tuple(f for f in health.failing if not expected_finding(f))
    return replace(health, failing=failing, expected=expected)


def retention_finding(settings, catalog):
    """The table's data_retention finding now."""
    from icelake_assets.catalog.connection import TableRef
    from icelake_assets.operate.table_health import table_health

    health = table_health(settings, catalog, TableRef(CATALOG, (NAMESPACE,), TABLE))
    return next((f for f in health.findings if f.check == "data_retention"), None)


def retention_outcomes(
    check: RetentionCheck | None, approval: Approval, error: str = ""
) -> tuple[Outcome, ...]:
    return (
        Outcome(
            "retention: the first expiry approved once at the start, and it acted",
            approval.acted,
            (
                f"run {(approval.run_id or '-')[:8]} {approval.status} after {approval.tries} tries: "
                f"{approval.reason}",
            ),
        ),
        Outcome(
            f"retention: 0 rows lost outside what keep_days {KEEP_DAYS} (since newest) expires, every "
            "far-future/sentinel row kept and named by data_retention",
            check is not None and check.ok,
            (check.describe(),) if check is not None else (error or "not checked",),
        ),
    )
