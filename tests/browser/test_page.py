"""The built page in a real Chromium: one engine, two runtimes, one answer."""

import csv
import io
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest
from conftest import settled, show, total

from pycore import estimate

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.browser


def field(page, selector):
    """The control, after opening its folded section the way a user would."""
    locator = page.locator(selector)
    if not locator.is_visible():
        page.locator(f"details:has({selector}) > summary").click()
    return locator


def test_loads_with_no_console_error_and_nothing_from_outside(watched, base_url):
    page = watched.open(base_url)
    assert watched.errors == [] and watched.outside == []
    assert page.locator("#total-gib").inner_text() != "—"
    assert page.locator("#f-batch").is_enabled()


def test_inputs_disabled_until_python_is_ready(watched, base_url):
    page = watched.page
    page.goto(base_url, wait_until="domcontentloaded")
    assert page.locator("#f-batch").is_disabled()
    assert "Starting Python" in page.locator("#status").inner_text()
    page.wait_for_selector("html.py-ready", timeout=120_000)
    assert page.locator("#f-batch").is_enabled()


def test_failure_to_start_python_is_said_in_words(watched, base_url):
    watched.context.route("**/pyodide.asm.wasm", lambda route: route.abort())
    page = watched.page
    page.goto(base_url)
    page.wait_for_selector("#status.failed", timeout=120_000)
    assert "Python could not start" in page.locator("#status").inner_text()
    assert page.locator("#f-batch").is_enabled()              # the form stays usable: its link can be shared


@pytest.mark.parametrize("selector,action,value", [
    ("#f-batch", "fill", "16"), ("#f-seq", "fill", "8192"), ("#f-model", "fill", "qwen2.5-0.5b"),
    ("#f-precision", "select", "fp32"), ("#f-optimizer", "select", "sgd"), ("#f-recompute", "select", "full"),
    ("#f-attention", "select", "eager"), ("#f-act_dtype", "select", "fp32"), ("#f-mode", "select", "infer"),
    ("#f-activations", "select", "korthikanti"), ("#f-overhead", "fill", "10%"), ("#f-layers", "fill", "8"),
])
def test_each_kind_of_input_changes_the_numbers(shared, base_url, selector, action, value):
    page = shared.page
    show(page, "model=llama-3.2-1b&batch=8")        # activations dominate, so every kind of input shows
    before = total(page)
    locator = field(page, selector)
    locator.fill(value) if action == "fill" else locator.select_option(value)
    page.wait_for_function(f"document.documentElement.dataset.totalBytes !== '{before}'")
    page.wait_for_function("([k, v]) => new URLSearchParams(location.search).get(k) === v", arg=[selector[3:], value])
    query = dict(parse_qsl(urlsplit(page.url).query))
    assert total(page) == estimate(query).total_bytes


CASES = [
    "", "batch=4", "model=gpt2&batch=16&seq=1024", "model=llama-3.2-1b&precision=bf16&recompute=full&batch=8",
    "model=mistral-7b-v0.1&precision=bf16-master&optimizer=sgd-momentum", "model=qwen2.5-7b&precision=fp32",
    "model=gemma-2b&attention=eager&batch=2", "model=mixtral-8x7b&precision=bf16", "model=bert-base-uncased&batch=32&seq=512",
    "model=llama-3.1-8b&mode=infer&precision=bf16&batch=8&seq=8192&new_tokens=512",
    "model=qwen2.5-0.5b&mode=infer&kv_dtype=fp8&batch=64", "params=7B&activations=per-sample&act_per_sample=0.215GiB&batch=8",
    "params=350M&activations=multiplier&act_multiplier=20&layers=24&hidden=1024",
    "precision=amp-fp16&optimizer=adam-8bit", "precision=bf16&optimizer=lion&overhead=10%",
    "optimizer=adafactor&recompute=selective&attention=eager", "activations=korthikanti&seq=4096",
    "layers=4&hidden=1024&heads=16&kv_heads=4&ffn=2816&vocab=32000&batch=64", "precision=bf16-mixed&gpu=a100-40gb",
    "weight_dtype=bf16&opt_dtype=bf16&grad_dtype=bf16", "model=llama-3.1-8b&experts=8&experts_per_token=2",
    "overhead=3GiB&gpu=rtx-4090&model=llama-3.2-1b&precision=bf16",
]


def test_page_numbers_equal_cpython_numbers(shared, base_url):
    page = shared.page
    assert len(CASES) >= 20
    for query in CASES:
        show(page, query)
        expected = estimate(dict(parse_qsl(query))).as_dict()
        assert total(page) == expected["total_bytes"], query
        assert int(page.evaluate("document.documentElement.dataset.peakBytes")) == expected["peak_bytes"], query
        shown = page.locator("#total-gib").inner_text().replace(",", "")
        assert float(shown) == pytest.approx(expected["total_bytes"] / 2**30, abs=0.005), query
        assert page.locator("#messages p").count() == 0, query


def test_url_restores_every_field_after_reload(watched, base_url):
    page = watched.open(base_url)
    edits = {"#f-model": "gpt2", "#f-batch": "16", "#f-seq": "512", "#f-overhead": "2GiB"}
    choices = {"#f-precision": "bf16", "#f-recompute": "full", "#f-act_dtype": "fp32", "#f-optimizer": "lion"}
    for selector, value in edits.items():
        field(page, selector).fill(value)
    for selector, value in choices.items():
        field(page, selector).select_option(value)
    page.wait_for_function("location.search.includes('optimizer=lion')")
    page.reload()
    page.wait_for_selector("html.py-ready", timeout=120_000)
    for selector, value in {**edits, **choices}.items():
        assert page.locator(selector).input_value() == value
    assert total(page) == estimate(dict(parse_qsl(urlsplit(page.url).query))).total_bytes


