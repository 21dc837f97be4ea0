"""`icelake mcp` through the SDK's own client: the server is started as a subprocess over stdio
(`mcp.client.stdio`, `ClientSession`) on one real lake (SQLite catalog, pyiceberg; no Spark). Read tools
answer with the CLI's JSON shapes; bad input is a typed error; write tools are absent unless the settings
allow them; a capped agent is refused naming the cap; an approve launches a real run on a real Dagster
webserver (no daemon: the run stays queued) whose record is in its DagsterInstance."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult

from icelake_assets.audit.store import AuditLog
from icelake_assets.settings import Settings, load_settings
from icelake_assets_tests.conftest import new_lake
from icelake_assets_tests.dagster_webserver import dagster_webserver
from icelake_assets_tests.operate.shapes import AUDIT, HEALTH, PLAN, POLICY, assert_shape, held_lake

ROOT = Path(__file__).resolve().parents[2]
READ_TOOLS = {
    "list_tables",
    "table_findings",
    "partition_health",
    "layout_usage",
    "plan",
    "policy",
    "column_statistics",
    "audit_history",
    "lake_overview",
}
# table_findings: the health shape, each finding with its numbers and its thresholds' sources.
FINDING = {
    **HEALTH["tables"][0]["findings"][0],
    "metrics": dict,
    "thresholds": [{"key": str, "value": str, "source": str}],
}
FINDINGS = {**HEALTH, "tables": [{**HEALTH["tables"][0], "findings": [FINDING]}]}
TOKEN = "tok-" + "0123456789abcdef" * 2
pytestmark = pytest.mark.timeout(600)

Session = Callable[[ClientSession], Coroutine[Any, Any, Any]]


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Settings, str, str]:
    """The held lake (ns.t held by the cost guard, ns.small proposed) with agents in its settings."""
    settings, held, small = held_lake(
        lambda thresholds=None, extra=None: new_lake(tmp_path_factory, thresholds, extra)
    )
    path = Path(settings.source)
    data = yaml.safe_load(path.read_text())
    data["agents"] = {
        "bot": {"write": True, "max_rewrite_bytes_per_day": 1_500_000},
        "tight": {"write": True, "max_rewrite_bytes_per_call": 1000},
        "careful": {"write": True, "require_human_approval": True},
        "http": {"token": "${ICELAKE_TEST_AGENT_TOKEN}"},
    }
    path.write_text(yaml.safe_dump(data))
    os.environ["ICELAKE_TEST_AGENT_TOKEN"] = TOKEN
    return load_settings(path), str(held), str(small)


def session(settings: Settings, body: Session, *args: str, env: dict[str, str] | None = None) -> Any:
    """Runs ``body`` against `icelake mcp ARGS` started over stdio by the SDK's client."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "icelake_assets.cli", "--config", settings.source, "mcp", *args],
        env={
            "PYTHONPATH": str(ROOT),
            "ICELAKE_INVENTORY": "off",
            "ICELAKE_TEST_AGENT_TOKEN": TOKEN,
            **(env or {}),
        },
        cwd=str(ROOT),
    )

    async def run() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as client:
            await client.initialize()
            return await body(client)

    return anyio.run(run)


def doc(result: CallToolResult, error: bool = False) -> dict[str, Any]:
    assert result.is_error is error, result.content
    assert isinstance(result.structured_content, dict)
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    return result.structured_content


