"""The model picker (issue 28): typing in the model field lists the presets whose name, hub id, family or size
match, each with pycore's words for it (report.model_choices: parameters, context length, dense / MoE /
hybrid / VL); arrow keys, Enter and Escape work it; a pick sets the model alone and keeps every other input;
config.json imports are listed first from then on (localStorage), shown as text whatever storage holds. At a
phone's width and a desktop's."""

import json
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import settled, show, total

from pycore.output import report, web

pytestmark = pytest.mark.browser

CHOICES = {entry["id"]: entry for entry in report.model_choices()}
OPTIONS = """() => [...document.querySelectorAll('#model-picker [role=option]')].map((n) => ({
  name: n.querySelector('.pick-name').textContent, what: n.querySelector('.pick-what').textContent,
  detail: n.querySelector('.pick-detail').textContent, selected: n.getAttribute('aria-selected'), id: n.id,
  recent: n.classList.contains('recent')}))"""
CONFIG = Path(__file__).resolve().parents[1] / "configs" / "qwen3-30b-a3b.json"


def typed_in(page, text):
    field = page.locator("#f-model")
    field.scroll_into_view_if_needed()
    field.click()
    field.fill("")
    field.press_sequentially(text)
    page.wait_for_selector("#model-picker:not([hidden])")
    return page.evaluate(OPTIONS)


def matching(text):
    return {model for model, entry in CHOICES.items() if all(word in entry["words"] for word in text.lower().split())}


def params_of(page):
    return {key: values[-1] for key, values in parse_qs(urlparse(page.url).query).items()}


def no_sideways_scroll(page):
    assert page.evaluate("document.scrollingElement.scrollWidth <= document.documentElement.clientWidth")


@pytest.mark.parametrize("width", [390, 1440])
def test_typing_filters_the_presets_and_the_keys_pick_one(watched, base_url, width):
    page = watched.open(base_url, "?batch=4&seq=1536&gpu=a100-sxm-80gb")
    page.set_viewport_size({"width": width, "height": 900})
    options = typed_in(page, "qwen")
    names = [o["name"] for o in options if not o["recent"]]
    assert set(names) == matching("qwen") and len(names) > 10
    for o in options:
        entry = CHOICES[o["name"]]
        assert o["what"] == entry["what"]                       # pycore's words, as they are
        assert o["detail"] == " · ".join([entry["detail"], ", ".join(entry["hub"])])
    assert page.get_attribute("#f-model", "aria-expanded") == "true"
    no_sideways_scroll(page)
    page.screenshot(path=f"/tmp/picker-qwen-{width}.png")
    # Arrow keys move the highlight (aria-activedescendant), Enter picks it.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    options = page.evaluate(OPTIONS)
    assert [o["selected"] for o in options[:3]] == ["false", "true", "false"]
    assert page.get_attribute("#f-model", "aria-activedescendant") == options[1]["id"]
    page.keyboard.press("Enter")
    assert page.locator("#model-picker").is_hidden()
    assert page.input_value("#f-model") == options[1]["name"]
    page.wait_for_function("(m) => new URLSearchParams(location.search).get('model') === m", arg=options[1]["name"])
    settled(page)
    query = f"batch=4&seq=1536&gpu=a100-sxm-80gb&model={options[1]['name']}"
    assert params_of(page) == {"batch": "4", "seq": "1536", "gpu": "a100-sxm-80gb", "model": options[1]["name"]}
    assert total(page) == json.loads(web.run(query))["result"]["total_bytes"]

    # A hub id's owner lists that owner's presets; a click picks one; Escape closes and keeps the text.
    options = typed_in(page, "meta-llama/")
    assert {o["name"] for o in options} == matching("meta-llama/")
    assert all(CHOICES[o["name"]]["hub"][0].startswith("meta-llama/") for o in options)
    page.screenshot(path=f"/tmp/picker-meta-llama-{width}.png")
    page.locator("#model-picker [role=option]", has_text="llama-3.1-70b").first.click()
    assert page.input_value("#f-model") == "llama-3.1-70b"
    page.wait_for_function("new URLSearchParams(location.search).get('model') === 'llama-3.1-70b'")
    settled(page)
    assert params_of(page)["batch"] == "4" and params_of(page)["gpu"] == "a100-sxm-80gb"
    typed_in(page, "mixtral")
    page.keyboard.press("Escape")
    assert page.locator("#model-picker").is_hidden()
    assert page.input_value("#f-model") == "mixtral"
    assert page.get_attribute("#f-model", "aria-expanded") == "false"
    assert not watched.errors, watched.errors


def test_imports_are_listed_first_and_picked_again(watched, base_url):
    page = watched.open(base_url, "?batch=2")
    page.locator("#import > summary").click()
    page.fill("#import-text", CONFIG.read_text())
    page.click("#import-apply")
    page.wait_for_function("new URLSearchParams(location.search).get('max_positions') === '32768'")
    settled(page)
    imported = params_of(page)
    choice = json.loads(web.import_config(CONFIG.read_text()))["choice"]
    show(page, "model=gpt2&batch=2")
    page.reload()
    page.wait_for_selector("html.py-ready", timeout=120_000)
    settled(page)
    options = typed_in(page, "qwen3-30b")
    assert options[0] == {**options[0], "name": choice["label"], "what": choice["what"], "detail": choice["detail"],
                          "recent": True}
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    page.wait_for_function("new URLSearchParams(location.search).get('max_positions') === '32768'")
    settled(page)
    assert params_of(page) == imported
    assert not watched.errors, watched.errors


def test_stored_imports_are_shown_as_text(watched, base_url):
    page = watched.open(base_url)
    hostile = [{"label": "<img src=x onerror=alert(1)>", "what": "<b>MoE</b>", "detail": "x",
                "query": [["model", "gpt2"]]}, {"label": 5, "what": "", "detail": "", "query": "model=gpt2"}]
    page.evaluate("(v) => localStorage.setItem('gpu-memory-estimator.recent-imports', JSON.stringify(v))", hostile)
    options = typed_in(page, "img")
    assert options[0]["name"] == "<img src=x onerror=alert(1)>" and options[0]["what"] == "<b>MoE</b>"
    assert page.locator("#model-picker img, #model-picker b").count() == 0
    assert len([o for o in options if o["recent"]]) == 1          # the malformed entry is left out
    page.evaluate("localStorage.setItem('gpu-memory-estimator.recent-imports', '{not json')")
    assert typed_in(page, "gpt2")[0]["name"] == "gpt2"
    assert not watched.errors, watched.errors
