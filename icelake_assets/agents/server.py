"""``icelake mcp``: the operator tools as an MCP server (the official SDK's MCPServer), over stdio or
streamable HTTP on 127.0.0.1 (docs/agents.md).

Every call goes through :meth:`IcelakeMCP.call_tool`, the one place that
- refuses an unknown tool or argument (the SDK ignores unknown arguments) with a typed error;
- knows the caller: ``--agent``/``$ICELAKE_AGENT`` over stdio, the bearer token's identity over HTTP;
- turns every failure into ``icelake.error/v1`` (kind, message, the guard that refused): no traceback;
- masks every secret of the settings in the result (catalog credentials, agents' tokens);
- records the call in the audit log (kind ``agent``, op the tool, ``results.agent`` the identity).
"""

from __future__ import annotations

import hmac
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, TextContent, Tool as MCPTool

from icelake_assets.agents import guardrails, read_tools
from icelake_assets.agents.errors import error_body, secret_values
from icelake_assets.agents.tools import register_docs, register_tools
from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.writer import write_audit
from icelake_assets.settings import Settings
from icelake_assets.types import IcelakeError

AGENT_ENV = "ICELAKE_AGENT"
DOCS = ("health.md", "loop.md")
# The hosts --http may bind: loopback only, and only the names the SDK guards against DNS rebinding
# (it checks the Host and Origin headers of every request for these three).
LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")


def docs_folder() -> Path:
    """The docs the resources serve: the source tree's docs/ (next to the package), or
    ``$ICELAKE_DOCS`` for an installed package (the wheel ships the code only)."""
    return Path(os.environ.get("ICELAKE_DOCS") or Path(__file__).resolve().parents[2] / "docs")


class TokenIdentities:
    """The SDK's TokenVerifier: a bearer token is an agent's when it equals its ``token`` setting."""

    def __init__(self, settings: Settings) -> None:
        self._tokens = {a.token: name for name, a in settings.agents.items() if a.token}

    async def verify_token(self, token: str) -> AccessToken | None:
        for known, name in self._tokens.items():
            if hmac.compare_digest(known.encode(), token.encode()):
                return AccessToken(token=token, client_id=name, scopes=[])
        return None


class IcelakeMCP(MCPServer[Any]):
    """The MCP server of one settings file and one Dagster webserver (the approve tool's)."""

    def __init__(self, settings: Settings, identity: str | None, dagster_url: str, **kwargs: Any) -> None:
        super().__init__("icelake", instructions=INSTRUCTIONS, **kwargs)
        self.lake = settings
        self.stdio_identity = identity  # None over HTTP: each request's token names the caller
        self.dagster_url = dagster_url
        self._secrets = secret_values(settings)

    def identity(self) -> str:
        token = get_access_token()
        if token is not None:
            return token.client_id
        return self.stdio_identity or guardrails.ANONYMOUS

    async def list_tools(self) -> list[MCPTool]:
        """The caller's tools: over HTTP one server holds the write tool when any agent may write, and
        an identity that may not write neither sees it nor calls it (as over stdio)."""
        may_write = guardrails.may_write(self.lake, self.identity())
        return [t for t in await super().list_tools() if may_write or _reads(t)]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:  # never an InputRequiredResult: no tool asks for input
        who = self.identity()
        try:
            schemas = {t.name: set(t.input_schema.get("properties", {})) for t in await self.list_tools()}
            if name not in schemas:  # a tool of another identity is as unknown as one that does not exist
                raise UnknownName(
                    "unknown_tool", f"unknown tool {name!r} (tools: {', '.join(sorted(schemas))})"
                )
            unknown = sorted(set(arguments) - schemas[name])
            if unknown:
                raise UnknownName(
                    "unknown_argument",
                    f"unknown argument(s) {', '.join(map(repr, unknown))} of {name} "
                    f"(arguments: {', '.join(sorted(schemas[name])) or 'none'})",
                )
            token = guardrails.CALLER.set(who)
            try:
                result = await super().call_tool(name, arguments, context)
            finally:
                guardrails.CALLER.reset(token)
            if type(result) is not CallToolResult:  # an elicitation: none of these tools asks for input
                raise ToolFailed(CallToolResult(content=[], is_error=True))
            if result.is_error:  # the SDK's own: arguments of the wrong type, a tool that raised
                raise ToolFailed(result)
            body: dict[str, Any] = result.structured_content or {}
            outcome = "answered"
        except Exception as err:
            body = error_body(name, err)
            outcome = "refused" if body["error"]["kind"] == "refused" else "failed"
        body = self._masked(body)
        await anyio.to_thread.run_sync(self._audit, who, name, arguments, body, outcome)
        text = json.dumps(body, indent=1, default=str)
        return CallToolResult(
            content=[TextContent(text=text)], structured_content=body, is_error=outcome != "answered"
        )

    def _masked(self, body: dict[str, Any]) -> dict[str, Any]:
        text = json.dumps(body, default=str)
        for secret in self._secrets:
            text = text.replace(json.dumps(secret)[1:-1], "***")
        return json.loads(text)

    def _audit(
        self, who: str, tool: str, arguments: dict[str, Any], body: dict[str, Any], outcome: str
    ) -> None:
        """One audit record per call (best effort: a catalog that is down loses the record, not the answer)."""
        s = self.lake
        table = f"{s.audit.catalog or next(iter(s.catalogs))}.{s.audit.table}"  # lake-wide calls
        if isinstance(arguments.get("table"), str):
            try:
                table = str(read_tools.table_ref(s, arguments["table"]))
            except Exception:  # noqa: S110 - a bad name is recorded under the lake-wide name
                pass
        error = body.get("error") if outcome != "answered" else None
        # What the guards priced (every op's bytes); the day's ledger is guardrails' own agent_spend records.
        price = body.get("price") if tool == guardrails.APPROVE_TOOL else None
        cost = price.get("total_bytes") if isinstance(price, dict) else None
        record = AuditRecord(
            table_name=table,
            kind="agent",
            decision=outcome,
            trigger="agent",
            op=tool,
            run_id=body.get("run_id") if isinstance(body.get("run_id"), str) else None,
            reason=(error or {}).get("message", "")[:500] if error else f"{tool} answered {who}",
            cost_estimate_bytes=cost if isinstance(cost, int) else None,
            results=self._masked(
                {
                    "agent": who,
                    "arguments": {
                        k: v for k, v in arguments.items() if isinstance(v, str | int | bool | None)
                    },
                    "schema": body.get("schema"),
                    "run_id": body.get("run_id"),
                    **({"error": error} if error else {}),
                }
            ),
        )
        done = write_audit(s, [record])
        if done.log_error:
            print(f"icelake mcp: warning: the call was not audited: {done.log_error}", file=sys.stderr)


