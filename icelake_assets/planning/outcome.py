"""What the maintenance sensor records for a table on a tick (one word each: the audit, the cursor,
the run tags and the UI show it)."""

from enum import StrEnum


class Outcome(StrEnum):
    """What the maintenance sensor records for a table on a tick. The values are the words the audit,
    the cursor, the run tags and the UI show (a StrEnum: each equals its word)."""

    # The table's decision (decide_table): metadata, policy and mode alone.
    LAUNCHED = "launched"  # a run is requested
    PROPOSED = "proposed"  # mode propose: what would be launched, recorded, nothing launched
    OBSERVED = "observed"  # mode observe: checks only
    DEFERRED = "deferred"  # a writer committed within the quiet period
    HELD = "held"  # the cost guard: over guards.max_rewrite_bytes, awaiting approval
    SKIPPED = "skipped"  # no op past its threshold
    # What the sensor adds from the instance and the tick (orchestration/sensors/maintenance.py, runs/model.py).
    IN_FLIGHT = "in_flight"  # a run of the table is queued or running
    BACKOFF = "backoff"  # a failed or ineffective run: not relaunched yet
    QUEUED_BY_PRIORITY = "queued_by_priority"  # under the global run cap, a better table went first
    ERROR = "error"  # the table could not be evaluated (its own fault only)


# Sensor outcomes a table's decision can have before the run model (in flight, backoff, priority).
OUTCOMES = (
    Outcome.LAUNCHED,
    Outcome.PROPOSED,
    Outcome.OBSERVED,
    Outcome.DEFERRED,
    Outcome.HELD,
    Outcome.SKIPPED,
)

# Outcomes worth re-evaluating on the next tick even when the table did not change.
RECHECK = frozenset(
    {Outcome.DEFERRED, Outcome.ERROR, Outcome.IN_FLIGHT, Outcome.BACKOFF, Outcome.QUEUED_BY_PRIORITY}
)
# Outcomes of a table that still wants maintenance: the age of its finding carries over.
WAITING = frozenset(
    {Outcome.DEFERRED, Outcome.HELD, Outcome.IN_FLIGHT, Outcome.BACKOFF, Outcome.QUEUED_BY_PRIORITY}
)
