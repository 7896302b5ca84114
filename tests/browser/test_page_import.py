"""Importing a Hugging Face config.json on the page: paste, upload, fetch from the hub (stubbed)."""

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from pycore.output import web

CONFIGS = Path(__file__).resolve().parents[1] / "configs"
pytestmark = pytest.mark.browser


def open_import(page):
    page.locator("#import > summary").click()


def imported_total(page):
    page.wait_for_function("document.getElementById('import-status').textContent.includes('Imported')")
    page.wait_for_function("new URLSearchParams(location.search).has('model')")
    query = dict(parse_qsl(urlsplit(page.url).query))
    # what pycore's page entry point gives for the link (a sequence past a learned position table is
    # estimated at the longest it embeds, said under seq)
    expected = json.loads(web.run(urlencode(query)))["total"]["bytes"]
    assert int(page.evaluate("document.documentElement.dataset.totalBytes")) == expected
    return query


def test_paste_a_config_and_the_link_keeps_it(watched, base_url):
    page = watched.open(base_url, "?batch=4")
    open_import(page)
    page.locator("#import-text").fill((CONFIGS / "qwen2.5-0.5b.json").read_text())
    page.locator("#import-apply").click()
    query = imported_total(page)
    assert query["batch"] == "4"                            # the workload is kept
    assert "494,032,768 parameters" in page.locator("#params-line").inner_text()
    page.reload()
    page.wait_for_selector("html.py-ready", timeout=120_000)
    assert page.locator("#f-hidden").input_value() == "896"
    assert "494,032,768 parameters" in page.locator("#params-line").inner_text()


def test_upload_a_config_file(watched, base_url):
    page = watched.open(base_url)
    open_import(page)
    page.locator("#import-file").set_input_files(str(CONFIGS / "gpt2.json"))
    assert imported_total(page)["model"] == "gpt2"


def test_fetch_from_the_hub(watched, base_url):
    body = (CONFIGS / "qwen3-30b-a3b.json").read_text()
    watched.context.route("https://huggingface.co/**", lambda route: route.fulfill(body=body, content_type="application/json"))
    page = watched.open(base_url)
    open_import(page)
    page.locator("#import-hub").fill("Qwen/Qwen3-30B-A3B")
    page.locator("#import-fetch").click()
    assert imported_total(page)["model"] == "qwen3-30b-a3b"


def test_gated_model_says_to_paste_instead(watched, base_url):
    watched.context.route("https://huggingface.co/**", lambda route: route.fulfill(status=401, body="gated"))
    page = watched.open(base_url)
    open_import(page)
    page.locator("#import-hub").fill("meta-llama/Llama-3.1-8B")
    page.locator("#import-fetch").click()
    status = page.locator("#import-status")
    page.wait_for_function("document.getElementById('import-status').textContent.includes('refused')")
    assert "gated" in status.inner_text() and "paste" in status.inner_text()


def test_partial_config_names_the_missing_fields(watched, base_url):
    page = watched.open(base_url)
    open_import(page)
    page.locator("#import-text").fill(json.dumps({"model_type": "llama", "hidden_size": 4096}))
    page.locator("#import-apply").click()
    status = page.locator("#import-status").inner_text()
    assert "num_hidden_layers" in status and "vocab_size" in status
    assert "model=" not in page.url                         # nothing changed


def test_a_family_no_preset_expresses_travels_in_the_link(watched, base_url):
    # issue 29: Granite 4.0's hybrid (Mamba-2 and attention layers, MoE): transformers 5.24's default config
    # (tests/configs/families/granitemoehybrid.json), which no preset with overrides expresses, is carried by the link
    page = watched.open(base_url, "?mode=infer&engine=vllm&tp=2")
    open_import(page)
    page.locator("#import-text").fill((CONFIGS / "families" / "granitemoehybrid.json").read_text())
    page.locator("#import-apply").click()
    query = imported_total(page)
    assert json.loads(query["config"])["model_type"] == "granitemoehybrid" and query["tp"] == "2"
    assert "the link carries it" in page.locator("#import-status").inner_text()
    # 38,601,064,448: transformers on the meta device (validation/config_counts.json)
    assert "38,601,064,448 parameters" in page.locator("#params-line").inner_text()
    assert page.locator("[data-field='config']").is_visible()
    assert "KV cache and state slots" in page.locator("#breakdown").inner_text()
    page.reload()
    page.wait_for_selector("html.py-ready", timeout=120_000)
    assert "38,601,064,448 parameters" in page.locator("#params-line").inner_text()
    # another model leaves the imported config: it is gone from the form and the link
    page.locator("#f-model").fill("llama-3.1-8b")
    page.locator("#f-model").press("Enter")
    page.wait_for_function("!new URLSearchParams(location.search).has('config')")
    assert "name" not in dict(parse_qsl(urlsplit(page.url).query))      # nor the name it gave the model
    assert page.locator("#f-config").input_value() == ""
    assert page.locator("[data-field='config']").is_hidden()
    assert "8,030,261,248 parameters" in page.locator("#params-line").inner_text()


def test_a_hub_fetch_no_preset_expresses_names_the_hub_id(watched, base_url):
    # a Mamba-2 with biases, which no preset expresses (mamba-codestral-7b-v0.1 has none): a small config made by
    # transformers 5.24 (tests/configs/variants/synthetic-mamba2-biased.json), served under a hub id no preset has
    body = (CONFIGS / "variants" / "synthetic-mamba2-biased.json").read_text()
    watched.context.route("https://huggingface.co/**", lambda route: route.fulfill(body=body, content_type="application/json"))
    page = watched.open(base_url)
    open_import(page)
    page.locator("#import-hub").fill("AntonV/mamba2-130m-hf")
    page.locator("#import-fetch").click()
    query = imported_total(page)
    assert query["model"] == query["name"] == "AntonV/mamba2-130m-hf" and "config" in query
    assert page.locator("#f-model").input_value() == "AntonV/mamba2-130m-hf"
