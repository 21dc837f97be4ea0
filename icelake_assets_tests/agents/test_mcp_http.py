"""`icelake mcp --http` as a real process (`.venv/bin/icelake`), driven by the SDK's streamable HTTP
client (`mcp.client.streamable_http.streamable_http_client`, `ClientSession`) on one small lake
(SQLite catalog, pyiceberg; no Spark) with two agents: `operator` (may write) and `reader` (reads
only), each with its own token. A request without a token, with a wrong one, or with a token that is
nearly right gets 401; each token sees its own identity's tools only, and its calls are audited
under its identity; the server listens on loopback only and refuses any other --host."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
import pyarrow as pa
import pytest
from mcp import ClientSession, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from icelake_assets.agents.server import LOOPBACK_HOSTS, serve_http
from icelake_assets.catalog.connection import open_catalog
from icelake_assets.cli import main
from icelake_assets.settings import Settings
from icelake_assets_tests.conftest import catalog_name, new_lake
from icelake_assets_tests.operate.shapes import SCHEMA
from icelake_assets_tests.servers import free_port, stop_process_group

ROOT = Path(__file__).resolve().parents[2]
ICELAKE = Path(sys.executable).parent / "icelake"  # the venv's console script
TOKENS = {
    "operator": ("ICELAKE_TEST_OPERATOR_TOKEN", "op-" + "5f3a9c1e" * 4),
    "reader": ("ICELAKE_TEST_READER_TOKEN", "rd-" + "0b7d2e64" * 4),
}
from icelake_assets_tests.agents.test_mcp import READ_TOOLS  # noqa: E402 - one list of the read tools

WRITE_TOOL = "approve_maintenance"
pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

Body = Callable[[ClientSession], Coroutine[Any, Any, Any]]


@dataclass(frozen=True)
class Server:
    settings: Settings
    table: str
    url: str
    pid: int
    port: int


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """One `icelake mcp --http` on a free port of a lake with one table, stopped by its PID."""
    agents = {
        "operator": {
            "write": True,
            "require_human_approval": True,
            "token": "${ICELAKE_TEST_OPERATOR_TOKEN}",
        },
        "reader": {"token": "${ICELAKE_TEST_READER_TOKEN}"},
    }
    with pytest.MonkeyPatch.context() as mp:
        for var, token in TOKENS.values():
            mp.setenv(var, token)
        settings = new_lake(tmp_path_factory, extra={"agents": agents})
        name = catalog_name(settings)
        catalog = open_catalog(settings, name, create=True)
        catalog.create_namespace("ns")
        rows = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "payload": ["a", "b", "c"]})
        catalog.create_table(("ns", "t"), SCHEMA).append(rows)
    port = free_port()  # bound to port 0 on 127.0.0.1, then released for the server
    env = {
        **{k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ},
        "PYTHONPATH": str(ROOT),
        "ICELAKE_INVENTORY": "off",
        **dict(TOKENS.values()),
    }
    log = Path(settings.source).parent / "mcp-http.log"
    args = [str(ICELAKE), "--config", settings.source, "mcp", "--http", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(
            args, env=env, cwd=str(ROOT), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, f"icelake mcp --http exited {proc.returncode}:\n{log.read_text()}"
            if _listening(proc.pid):
                break
            assert time.monotonic() < deadline, f"icelake mcp --http did not listen:\n{log.read_text()}"
            time.sleep(0.2)
        assert f"serving http://127.0.0.1:{port}/mcp" in log.read_text()
        yield Server(settings, f"{name}.ns.t", f"http://127.0.0.1:{port}/mcp", proc.pid, port)
    finally:
        stop_process_group(proc)


def _listening(pid: int) -> list[tuple[str, int]]:
    """The (address, port) of every TCP socket the process (and its children) listens on."""
    procs = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    return [
        (c.laddr.ip, c.laddr.port)
        for p in procs
        for c in p.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN
    ]


def session(url: str, token: str | None, body: Body, scheme: str = "Bearer ") -> tuple[Any, list[int]]:
    """Runs ``body`` in a session of the SDK's client sending ``token`` (None: no Authorization
    header); returns its result (or the MCPError the session raised) and every HTTP status seen."""
    statuses: list[int] = []

    async def seen(response: httpx2.Response) -> None:
        statuses.append(response.status_code)
        if response.status_code == 401:
            assert response.headers["www-authenticate"].startswith('Bearer error="invalid_token"')

    async def run() -> Any:
        headers = {"Authorization": f"{scheme}{token}"} if token is not None else {}
        http = httpx2.AsyncClient(headers=headers, timeout=30, event_hooks={"response": [seen]})
        async with (
            http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as client,
        ):
            try:
                await client.initialize()
            except MCPError as err:
                return err
            return await body(client)

    return anyio.run(run), statuses


async def tool_names(client: ClientSession) -> set[str]:
    return {t.name for t in (await client.list_tools()).tools}


def doc(result: CallToolResult, error: bool = False) -> dict[str, Any]:
    assert result.is_error is error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def test_no_token_a_wrong_token_and_a_nearly_right_one_are_refused_with_401(server):
    right = TOKENS["reader"][1]
    cases = [("Bearer ", t) for t in (None, "wrong-" + "9" * 20, right[:-1], right + "0", right.upper())]
    for scheme, token in [*cases, ("", right), ("Basic ", right)]:  # a right token, not as a bearer's
        result, statuses = session(server.url, token, tool_names, scheme)
        assert isinstance(result, MCPError), (scheme, token, result)  # initialize itself is refused
        assert statuses == [401], (scheme, token, statuses)


def test_each_token_sees_and_calls_its_own_identitys_tools_only(server):
    async def operator(client: ClientSession) -> tuple[set[str], CallToolResult, CallToolResult]:
        findings = await client.call_tool("table_findings", {"table": server.table})
        approve = await client.call_tool(WRITE_TOOL, {"table": server.table})
        return await tool_names(client), findings, approve

    async def reader(client: ClientSession) -> tuple[set[str], CallToolResult, CallToolResult]:
        tables = await client.call_tool("list_tables", {})
        approve = await client.call_tool(WRITE_TOOL, {"table": server.table})
        return await tool_names(client), tables, approve

    (tools, findings, approve), statuses = session(server.url, TOKENS["operator"][1], operator)
    assert tools == READ_TOOLS | {WRITE_TOOL} and set(statuses) <= {200, 202}, statuses
    assert [t["table"] for t in doc(findings)["tables"]] == [server.table]
    # The write tool is the operator's: its call reaches the guards past `write` (nothing awaits approval).
    assert doc(approve, error=True)["error"]["guard"] == "plan"

    # The reader's token on the same server: the write tool is neither listed nor callable.
    (tools, tables, approve), _ = session(server.url, TOKENS["reader"][1], reader)
    assert tools == READ_TOOLS
    assert [t["table"] for t in doc(tables)["tables"]] == [server.table]
    error = doc(approve, error=True)["error"]
    assert error["kind"] == "unknown_tool" and WRITE_TOOL not in error["message"].split("(tools:")[1]

    # Every call is audited under the identity its token names.
    async def audit(client: ClientSession) -> CallToolResult:
        return await client.call_tool("audit_history", {"limit": 1000})

    records, _ = session(server.url, TOKENS["reader"][1], audit)
    calls = [
        (r["results"]["agent"], r["op"], r["decision"])
        for r in doc(records)["records"]
        if r["kind"] == "agent"
    ]
    assert calls == [
        ("operator", "table_findings", "answered"),
        ("operator", WRITE_TOOL, "refused"),
        ("reader", "list_tables", "answered"),
        ("reader", WRITE_TOOL, "failed"),
    ], json.dumps(calls)


def test_the_server_listens_on_loopback_only_and_refuses_another_host(server, capsys):
    listening = _listening(server.pid)
    assert ("127.0.0.1", server.port) in listening
    assert all(ipaddress.ip_address(ip).is_loopback for ip, _ in listening), listening

    # `icelake mcp --http --host H` exits 2 naming H, before it loads the settings or binds anything.
    for host in ("0.0.0.0", "::", "192.168.1.10", "example.com", "127.0.0.2"):
        assert main(["--config", "/nonexistent.yaml", "mcp", "--http", "--host", host]) == 2
        error = capsys.readouterr().err
        assert error.startswith(f"icelake: error: --host {host}: icelake mcp --http serves on loopback only")
        with pytest.raises(ValueError, match=rf"--host {re.escape(host)}: "):  # and so does serve_http
            serve_http(server.settings, "http://127.0.0.1:3000", host, 0)
    assert set(LOOPBACK_HOSTS) == {"127.0.0.1", "::1", "localhost"}
