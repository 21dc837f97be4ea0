"""What the maintenance sensor remembers of a table between ticks (its cursor, orchestration/
sensors/cursor.py) and what it read of the table's runs (orchestration/runs/model.py), as plain typed
records: the planning core reads them, the sensor fills them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from icelake_assets.planning.outcome import RECHECK, WAITING, Outcome


@dataclass(frozen=True)
class Seen:
    """One table's line of the cursor: the metadata file the sensor last saw ("" none), the outcome it
    recorded, when its orphans were last listed and since when it has wanted maintenance (epoch s)."""

    metadata_file: str = ""
    outcome: Outcome = Outcome.SKIPPED
    scanned_at: float | None = None
    since: float | None = None


@dataclass(frozen=True)
class Runs:
    """The table's maintenance runs as the instance knows them (runs/model.py's TableRuns, converted):
    ``in_flight``: "run <id>" of one queued or running; ``retry_at``: when a table whose last runs
    failed may launch again (epoch s, None: the last run did not fail)."""

    in_flight: str | None = None
    failures_in_a_row: int = 0
    retry_at: float | None = None
    failure_reason: str | None = None
    interrupted: bool = False  # the latest runs failed for an outage or a lost worker, not the table


@dataclass(frozen=True)
class LastOutcome:
    """The tags of the table's latest run that recorded an outcome, and when it ended (epoch s)."""

    tags: Mapping[str, str]
    ended_at: float


@dataclass(frozen=True)
class History:
    """``last_outcome``: looks the latest outcome run up, asked only for a table that would launch (it
    costs the sensor a query of the instance) and only when it may still count (:meth:`outcome_may_count`);
    ``quiet_since``: no run of the table finished after this time (epoch s), as far as the run model
    read (its latest finished run's end, else the start of the window it reads; None: unknown)."""

    seen: Seen | None = None
    runs: Runs | None = None
    last_outcome: Callable[[], LastOutcome | None] | None = None
    quiet_since: float | None = None

    def outcome_may_count(self, now: float, lapses_after_seconds: float) -> bool:
        """Whether the latest outcome run may have ended less than ``lapses_after_seconds`` ago. What
        the sensor reads of it (the relaunch hold, a statistics refusal) lapses after the policy's
        ``loop.relaunch_backoff_hours``: a table none of whose runs ended within them skips the lookup
        (a query each, every tick, for every waiting table of a lake that was never maintained)."""
        return self.quiet_since is None or now - self.quiet_since < lapses_after_seconds


def needs_evaluation(seen: Seen | None, metadata_file: str, scan_due: bool, runs: Runs | None) -> bool:
    """Whether a tick reads the table: it changed (another metadata file), its orphan scan is due, its
    last outcome is worth a recheck, or it was launched and that run failed since (retried after its
    backoff). An unchanged table otherwise costs nothing, and so does one the sensor launched or found
    in flight while that run still holds it: its commits change nothing to decide until the run ends
    (the run reports its own materializations and checks; its scan stays due for the tick after)."""
    held = runs is not None and runs.in_flight is not None
    if seen is not None and held and seen.outcome in (Outcome.LAUNCHED, Outcome.IN_FLIGHT):
        return False
    if seen is None or seen.metadata_file != metadata_file or scan_due or seen.outcome in RECHECK:
        return True
    failed_since = (
        runs is not None and not runs.in_flight and (runs.failures_in_a_row > 0 or runs.retry_at is not None)
    )
    return seen.outcome == Outcome.LAUNCHED and failed_since


def finding_since(seen: Seen | None, now: float) -> float:
    """When the table's finding was first seen: it carries over while the table keeps waiting for
    maintenance (an older finding goes first among equal benefits)."""
    if seen is not None and seen.since is not None and seen.outcome in WAITING:
        return seen.since
    return now
