"""Browser tests: Debian's Chromium driven by Playwright against Django's live server.

`make test` installs the chromium package when it is missing (scripts/ensure-chromium.sh);
Playwright's own browser downloads are never used. The browser lives for one test module
only: Playwright's sync API runs an event loop in the test thread while it is open, and
tests elsewhere (asyncio.run, mini-racer timeouts) need that loop gone.
"""

import os
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TIMEOUT_MS = 10_000


def pytest_collection_modifyitems(items):
    if CHROMIUM.exists():
        return
    skip = pytest.mark.skip(reason=f"{CHROMIUM} is missing: run scripts/ensure-chromium.sh (make test does)")
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(skip)


@pytest.fixture(scope="module")
def browser():
    # Django refuses database access from a thread with a running event loop unless told
    # it is safe; it is, here: the test thread waits while Playwright's loop idles.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
            expect.set_options(timeout=TIMEOUT_MS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def screenshot():
    """Saves a PNG when E2E_SCREENSHOTS names a folder (to look at what a person sees)."""
    folder = os.environ.get("E2E_SCREENSHOTS")

    def take(page, name):
        if folder:
            Path(folder).mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(Path(folder) / f"{name}.png"))

    return take
