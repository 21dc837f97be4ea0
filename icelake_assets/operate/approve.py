"""``icelake approve TABLE``: launch a held (or proposed) table's maintenance through Dagster, approved.

1. The table's plan now (operate/plan.py, the sensor's own decision): it must await approval (held by
   the cost guard, or proposed in mode propose); with ``expect_digest`` it must be the plan reviewed.
2. The running webserver names the table's maintenance job and code location (GraphQL ``assetNode``).
3. One run of that job, selecting the table only, is submitted with ``DagsterGraphQLClient``: the
   sensor's tags (``icelake/table``, ``icelake/trigger=manual``, ``icelake/ops``, ``icelake/signal``)
   plus ``icelake/approved=true`` (the rewrite's cost guard lets it pass), ``icelake/approved_by``
   and ``icelake/plan_digest``. Dagster's run queue and pools apply as to any run.
4. Once submitted, the approval is an audit record: decision ``launched``, trigger ``manual``, the run
   id, and ``results.approval`` = who, when, which plan (digest), job and webserver.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.operate.plan import TablePlan, plan_table
from icelake_assets.orchestration.assets.graph import MAINTENANCE_JOB  # the whole-table jobs' name (prefix)

# The run tags the maintenance sensor puts on its runs, same keys.
from icelake_assets.orchestration.sensors.maintenance import OPS_TAG, SIGNAL_TAG, TABLE_TAG, TRIGGER_TAG
from icelake_assets.planning.approval import APPROVED_BY_TAG, PLAN_DIGEST_TAG
from icelake_assets.planning.guards import APPROVAL_TAG
from icelake_assets.settings import Settings
from icelake_assets.settings.asset_keys import asset_key_path
from icelake_assets.types import IcelakeError, TableRef

APPROVAL_SCHEMA = "icelake.approval/v1"

ASSET_JOBS = """query($key: AssetKeyInput!) { assetNodeOrError(assetKey: $key) { __typename
  ... on AssetNode { jobNames repository { name location { name } } }
  ... on AssetNotFoundError { message } } }"""


_NOT_AWAITING = {
    "launched": "the sensor launches its maintenance by itself (mode enforce, no guard holds it)",
    "observed": "its mode is observe: the sensor only checks it",
    "deferred": "deferred while writers are active",
    "skipped": "nothing to do",
}


class ApprovalError(IcelakeError, RuntimeError):
    """The approval could not be carried out (webserver down, table or job unknown to Dagster)."""


class NotAwaitingApproval(IcelakeError, RuntimeError):
    """The table's plan awaits no approval (nothing to do, writers active, already launched...)."""


@dataclass(frozen=True)
class JobTarget:
    job: str
    location: str
    repository: str


@dataclass(frozen=True)
class Approval:
    table: str
    run_id: str
    job: str
    dagster_url: str
    approved_by: str
    approved_at: datetime
    tags: Mapping[str, str]
    plan: TablePlan
    audit_record_id: str | None  # None: the audit log is disabled in the settings

    @property
    def run_url(self) -> str:
        return f"{self.dagster_url.rstrip('/')}/runs/{self.run_id}"

    def to_json(self) -> dict[str, Any]:
        """The documented JSON shape ``icelake.approval/v1`` (docs/operating.md)."""
        return {
            "schema": APPROVAL_SCHEMA,
            "table": self.table,
            "run_id": self.run_id,
            "run_url": self.run_url,
            "job": self.job,
            "dagster_url": self.dagster_url,
            "approved_by": self.approved_by,
            "approved_at": self.approved_at.isoformat(),
            "plan_digest": self.plan.digest,
            "audit_record_id": self.audit_record_id,
            "tags": dict(self.tags),
            "plan": self.plan.to_json(),
        }


