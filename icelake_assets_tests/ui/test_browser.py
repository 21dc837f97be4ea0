"""End to end in a real browser: `dagster dev` (webserver + daemon) on the shipped demo (`icelake
demo-lake --scale demo`, the settings of icelake.yaml), driven with Debian's Chromium through
Playwright. It regenerates the screenshots of the README and docs (docs/screenshots/).

What a new user should see: the tables with their producer and consumer in the asset graph; each
degraded table's checks failing, with its health summary, in the catalog and the lineage graph; the
maintenance sensor, started with its toggle, healing all three tables; then every table's `health`
check Healthy, the lake overview refreshed after the maintenance runs, the catalog and lineage again.
Teardown stops the whole process group and checks nothing is left running.
"""

import re
import time

import pytest

from icelake_assets.maintenance.spark.resident_spark import read_driver
from icelake_assets.orchestration.runs.run_tags import named_tables
from icelake_assets_tests.ui.browser import browser_page, open_page, running, screenshot, sync_api
from icelake_assets_tests.ui.server import DagsterDev, free_port

LOCATION = "icelake_assets.definitions"
CLICKS = "demo.events.clicks"
# The shipped demo's tables (name -> UI path) and the checks each fails before maintenance, as
# `icelake health --orphans` lists them on a fresh demo lake (orders: once its storage was scanned).
TABLES = {
    "demo.taxi.trips": "demo/taxi/trips",
    CLICKS: "demo/events/clicks",
    "demo.sales.orders": "demo/sales/orders",
}
FAILING = {
    "demo.taxi.trips": ("small_files", "manifest_fragmentation"),
    CLICKS: ("small_files", "manifest_fragmentation"),
    "demo.sales.orders": ("orphan_files",),
}
FAILED = "(?:Failed|Warning)"  # how the UI shows a failed check of severity ERROR or WARN
OVERVIEW = "/assets/icelake/health_overview?view=lineage&lineageScope=upstream"

# The shipped demo at its own scale: ~1 min to build, ~2 min to heal after the sensor starts.
pytestmark = pytest.mark.timeout(780)

# The sensor's runs: a run names its table (icelake/table) or, shared by small tables, them all.
RUNS = """{ runsOrError(filter: {tags: [{key: "icelake/trigger", value: "sensor"}]}) {
  ... on Runs { results { runId status endTime tags { key value } } } } }"""
RUN = """query($id: ID!) { runOrError(runId: $id) { ... on Run { status } } }"""
LAUNCH = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""
MATERIALIZATIONS = """query($path: [String!]!) { assetOrError(assetKey: {path: $path}) {
  ... on Asset { assetMaterializations(limit: 20) { timestamp runId } } } }"""
ASSET_DEPS = """{ assetNodes { assetKey { path } dependencyKeys { path } } }"""
SENSOR = """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) {
  ... on Sensor { sensorState { status } } } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui")
    dev = DagsterDev(folder, free_port())
    dev.prepare()
    with running(dev):
        yield dev


@pytest.fixture(scope="module")
def page(server):
    with browser_page() as page:
        yield page


def _wait_for_text(page, server, path: str, pattern: str, timeout: float) -> str:
    """Reload ``path`` until the page's text matches ``pattern``; returns the text."""
    deadline = time.monotonic() + timeout
    while True:
        open_page(page, server, path)
        page.wait_for_timeout(1500)
        text = page.inner_text("body")
        if re.search(pattern, text):
            return text
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{path}: no {pattern!r} after {timeout:.0f}s; page text:\n{text[:2000]}\n"
                f"dagster dev log:\n{server.log_tail()}"
            )
        page.wait_for_timeout(3000)


def _check_status(check: str, status: str) -> str:
    return rf"\n{check}\n(?:{check}\n)?{status}\b"


