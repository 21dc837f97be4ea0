"""The MCP read tool `partition_health` on a real lake (SQLite catalog, pyiceberg), called through the
server `icelake mcp` builds (in process): listed as a read tool, it answers with the very document
`icelake health TABLE --partitions --json` prints, masked and audited like every other tool."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from icelake_assets.agents import read_tools
from icelake_assets.agents.server import build_server
from icelake_assets.audit.store import AuditLog
from icelake_assets.cli import main
from icelake_assets.settings import Settings
from icelake_assets_tests.operate.test_partition_health import degraded_lake

URL = "http://127.0.0.1:1"


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> tuple[Settings, str, str]:
    return degraded_lake(tmp_path_factory)


def _call(settings: Settings, name: str, arguments: dict[str, Any]) -> tuple[Any, Any]:
    async def body() -> tuple[Any, Any]:
        server = build_server(settings, None, URL)
        tools = {t.name: t for t in await server.list_tools()}
        return tools, await server.call_tool(name, arguments)

    return anyio.run(body)


def test_partition_health_answers_with_the_commands_json(lake, capsys):
    settings, days, flat = lake
    tools, result = _call(settings, "partition_health", {"table": days})
    tool = tools["partition_health"]
    assert tool.annotations.read_only_hint is True and set(tool.input_schema["properties"]) == {
        "table",
        "top",
    }
    assert result.is_error is False, result.content
    assert main(["--config", settings.source, "health", days, "--partitions", "--json"]) == 0
    assert result.structured_content == json.loads(capsys.readouterr().out)
    assert [p["key"] for p in result.structured_content["partitions"]] == ["2024-03-02", "2024-03-05"]
    top: Any = read_tools.partition_health(settings, days, top=1)["checks"]
    assert [o["key"] for o in top[0]["worst"]] == ["2024-03-02"]
    assert read_tools.partition_health(settings, flat)["partitioned"] is False
    calls = [r for r in AuditLog.from_settings(settings).records() if r.kind == "agent"]
    assert [(r.op, r.decision) for r in calls][-1:] == [("partition_health", "answered")]


def test_an_unknown_table_is_a_typed_error(lake):
    settings, days, _ = lake
    _, result = _call(settings, "partition_health", {"table": days.rsplit(".", 1)[0] + ".nope"})
    assert result.is_error is True
    error = result.structured_content["error"]
    assert error["kind"] == "unknown_table" and ".nope" in error["message"]


def test_the_lake_overview_counts_each_partitioned_tables_unhealthy_partitions(lake, capsys, monkeypatch):
    settings, days, flat = lake
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # no instance: the tool's benefit is None
    doc: Any = read_tools.overview(settings)
    counts = {t["table"]: t["unhealthy_partitions"] for t in doc["overview"]}
    assert counts == {days: 2, flat: None}  # null: unpartitioned
    assert main(["--config", settings.source, "health", "--overview", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert {t["table"]: t["unhealthy_partitions"] for t in printed["overview"]} == counts