def test_read_tools_answer_with_the_commands_shapes_and_bad_input_is_a_typed_error(lake):
    settings, held, small = lake

    async def body(client: ClientSession) -> dict[str, Any]:
        tools = {t.name for t in (await client.list_tools()).tools}
        resources = {str(r.uri) for r in (await client.list_resources()).resources}
        health_md = await client.read_resource("icelake://docs/health.md")
        out = {"tools": tools, "resources": resources, "health_md": health_md.contents[0].text}  # type: ignore[union-attr]
        calls = {
            "list_tables": {},
            "table_findings": {"table": held},
            "plan": {"table": held},
            "policy": {"table": held},
            "column_statistics": {"table": small, "read_puffin": True},
            "lake_overview": {},
            "missing": ("plan", {"table": held.rsplit(".", 1)[0] + ".nope"}),
            "bad_arg": ("plan", {"table": held, "sql": "drop table x"}),
            "bad_type": ("audit_history", {"limit": "many"}),
            "bad_since": ("audit_history", {"since": "yesterday-ish"}),
            "no_tool": ("run_sql", {}),
            "approve": ("approve_maintenance", {"table": held}),
        }
        for key, call in calls.items():
            name, args = call if isinstance(call, tuple) else (key, call)
            out[key] = await client.call_tool(name, args)
        out["audit_history"] = await client.call_tool("audit_history", {"limit": 100})
        return out

    started = time.monotonic()
    out = session(settings, body)
    assert out["tools"] == READ_TOOLS  # no write tool for an identity the settings do not let write
    assert out["resources"] == {"icelake://docs/health.md", "icelake://docs/loop.md"}
    assert out["health_md"] == (ROOT / "docs" / "health.md").read_text()
    assert_shape(doc(out["list_tables"]), HEALTH)
    assert {t["table"] for t in doc(out["list_tables"])["tables"]} == {held, small}
    findings = doc(out["table_findings"])
    assert_shape(findings, FINDINGS)
    small_files = next(f for f in findings["tables"][0]["findings"] if f["check"] == "small_files")
    assert small_files["metrics"] and any(
        t["key"] == "small_files.max_files_per_partition"
        and t["value"] == "20"
        and "icelake.yaml" in t["source"]
        for t in small_files["thresholds"]
    ), small_files
    plan = doc(out["plan"])
    assert_shape(plan, PLAN)
    assert plan["outcome"] == "held" and plan["approve"]["awaiting"] is True
    assert_shape(doc(out["policy"]), POLICY)
    stats = doc(out["column_statistics"])
    assert stats["schema"] == "icelake.statistics/v1" and stats["table"] == small
    assert stats["rows"] == 250 and stats["data_files"] == 25 and stats["data_bytes"] > 0
    assert [c["name"] for c in stats["columns"]] and all(c["ndv"] is None for c in stats["columns"])
    overview = doc(out["lake_overview"])
    assert_shape({k: v for k, v in overview.items() if k != "benefit"}, HEALTH)
    assert overview["overview"][0]["table"] in (held, small) and overview["benefit"] is None
    errors = {
        k: doc(out[k], error=True)["error"]
        for k in ("missing", "bad_arg", "bad_type", "bad_since", "no_tool", "approve")
    }
    assert errors["missing"]["kind"] == "unknown_table" and ".nope" in errors["missing"]["message"]
    assert errors["bad_arg"]["kind"] == "unknown_argument" and "'sql'" in errors["bad_arg"]["message"]
    assert errors["bad_type"]["kind"] == "bad_argument" and "limit" in errors["bad_type"]["message"]
    assert (
        errors["bad_since"]["kind"] == "bad_argument" and "invalid --since" in errors["bad_since"]["message"]
    )
    assert errors["no_tool"]["kind"] == "unknown_tool" and errors["approve"]["kind"] == "unknown_tool"
    assert all("Traceback" not in e["message"] for e in errors.values())
    # Every call of the session is in the audit log, under the caller's identity.
    trail = doc(out["audit_history"])
    assert_shape(trail, AUDIT)
    mine = [r for r in trail["records"] if r["kind"] == "agent"]
    assert [r["op"] for r in mine][:6] == [
        "list_tables",
        "table_findings",
        "plan",
        "policy",
        "column_statistics",
        "lake_overview",
    ]
    assert {r["results"]["agent"] for r in mine} == {"anonymous"}
    assert {r["decision"] for r in mine} == {"answered", "failed"}
    print(f"read session: {time.monotonic() - started:.1f}s")


