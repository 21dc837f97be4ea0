"""What every concern's evaluator returns: the health finding and the maintenance op's decision,
built from one set of numbers (one threshold each, in the concern's module)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from icelake_assets.health.findings import Finding
from icelake_assets.settings import Policy


@dataclass(frozen=True)
class Decision:
    op: str
    act: bool
    reason: str
    signals: dict[str, Any] = field(default_factory=dict)  # numbers (counts, ratios, bytes)


@dataclass(frozen=True)
class Evaluation:
    """One concern of one table: its finding and, for a concern an op acts on, that op's decision."""

    finding: Finding
    decision: Decision | None = None


def disabled(op: str, policy: Policy) -> Decision | None:
    """An op left out of policy.operations.enabled never acts, whatever its signal."""
    if op in policy.operations.enabled:
        return None
    return Decision(
        op,
        False,
        f"disabled by policy (operations.enabled: {', '.join(policy.operations.enabled) or 'none'})",
    )