def _launch(server, job: str) -> str:
    """Launch ``job`` as the UI's Launchpad does; returns the run id."""
    selector = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__", "jobName": job}
    launched = server.graphql(LAUNCH, {"p": {"selector": selector, "runConfigData": {}}})["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return launched["run"]["runId"]


def _wait_for_run(server, run_id: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (status := server.graphql(RUN, {"id": run_id})["runOrError"]["status"]) != "SUCCESS":
        assert status not in ("FAILURE", "CANCELED"), f"run {run_id}: {status}\n{server.log_tail()}"
        assert time.monotonic() < deadline, f"run {run_id} still {status} after {timeout:.0f}s"
        time.sleep(2)


def _overview_materializations(server) -> list[float]:
    """Timestamps (s) of the lake overview's materializations."""
    asset = server.graphql(MATERIALIZATIONS, {"path": ["icelake", "health_overview"]})["assetOrError"]
    return sorted(int(m["timestamp"]) / 1000 for m in asset.get("assetMaterializations") or [])


def _catalog(page, server, shot: str) -> None:
    """The asset catalog list (each table's status, a failed ERROR check turning it red)."""
    open_page(page, server, "/assets")
    for path in TABLES.values():  # the list names each asset by its key: "demo / taxi / trips"
        page.get_by_text(path.replace("/", " / "), exact=True).first.wait_for()
    page.wait_for_timeout(1500)
    screenshot(page, shot)


def _lake_lineage(page, server, shot: str) -> None:
    """The lake overview and the three tables upstream of it, each node counting its checks (a
    taller window: the graph is centred on the overview, the tables stacked beside it)."""
    page.set_viewport_size({"width": 1400, "height": 1250})
    open_page(page, server, OVERVIEW)
    for path in TABLES.values():
        page.get_by_text(path.rsplit("/", 1)[1], exact=True).first.wait_for()
    page.get_by_text(re.compile(r"\d+ / \d+ Passed")).first.wait_for()
    try:  # the nodes' status rows load last
        page.get_by_text("Loading...").first.wait_for(state="hidden", timeout=15_000)
    except sync_api.TimeoutError:
        pass
    page.wait_for_timeout(1500)
    screenshot(page, shot)
    page.set_viewport_size({"width": 1400, "height": 1000})


def test_the_graph_shows_each_table_with_its_producer_and_consumer(page, server):
    open_page(page, server, "/assets/demo/taxi/trips?view=lineage")
    for name in ("trips_writer", "trips", "daily_revenue", "health_overview"):
        page.get_by_text(name, exact=True).first.wait_for()
    # The edges, as the UI itself loads them (same origin, from inside the page).
    nodes = page.evaluate(
        """async (q) => (await (await fetch('/graphql', {method: 'POST',
        headers: {'Content-Type': 'application/json'},
        body: JSON.stringify({query: q})})).json()).data.assetNodes""",
        ASSET_DEPS,
    )
    parents = {
        "/".join(n["assetKey"]["path"]): {"/".join(d["path"]) for d in n["dependencyKeys"]} for n in nodes
    }
    assert parents["demo/taxi/trips"] == {"icelake_demo/trips_writer"}
    assert parents["icelake_demo/daily_revenue"] == {"demo/taxi/trips"}
    assert set(TABLES.values()) <= parents["icelake/health_overview"]


def test_each_degraded_table_shows_its_failing_checks_in_the_catalog_and_the_lineage(page, server):
    # The orphan check lists storage: it runs on its own schedule (stopped here) or as the user runs
    # its job; the metadata checks come from the health sensor's first tick, without any run.
    orphan_run = _launch(server, "icelake_orphan_checks")
    for table, checks in FAILING.items():
        text = _wait_for_text(
            page,
            server,
            f"/assets/{TABLES[table]}?view=checks",
            _check_status(checks[0], FAILED),
            timeout=180,
        )
        for check in checks[1:]:
            assert re.search(_check_status(check, FAILED), text), (table, check)
        if table != "demo.sales.orders":  # its health was reported before its storage was scanned
            assert re.search(_check_status("health", FAILED), text), table
    _wait_for_run(server, orphan_run, 60)

    open_page(page, server, "/assets/demo/events/clicks?view=checks")
    page.get_by_text("health", exact=True).first.click()
    # The one line the UI shows names the worst finding first (the larger penalty among errors).
    page.get_by_text("Critical, score 49/100; failing: small_files, manifest_fragmentation").first.wait_for()
    page.wait_for_timeout(1000)
    screenshot(page, "checks_failing.png")
    page.get_by_text("[Show Markdown]").first.click()  # the summary: one row per check, fix links
    link = page.locator("a[href='/guess/icelake_maintenance']").first
    link.wait_for()
    page.wait_for_timeout(1000)  # the dialog's fade-in
    screenshot(page, "health_summary.png")
    page.keyboard.press("Escape")

    # Health at a glance, before: the catalog list and the lineage graph (check counts by severity).
    _catalog(page, server, "catalog_before.png")
    open_page(page, server, "/assets/demo/taxi/trips?view=lineage")
    page.get_by_text("trips_writer", exact=True).first.wait_for()
    page.wait_for_timeout(1500)
    screenshot(page, "lineage.png")
    _lake_lineage(page, server, "lineage_before.png")


def _tables_of(run: dict) -> tuple[str, ...]:
    """The tables a run carries, as its tags name them in the UI's run list."""
    return named_tables({t["key"]: t["value"] for t in run["tags"]}) or ()


def test_the_sensor_heals_all_three_tables_and_the_overview_follows(page, server):
    # Start the maintenance sensor the way a user does: its toggle in the UI.
    open_page(page, server, f"/locations/{LOCATION}/sensors/icelake_maintenance_sensor")
    # The switch's input is hidden behind its styled label: click what the user sees.
    page.locator("input[type=checkbox]").first.locator("xpath=..").click()
    selector = {
        "repositoryName": "__repository__",
        "repositoryLocationName": LOCATION,
        "sensorName": "icelake_maintenance_sensor",
    }
    deadline = time.monotonic() + 30
    while server.graphql(SENSOR, {"s": selector})["sensorOrError"]["sensorState"]["status"] != "RUNNING":
        assert time.monotonic() < deadline, "the sensor toggle did not start the sensor"
        time.sleep(1)
    started = time.monotonic()

    # Every table healed by a run the sensor launched, none failed (measured: ~2 min on 2 cores).
    deadline = started + 360
    healed: dict[str, dict] = {}
    while len(healed) < len(TABLES):
        sensor_runs = server.graphql(RUNS)["runsOrError"]["results"]
        for table in TABLES:
            runs = [r for r in sensor_runs if table in _tables_of(r)]
            statuses = [r["status"] for r in runs]
            assert not {"FAILURE", "CANCELED"} & set(statuses), (
                f"{table}: maintenance failed: {runs}\n{server.log_tail()}"
            )
            if "SUCCESS" in statuses:
                healed[table] = next(r for r in runs if r["status"] == "SUCCESS")
        assert time.monotonic() < deadline, (
            f"healed after 360s: {sorted(healed)} of {sorted(TABLES)}\n{server.log_tail()}"
        )
        time.sleep(5)
    for table, run in healed.items():
        assert {t["key"]: t["value"] for t in run["tags"]}["icelake/trigger"] == "sensor", table
    healed_at = max(run["endTime"] for run in healed.values())
    print(f"all three tables healed {time.monotonic() - started:.0f}s after the sensor started")
    # The runs shared one Spark driver (the product's default), still up for the next run.
    spark_state = server.folder / "dagster_home" / "icelake" / "spark"
    assert len([d for d in spark_state.glob("*") if read_driver(d)]) == 1, list(spark_state.glob("*/*"))

    # Each table's health check reads Healthy, with every check passing.
    for table, path in TABLES.items():
        text = _wait_for_text(
            page, server, f"/assets/{path}?view=checks", _check_status("health", "Succeeded"), timeout=120
        )
        for check in FAILING[table]:
            assert re.search(_check_status(check, "Succeeded"), text), (table, check)
        page.get_by_text("health", exact=True).first.click()
        page.get_by_text(re.compile(r"Healthy, score 100/100; every check passes")).first.wait_for()
        if table == CLICKS:
            screenshot(page, "checks_passing.png")
            # The plots of the health check: score and penalties before and after maintenance.
            page.get_by_text("Plots", exact=True).first.evaluate("el => el.scrollIntoView({block: 'start'})")
            page.wait_for_timeout(1500)
            screenshot(page, "plots.png")

    # The lake overview refreshes by itself after the maintenance runs (its automation condition,
    # evaluated by the icelake_overview_sensor, running by default).
    deadline = time.monotonic() + 120
    while not any(t > healed_at for t in _overview_materializations(server)):
        assert time.monotonic() < deadline, (
            f"the overview was not materialized after the runs ended at {healed_at}: "
            f"{_overview_materializations(server)}\n{server.log_tail()}"
        )
        time.sleep(3)

    _catalog(page, server, "catalog_after.png")
    _lake_lineage(page, server, "lineage_after.png")