class DagsterWebserver:
    """The webserver's GraphQL API at ``url`` (http[s]://host[:port][/prefix])."""

    def __init__(self, url: str, timeout: float = 30) -> None:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"invalid --dagster-url {url!r}: expected http://host:port")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._parts = parts

    def _query(self, query: str, variables: Mapping[str, Any]) -> dict[str, Any]:
        import requests

        try:
            response = requests.post(
                f"{self.url}/graphql",
                json={"query": query, "variables": dict(variables)},
                timeout=self.timeout,
            )
            response.raise_for_status()
            body = response.json()
        except (requests.RequestException, ValueError) as err:
            raise ApprovalError(
                f"the Dagster webserver at {self.url} does not answer ({type(err).__name__}): start it "
                "(make run) or name it with --dagster-url"
            ) from err
        if body.get("errors"):
            raise ApprovalError(f"the Dagster webserver at {self.url} refused the query: {body['errors']}")
        return body["data"]

    def maintenance_job(self, ref: TableRef) -> JobTarget:
        """The table's whole-table maintenance job (``icelake_maintenance`` or ``icelake_maintenance__...``)."""
        node = self._query(ASSET_JOBS, {"key": {"path": asset_key_path(ref)}})["assetNodeOrError"]
        if node["__typename"] != "AssetNode":
            raise ApprovalError(
                f"{ref} is not an asset of the Dagster webserver at {self.url} ({node.get('message', '')}); "
                "is it the lake's webserver, and was its code location reloaded since the table was created?"
            )
        jobs = [j for j in node["jobNames"] if j == MAINTENANCE_JOB or j.startswith(MAINTENANCE_JOB + "__")]
        if not jobs:
            raise ApprovalError(
                f"no maintenance job of {ref} at {self.url}: its jobs are {', '.join(node['jobNames']) or 'none'}"
            )
        repo = node["repository"]
        return JobTarget(jobs[0], repo["location"]["name"], repo["name"])

    def submit(self, target: JobTarget, asset_path: Sequence[str], tags: Mapping[str, str]) -> str:
        """Submits one run of the job selecting ``asset_path``; returns its run id."""
        from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError

        p = self._parts
        client = DagsterGraphQLClient(
            p.hostname or "",
            port_number=p.port,
            use_https=p.scheme == "https",
            timeout=int(self.timeout),
            path_prefix=p.path.rstrip("/"),
        )
        try:
            return client.submit_job_execution(
                target.job,
                repository_location_name=target.location,
                repository_name=target.repository,
                run_config={},
                tags=dict(tags),
                asset_selection=[list(asset_path)],
            )
        except DagsterGraphQLClientError as err:
            raise ApprovalError(f"Dagster did not launch {target.job}: {err}") from err


def approval_tags(plan: TablePlan, by: str) -> dict[str, str]:
    return {
        TABLE_TAG: plan.table,
        TRIGGER_TAG: "manual",
        SIGNAL_TAG: plan.guards_reason[:200],
        OPS_TAG: ",".join(plan.acting),
        APPROVAL_TAG: "true",
        APPROVED_BY_TAG: by[:200],
        PLAN_DIGEST_TAG: plan.digest,
    }


def approve_table(
    settings: Settings,
    ref: TableRef,
    dagster_url: str,
    by: str,
    expect_digest: str | None = None,
    webserver: Callable[[str], DagsterWebserver] = DagsterWebserver,
) -> Approval:
    """Approve and launch (see the module docstring). Raises NotAwaitingApproval when the plan awaits
    no approval or is not ``expect_digest``; ApprovalError when Dagster cannot launch it."""
    server = webserver(dagster_url)  # a bad URL fails before the lake is read
    plan = plan_table(settings, ref)
    if not plan.awaiting_approval:
        raise NotAwaitingApproval(
            f"{ref} awaits no approval: {_NOT_AWAITING.get(plan.outcome, plan.outcome)} "
            f"({plan.guards_reason}); see `icelake plan {'/'.join(ref.asset_key_path)}`"
        )
    if expect_digest and expect_digest != plan.digest:
        raise NotAwaitingApproval(
            f"{ref}: the plan changed since {expect_digest} (now {plan.digest}): review `icelake plan` again"
        )
    target = server.maintenance_job(ref)
    tags = approval_tags(plan, by)
    run_id = server.submit(target, asset_key_path(ref), tags)
    approved_at = datetime.now(UTC)
    record = AuditRecord(
        table_name=str(ref),
        kind="decision",
        decision="launched",
        trigger="manual",
        run_id=run_id,
        reason=f"approved by {by}: {plan.guards_reason}",
        signals={o.op: o.signals for o in plan.ops},
        partitions=plan.partitions,
        partitions_reason="compaction candidates" if plan.partitions else None,
        cost_estimate_bytes=plan.estimate.rewrite_bytes,
        snapshot_before=plan.snapshot_id,
        results={
            "approval": {
                "approved_by": by,
                "approved_at": approved_at.isoformat(),
                "plan_digest": plan.digest,
                "plan_outcome": plan.outcome,
                "job": target.job,
                "dagster_url": server.url,
                "ops": list(plan.acting),
            }
        },
        recorded_at=approved_at,
    )
    try:
        written = AuditLog.from_settings(settings).append(record)
    except Exception as err:
        raise ApprovalError(
            f"run {run_id} of {target.job} was launched for {ref}, but the approval was not recorded "
            f"in the audit log: {err}"
        ) from err
    _metrics(settings, record)
    return Approval(
        str(ref),
        run_id,
        target.job,
        server.url,
        by,
        approved_at,
        tags,
        plan,
        record.record_id if written else None,
    )


def _metrics(settings: Settings, record: AuditRecord) -> None:
    """The decision counts and the table's awaiting-approval gauge follow the approval (best effort:
    the run is launched and audited whatever the metrics' storage says)."""
    from icelake_assets.audit.metrics import MetricsWriter

    try:
        metrics = MetricsWriter.from_settings(settings)
        metrics.record(record)
        metrics.flush()
    except Exception as err:  # metrics never fail an approval: said, not raised
        print(f"icelake: warning: metrics of the approval not written: {err}", file=sys.stderr)
