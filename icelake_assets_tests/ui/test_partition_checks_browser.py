"""Health per partition in a real browser: `dagster dev` (webserver + daemon) on the demo lake at its
test scale (`demo.taxi.trips`: 6 days of 30 small files each, all failing `small_files_by_partition`)
plus one day of a single file, added before the code location loads the table's days: a healthy
partition. Driven with Chromium through Playwright, it regenerates docs/screenshots/partition_checks_*.

What a user does: opens the check's *Partitions* tab, sees the degraded days failing (reported by the
run of `icelake_partition_checks` the health sensor asks for), runs `icelake backfill demo.taxi.trips
--unhealthy --check small_files` against the webserver, waits for the backfill, and sees every day
passing; the backfill rewrote the failing days' files and left the healthy day's alone.
"""

import json
import re
import subprocess
import sys
import time
from collections import defaultdict

import numpy as np
import pytest

from icelake_assets.catalog.connection import TableRef, load_table, open_catalog
from icelake_assets.demo.lake import SCALES, append, trips_batch
from icelake_assets.settings import load_settings
from icelake_assets_tests.ui.browser import browser_page, open_page, running, screenshot, sync_api
from icelake_assets_tests.ui.server import ROOT, DagsterDev, free_port

TABLE = "demo.taxi.trips"
CHECK = "small_files_by_partition"
DAYS = SCALES["test"].days
DEGRADED = [f"2024-01-{d:02d}" for d in range(1, DAYS + 1)]  # the demo writer's days, from START
QUIET = f"2024-01-{DAYS + 1:02d}"  # the added day of one file
CHECK_VIEW = f"/assets/demo/taxi/trips?view=checks&checkDetail={CHECK}"
BACKFILL = """query($id: String!) { partitionBackfillOrError(backfillId: $id) {
  __typename ... on PartitionBackfill { status } } }"""
# Statuses of a backfill that will not succeed (dagster BulkActionStatus).
BACKFILL_FAILED = {"FAILED", "FAILING", "COMPLETED_FAILED", "CANCELED", "CANCELING"}

# Measured 6-7 min on 2 cores, most of it the backfill's one run: the shared Spark driver starting
# (~1 min) and its rewrite of the six days (~2 min).
pytestmark = pytest.mark.timeout(780)


def _trips(dev: DagsterDev):
    return load_table(open_catalog(load_settings(dev.folder / "icelake.yaml"), "demo"), TableRef.parse(TABLE))


def _add_quiet_day(dev: DagsterDev) -> None:
    """One small batch into the day after the writer's: one file, a healthy partition."""
    table = _trips(dev)
    # Rows go round-robin over the days: every (DAYS+1)-th row falls on the day after the writer's.
    batch = trips_batch(np.random.default_rng(7), 10**9, 4 * (DAYS + 1), DAYS + 1)
    append(table, batch.take(list(range(DAYS, batch.num_rows, DAYS + 1))))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui_partitions")
    dev = DagsterDev(folder, free_port(), scale="test")
    dev.prepare()
    _add_quiet_day(dev)  # before the code location reads the table's first and last day
    with running(dev):
        yield dev


@pytest.fixture(scope="module")
def page(server):
    with browser_page() as page:
        yield page


def _files_by_day(server) -> dict[str, set[str]]:
    """The table's data files per day, as its current snapshot lists them."""
    files: dict[str, set[str]] = defaultdict(set)
    for row in _trips(server).inspect.files().select(["file_path", "partition"]).to_pylist():
        files[str(row["partition"]["pickup_at_day"])].add(row["file_path"])
    return dict(files)


def _partitions_tab(page, server, failed: int, passed: int, timeout: float) -> None:
    """Reload the check's *Partitions* tab until its status filter counts ``failed`` and ``passed``
    partitions (the tab reads the statuses once, when it opens)."""
    deadline = time.monotonic() + timeout
    while True:
        open_page(page, server, CHECK_VIEW)
        history = page.get_by_role("tab", name="Execution history")
        page.get_by_role("tablist").filter(has=history).get_by_role("tab", name="Partitions").click()
        try:
            page.get_by_text(f"Failed ({failed})", exact=True).wait_for(timeout=10_000)
            page.get_by_text(f"Passed ({passed})", exact=True).wait_for(timeout=1_000)
            return
        except sync_api.TimeoutError:
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{CHECK}: not {failed} failed and {passed} passed after {timeout:.0f}s; page text:\n"
                    f"{page.inner_text('body')[:2000]}\ndagster dev log:\n{server.log_tail()}"
                ) from None
        page.wait_for_timeout(3000)


def _focus(page, key: str, status: str) -> str:
    """Open ``key``'s latest evaluation in the tab; asserts its status tag, returns the page text."""
    page.locator(f"[data-tooltip='{key}']").first.click()  # its row in the list
    page.get_by_text("Target materialization", exact=True).wait_for()
    page.wait_for_timeout(1000)
    text = page.inner_text("body")
    assert re.search(rf"\n{key}\n(?:{key}\n)?{status}\n", text), text[:3000]
    return text


def _backfill_unhealthy(server) -> dict:
    """`icelake backfill TABLE --unhealthy --check small_files` against the test's webserver."""
    command = f"backfill {TABLE} --unhealthy --check small_files --dagster-url {server.url} --json"
    proc = subprocess.run(
        [sys.executable, "-m", "icelake_assets.cli", *command.split()],
        cwd=ROOT,
        env=server.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def _wait_for_backfill(server, backfill_id: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        status = server.graphql(BACKFILL, {"id": backfill_id})["partitionBackfillOrError"].get("status")
        if status in ("COMPLETED_SUCCESS", "COMPLETED"):
            return
        assert status not in BACKFILL_FAILED, f"backfill {backfill_id}: {status}\n{server.log_tail()}"
        assert time.monotonic() < deadline, f"backfill {backfill_id} still {status} after {timeout:.0f}s"
        time.sleep(3)


def test_a_backfill_of_the_failing_days_turns_their_checks_green_and_leaves_the_others(page, server):
    # The health sensor's first tick asks for one report run of every day's checks.
    _partitions_tab(page, server, failed=len(DEGRADED), passed=1, timeout=240)
    text = _focus(page, DEGRADED[0], "Failed")
    assert f"icelake backfill {TABLE} --unhealthy --check small_files" in text  # the fix, in its metadata
    screenshot(page, "partition_checks_failing.png")
    before = _files_by_day(server)
    counts = {day: len(files) for day, files in before.items()}
    assert sorted(before) == [*DEGRADED, QUIET] and counts[QUIET] == 1, counts

    launched = _backfill_unhealthy(server)
    assert launched["keys"] == DEGRADED, launched
    _wait_for_backfill(server, launched["backfill_id"], timeout=300)

    _partitions_tab(page, server, failed=0, passed=len(DEGRADED) + 1, timeout=120)
    _focus(page, DEGRADED[0], "Passed")
    screenshot(page, "partition_checks_healed.png")
    after = _files_by_day(server)
    assert after[QUIET] == before[QUIET]  # the healthy day: not touched
    for day in DEGRADED:  # each failing day compacted: new files, fewer of them
        assert after[day] and not after[day] & before[day], day
        assert len(after[day]) < len(before[day]), (day, len(after[day]))
