"""The write tool of ``icelake mcp`` and the guards in front of it, in the order they refuse:

1. ``write``: the agent's identity must be in the settings' ``agents`` section with ``write: true``;
2. the sensor's own guards: the table's plan now must await approval (held by the cost guard, or
   proposed in mode propose); writers active defer it, nothing to do skips it (operate/approve.py);
3. ``human_gate``: a row expiry the plan says waits for a person (a table's first expiry, or any
   expire_data whose bounds need approval again) is never an agent's to approve, whatever its caps;
4. ``max_rewrite_bytes_per_call``: the plan's price (every op's bytes: agents/spending.py) against
   the agent's cap per call;
5. ``max_rewrite_bytes_per_day``: the agent's spend since UTC midnight (its ledger in the audit log)
   plus this one, against its cap per day; a ledger that cannot be read or appended refuses
   (``spend_ledger``), and calls that spend are serialized from the read to the append;
6. ``require_human_approval``: the call launches nothing; it is recorded as held (the table keeps
   waiting in the UI's list with its launchpad link and ``icelake approve`` command, for a person).

Past the guards the launch is ``icelake approve``'s (operate/approve.py: Dagster's GraphQL API, the
sensor's tags, the approval tag, the audit record), approved by ``agent:<identity>``.
"""

from __future__ import annotations

from contextvars import ContextVar

from icelake_assets.agents.read_tools import JsonDocument, table_ref
from icelake_assets.agents.spending import (
    GuardRefused,
    Price,
    price,
    record_spend,
    release_spend,
    spend_today,
    spending,
)
from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.operate.approve import NotAwaitingApproval, approve_table
from icelake_assets.operate.plan import TablePlan, plan_table
from icelake_assets.planning.approval import approve_command
from icelake_assets.settings import AgentSettings, Settings
from icelake_assets.types import TableRef

HOLD_SCHEMA = "icelake.agent_hold/v1"
APPROVE_TOOL = "approve_maintenance"
ANONYMOUS = "anonymous"
# The identity of the call being served: set by the server around each call (agents/server.py).
CALLER: ContextVar[str] = ContextVar("icelake_agent", default=ANONYMOUS)


def caller() -> str:
    return CALLER.get()


def agent_settings(settings: Settings, identity: str) -> AgentSettings:
    """The identity's settings; an identity the file does not name reads only."""
    return settings.agents.get(identity, AgentSettings())


def may_write(settings: Settings, identity: str) -> bool:
    return agent_settings(settings, identity).write


def approve_maintenance(
    settings: Settings, identity: str, table: str, dagster_url: str, digest: str | None = None
) -> JsonDocument:
    """Approve a held or proposed table's maintenance as ``identity``, behind the guards above;
    returns ``icelake.approval/v1`` (a run launched) or ``icelake.agent_hold/v1`` (held for a person),
    each with the ``price`` the caps counted. Raises GuardRefused naming the guard that refused."""
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
    if digest and digest != plan.digest:  # before anything is spent on a plan that will not launch
        raise GuardRefused(
            "plan", f"{ref}: the plan changed since {digest} (now {plan.digest}): review it again"
        )
    _human_gate(plan, ref)
    cost = price(plan)
    per_call = agent.max_rewrite_bytes_per_call
    if per_call is not None and cost.total_bytes > per_call:
        raise GuardRefused(
            "max_rewrite_bytes_per_call",
            f"the plan of {ref} costs {cost.total_bytes:,} bytes ({cost.describe()}), over agent "
            f"{identity!r}'s max_rewrite_bytes_per_call of {per_call:,} bytes",
        )
    per_day = agent.max_rewrite_bytes_per_day
    if per_day is None or agent.require_human_approval:  # nothing is spent against a day's cap
        if per_day is not None:
            _within_day(settings, identity, ref, cost, per_day)
        if agent.require_human_approval:
            return _hold(settings, identity, plan.digest, ref, cost)
        return _launch(settings, identity, ref, plan, dagster_url, cost, None)
    with spending(settings):
        _within_day(settings, identity, ref, cost, per_day)
        spend_id = record_spend(settings, identity, ref, plan, cost)
    return _launch(settings, identity, ref, plan, dagster_url, cost, spend_id)


def _human_gate(plan: TablePlan, ref: TableRef) -> None:
    """A row expiry the plan holds for a person stays a person's, whatever the agent's caps."""
    e = plan.estimate
    if "expire_data" not in plan.acting or not (e.first_expiry or e.expire_needs_approval):
        return
    why = "the table's first expiry" if e.first_expiry else ""
    if e.expire_needs_approval:
        why = f"{why}; {e.expire_needs_approval}" if why else e.expire_needs_approval
    raise GuardRefused(
        "human_gate",
        f"{ref}'s plan deletes rows (expire_data: {e.expire_rows:,} rows in {e.expire_files:,} files, "
        f"{e.expire_bytes:,} bytes, before {e.expire_cutoff}) and needs a person's approval: {why}. "
        f"An agent may not approve it; a person runs `{plan.approve_command}`",
    )


def _within_day(settings: Settings, identity: str, ref: TableRef, cost: Price, per_day: int) -> None:
    spent = spend_today(settings, identity)
    if spent.bytes + cost.total_bytes > per_day:
        raise GuardRefused(
            "max_rewrite_bytes_per_day",
            f"agent {identity!r} launched {spent.launches} runs costing {spent.bytes:,} bytes today; "
            f"{cost.total_bytes:,} more for {ref} ({cost.describe()}) is over its "
            f"max_rewrite_bytes_per_day of {per_day:,} bytes",
        )


def _launch(
    settings: Settings,
    identity: str,
    ref: TableRef,
    plan: TablePlan,
    dagster_url: str,
    cost: Price,
    spend_id: str | None,
) -> JsonDocument:
    try:
        approval = approve_table(settings, ref, dagster_url, f"agent:{identity}", plan.digest)
    except (NotAwaitingApproval, ValueError) as err:  # raised before any run is submitted
        if spend_id:
            release_spend(settings, identity, ref, spend_id, str(err))
        if isinstance(err, NotAwaitingApproval):  # the plan changed between our look and approve's
            raise GuardRefused("plan", str(err)) from None
        raise
    # Any later failure keeps the spend: the run may have been submitted, so it counts (fail closed).
    return {**approval.to_json(), "price": cost.to_json()}


def _hold(settings: Settings, identity: str, digest: str, ref: TableRef, cost: Price) -> JsonDocument:
    """The call held for a person: an audit decision ``held`` naming the agent, and how to approve
    (the command; the UI's lake overview lists the held table with its launchpad link)."""
    reason = f"agent {identity} asked to approve plan {digest}: held for a person (require_human_approval)"
    record = AuditRecord(
        table_name=str(ref),
        kind="decision",
        decision="held",
        trigger="agent",
        reason=reason,
        cost_estimate_bytes=cost.total_bytes,
        results={"agent_hold": {"agent": identity, "plan_digest": digest, "price": cost.to_json()}},
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
        "rewrite_bytes": cost.rewrite_bytes,
        "price": cost.to_json(),
        "approve": {"command": approve_command(ref), "digest": digest},
        "audit_record_id": record.record_id if settings.audit.enabled else None,
    }
