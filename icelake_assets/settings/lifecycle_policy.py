"""A table's data lifecycle policy (issue 40), beside the health thresholds of policy_schema.py:
how long rows are kept (``retention``), the restore points kept as Iceberg tags (``restore_points``)
and the recovery window orphan files wait in before they are deleted (``orphans.recovery_window_hours``,
in policy_schema.py). Each section is off until the settings file (or a table property, tightening)
turns it on, like the others layered per table."""

from __future__ import annotations

import hashlib
import json
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_DAYS = 100 * 365.0  # a century: past it a value is a typo, never a retention

# How a long column counts time since the epoch.
EpochUnit = Literal["seconds", "milliseconds", "microseconds", "days"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RetentionPolicy(_Strict):
    """Rows whose ``column`` is older than ``keep_days`` are expired by the ``expire_data`` op (the first
    of the chain). The column is a timestamp, timestamptz or date; a long counting ``unit`` since the
    epoch; or a string parsed with ``format`` (strptime, e.g. ``%Y-%m-%d``). Age counts from now, or
    from the table's newest value of the column (``since: newest``: a table that stopped receiving data
    keeps its last ``keep_days``).

    Bounds on what one run may delete (docs/safety.md): a run removes at most ``max_delete_fraction``
    of the table's rows unless approved; values later than now plus ``future_skew_days`` never move
    the cut-off (``since: newest``); an approved expiry binds the next ones to its policy
    (:meth:`digest`) and to a cut-off that moves no faster than time (plus ``approval_slack_days``).
    ``timezone``: the zone of the wall time stored in a timestamp without zone, a date or a string."""

    column: str | None = None
    keep_days: float | None = Field(None, gt=0, le=MAX_DAYS)
    unit: EpochUnit | None = None
    format: str | None = None
    since: Literal["now", "newest"] = "now"
    timezone: str = "UTC"
    max_delete_fraction: float = Field(0.5, gt=0, le=1)
    future_skew_days: float = Field(1.0, ge=0, le=MAX_DAYS)
    approval_slack_days: float = Field(1.0, ge=0, le=MAX_DAYS)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as e:
            raise ValueError(
                f"retention.timezone {value!r} is not an IANA time zone (e.g. Europe/Paris)"
            ) from e
        return value

    @model_validator(mode="after")
    def _complete(self) -> RetentionPolicy:
        if (self.column is None) != (self.keep_days is None):
            raise ValueError("retention needs both 'column' and 'keep_days' (or neither: off)")
        if self.unit is not None and self.format is not None:
            raise ValueError("retention: 'unit' is for a long column, 'format' for a string one; not both")
        return self

    @property
    def enabled(self) -> bool:
        return self.column is not None

    def digest(self) -> str:
        """What an approved expiry binds to: the fields that say how a value maps to time. Another
        value of any of them (a new unit, format or zone) needs approval again; ``keep_days`` is bound
        apart (a larger one keeps more and needs none)."""
        fields = {k: getattr(self, k) for k in ("column", "unit", "format", "since", "timezone")}
        return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


class RestorePointPolicy(_Strict):
    """Restore points: tags Iceberg keeps (snapshot expiry never removes a snapshot a tag names), made
    ``every`` day or week and, with ``before_rewrite``, just before each run that rewrites data, so
    the run can be undone after its snapshots expired; tags of this product older than
    ``max_age_days`` are removed. Names start with ``prefix``."""

    every: Literal["off", "daily", "weekly"] = "off"
    before_rewrite: bool = False
    max_age_days: float = Field(30.0, gt=0, le=MAX_DAYS)
    prefix: str = Field("icelake-", pattern=r"^[A-Za-z0-9_\-.]{1,40}$")

    @property
    def enabled(self) -> bool:
        return self.every != "off" or self.before_rewrite
