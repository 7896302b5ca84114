"""Issue 28's inputs on the page, at a phone's width and a desktop's: a hub id typed in the model field (a preset's
is estimated as that preset; one no preset has offers, in one click, the config.json import from the hub, which a
route stands in for), training hours instead of tokens, and the price field showing the number it uses and its
source, every word pycore's (web.run, web.answers)."""

import json
import os
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from conftest import Watched, seen_text, settled, total

from pycore.output import web

pytestmark = pytest.mark.browser

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
SHOTS = Path(os.environ.get("SCREENSHOT_DIR", "/tmp/shots-28"))
VIEWPORTS = [(390, 844, True), (1440, 900, False)]


@pytest.fixture(params=VIEWPORTS, ids=[f"{w}x{h}" for w, h, _ in VIEWPORTS])
def device(request, browser, base_url):
    width, height, touch = request.param
    context = browser.new_context(viewport={"width": width, "height": height}, has_touch=touch, is_mobile=touch)
    watched = Watched(context, base_url)
    watched.width = width
    yield watched
    assert watched.errors == [] and watched.outside == []
    context.close()


def shot(page, name, width):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=False)


def query_of(page):
    return dict(parse_qsl(urlsplit(page.url).query))


def no_sideways_scroll(page, width):
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def type_model(page, text):
    field = page.locator("#f-model")
    field.scroll_into_view_if_needed()
    field.fill("")
    field.type(text)
    page.wait_for_function("t => new URLSearchParams(location.search).get('model') === t", arg=text)
    settled(page)


def test_a_hub_id_typed_in_the_model_field_is_its_preset(device, base_url):
    page = device.open(base_url, "?batch=2")
    type_model(page, "META-LLAMA/Llama-3.1-70B")
    expected = json.loads(web.run("batch=2&model=META-LLAMA%2FLlama-3.1-70B"))
    assert total(page) == expected["total"]["bytes"] == json.loads(web.run("batch=2&model=llama-3.1-70b"))["total"]["bytes"]
    assert page.locator("#e-model").text_content() == ""
    assert page.locator("#params-line").text_content().startswith("llama-3.1-70b: 70,553,706,496 parameters")
    assert query_of(page)["batch"] == "2"
    shot(page, "hub-id-preset", device.width)
    no_sideways_scroll(page, device.width)


def test_an_unknown_hub_id_offers_the_hub_import_in_one_click(device, base_url):
    asked = []
    body = (CONFIGS / "qwen2.5-0.5b.json").read_text()

    def hub(route):
        asked.append(route.request.url)
        route.fulfill(body=body, content_type="application/json")
    device.context.route("https://huggingface.co/**", hub)
    page = device.open(base_url, "?batch=4")
    type_model(page, "acme/Foo-0.5B")
    offer = json.loads(web.run("batch=4&model=acme%2FFoo-0.5B"))
    line = page.locator("#e-model")
    # on a loaded machine the typing pauses mid-word and the line can still show that pause's "Did you mean" (for
    # "acme", a name no preset has) when the answers settle (seen once in CI): wait for the whole id's offer
    line.locator("button", has_text="Fetch").wait_for()
    assert line.locator("button").text_content() == offer["hub_offer"]["label"]
    assert offer["errors"]["model"] in line.text_content()
    assert "the results are the default model's (llama-3.1-8b)" in offer["errors"]["model"]     # whose numbers show
    assert total(page) == offer["total"]["bytes"]                       # the default model meanwhile, batch kept
    line.locator("button").scroll_into_view_if_needed()
    shot(page, "hub-id-offer", device.width)
    no_sideways_scroll(page, device.width)
    line.locator("button").click()
    page.wait_for_function("document.getElementById('import-status').textContent.includes('Imported')")
    page.wait_for_function("new URLSearchParams(location.search).get('name') === 'acme/Foo-0.5B'")
    settled(page)
    assert asked == ["https://huggingface.co/acme/Foo-0.5B/resolve/main/config.json"]
    query = query_of(page)
    imported = dict(json.loads(web.import_config(body, "acme/Foo-0.5B"))["query"])     # the import's inputs
    assert {key: query.get(key) for key in imported} == imported and query["batch"] == "4"
    assert total(page) == json.loads(web.run(urlencode(query)))["total"]["bytes"]
    assert page.locator("#params-line").text_content().startswith("acme/Foo-0.5B: 494,032,768 parameters")
    assert page.locator("#e-model").text_content() == ""
    shot(page, "hub-id-imported", device.width)


def answer_text(page, label):
    return page.evaluate("l => { const dt = [...document.querySelectorAll('#answers dt')].find(n => n.textContent === l);"
                         " return dt ? dt.nextElementSibling.textContent : null; }", label)


def test_hours_instead_of_tokens(device, base_url):
    page = device.open(base_url, "?gpus=64")
    hours = page.locator("#f-train_hours")
    hours.scroll_into_view_if_needed()
    hours.fill("72")
    page.wait_for_function("new URLSearchParams(location.search).get('train_hours') === '72'")
    settled(page)
    shown = {row["label"]: row["text"] for row in json.loads(web.answers("gpus=64&train_hours=72"))["display"]}
    assert answer_text(page, "Time and cost") == shown["Time and cost"]
    assert shown["Time and cost"].endswith("(train_hours 72 given; the tokens derived from the throughput)")
    # Both: the later field is refused by name, the estimate keeps the tokens and every other input.
    tokens = page.locator("#f-train_tokens")
    tokens.fill("1T")
    page.wait_for_function("new URLSearchParams(location.search).get('train_tokens') === '1T'")
    settled(page)
    message = json.loads(web.run("gpus=64&train_tokens=1T&train_hours=72"))["errors"]["train_hours"]
    assert "give train_tokens or train_hours, not both" in message
    assert page.locator("#e-train_hours").text_content().startswith(message)
    assert answer_text(page, "Time and cost").endswith("(train_tokens 1T given; the time derived from the throughput)")
    assert query_of(page)["gpus"] == "64"
    page.locator("#e-train_hours").scroll_into_view_if_needed()
    shot(page, "hours-and-tokens", device.width)
    no_sideways_scroll(page, device.width)


def test_the_price_field_shows_the_number_it_uses_and_its_source(device, base_url):
    page = device.open(base_url)
    price = page.locator("#f-price")
    expected = json.loads(web.run(""))["field_defaults"]["price"]
    assert price.get_attribute("placeholder") == expected["placeholder"] == "2.99"
    assert seen_text(page.locator("#d-price")) == expected["text"]
    shot(page, "price-default", device.width)
    gpu = page.locator("#f-gpu")
    gpu.fill("a10g")
    page.wait_for_function("new URLSearchParams(location.search).get('gpu') === 'a10g'")
    settled(page)
    expected = json.loads(web.run("gpu=a10g"))["field_defaults"]["price"]
    assert price.get_attribute("placeholder") == "1.006"
    assert page.locator("#d-price").text_content() == expected["text"]
    price.fill("0.8")
    page.wait_for_function("new URLSearchParams(location.search).get('price') === '0.8'")
    settled(page)
    assert page.locator("#d-price").text_content() == json.loads(web.run("gpu=a10g&price=0.8"))["field_defaults"]["price"]["text"]
    assert page.locator("#d-price").text_content().startswith("$0.80 per GPU-hour, as given; $1.006 is the catalog price")
    page.locator("#d-price").scroll_into_view_if_needed()
    shot(page, "price-given", device.width)
    no_sideways_scroll(page, device.width)
