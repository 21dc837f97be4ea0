"""What an agent's approve spends, and the ledger its day's cap is summed from.

- ``price``: every byte the approved run reads and writes again or deletes, op by op (the plan's
  figures, operate/plan.py): the data rewrite, the position-delete compaction, and expire_data's files
  (the files holding the expired rows, plus the straddling files it writes again). One function, so
  the caps, the hold record and the call's audit record price the same plan the same way.
- The ledger is the audit log: before a capped launch the spend is appended (kind ``agent``, op
  ``agent_spend``), and the day's spend is summed from those records. It fails closed: an audit log
  that is off, cannot be read or refuses the append refuses the call, naming the cause.
- ``spending``: one spending call at a time, from the ledger's read to its append. Several processes
  may serve one lake on a host (a stdio server per client, HTTP servers), so the lock is a file lock
  in the lake's metrics folder (the state every process of the lake already shares), plus a thread
  lock for the HTTP server's concurrent calls.
"""

from __future__ import annotations

import fcntl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.operate.plan import TablePlan
from icelake_assets.settings import Settings
from icelake_assets.types import IcelakeError, TableRef

SPEND_OP = "agent_spend"
LEDGER_GUARD = "spend_ledger"
LOCK_FILE = "agent_spend.lock"
LOCK_TIMEOUT_S = 120.0  # a holder stuck longer (a paused process) refuses the call, never waits forever
_THREADS = threading.Lock()


class GuardRefused(IcelakeError, RuntimeError):
    """A guard refused an agent's call: ``guard`` names it, the message says why."""

    def __init__(self, guard: str, message: str) -> None:
        super().__init__(message)
        self.guard = guard


class LedgerUnavailable(GuardRefused):
    """The day's cap cannot be checked or recorded: refused rather than spent unbounded."""

    def __init__(self, message: str) -> None:
        super().__init__(LEDGER_GUARD, message)


@dataclass(frozen=True)
class Price:
    """The bytes an approved plan costs against an agent's caps, op by op."""

    rewrite_bytes: int  # data files rewrite_data_files reads and writes again
    position_delete_bytes: int  # delete files rewrite_position_delete_files compacts
    expire_bytes: int  # data files holding the rows expire_data deletes (straddling files whole)
    expire_rewrite_bytes: int  # the files expire_data writes again without the rows (0: metadata-only)

    @property
    def total_bytes(self) -> int:
        return self.rewrite_bytes + self.position_delete_bytes + self.expire_bytes + self.expire_rewrite_bytes

    def describe(self) -> str:
        parts = {
            "rewrite": self.rewrite_bytes,
            "position-delete compaction": self.position_delete_bytes,
            "expired rows' files": self.expire_bytes,
            "expiry rewrite": self.expire_rewrite_bytes,
        }
        return ", ".join(f"{name} {n:,}" for name, n in parts.items() if n) or "nothing"

    def to_json(self) -> dict[str, int]:
        return {
            "rewrite_bytes": self.rewrite_bytes,
            "position_delete_bytes": self.position_delete_bytes,
            "expire_bytes": self.expire_bytes,
            "expire_rewrite_bytes": self.expire_rewrite_bytes,
            "total_bytes": self.total_bytes,
        }


def price(plan: TablePlan) -> Price:
    """What ``plan`` costs: every acting op's bytes (its estimate is 0 for an op that does not act)."""
    e = plan.estimate
    expiring = "expire_data" in plan.acting
    signals: dict[str, Any] = next((o.signals for o in plan.ops if o.op == "expire_data" and o.act), {})
    rewritten = 0 if e.expire_metadata_only else _bytes(signals.get("rewrite_bytes"))
    return Price(
        rewrite_bytes=e.rewrite_bytes,
        position_delete_bytes=e.position_delete_bytes,
        expire_bytes=e.expire_bytes if expiring else 0,
        expire_rewrite_bytes=rewritten if expiring else 0,
    )


def _bytes(value: Any) -> int:
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


