"""Issue 28's walk through the README on the built page, as one user would: a hub id typed in the model field,
hours given instead of tokens, fp32 master weights switched on with one click, the results copied (the clipboard
read back and compared with python -m pycore --markdown for the same URL), and every chart drawn with no colour
repeated and no label cut."""

import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from conftest import Watched, settled
from test_page_charts_28 import DRAWN, LABELS

from pycore import estimate

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=[(390, 844, True), (1440, 900, False)], ids=["390x844", "1440x900"])
def user(request, browser, base_url):
    width, height, touch = request.param
    context = browser.new_context(viewport={"width": width, "height": height}, has_touch=touch, is_mobile=touch)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base_url.rstrip("/"))
    watched = Watched(context, base_url)
    yield watched
    context.close()


def query_of(page):
    return dict(parse_qsl(urlsplit(page.url).query))


def typed(page, selector, text, key):
    page.locator(selector).fill(text)
    page.wait_for_function(f"new URLSearchParams(location.search).get('{key}') === {text!r}")
    settled(page)


def test_the_readme_walkthrough_on_the_page(user, base_url):
    page = user.open(base_url)
    # A hub id from the model card, as the README's second question asks it.
    typed(page, "#f-model", "meta-llama/Llama-3.1-70B", "model")
    typed(page, "#f-train_hours", "72", "train_hours")
    shown = page.locator("#answers").inner_text()
    assert "train_hours 72 given; the tokens derived from the throughput" in shown
    # fp32 master weights, one click: pycore's sentence under the precision's default and its button.
    button = page.locator("#precision-default button")
    button.scroll_into_view_if_needed()
    button.click()
    page.wait_for_function("new URLSearchParams(location.search).get('precision') === 'bf16-master'")
    settled(page)
    values = query_of(page)
    assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == estimate(values).total_bytes
    # Copy results: the clipboard holds what the command line prints for this URL.
    page.locator("#copy-results").scroll_into_view_if_needed()
    page.locator("#copy-results").click()
    page.wait_for_function("document.getElementById('status').textContent === 'Results copied as Markdown.'")
    cli = subprocess.run([sys.executable, "-m", "pycore", "--markdown", *(f"{k}={v}" for k, v in values.items())],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert page.evaluate("navigator.clipboard.readText()") == cli
    # Every chart drawn: no two pools in one chart share a colour, and no label is cut.
    charts = page.evaluate(DRAWN)
    assert {"bar", "breakdown table"} <= {name for name, _ in charts}
    for name, pairs in charts:
        styles = [style for _, style in pairs]
        assert len(set(styles)) == len(styles), f"two pools share a colour in the {name}"
    labels = page.evaluate(LABELS, "#breakdown tbody td:first-child")
    assert len(labels) >= 4
    for text, cut in labels:
        assert not cut, f"cut: {text}"
    assert user.errors == [] and user.outside == []
