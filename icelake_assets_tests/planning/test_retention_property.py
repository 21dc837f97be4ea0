"""Property (issue 50): whatever the column's type, unit, format, zone, ``since``, partitioning and the
values written (a far future, a sentinel, text that is no time), an expiry removes only rows past the
cut-off its approval saw, never a row within ``keep_days`` of now; an unapproved expiry after it only
rows the bounds allow.

Each example writes a real table with pyiceberg (SQLite catalog), reads the facts and decisions the
product reads, and applies the delete with pyiceberg (``LessThan`` the facts' cut-off key, what
expire_data's condition says in Spark SQL: maintenance/ops/test_expire_data.py checks that the two
agree). pyiceberg deletes copy-on-write only: merge-on-read is the Spark loop's
(orchestration/test_data_retention_loop.py). What a row's value means in time is computed here from the
instant it was written for, independently of health/retention_column.py."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pyarrow as pa
from hypothesis import HealthCheck, event, example, given, settings, strategies as st
from pyiceberg.expressions import LessThan
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    MonthTransform,
    YearTransform,
)
from pyiceberg.types import DateType, LongType, NestedField, StringType, TimestampType, TimestamptzType

from icelake_assets.health.stats import compute_table_stats
from icelake_assets.planning.data_retention import approval_needed, decide_expire_data, fraction_exceeded
from icelake_assets.settings import Policy
from icelake_assets.types import (
    SNAPSHOT_OP,
    SNAPSHOT_RETENTION_CUTOFF,
    SNAPSHOT_RETENTION_KEEP_DAYS,
    SNAPSHOT_RETENTION_POLICY,
)

KINDS = {
    "timestamp": (TimestampType(), {}),
    "timestamptz": (TimestamptzType(), {}),
    "date": (DateType(), {}),
    "seconds": (LongType(), {"unit": "seconds"}),
    "milliseconds": (LongType(), {"unit": "milliseconds"}),
    "microseconds": (LongType(), {"unit": "microseconds"}),
    "days": (LongType(), {"unit": "days"}),
    "day_text": (StringType(), {"format": "%Y-%m-%d"}),
    "hour_text": (StringType(), {"format": "%Y%m%d%H"}),
}
TRANSFORMS = {
    "identity": IdentityTransform(),
    "bucket": BucketTransform(4),
    "hour": HourTransform(),
    "day": DayTransform(),
    "month": MonthTransform(),
    "year": YearTransform(),
}
TIMELY = ("timestamp", "timestamptz", "date")
# Zones without daylight saving: a wall time there names one instant (a repeated hour would not).
ZONES = ("UTC", "Asia/Kolkata", "America/Sao_Paulo", "Pacific/Kiritimati")
FAR_FUTURE = datetime(2099, 1, 1, tzinfo=UTC)
_names = itertools.count()


def _transforms(kind: str) -> list[str]:
    out = ["none", "identity", "bucket"]
    if kind in TIMELY:
        out += ["day", "month", "year"] + (["hour"] if kind != "date" else [])
    return out


@dataclass(frozen=True)
class Case:
    kind: str
    transform: str
    since: str
    zone: str
    keep_days: float
    ages_s: tuple[tuple[int, ...], ...]  # per file: each row's age in seconds (negative: after now)
    extras: tuple[str, ...]  # "far" (2099), "sentinel" (the type's greatest value), "garbage" (text)
    later_days: float  # when the unapproved run comes, after the approved one

    def policy(self) -> Policy:
        section = {"column": "t", "keep_days": self.keep_days, "since": self.since, "timezone": self.zone}
        return Policy.model_validate({"retention": {**section, **KINDS[self.kind][1]}})


@st.composite
def cases(draw) -> Case:
    kind = draw(st.sampled_from(sorted(KINDS)))
    keep_days = draw(st.one_of(st.integers(1, 200).map(float), st.floats(0.5, 200, allow_nan=False)))
    # Ages around keep_days (up to twice it, and a little after now): rows on both sides of the cut-off.
    ages = st.floats(-0.05, 2.0, allow_nan=False).map(lambda f: int(f * keep_days * 86_400))
    files = draw(st.lists(st.lists(ages, min_size=1, max_size=12).map(tuple), min_size=1, max_size=3))
    extras = ["far", "sentinel"] + (["garbage"] if kind.endswith("_text") else [])
    return Case(
        kind,
        draw(st.sampled_from(_transforms(kind))),
        draw(st.sampled_from(["now", "newest"])),
        draw(st.sampled_from(ZONES)),
        keep_days,
        tuple(files),
        tuple(draw(st.lists(st.sampled_from(extras), max_size=2))),
        draw(st.floats(0, 0.6, allow_nan=False)) * keep_days,  # mostly within the delete fraction
    )


def _meaning(kind: str, zone: str, when: datetime) -> datetime:
    """The instant the value written for ``when`` stands for (a date or an hour of text is its start)."""
    wall = when.astimezone(ZoneInfo(zone))
    if kind in ("date", "day_text"):
        return wall.replace(hour=0, minute=0, second=0, microsecond=0)
    if kind == "hour_text":
        return wall.replace(minute=0, second=0, microsecond=0)
    if kind == "days":
        return when.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return when


def _value(kind: str, zone: str, when: datetime):
    wall = when.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    epoch = (when - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds()
    return {
        "timestamp": lambda: wall,
        "timestamptz": lambda: when,
        "date": lambda: wall.date(),
        "seconds": lambda: int(epoch),
        "milliseconds": lambda: int(epoch) * 1_000,
        "microseconds": lambda: int(epoch) * 1_000_000,
        "days": lambda: int(epoch // 86_400),
        "day_text": lambda: wall.strftime("%Y-%m-%d"),
        "hour_text": lambda: wall.strftime("%Y%m%d%H"),
    }[kind]()


def _extra(kind: str, extra: str):
    if extra == "far":
        return _value(kind, "UTC", FAR_FUTURE)
    if extra == "garbage":
        return "zz-not-a-time"
    return {
        "timestamp": datetime(9999, 12, 31, 23, 59),
        "timestamptz": datetime(9999, 12, 31, 23, 59, tzinfo=UTC),
        "date": datetime(9999, 12, 31).date(),
        "day_text": "9999-12-31",
        "hour_text": "9999123123",
    }.get(kind, 2**63 - 1)


ARROW = {
    "timestamp": pa.timestamp("us"),
    "timestamptz": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
    "day_text": pa.string(),
    "hour_text": pa.string(),
}


def _write(catalog, case: Case, now: datetime) -> dict[int, datetime | None]:
    """The table, one file per list of ages and one for the extras; returns each row id's meaning
    (None: a value that stands for no time before the far future)."""
    ftype = KINDS[case.kind][0]
    schema = Schema(NestedField(1, "id", LongType()), NestedField(2, "t", ftype))
    spec = UNPARTITIONED_PARTITION_SPEC
    if case.transform != "none":
        spec = PartitionSpec(PartitionField(2, 1000, TRANSFORMS[case.transform], "t_part"))
    table = catalog.create_table(("health", f"prop{next(_names)}"), schema=schema, partition_spec=spec)
    meaning: dict[int, datetime | None] = {}
    ids = itertools.count()
    batches = []
    for ages in case.ages_s:
        whens = [now - timedelta(seconds=a) for a in ages]
        rows = [(next(ids), _value(case.kind, case.zone, w), w) for w in whens]
        meaning.update({i: _meaning(case.kind, case.zone, w) for i, _, w in rows})
        batches.append([(i, v) for i, v, _ in rows])
    if case.extras:
        extra_rows = [(next(ids), _extra(case.kind, e)) for e in case.extras]
        meaning.update({i: None for i, _ in extra_rows})
        batches.append(extra_rows)
    for batch in batches:
        table.append(
            pa.table({
                "id": pa.array([i for i, _ in batch], pa.int64()),
                "t": pa.array([v for _, v in batch], ARROW.get(case.kind, pa.int64())),
            })
        )  # fmt: skip
    return table, meaning


def _expire(table, case: Case, at: datetime, approved: bool) -> set[int]:
    """What expire_data does at ``at``: decide, check the bounds and the exact fraction, delete by the
    cut-off and record the binding. Returns the ids it removed."""
    policy = case.policy()
    stats = compute_table_stats(table, policy, now=at.timestamp())
    facts = stats.data_retention
    assert facts is not None and facts.problem is None, facts
    decision = decide_expire_data(stats, policy)
    if not decision.act or (approval_needed(facts, policy.retention) and not approved):
        return set()
    before = set(table.scan().to_arrow()["id"].to_pylist())
    matched = len(table.scan(row_filter=LessThan("t", facts.cutoff_key)).to_arrow())
    if not approved and fraction_exceeded(matched, len(before), policy.retention):
        return set()
    table.delete(
        LessThan("t", facts.cutoff_key),
        snapshot_properties={
            SNAPSHOT_OP: "expire_data",
            SNAPSHOT_RETENTION_POLICY: policy.retention.digest(),
            SNAPSHOT_RETENTION_KEEP_DAYS: repr(facts.keep_days),
            SNAPSHOT_RETENTION_CUTOFF: facts.raw_cutoff or "",
        },
    )
    table.refresh()
    return before - set(table.scan().to_arrow()["id"].to_pylist())


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,  # the same examples in every CI run; explore with HYPOTHESIS_PROFILE or more examples
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=cases())
# Rows on both sides of the cut-off, some aging past it before the unapproved run (within the fraction).
@example(
    Case(
        "hour_text",
        "none",
        "now",
        "Asia/Kolkata",
        10.0,
        ((0, 86_400 * 3, 86_400 * 9, 86_400 * 12),),
        ("far",),
        2.0,
    )
)
@example(
    Case(
        "timestamp",
        "day",
        "now",
        "America/Sao_Paulo",
        5.0,
        ((3_600, 86_400 * 4 + 7_200),) * 2,
        ("sentinel",),
        1.5,
    )
)
def test_an_expiry_removes_only_rows_past_the_cut_off_its_approval_saw(catalog, case):
    now = datetime.now(UTC).replace(microsecond=0)
    table, meaning = _write(catalog, case, now)
    keep = timedelta(days=case.keep_days)

    approved = _expire(table, case, now, approved=True)
    for i in approved:
        assert meaning[i] is not None, f"row {i} (after now, a sentinel or no time) was removed"
        assert meaning[i] < now - keep, f"row {i} of {meaning[i]} is within keep_days of {now}"
    approved_cutoff = now - keep  # the latest cut-off the approval could have seen (since: now)

    later = now + timedelta(days=case.later_days)
    slack = timedelta(days=case.policy().retention.approval_slack_days)
    unapproved = _expire(table, case, later, approved=False)
    for i in unapproved:
        assert meaning[i] is not None, f"row {i} (after now, a sentinel or no time) was removed unapproved"
        assert meaning[i] < later - keep, f"row {i} of {meaning[i]} is within keep_days of {later}"
        assert meaning[i] < approved_cutoff + (later - now) + slack, "past what the approval bounds"
    event(f"approved removed rows: {bool(approved)}; unapproved removed rows: {bool(unapproved)}")
    remaining = len(meaning) - len(approved)
    assert len(unapproved) <= case.policy().retention.max_delete_fraction * remaining
