"""The write tool of ``icelake mcp`` and the guards in front of it, in the order they refuse:

1. ``write``: the agent's identity must be in the settings' ``agents`` section with ``write: true``;
2. the sensor's own guards: the table's plan now must await approval (held by the cost guard, or
   proposed in mode propose); writers active defer it, nothing to do skips it (operate/approve.py);
3. ``max_rewrite_bytes_per_call``: the plan's rewrite estimate against the agent's cap per call;
4. ``max_rewrite_bytes_per_day``: the estimates of the agent's launches since UTC midnight (its
   audit records) plus this one, against its cap per day;
5. ``require_human_approval``: the call launches nothing; it is recorded as held (the table keeps
   waiting in the UI's list with its launchpad link and ``icelake approve`` command, for a person).

Past the guards the launch is ``icelake approve``'s (operate/approve.py: Dagster's GraphQL API, the
sensor's tags, the approval tag, the audit record), approved by ``agent:<identity>``.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime

from icelake_assets.agents.read_tools import JsonDocument, table_ref
from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.operate.approve import NotAwaitingApproval, approve_table
from icelake_assets.operate.plan import plan_table
from icelake_assets.planning.approval import approve_command
from icelake_assets.settings import AgentSettings, Settings
from icelake_assets.types import IcelakeError, TableRef

HOLD_SCHEMA = "icelake.agent_hold/v1"
APPROVE_TOOL = "approve_maintenance"
ANONYMOUS = "anonymous"
# The identity of the call being served: set by the server around each call (agents/server.py).
CALLER: ContextVar[str] = ContextVar("icelake_agent", default=ANONYMOUS)


def caller() -> str:
    return CALLER.get()


class GuardRefused(IcelakeError, RuntimeError):
    """A guard refused an agent's call: ``guard`` names it, the message says why."""

    def __init__(self, guard: str, message: str) -> None:
        super().__init__(message)
        self.guard = guard


@dataclass(frozen=True)
class Spend:
    """An agent's launches today: how many, and their estimated rewrite bytes."""

    launches: int
    rewrite_bytes: int


def agent_settings(settings: Settings, identity: str) -> AgentSettings:
    """The identity's settings; an identity the file does not name reads only."""
    return settings.agents.get(identity, AgentSettings())


def may_write(settings: Settings, identity: str) -> bool:
    return agent_settings(settings, identity).write


def spend_today(settings: Settings, identity: str, now: datetime | None = None) -> Spend:
    """The agent's launches since UTC midnight, from its audit records (kind ``agent``, the approve
    tool, a run launched): every process serving the agent counts the same day."""
    now = now or datetime.now(UTC)
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    records = AuditLog.from_settings(settings).records(since=midnight)
    mine = [
        r
        for r in records
        if r.kind == "agent"
        and r.op == APPROVE_TOOL
        and r.results.get("agent") == identity
        and r.results.get("run_id")
    ]
    return Spend(len(mine), sum(r.cost_estimate_bytes or 0 for r in mine))


def approve_maintenance(
    settings: Settings, identity: str, table: str, dagster_url: str, digest: str | None = None
) -> JsonDocument:
    """Approve a held or proposed table's maintenance as ``identity``, behind the guards above;
    returns ``icelake.approval/v1`` (a run launched) or ``icelake.agent_hold/v1`` (held for a person).
    Raises GuardRefused naming the guard that refused."""
    agent = agent_settings(settings, identity)
    if not agent.write:
        raise GuardRefused(
            "write",
            f"agent {identity!r} may not write: set agents.{identity}.write: true in {settings.source}",
        )
    ref = table_ref(settings, table)
    plan = plan_table(settings, ref)
    if not plan.awaiting_approval:
        raise GuardRefused(
            "plan", f"{ref} awaits no approval: the sensor's guards say {plan.outcome} ({plan.guards_reason})"
        )
    cost = plan.estimate.rewrite_bytes
    per_call = agent.max_rewrite_bytes_per_call
    if per_call is not None and cost > per_call:
        raise GuardRefused(
            "max_rewrite_bytes_per_call",
            f"the plan of {ref} rewrites {cost:,} bytes, over agent {identity!r}'s "
            f"max_rewrite_bytes_per_call of {per_call:,} bytes",
        )
    per_day = agent.max_rewrite_bytes_per_day
    if per_day is not None:
        spent = spend_today(settings, identity)
        if spent.rewrite_bytes + cost > per_day:
            raise GuardRefused(
                "max_rewrite_bytes_per_day",
                f"agent {identity!r} launched {spent.launches} runs rewriting {spent.rewrite_bytes:,} bytes "
                f"today; {cost:,} more for {ref} is over its max_rewrite_bytes_per_day of {per_day:,} bytes",
            )
    if agent.require_human_approval:
        return _hold(settings, identity, plan.digest, ref, cost)
    try:
        approval = approve_table(settings, ref, dagster_url, f"agent:{identity}", digest or plan.digest)
    except NotAwaitingApproval as err:  # the plan changed between our look and approve's
        raise GuardRefused("plan", str(err)) from None
    return approval.to_json()


def _hold(settings: Settings, identity: str, digest: str, ref: TableRef, cost: int) -> JsonDocument:
    """The call held for a person: an audit decision ``held`` naming the agent, and how to approve
    (the command; the UI's lake overview lists the held table with its launchpad link)."""
    reason = f"agent {identity} asked to approve plan {digest}: held for a person (require_human_approval)"
    record = AuditRecord(
        table_name=str(ref),
        kind="decision",
        decision="held",
        trigger="agent",
        reason=reason,
        cost_estimate_bytes=cost,
        results={"agent_hold": {"agent": identity, "plan_digest": digest}},
    )
    if settings.audit.enabled:
        AuditLog.from_settings(settings).append(record)
    return {
        "schema": HOLD_SCHEMA,
        "table": str(ref),
        "held": True,
        "guard": "require_human_approval",
        "reason": reason,
        "plan_digest": digest,
        "rewrite_bytes": cost,
        "approve": {"command": approve_command(ref), "digest": digest},
        "audit_record_id": record.record_id if settings.audit.enabled else None,
    }
