"""What the browser tests share: Debian's Chromium through Playwright (skipped, with the reason, where
either is missing), a `dagster dev` of the demo started and stopped with nothing left behind, a page,
and the screenshots the README and docs show (docs/screenshots/)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from icelake_assets_tests.ui.server import ROOT, DagsterDev, processes_using

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

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright's Python package is not installed (pip install -e '.[test]')"
)
if not CHROMIUM.exists():
    pytest.skip(
        "Chromium is not installed at /usr/bin/chromium (Debian: apt-get install chromium)",
        allow_module_level=True,
    )


@contextmanager
def running(dev: DagsterDev) -> Iterator[DagsterDev]:
    """``dev`` (prepared) started; at the end stopped, and nothing of its folder left running."""
    try:
        dev.start()
        dev.graphql("mutation { setNuxSeen }")  # no newsletter dialog over the screenshots
        yield dev
    finally:
        dev.stop()
        time.sleep(1)
        left = processes_using(dev.folder)
        assert not left, f"processes left running after teardown: {left}"


@contextmanager
def browser_page() -> Iterator:
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        # Should the newsletter dialog open anyway, dismiss it whenever it blocks a click.
        page.add_locator_handler(page.get_by_role("button", name="Skip"), lambda skip: skip.click())
        yield page
        browser.close()


def open_page(page, server: DagsterDev, path: str) -> None:
    page.goto(server.url + path)
    page.wait_for_load_state("networkidle")


def screenshot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name))
