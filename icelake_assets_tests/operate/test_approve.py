"""`icelake approve` end to end against a real Dagster webserver (the product's own code location on a
real lake, no daemon: approved runs stay queued, so no Spark): a held table is approved, one run of its
maintenance job is submitted selecting that table with the approval tags, and the audit log records who,
when and which plan. Then the UI path: the launchpad link the sensor shows, opened in Chromium, launches
an approved run with nothing typed (skipped without Playwright or Chromium)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests

from icelake_assets.audit.store import AuditLog
from icelake_assets.cli import main
from icelake_assets.planning.approval import launchpad_path
from icelake_assets_tests.dagster_webserver import dagster_webserver
from icelake_assets_tests.operate.shapes import APPROVAL, assert_shape, held_lake
from icelake_assets_tests.servers import free_port

CHROMIUM = Path("/usr/bin/chromium")
RUN = """query($id: ID!) { runOrError(runId: $id) { __typename ... on Run {
  jobName status tags { key value } assetSelection { path } } } }"""
RUNS = """{ runsOrError { ... on Runs { results { runId jobName tags { key value } assetSelection { path } } } } }"""

pytestmark = pytest.mark.timeout(400)


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    body = requests.post(
        f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=30
    ).json()
    assert not body.get("errors"), body
    return body["data"]


@pytest.fixture
def webserver(make_lake, tmp_path):
    """The lake with a held table, and `dagster-webserver` (no daemon) serving its code location."""
    settings, held, small = held_lake(make_lake)
    with dagster_webserver(settings, tmp_path) as (url, _home):
        yield settings, held, small, url


def _tags(run: dict) -> dict[str, str]:
    return {t["key"]: t["value"] for t in run["tags"]}


def test_approve_launches_the_held_maintenance_and_records_the_approval(webserver, capsys):
    settings, held, small, url = webserver
    assert main(["--config", settings.source, "plan", str(held), "--json"]) == 0
    digest = json.loads(capsys.readouterr().out)["digest"]

    argv = ["--config", settings.source, "approve", "/".join(held.asset_key_path), "--dagster-url", url]
    assert main([*argv, "--by", "alice", "--digest", digest, "--json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert_shape(doc, APPROVAL)
    assert (doc["table"], doc["approved_by"], doc["plan_digest"], doc["job"]) == (
        str(held),
        "alice",
        digest,
        "icelake_maintenance",
    )
    assert doc["run_url"] == f"{url}/runs/{doc['run_id']}" and doc["plan"]["outcome"] == "held"

    # One run of the table's maintenance job, the table only, with the approval and the sensor's tags.
    run = graphql(url, RUN, {"id": doc["run_id"]})["runOrError"]
    assert run["__typename"] == "Run" and run["jobName"] == "icelake_maintenance"
    assert run["assetSelection"] == [{"path": held.asset_key_path}]
    tags = _tags(run)
    assert tags["icelake/approved"] == "true" and tags["icelake/approved_by"] == "alice"
    assert tags["icelake/plan_digest"] == digest and tags["icelake/table"] == str(held)
    assert tags["icelake/trigger"] == "manual" and tags["icelake/ops"].split(",")[1] == "rewrite_data_files"
    assert run["status"] == "QUEUED"  # no daemon here: the run queue starts it under `make run`

    # The audit records who, when and which plan, tied to the run.
    [record] = [
        r for r in AuditLog.from_settings(settings).records(table=str(held)) if r.run_id == doc["run_id"]
    ]
    assert (record.kind, record.decision, record.trigger) == ("decision", "launched", "manual")
    assert record.record_id == doc["audit_record_id"] and record.reason.startswith(
        "approved by alice: rewrite of"
    )
    approval = record.results["approval"]
    assert approval["approved_by"] == "alice" and approval["plan_digest"] == digest
    assert approval["approved_at"] == doc["approved_at"] and record.cost_estimate_bytes > 1024 * 1024
    assert main(["--config", settings.source, "audit", str(held), "--json"]) == 0
    trail = json.loads(capsys.readouterr().out)["records"]
    assert trail[-1]["run_id"] == doc["run_id"] and trail[-1]["results"]["approval"]["approved_by"] == "alice"

    # Clear errors, non-zero exits: a plan that is not the one reviewed, a table that awaits nothing,
    # a webserver that does not answer, a table the webserver does not know.
    assert main([*argv, "--digest", "sha256:0000"]) == 1
    assert "the plan changed since sha256:0000" in capsys.readouterr().err
    from icelake_assets.catalog.connection import open_catalog
    from icelake_assets_tests.operate.shapes import SCHEMA, _append

    cat = open_catalog(settings, held.catalog)
    _append(cat.create_table(("ns", "fine"), SCHEMA), 1, 10, 8)
    assert (
        main(["--config", settings.source, "approve", f"{held.catalog}.ns.fine", "--dagster-url", url]) == 1
    )
    assert "awaits no approval: nothing to do" in capsys.readouterr().err
    down = f"http://127.0.0.1:{free_port()}"
    assert main(["--config", settings.source, "approve", str(held), "--dagster-url", down]) == 2
    assert f"the Dagster webserver at {down} does not answer" in capsys.readouterr().err
    _append(cat.create_table(("ns", "late"), SCHEMA), 25, 10, 8)  # created after the code location loaded
    assert (
        main(["--config", settings.source, "approve", f"{held.catalog}.ns.late", "--dagster-url", url]) == 2
    )
    assert "is not an asset of the Dagster webserver" in capsys.readouterr().err


def test_the_launchpad_link_approves_with_nothing_typed(webserver):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    if not CHROMIUM.exists():
        pytest.skip("Chromium is not installed at /usr/bin/chromium")
    settings, held, small, url = webserver
    graphql(url, "mutation { setNuxSeen }")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(url + launchpad_path("icelake_maintenance", held.asset_key_path))
        page.wait_for_url("**/jobs/icelake_maintenance/playground**")
        page.get_by_role("button", name="Launch run").click()
        deadline = time.monotonic() + 60
        runs: list[dict] = []
        while time.monotonic() < deadline and not runs:
            runs = graphql(url, RUNS)["runsOrError"]["results"]
            time.sleep(1)
        browser.close()
    [run] = runs
    assert run["jobName"] == "icelake_maintenance" and _tags(run)["icelake/approved"] == "true"
    assert run["assetSelection"] == [{"path": held.asset_key_path}]
