"""Copy and share (issue 28): "Copy results" puts pycore's Markdown (or plain text) of the result on the
clipboard, the very text python -m pycore --markdown prints for the same URL; "Copy link" the bookmarkable
URL; both buttons fit on a phone. And a link's unread keys are named safely (U+202E shown as ?)."""

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from conftest import READY_MS, Watched, settled

from pycore.output import web

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
VIEWPORTS = [(390, 844, True), (1440, 900, False)]
QUERY = "model=mixtral-8x7b-v0.1&dp=8&ep=8&zero=3&batch=2&seq=4096"


def cli_markdown(query):
    done = subprocess.run([sys.executable, "-m", "pycore", "--markdown", *(f"{k}={v}" for k, v in parse_qsl(query))],
                          cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


@pytest.fixture(params=VIEWPORTS, ids=[f"{w}x{h}" for w, h, _ in VIEWPORTS])
def device(request, browser, base_url):
    width, height, touch = request.param
    context = browser.new_context(viewport={"width": width, "height": height}, has_touch=touch, is_mobile=touch,
                                  permissions=["clipboard-read", "clipboard-write"])
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url.rstrip("/"))
    watched = Watched(context, base_url)
    watched.touch, watched.width = touch, width
    yield watched
    context.close()


def press(watched, selector):
    locator = watched.page.locator(selector)
    locator.scroll_into_view_if_needed()
    locator.tap() if watched.touch else locator.click()


def clipboard(page):
    return page.evaluate("navigator.clipboard.readText()")


def test_copy_results_is_the_command_lines_markdown(device, base_url):
    page = device.open(base_url, "?" + QUERY)
    press(device, "#copy-results")
    page.wait_for_function("document.getElementById('status').textContent === 'Results copied as Markdown.'")
    copied = clipboard(page)
    assert copied == cli_markdown(QUERY)
    assert "| **Total per GPU** |" in copied and "Framework defaults used" in copied
    # The plain-text choice: pycore's text, no Markdown.
    page.locator("#copy-as").select_option("text")
    press(device, "#copy-results")
    page.wait_for_function("document.getElementById('status').textContent === 'Results copied as plain text.'")
    assert clipboard(page) == json.loads(web.run(QUERY))["share"]["text"]
    assert page.locator("#share-field").is_hidden()
    assert device.errors == [] and device.outside == []


def test_copy_results_and_copy_link_follow_the_last_keystroke(device, base_url):
    page = device.open(base_url, "?model=gpt2&seq=1024")
    page.locator("#f-batch").fill("7")                 # copied at once: the details may not be drawn yet
    press(device, "#copy-results")
    page.wait_for_function("document.getElementById('status').textContent === 'Results copied as Markdown.'")
    assert clipboard(page) == cli_markdown("model=gpt2&seq=1024&batch=7")
    page.locator("#f-seq").fill("512")
    press(device, "#copy-link")
    page.wait_for_function("document.getElementById('status').textContent === 'Link copied.'")
    link = clipboard(page)
    assert link == page.url and urlsplit(link).path == urlsplit(base_url).path
    assert dict(parse_qsl(urlsplit(link).query)) == {"model": "gpt2", "seq": "512", "batch": "7"}
    # The copied link opens the same estimate.
    page.goto(link)
    page.wait_for_selector("html.py-ready", timeout=READY_MS)
    settled(page)
    press(device, "#copy-results")
    page.wait_for_function("document.getElementById('status').textContent === 'Results copied as Markdown.'")
    assert clipboard(page) == cli_markdown("model=gpt2&seq=512&batch=7")
    assert device.errors == []


def test_the_buttons_fit_the_screen(device, base_url):
    page = device.open(base_url)
    page.locator(".actions").scroll_into_view_if_needed()
    boxes = page.eval_on_selector_all(
        "#copy-results, #copy-as, #copy-link, #download-csv, #print",
        "nodes => nodes.map(n => { const r = n.getBoundingClientRect(); return [n.id, r.left, r.right, r.height]; })")
    assert len(boxes) == 5
    for name, left, right, height in boxes:
        assert 0 <= left and right <= device.width, (name, left, right)
        assert height >= (32 if device.touch else 20), name                  # big enough to tap
    assert page.evaluate("document.documentElement.scrollWidth") <= device.width
    results, choice = boxes[0], boxes[1]
    assert abs(choice[1] - results[2]) < 2          # the format choice sits against its button
    assert page.locator("#copy-results").is_enabled() and page.locator("#copy-link").is_enabled()


def test_a_links_unread_keys_are_named_safely(shared, base_url):
    page = shared.page
    page.goto(base_url + "?%E2%80%AEevil=1&config=/etc/passwd&model=gpt2&seq=512")
    page.wait_for_selector("html.py-ready", timeout=READY_MS)
    settled(page)
    messages = page.locator("#messages").inner_text()
    assert "Ignored a key this page does not take from a link: ?evil." in messages
    # config= carries a config.json's text, never a path: pycore refuses the path by name and reads no file
    assert "config: a link carries a config.json's own text, not a path" in messages
    assert "\u202e" not in messages