def _reads(tool: MCPTool) -> bool:
    return tool.annotations is not None and tool.annotations.read_only_hint is True


class UnknownName(IcelakeError, LookupError):
    """A tool or argument the server does not know (``kind`` names which)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class ToolFailed(IcelakeError, RuntimeError):
    """The SDK answered the call with an error (its text: the tool's message or the bad argument)."""

    def __init__(self, result: CallToolResult) -> None:
        text = " ".join(c.text for c in result.content if isinstance(c, TextContent))
        super().__init__(text or "the tool failed")


INSTRUCTIONS = (
    "Operator tools of an Apache Iceberg lake kept by icelake_assets. Start with list_tables or "
    "lake_overview, then table_findings, plan, policy, column_statistics and audit_history of a table. "
    "Read the resources icelake://docs/health.md (what each finding means) and icelake://docs/loop.md "
    "(how maintenance decides). Tables are named catalog.namespace.table or catalog/namespace/table."
)


def build_server(settings: Settings, identity: str | None, dagster_url: str) -> IcelakeMCP:
    """The stdio server of ``identity``: the read tools, the docs resources, and the write tool when
    the identity may write."""
    server = IcelakeMCP(settings, identity or guardrails.ANONYMOUS, dagster_url)
    register(server, settings, http=False)
    return server


def register(server: IcelakeMCP, s: Settings, http: bool) -> None:
    register_tools(server, s, _writers(s, server.stdio_identity, http), server.dagster_url)
    register_docs(server, docs_folder(), DOCS)


def _writers(s: Settings, identity: str | None, http: bool) -> bool:
    if http:
        return any(a.write and a.token for a in s.agents.values())
    return guardrails.may_write(s, identity or guardrails.ANONYMOUS)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def loopback(host: str) -> str:
    """``host`` when it is one of LOOPBACK_HOSTS; any other address refused, naming it."""
    if host not in LOOPBACK_HOSTS:
        raise ValueError(
            f"--host {host}: icelake mcp --http serves on loopback only ({', '.join(LOOPBACK_HOSTS)}); "
            "reach it from another host through an SSH tunnel or a proxy that terminates TLS"
        )
    return host


def serve_http(settings: Settings, dagster_url: str, host: str, port: int) -> None:
    """Streamable HTTP at http://host:port/mcp on loopback; every request needs a bearer token of an agent."""
    loopback(host)
    if not any(a.token for a in settings.agents.values()):
        raise ValueError(
            f"--http needs an agent with a token in {settings.source} (agents.<name>.token: ${{VAR}}): "
            "every HTTP request names its agent by its bearer token"
        )
    port = port or free_port()
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    server = IcelakeMCP(
        settings,
        None,
        dagster_url,
        token_verifier=TokenIdentities(settings),
        auth=AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False),
    )
    register(server, settings, http=True)
    print(f"icelake mcp: serving {base}/mcp", file=sys.stderr, flush=True)
    anyio.run(lambda: server.run_streamable_http_async(host=host, port=port))


def cmd_mcp(config: str | None, agent: str | None, http: bool, host: str, port: int, dagster_url: str) -> int:
    """``icelake mcp``: serve until the client closes stdin (stdio) or the process is stopped (HTTP)."""
    from icelake_assets.settings import load_settings
    from icelake_assets.settings.asset_keys import use_asset_keys

    if http:  # before the settings load: nothing is opened for a server that will not start
        loopback(host)
    settings = load_settings(config)
    use_asset_keys(settings.asset_keys)
    if http:
        serve_http(settings, dagster_url, host, port)
    else:
        build_server(settings, agent or os.environ.get(AGENT_ENV) or None, dagster_url).run("stdio")
    return 0
