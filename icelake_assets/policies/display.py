"""A resolved policy as shown: each value with its source (command line, asset metadata, checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icelake_assets.settings import Mode, Policy, SchedulePolicy

DEFAULT_SOURCE = "default"
MODE_TAG = "icelake/mode"


@dataclass(frozen=True)
class PolicyValue:
    key: str  # dotted policy key, e.g. snapshots.min_keep
    value: Any
    source: str  # e.g. "icelake.yaml policies.namespaces['taxi'].snapshots.min_keep"


@dataclass(frozen=True)
class EffectivePolicy:
    """One table's policy, where each of its values came from, and table properties that were ignored."""

    table: str
    policy: Policy
    values: tuple[PolicyValue, ...]
    problems: tuple[str, ...] = ()

    @property
    def mode(self) -> Mode:
        return self.policy.mode

    @property
    def owners(self) -> tuple[str, ...]:
        return self.policy.owners

    @property
    def tags(self) -> dict[str, str]:
        return dict(self.policy.tags)

    @property
    def schedule(self) -> SchedulePolicy:
        return self.policy.schedule

    def source_of(self, key: str) -> str:
        for v in self.values:
            if v.key == key:
                return v.source
        raise KeyError(f"{key!r} is not a policy key (keys: {', '.join(v.key for v in self.values)})")

    def value_of(self, key: str) -> Any:
        for v in self.values:
            if v.key == key:
                return v.value
        raise KeyError(f"{key!r} is not a policy key")

    def asset_tags(self) -> dict[str, str]:
        """Dagster asset tags: the policy's tags plus its mode (filterable in the UI)."""
        return {**self.policy.tags, MODE_TAG: self.mode}

    def overridden(self) -> tuple[PolicyValue, ...]:
        """The values that do not come from the built-in defaults."""
        return tuple(v for v in self.values if v.source != DEFAULT_SOURCE)


def format_value(value: Any) -> str:
    """A policy value as printed (command line, asset metadata)."""
    if isinstance(value, tuple):
        return ", ".join(map(str, value)) or "(none)"
    return "(none)" if value is None else str(value)
