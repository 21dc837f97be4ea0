"""The operator commands on a real lake (SQLite catalog, pyiceberg; no Spark): `icelake plan`, `audit`,
`health --json`, `policy --json`, each JSON document checked against its documented shape
(docs/operating.md), and the held table shown in the UI's sensor observation and lake overview."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl

import pytest
from dagster import DagsterInstance

from icelake_assets.audit.records import AuditRecord
from icelake_assets.audit.store import AuditLog
from icelake_assets.cli import main
from icelake_assets.operate.audit_view import parse_since
from icelake_assets.orchestration.checks.asset_checks import HEALTH_JOB
from icelake_assets.orchestration.project import build_definitions
from icelake_assets.planning.approval import launchpad_path
from icelake_assets_tests.conftest import sensor_tick
from icelake_assets_tests.operate.shapes import (
    AUDIT,
    HEALTH,
    PLAN,
    POLICY,
    assert_shape,
    held_lake,
)


def _json(capsys, argv: list[str], code: int = 0) -> dict:
    assert main(argv) == code, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def lake(make_lake):
    return held_lake(make_lake)


def test_plan_of_a_held_table_names_the_guard_the_estimate_and_the_approval(lake, capsys):
    settings, held, small = lake
    doc = _json(capsys, ["--config", settings.source, "plan", str(held), "--json"])
    assert_shape(doc, PLAN)
    assert doc["table"] == str(held) and doc["asset_key"] == "/".join(held.asset_key_path)
    assert doc["outcome"] == "held" and doc["guards"]["verdict"] == "hold"
    assert "awaiting approval" in doc["guards"]["reason"]
    assert doc["enforce"] == {
        "action": "hold",
        "ops": ["expire_snapshots", "rewrite_data_files", "rewrite_manifests", "compute_statistics"],
    }
    # 50,000 rows and no statistics yet: the plan names the columns it would sketch.
    assert doc["statistics"]["columns"] and doc["statistics"]["snapshot_id"] is None
    assert doc["estimate"]["rewrite_bytes"] > doc["estimate"]["max_rewrite_bytes"] == 1024 * 1024
    assert doc["estimate"]["rewrite_files"] == 25 and doc["partitions"] == ["<unpartitioned>"]
    assert doc["approve"] == {"awaiting": True, "command": f"icelake approve {'/'.join(held.asset_key_path)}"}
    assert [o["op"] for o in doc["ops"]] == [
        "manage_restore_points",  # restore points off: decided, does not act
        "expire_data",  # retention not configured: decided, does not act
        "expire_snapshots",
        "rewrite_data_files",
        "rewrite_manifests",
        "compute_statistics",
    ]
    assert doc["orphans_evaluated"] is False
    # The digest names the plan: the same table state gives the same digest.
    again = _json(capsys, ["--config", settings.source, "plan", "/".join(held.asset_key_path), "--json"])
    assert again["digest"] == doc["digest"] and again["digest"].startswith("sha256:")

    # The small table is under the cap: allowed, and in mode propose only proposed.
    doc = _json(capsys, ["--config", settings.source, "plan", str(small), "--json", "--orphans"])
    assert_shape(doc, PLAN)
    assert doc["orphans_evaluated"] is True and "remove_orphan_files" in [o["op"] for o in doc["ops"]]
    assert (doc["guards"]["verdict"], doc["outcome"], doc["enforce"]["action"]) == (
        "allow",
        "proposed",
        "launch",
    )
    assert doc["approve"]["awaiting"] is True
    # How the sensor would launch it: small, in a run shared with other small tables.
    assert doc["launch"]["shared"] is True, doc["launch"]
    assert "shares a run with other small tables" in doc["launch"]["reason"]

    assert main(["--config", settings.source, "plan", str(held)]) == 0
    out = capsys.readouterr().out
    assert "guards: hold: rewrite of" in out and "awaiting approval: icelake approve" in out
    assert "launch: shares a run with other small tables" in out
    assert main(["--config", settings.source, "plan", f"{held.catalog}.ns.nope"]) == 2
    assert f"table {held.catalog}.ns.nope does not exist" in capsys.readouterr().err


def test_the_launchpad_link_carries_the_approval_tag_and_the_table():
    path = launchpad_path("icelake_maintenance__day_2024_01_01", ["lake", "o'brien", "café"])
    route, query = path.split("?")
    assert route == "/guess/icelake_maintenance__day_2024_01_01/playground/setup"
    assert parse_qsl(query) == [
        ("tags[0][key]", "icelake/approved"),
        ("tags[0][value]", "true"),
        ("assetSelection[0][assetKey][path][0]", "lake"),
        ("assetSelection[0][assetKey][path][1]", "o'brien"),
        ("assetSelection[0][assetKey][path][2]", "café"),
    ]


def test_audit_lists_the_trail_in_time_order_with_filters(lake, capsys):
    settings, held, small = lake
    now = datetime.now(UTC)
    log = AuditLog.from_settings(settings)
    log.append(
        [
            AuditRecord(
                str(held), "decision", "held", "sensor", reason="old", recorded_at=now - timedelta(days=2)
            ),
            AuditRecord(
                str(small),
                "decision",
                "proposed",
                "sensor",
                reason="mid",
                recorded_at=now - timedelta(hours=2),
            ),
            AuditRecord(
                str(held),
                "decision",
                "deferred",
                "sensor",
                reason="new",
                recorded_at=now - timedelta(minutes=5),
            ),
        ]
    )
    doc = _json(capsys, ["--config", settings.source, "audit", "--json"])
    assert_shape(doc, AUDIT)
    assert [r["reason"] for r in doc["records"]] == ["old", "mid", "new"]
    assert doc["log"].endswith("icelake.audit_log") and doc["table"] is None
    doc = _json(capsys, ["--config", settings.source, "audit", str(held), "--json"])
    assert [r["reason"] for r in doc["records"]] == ["old", "new"] and doc["table"] == str(held)
    doc = _json(capsys, ["--config", settings.source, "audit", "--since", "24h", "--json"])
    assert [r["reason"] for r in doc["records"]] == ["mid", "new"]
    doc = _json(capsys, ["--config", settings.source, "audit", "--limit", "2", "--json"])
    assert [r["reason"] for r in doc["records"]] == ["mid", "new"] and doc["limit"] == 2
    since = (now - timedelta(hours=1)).isoformat()
    doc = _json(capsys, ["--config", settings.source, "audit", "--since", since, "--json"])
    assert [r["reason"] for r in doc["records"]] == ["new"]

    assert main(["--config", settings.source, "audit", str(held)]) == 0
    out = capsys.readouterr().out
    assert "deferred" in out and "held" in out and "proposed" not in out
    assert main(["--config", settings.source, "audit", "--since", "yesterday"]) == 2
    assert "invalid --since" in capsys.readouterr().err


def test_since_takes_ages_and_iso_times():
    now = datetime(2026, 1, 31, 12, tzinfo=UTC)
    assert parse_since("24h", now) == now - timedelta(hours=24)
    assert parse_since("30m", now) == now - timedelta(minutes=30)
    assert parse_since("7d", now) == now - timedelta(days=7)
    assert parse_since("2026-01-30T10:00:00", now) == datetime(2026, 1, 30, 10, tzinfo=UTC)
    assert parse_since("2026-01-30T10:00:00+02:00", now) == datetime(2026, 1, 30, 8, tzinfo=UTC)


def test_health_and_policy_as_json(lake, capsys):
    settings, held, small = lake
    doc = _json(capsys, ["--config", settings.source, "health", "--json", "--overview"])
    assert_shape(doc, HEALTH)
    assert {t["table"] for t in doc["tables"]} == {str(held), str(small)}
    assert doc["problems"] == [] and doc["overview"][0]["rank"] == 1
    table = next(t for t in doc["tables"] if t["table"] == str(held))
    assert table["stats"]["data_files"] == 25 and "orphan_files" in table["not_evaluated"]
    assert any(f["check"] == "small_files" and not f["passed"] for f in table["findings"])
    doc = _json(capsys, ["--config", settings.source, "health", str(small), "--json"])
    assert doc["overview"] is None and [t["table"] for t in doc["tables"]] == [str(small)]

    doc = _json(capsys, ["--config", settings.source, "policy", str(held), "--json"])
    assert_shape(doc, POLICY)
    assert doc["exists"] is True and doc["mode"] == "enforce"
    cap = next(v for v in doc["values"] if v["key"] == "guards.max_rewrite_bytes")
    assert cap["value"] == 1024 * 1024 and "icelake.yaml" in cap["source"]
    doc = _json(capsys, ["--config", settings.source, "policy", f"{held.catalog}.ns.nope", "--json"], code=1)
    assert doc["exists"] is False


def test_the_ui_shows_held_tables_with_the_guard_the_estimate_and_how_to_approve(lake, tmp_path):
    settings, held, small = lake
    defs = build_definitions(settings)
    with DagsterInstance.local_temp(str(tmp_path)) as instance:
        tick = sensor_tick(defs, settings, instance)
        assert tick.run_requests == []
        observed = {tuple(e.asset_key.path): e.metadata for e in tick.asset_events}
        md = observed[tuple(held.asset_key_path)]
        assert md["sensor/outcome"].value == "held"
        assert md["sensor/waits_for"].value.startswith("approval: the rewrite is over the cost cap")
        assert md["sensor/estimate_bytes"].value > 1024 * 1024
        approve = md["sensor/approve"].value
        assert f"`icelake approve {'/'.join(held.asset_key_path)}`" in approve
        assert (
            "](/guess/icelake_maintenance/playground/setup?tags%5B0%5D%5Bkey%5D=icelake%2Fapproved" in approve
        )
        assert observed[tuple(small.asset_key_path)]["sensor/outcome"].value == "proposed"

        result = defs.resolve_job_def(HEALTH_JOB).execute_in_process(instance=instance, raise_on_error=False)
        [overview] = result.asset_materializations_for_node("icelake__health_overview")
        meta = overview.metadata
        assert (meta["tables/held"].value, meta["tables/proposed"].value, meta["tables/deferred"].value) == (
            1,
            1,
            0,
        )
        waiting = meta["waiting"].value
        assert f"| {held} | held | rewrite of" in waiting and "launchpad, approval filled in" in waiting
        assert f"| {small} | proposed |" in waiting