@dataclass(frozen=True)
class Spend:
    """An agent's spending today: how many launches, and their priced bytes."""

    launches: int
    bytes: int


def spend_today(settings: Settings, identity: str, now: datetime | None = None) -> Spend:
    """The agent's spend since UTC midnight from the ledger (its ``agent_spend`` records, less those
    released); raises LedgerUnavailable when the audit log is off or cannot be read."""
    if not settings.audit.enabled:
        raise LedgerUnavailable(
            f"agent {identity!r}'s day cap cannot be checked: the audit log, its ledger, is off "
            f"(audit.enabled: false in {settings.source}); enable it or remove the day cap"
        )
    now = now or datetime.now(UTC)
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    try:
        records = AuditLog.from_settings(settings).records(since=midnight)
    except Exception as err:
        raise LedgerUnavailable(
            f"agent {identity!r}'s day cap cannot be checked: the audit log cannot be read "
            f"({type(err).__name__}: {err})"
        ) from err
    mine = [
        r for r in records if r.kind == "agent" and r.op == SPEND_OP and r.results.get("agent") == identity
    ]
    released = {r.results.get("releases") for r in mine if r.decision == "failed"}
    spent = [r for r in mine if r.decision == "answered" and r.record_id not in released]
    return Spend(len(spent), sum(r.cost_estimate_bytes or 0 for r in spent))


def _ledger_record(
    ref: TableRef, decision: str, reason: str, results: dict, cost: int | None = None
) -> AuditRecord:
    """One entry of the spend ledger: an audit record of the guardrail's own op."""
    return AuditRecord(
        table_name=str(ref),
        kind="agent",
        decision=decision,
        trigger="agent",
        op=SPEND_OP,
        reason=reason[:500],
        cost_estimate_bytes=cost,
        results=results,
    )


def record_spend(settings: Settings, identity: str, ref: TableRef, plan: TablePlan, cost: Price) -> str:
    """Append the spend before the launch (so a failed append launches nothing); its record id."""
    record = _ledger_record(
        ref,
        "answered",
        f"agent {identity} spends {cost.total_bytes:,} bytes on plan {plan.digest} ({cost.describe()})",
        {"agent": identity, "plan_digest": plan.digest, "price": cost.to_json()},
        cost.total_bytes,
    )
    try:
        AuditLog.from_settings(settings).append(record)
    except Exception as err:
        raise LedgerUnavailable(
            f"agent {identity!r}'s spend on {ref} cannot be recorded in the audit log, so nothing was "
            f"launched ({type(err).__name__}: {err})"
        ) from err
    return record.record_id


def release_spend(settings: Settings, identity: str, ref: TableRef, record_id: str, why: str) -> None:
    """The launch did not happen: its spend no longer counts (best effort: kept, it only over-counts)."""
    record = _ledger_record(
        ref,
        "failed",
        f"agent {identity}'s spend {record_id} released: {why}",
        {"agent": identity, "releases": record_id},
    )
    try:
        AuditLog.from_settings(settings).append(record)
    except Exception:  # noqa: S110 - the spend stays counted: the safe side
        pass


@contextmanager
def spending(settings: Settings, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """Held from the ledger's read to its append: two calls never both pass the day's cap."""
    path = Path(settings.metrics.textfile_dir) / LOCK_FILE
    if not _THREADS.acquire(timeout=timeout_s):
        raise LedgerUnavailable(f"another call of this server held the spending lock over {timeout_s:.0f} s")
    try:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle = open(path, "a")  # noqa: SIM115 - closed below, which also drops the flock
        except OSError as err:
            raise LedgerUnavailable(f"the agents' spending lock {path} cannot be opened: {err}") from err
        with handle:
            _flock(handle, path, time.monotonic() + timeout_s, timeout_s)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        _THREADS.release()


def _flock(handle: IO[str], path: Path, deadline: float, timeout_s: float) -> None:
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise LedgerUnavailable(
                    f"another process held the agents' spending lock {path} over {timeout_s:.0f} s"
                ) from None
            time.sleep(0.05)
