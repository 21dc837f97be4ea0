"""The tools and resources ``icelake mcp`` registers on its server: thin, typed signatures (their
arguments and descriptions are what an agent sees) over agents/read_tools.py and agents/guardrails.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import FunctionResource
from mcp_types import ToolAnnotations
from pydantic import Field

from icelake_assets.agents import guardrails, read_tools
from icelake_assets.agents.read_tools import JsonDocument
from icelake_assets.settings import Settings

Table = Annotated[
    str,
    Field(description="catalog.namespace.table, namespace.table (first catalog) or catalog/namespace/table"),
]
READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
# Destructive: an approved run rewrites files, and may delete rows (expire_data) and old snapshots.
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def register_tools(server: MCPServer[Any], s: Settings, write: bool, dagster_url: str) -> None:
    @server.tool(annotations=READ)
    def list_tables() -> JsonDocument:
        """Every table of the lake with its health status, score (0-100), numbers and findings
        (icelake.health/v1, as `icelake health --json`); tables that could not be read under problems."""
        return read_tools.list_tables(s)

    @server.tool(annotations=READ)
    def table_findings(table: Table) -> JsonDocument:
        """One table's findings (icelake.health/v1), each with its numbers (metrics) and the policy
        values that set its thresholds, each with its source."""
        return read_tools.table_findings(s, table)

    @server.tool(annotations=READ)
    def partition_health(
        table: Table,
        top: Annotated[int, Field(description="the worst partitions listed per check", ge=1, le=1000)] = 20,
    ) -> JsonDocument:
        """The table's unhealthy partitions by Dagster partition key (what a backfill selects), each
        with its failing checks (small_files, delete_files, layout_drift) and their numbers, and per
        check how many partitions fail and the worst ones (icelake.partition_health/v1, as
        `icelake health TABLE --partitions --json`)."""
        return read_tools.partition_health(s, table, top)

    @server.tool(annotations=READ)
    def layout_usage(table: Table) -> JsonDocument:
        """How the table's recorded scans (Iceberg scan reports) filter it: columns by kind and count,
        selectivity, projected columns, the heaviest queries; each candidate layout's predicted files
        read per query (a sample replayed with Iceberg's inclusive-metrics rules) and the choice, with
        its reason (icelake.layout/v1, as `icelake layout show TABLE --json`)."""
        return read_tools.layout_usage(s, table)

    @server.tool(annotations=READ)
    def plan(
        table: Table,
        orphans: Annotated[bool, Field(description="also list storage for orphan files (slower)")] = False,
    ) -> JsonDocument:
        """What maintenance would do to the table now, op by op and why, the partitions, the cost
        estimate, the guards' verdict and whether it awaits approval (icelake.plan/v1, `icelake plan`)."""
        return read_tools.plan(s, table, orphans)

    @server.tool(annotations=READ)
    def policy(
        table: Table,
        changed: Annotated[bool, Field(description="only the values that are not built-in defaults")] = False,
    ) -> JsonDocument:
        """The table's effective policy, each value with its source (icelake.policy/v1, `icelake policy`)."""
        return read_tools.policy(s, table, changed)

    @server.tool(annotations=READ)
    def column_statistics(
        table: Table,
        read_puffin: Annotated[
            bool, Field(description="read the Puffin file's footer too (one small read; no data scan)")
        ] = False,
    ) -> JsonDocument:
        """Rows, data file sizes and each column's distinct values (NDV) from the Puffin statistics the
        metadata references, without scanning data (icelake.statistics/v1)."""
        return read_tools.column_statistics(s, table, read_puffin)

    @server.tool(annotations=READ)
    def audit_history(
        table: Annotated[str | None, Field(description="one table (default: every table)")] = None,
        run_id: Annotated[str | None, Field(description="the records of one Dagster run")] = None,
        since: Annotated[str | None, Field(description="an ISO time or an age: 30m, 24h, 7d")] = None,
        limit: Annotated[int | None, Field(description="the most recent N records", ge=1, le=1000)] = 50,
    ) -> JsonDocument:
        """The audit trail oldest first: decisions, ops, validations, rollbacks, approvals and agents'
        calls (icelake.audit/v1, `icelake audit --json`)."""
        return read_tools.audit(s, table, run_id, since, limit)

    @server.tool(annotations=READ)
    def lake_overview() -> JsonDocument:
        """What to fix first, by the file opens each table's maintenance would save per full scan, and
        `benefit`: what past maintenance runs bought (icelake.health/v1 with overview and benefit)."""
        return read_tools.overview(s)

    if not write:
        return

    @server.tool(annotations=WRITE)
    def approve_maintenance(
        table: Table,
        digest: Annotated[
            str | None, Field(description="approve only this plan (the digest the plan tool returned)")
        ] = None,
    ) -> JsonDocument:
        """Approve and launch a held or proposed table's maintenance through Dagster (icelake.approval/v1),
        within this agent's caps on the bytes every op rewrites or deletes (`price`); held for a person
        instead when the settings require it (icelake.agent_hold/v1). A row expiry that waits for a person
        (a first expiry) is refused. A refusal names the guard."""
        return guardrails.approve_maintenance(s, guardrails.caller(), table, dagster_url, digest)


def register_docs(server: MCPServer[Any], folder: Path, names: Sequence[str]) -> None:
    """The docs an agent reads to understand a finding or a decision, read from disk when asked."""
    for name in names:
        path = folder / name
        if not path.is_file():  # an installed package without $ICELAKE_DOCS: no resource, said once
            continue
        server.add_resource(
            FunctionResource(
                uri=f"icelake://docs/{name}",
                name=name,
                description=f"docs/{name} of icelake_assets",
                mime_type="text/markdown",
                fn=path.read_text,
            )
        )
