"""Serve the built site on a free localhost port and drive it with Chromium.

The site is built once per session with build.py, unless DIST_DIR names an already built folder (CI's
deploy job tests the very artifact it uploads). Chromium is Debian's /usr/bin/chromium when present
(Playwright's own browser download is blocked on these machines), else Playwright's.
"""

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

# The unit-only command (CONTRIBUTING.md) runs without Playwright installed: the browser tests are then skipped
# as a module, never half-collected. tests/run.sh installs Playwright, so CI runs them all.
sync_playwright = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed").sync_playwright

ROOT = Path(__file__).resolve().parents[2]

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]
READY_MS = 120_000


@pytest.fixture(scope="session")
def dist():
    if os.environ.get("DIST_DIR"):
        return Path(os.environ["DIST_DIR"]).resolve()
    subprocess.run([sys.executable, str(ROOT / "build.py")], check=True)
    return ROOT / "dist"


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serving(folder):
    """build.py's static server for ``folder`` in its own process, checked to be up; yields its URL."""
    port = _free_port()
    server = subprocess.Popen([sys.executable, str(ROOT / "build.py"), "serve-only", str(port), str(folder)])
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                assert response.status == 200
                break
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise
            time.sleep(0.1)
    try:
        yield url
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture(scope="session")
def base_url(dist):
    with serving(dist) as url:
        yield url


@pytest.fixture(scope="session")
def playwright():
    with sync_playwright() as driver:
        yield driver


def launch(playwright, *flags, profile=None):
    """Chromium with the suite's arguments and any more ``flags``; with ``profile`` (a folder), a context
    whose storage (service worker, caches) outlives the browser, for the next launch with that folder."""
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    options = {"args": ARGS + list(flags), **({"executable_path": executable} if executable else {})}
    if profile is not None:
        return playwright.chromium.launch_persistent_context(str(profile), **options)
    return playwright.chromium.launch(**options)


@pytest.fixture(scope="session")
def browser(playwright):
    launched = launch(playwright)
    yield launched
    launched.close()


class Watched:
    """A page whose console errors, page errors and requests leaving localhost are recorded."""

    def __init__(self, context, base_url):
        self.context = context
        self.page = context.new_page()
        self.errors, self.outside = [], []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.errors.append("dialog: " + d.message), d.dismiss()))

        def route(route):
            if route.request.url.startswith(base_url) or route.request.url.startswith(("blob:", "data:")):
                route.continue_()
            else:
                self.outside.append(route.request.url)
                route.abort()
        context.route("**/*", route)

    def open(self, base_url, query=""):
        self.page.goto(base_url + query)
        self.page.wait_for_selector("html.py-ready", timeout=READY_MS)
        self.page.wait_for_function("document.documentElement.dataset.totalBytes !== undefined")
        settled(self.page)
        return self.page


def settled(page):
    """Wait until the answers (computed after the breakdown) are on the page."""
    page.wait_for_function("document.documentElement.dataset.answersPending === undefined")


def total(page):
    """The total bytes the page shows (from pycore's payload)."""
    return int(page.evaluate("document.documentElement.dataset.totalBytes"))


def seen_text(locator):
    """A part's text as a person sees it once scrolled to it: the form's groups and the explanations skip
    their rendering while out of view (style.css, content-visibility), and their innerText is empty then."""
    locator.scroll_into_view_if_needed()
    locator.page.wait_for_function("(node) => node.innerText !== ''", arg=locator.element_handle())
    return locator.inner_text()


def show(page, query):
    """Navigate inside the page (history + popstate) to the top of a new state, as a person following a
    link arrives, and wait for the new result and its answers."""
    page.evaluate("q => { history.pushState(null, '', '?' + q); dispatchEvent(new PopStateEvent('popstate')); "
                  "scrollTo(0, 0); }", query)
    page.wait_for_function("document.getElementById('link-field').value === location.href")
    settled(page)


@pytest.fixture()
def watched(browser, base_url):
    context = browser.new_context(accept_downloads=True)
    yield Watched(context, base_url)
    context.close()


@pytest.fixture(scope="module")
def shared(browser, base_url):
    """One loaded page reused by a module's tests (Python starts once)."""
    context = browser.new_context()
    w = Watched(context, base_url)
    w.open(base_url)
    yield w
    context.close()