def test_a_catalog_that_is_down_is_a_typed_error_and_secrets_never_show(tmp_path, lake):
    settings, held, _ = lake
    secret = "s3cr3t-" + "x" * 20
    config = tmp_path / "icelake.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "catalogs": {
                    "down": {"type": "rest", "uri": "http://127.0.0.1:9/catalog", "token": "${DOWN_TOKEN}"}
                },
                "audit": {"enabled": False},
            }
        )
    )
    os.environ["DOWN_TOKEN"] = secret
    down = load_settings(config)

    async def body(client: ClientSession) -> list[CallToolResult]:
        return [
            await client.call_tool("list_tables", {}),
            await client.call_tool("plan", {"table": "down.ns.t"}),
        ]

    results = session(down, body, env={"DOWN_TOKEN": secret})
    for result in results:
        error = doc(result, error=True)["error"]
        assert error["kind"] == "catalog_unavailable" and "down" in error["message"], error
        assert secret not in json.dumps(result.model_dump(mode="json"))


@pytest.fixture(scope="module")
def webserver(lake, tmp_path_factory):
    """`dagster-webserver` (no daemon) serving the lake's code location: approved runs stay queued."""
    settings, _, _ = lake
    with dagster_webserver(settings, tmp_path_factory.mktemp("dagster")) as served:
        yield served


def test_write_tools_launch_through_dagster_within_the_agents_caps(lake, webserver):
    from dagster import DagsterInstance

    settings, held, _ = lake
    url, home = webserver

    async def approve(client: ClientSession) -> tuple[set[str], list[CallToolResult]]:
        tools = {t.name for t in (await client.list_tools()).tools}
        first = await client.call_tool("approve_maintenance", {"table": held})
        return tools, [first, await client.call_tool("approve_maintenance", {"table": held})]

    async def once(client: ClientSession) -> CallToolResult:
        return await client.call_tool("approve_maintenance", {"table": held})

    tight = session(settings, once, "--agent", "tight", "--dagster-url", url)
    refused = doc(tight, error=True)["error"]
    assert (refused["kind"], refused["guard"]) == ("refused", "max_rewrite_bytes_per_call")
    assert "max_rewrite_bytes_per_call of 1,000 bytes" in refused["message"]

    hold = doc(session(settings, once, "--agent", "careful", "--dagster-url", url))
    assert hold["schema"] == "icelake.agent_hold/v1" and hold["guard"] == "require_human_approval"
    assert hold["approve"]["command"].startswith("icelake approve ")

    tools, (launched, second) = session(settings, approve, "--dagster-url", url, env={"ICELAKE_AGENT": "bot"})
    assert tools == READ_TOOLS | {"approve_maintenance"}
    approval = doc(launched)
    assert approval["schema"] == "icelake.approval/v1" and approval["approved_by"] == "agent:bot"
    with DagsterInstance.from_config(str(home)) as instance:
        run = instance.get_run_by_id(approval["run_id"])
        assert run is not None and run.tags["icelake/approved"] == "true"
        assert run.tags["icelake/approved_by"] == "agent:bot" and run.tags["icelake/table"] == held
    # The day's cap counts the first launch (from the audit records): the second is refused.
    over = doc(second, error=True)["error"]
    assert (over["kind"], over["guard"]) == ("refused", "max_rewrite_bytes_per_day")
    assert "launched 1 runs" in over["message"] and "1,500,000 bytes" in over["message"]
    records = [r for r in AuditLog.from_settings(settings).records(table=held) if r.kind == "agent"]
    calls = [(r.results["agent"], r.decision) for r in records if r.op == "approve_maintenance"]
    assert [c for c in calls if c[0] != "anonymous"] == [  # anonymous: the read test's unknown tool
        ("tight", "refused"),
        ("careful", "answered"),
        ("bot", "answered"),
        ("bot", "refused"),
    ]