def test_back_and_forward_restore_the_inputs(watched, base_url):
    page = watched.open(base_url)
    page.locator("#f-batch").fill("2")
    page.locator("#f-batch").dispatch_event("change")
    page.locator("#f-seq").fill("4096")
    page.locator("#f-seq").dispatch_event("change")
    four_k = total(page)
    page.go_back()
    page.wait_for_function("document.getElementById('f-seq').value === '2048'")
    assert page.locator("#f-batch").input_value() == "2"
    assert total(page) == estimate({"batch": "2"}).total_bytes
    page.go_forward()
    page.wait_for_function("document.getElementById('f-seq').value === '4096'")
    assert total(page) == four_k


def test_downloaded_csv_equals_the_command_line_csv(watched, base_url):
    query = "model=qwen2.5-7b&batch=2&precision=bf16-master&recompute=selective"
    page = watched.open(base_url, "?" + query)
    with page.expect_download() as download:
        page.locator("#download-csv").click()
    downloaded = Path(download.value.path()).read_text()
    cli = subprocess.run([sys.executable, "-m", "pycore", "--csv", *query.split("&")], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert downloaded == cli
    rows = list(csv.reader(io.StringIO(downloaded)))
    assert ["input", "batch", "2", "", ""] in rows


HOSTILE = ("?model=%3Cimg%20src%3Dx%20onerror%3Dwindow.__pwned%3D1%3E&batch=1e999&seq=NaN"
           "&%3Cscript%3Ewindow.__pwned%3D2%3C%2Fscript%3E=1&precision=%22%3E%3Csvg%20onload%3Dwindow.__pwned%3D3%3E"
           "&vocab=99999999999999999999999&overhead=-5%25&seq=3&gpu=javascript:alert(1)")


def test_hostile_url_parameters_show_messages_and_run_nothing(watched, base_url):
    page = watched.open(base_url, HOSTILE)
    messages = page.locator("#messages").inner_text()
    for key in ("model", "batch", "precision", "vocab", "overhead", "gpu"):
        assert f"{key}:" in messages
    assert page.locator("#f-seq").input_value() == "3"             # seq given twice: the last value counts
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#messages img, #messages svg, #messages script").count() == 0
    assert [e for e in watched.errors if "dialog" in e] == []
    assert page.locator("#total-gib").inner_text() != "—"          # the page still computes
    assert page.locator("#f-batch").input_value() == "1e999"        # what the user gave stays visible
    assert "using the default" in page.locator("#e-batch").inner_text()


def test_copy_link_gives_the_current_url(watched, base_url):
    page = watched.open(base_url, "?batch=3")
    watched.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.locator("#copy-link").click()
    assert page.locator("#link-field").input_value() == page.url
    assert "batch=3" in page.url


def test_parallelism_panel_stages_and_how_to_fit(watched, base_url):
    page = watched.open(base_url, "?model=llama-3.1-70b&precision=bf16-master&gpu=a100-40gb")
    assert not page.locator("#f-dp").is_visible()                 # hidden behind "single GPU"
    assert "does not fit" in page.locator("#how-to-fit").inner_text()
    field(page, "#f-pp").fill("4")
    settled(page)
    page.wait_for_selector("#stages:not([hidden])")
    assert page.locator("#stages tbody tr").count() == 4
    field(page, "#f-zero").select_option("3")
    field(page, "#f-dp").fill("8")
    page.wait_for_function("new URLSearchParams(location.search).get('dp') === '8'")
    settled(page)
    query = dict(parse_qsl(urlsplit(page.url).query))
    assert total(page) == estimate(query).total_bytes
    before = total(page)
    page.locator("#how-to-fit button").first.click()             # apply the best-ranked change
    page.wait_for_function(f"document.documentElement.dataset.totalBytes !== '{before}'")
    settled(page)
    assert total(page) < before
    assert "GPUs needed" in page.locator("#answers").inner_text()


def test_comparison_and_generic_networks(watched, base_url):
    # Short sequences: model states dominate, and bf16-master's 20 bytes a parameter outweigh fp32's 16.
    page = watched.open(base_url, "?precision=bf16-master&seq=128&compare=baseline")
    assert page.locator("#comparison").is_visible()
    assert "more memory" in page.locator("#compare-message").inner_text()
    show(page, "model=resnet-50&batch=64")
    page.wait_for_function("document.getElementById('generic-note').hidden === false")
    assert not page.locator("[data-field='seq']").is_visible()
    assert page.locator("[data-field='batch']").is_visible()
    assert total(page) == estimate({"model": "resnet-50", "batch": "64"}).total_bytes


def test_baseline_inputs_survive_editing(watched, base_url):
    page = watched.open(base_url, "?model=gpt2&seq=1024&base.batch=2&base.precision=bf16")
    assert page.locator("#comparison").is_visible()
    page.locator("#f-batch").fill("8")
    page.wait_for_function("new URLSearchParams(location.search).get('batch') === '8'")
    settled(page)
    query = parse_qsl(urlsplit(page.url).query)
    assert ("base.batch", "2") in query and ("base.precision", "bf16") in query
    expected = estimate({"model": "gpt2", "seq": "1024", "batch": "2", "precision": "bf16", "attention": "eager"}).as_dict()
    assert page.locator("#compare-message").inner_text().find(
        f"{expected['total_bytes'] / 2**30:.2f}") >= 0
