"""End to end in a real browser: `dagster dev` (webserver + daemon) on a fresh small demo lake, driven
with Debian's Chromium through Playwright. It regenerates the README's screenshots (docs/screenshots/).

What a new user should see: the tables with their producer and consumer in the asset graph; a degraded
table's checks failing with its health summary; the sensor launching maintenance that succeeds; then
the same checks passing. Teardown stops the whole process group and checks nothing is left running.
"""

import re
import time
from pathlib import Path

import pytest

from icelake_assets_tests.ui.server import ROOT, DagsterDev, free_port, processes_using

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SHOTS = ROOT / "docs" / "screenshots"
LOCATION = "icelake_assets.definitions"
CLICKS = "demo.events.clicks"

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright's Python package is not installed (pip install -e '.[test]')"
)
if not CHROMIUM.exists():
    pytest.skip(
        "Chromium is not installed at /usr/bin/chromium (Debian: apt-get install chromium)",
        allow_module_level=True,
    )

pytestmark = pytest.mark.timeout(600)

RUNS = """query($table: String!) { runsOrError(filter: {tags: [{key: "icelake/table", value: $table}]}) {
  ... on Runs { results { runId status tags { key value } } } } }"""
ASSET_DEPS = """{ assetNodes { assetKey { path } dependencyKeys { path } } }"""
SENSOR = """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) {
  ... on Sensor { sensorState { status } } } }"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui")
    dev = DagsterDev(folder, free_port())
    dev.prepare()
    try:
        dev.start()
        dev.graphql("mutation { setNuxSeen }")  # no newsletter dialog over the screenshots
        yield dev
    finally:
        dev.stop()
        time.sleep(1)
        left = processes_using(folder)
        assert not left, f"processes left running after teardown: {left}"


@pytest.fixture(scope="module")
def page(server):
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        # Should the newsletter dialog open anyway, dismiss it whenever it blocks a click.
        page.add_locator_handler(page.get_by_role("button", name="Skip"), lambda skip: skip.click())
        yield page
        browser.close()


def _open(page, server, path: str) -> None:
    page.goto(server.url + path)
    page.wait_for_load_state("networkidle")


def _wait_for_text(page, server, path: str, pattern: str, timeout: float) -> str:
    """Reload ``path`` until the page's text matches ``pattern``; returns the text."""
    deadline = time.monotonic() + timeout
    while True:
        _open(page, server, path)
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


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name))


def test_the_graph_shows_each_table_with_its_producer_and_consumer(page, server):
    _open(page, server, "/assets/demo/taxi/trips?view=lineage")
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
    tables = {"demo/taxi/trips", "demo/events/clicks", "demo/sales/orders"}
    assert tables <= parents["icelake/health_overview"]
    page.wait_for_timeout(1500)
    _shot(page, "lineage.png")


def test_a_degraded_tables_checks_fail_and_its_health_summary_says_why(page, server):
    # The health sensor reports the checks without any run: no "0 / N passed" on a table nobody checked.
    text = _wait_for_text(
        page,
        server,
        "/assets/demo/events/clicks?view=checks",
        _check_status("snapshot_retention", "Failed"),
        timeout=120,
    )
    assert re.search(_check_status("manifest_fragmentation", "Failed"), text)
    page.get_by_text("health", exact=True).first.click()
    page.get_by_text(re.compile(r"Critical, score \d+/100; failing: ")).first.wait_for()
    page.wait_for_timeout(1000)
    _shot(page, "checks_failing.png")
    page.get_by_text("[Show Markdown]").first.click()  # the summary: one row per check, fix links
    link = page.locator("a[href='/guess/icelake_maintenance']").first
    link.wait_for()
    page.wait_for_timeout(1000)  # the dialog's fade-in
    _shot(page, "health_summary.png")
    page.keyboard.press("Escape")


def test_the_sensor_maintains_the_table_and_its_checks_then_pass(page, server):
    # Start the maintenance sensor the way a user does: its toggle in the UI.
    _open(page, server, f"/locations/{LOCATION}/sensors/icelake_maintenance_sensor")
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

    deadline = time.monotonic() + 300
    while True:
        runs = server.graphql(RUNS, {"table": CLICKS})["runsOrError"]["results"]
        statuses = [r["status"] for r in runs]
        assert not {"FAILURE", "CANCELED"} & set(statuses), f"maintenance failed: {runs}\n{server.log_tail()}"
        if "SUCCESS" in statuses:
            break
        assert time.monotonic() < deadline, (
            f"no successful maintenance run after 300s: {runs}\n{server.log_tail()}"
        )
        time.sleep(5)
    run = next(r for r in runs if r["status"] == "SUCCESS")
    assert {t["key"]: t["value"] for t in run["tags"]}["icelake/trigger"] == "sensor"

    text = _wait_for_text(
        page,
        server,
        "/assets/demo/events/clicks?view=checks",
        _check_status("health", "Succeeded"),
        timeout=120,
    )
    for check in ("snapshot_retention", "manifest_fragmentation", "small_files"):
        assert re.search(_check_status(check, "Succeeded"), text), check
    page.get_by_text("health", exact=True).first.click()
    page.get_by_text(re.compile(r"Healthy, score \d+/100; every check passes")).first.wait_for()
    _shot(page, "checks_passing.png")
    # The plots of the health check: score and penalties before and after maintenance.
    page.get_by_text("Plots", exact=True).first.evaluate("el => el.scrollIntoView({block: 'start'})")
    page.wait_for_timeout(1500)
    _shot(page, "plots.png")
