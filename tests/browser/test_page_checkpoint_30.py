"""Issue 30 on the page: launch settings out (copyable blocks) and back (a pasted block fills the form), calibration
from a pasted run (measured against estimated, Apply writes the overrides into the link), and a checkpoint's headers
read from local files (weight_bytes). Every block, row and message the page shows is pycore's own
(pycore.output.web), compared here with what it returns; the checkpoints are files the tests write with struct."""

import json
import struct
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from conftest import READY_MS, settled, total

from pycore.output import web

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "build" / "screenshots"
pytestmark = pytest.mark.browser

sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402


def query_of(page):
    return dict(parse_qsl(urlsplit(page.url).query))


def open_tool(page, name):
    page.locator(f"#{name} > summary").click()


def wait_query(page, key, value):
    """Wait for the link to give ``key`` this value (None: the key left out, as a default is)."""
    page.wait_for_function(f"new URLSearchParams(location.search).get({key!r}) === {json.dumps(value)}")
    settled(page)


# --- launch settings out --------------------------------------------------------------------------------------


@pytest.mark.parametrize("query,kinds", [
    ("model=llama-3.1-70b&mode=infer&engine=vllm&tp=4&kv_dtype=fp8", ["vllm"]),
    ("batch=2&microbatches=8&recompute=full&zero=2&dp=4", ["trainer", "deepspeed"]),
])
def test_the_blocks_are_pycores_export_for_the_setup_on_screen(watched, base_url, query, kinds):
    page = watched.open(base_url, "?" + query)
    watched.context.grant_permissions(["clipboard-read", "clipboard-write"])
    open_tool(page, "export")
    page.wait_for_selector("#export-blocks .export-block")
    expected = json.loads(web.launch(query))["blocks"]
    assert [b["kind"] for b in expected] == kinds
    blocks = page.locator("#export-blocks .export-block")
    assert blocks.count() == len(kinds)
    for i, block in enumerate(expected):
        shown = blocks.nth(i)
        assert shown.locator("pre").text_content() == block["text"]
        assert block["follows"] in shown.inner_text()            # the framework version it follows
        shown.locator("button").click()
        page.wait_for_function("document.getElementById('export-copied').textContent.includes('copied')")
        assert page.evaluate("navigator.clipboard.readText()") == block["text"]


def test_the_blocks_follow_the_form_and_generate_has_none(watched, base_url):
    page = watched.open(base_url, "?mode=infer&engine=vllm")
    open_tool(page, "export")
    page.wait_for_selector("#export-blocks .export-block")
    page.locator("#f-seq").fill("4000")
    wait_query(page, "seq", "4000")
    page.wait_for_function("document.querySelector('#export-blocks pre').textContent.includes('--max-model-len 4256')")
    page.locator("#f-engine").select_option("hf")
    wait_query(page, "engine", None)                    # hf is the default: the link leaves it out
    page.wait_for_function("document.querySelectorAll('#export-blocks .export-block').length === 0")
    assert page.locator("#export-note").text_content() == json.loads(web.launch(urlencode(query_of(page))))["note"]


# --- launch settings back -------------------------------------------------------------------------------------


def test_a_pasted_deepspeed_config_fills_the_form_and_names_what_it_leaves(watched, base_url):
    page = watched.open(base_url, "?model=llama-3.1-8b&seq=1024")
    open_tool(page, "export-paste")
    pasted = json.dumps({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8,
                         "zero_optimization": {"stage": 3, "overlap_comm": True,
                                               "offload_optimizer": {"device": "cpu"}},
                         "bf16": {"enabled": True}, "gradient_clipping": 1.0})
    page.locator("#export-text").fill(pasted)
    page.locator("#export-apply").click()
    wait_query(page, "zero", "3")
    query = query_of(page)
    assert (query["batch"], query["microbatches"], query["offload"], query["seq"]) == ("4", "8", "optimizer", "1024")
    status = page.locator("#export-status").text_content()
    assert status == json.loads(web.launch_read(pasted))["message"]
    assert "zero_optimization.overlap_comm" in status and "gradient_clipping" in status and "bf16" in status
    assert total(page) == json.loads(web.run(urlencode(query)))["total"]["bytes"]


def test_an_exported_vllm_line_pasted_back_gives_the_same_estimate(watched, base_url):
    query = "model=llama-3.1-70b&mode=infer&engine=vllm&tp=4&seq=8192&new_tokens=512"
    line = json.loads(web.launch(query))["blocks"][0]["text"]
    page = watched.open(base_url, "?batch=3")
    before = total(page)
    open_tool(page, "export-paste")
    page.locator("#export-text").fill(line)
    page.locator("#export-apply").click()
    wait_query(page, "tp", "4")
    assert total(page) == json.loads(web.run(query))["total"]["bytes"] != before
    # every flag of the exported line is read (--dtype too: auto, the checkpoint's, as precision=auto exports it)
    assert "Not read" not in page.locator("#export-status").text_content()


def test_bad_pasted_settings_are_refused_by_name_and_nothing_is_lost(watched, base_url):
    page = watched.open(base_url, "?batch=3&seq=512")
    open_tool(page, "export-paste")
    page.locator("#export-text").fill("<img src=x onerror=window.__pwned=1> not a config")
    page.locator("#export-apply").click()
    status = page.locator("#export-status")
    page.wait_for_function("document.getElementById('export-status').textContent !== ''")
    assert "Pasted settings:" in status.text_content() and "failed" in status.get_attribute("class")
    # a value the schema refuses is named under its key; the others are taken
    page.locator("#export-text").fill('{"per_device_train_batch_size": "auto", "gradient_accumulation_steps": 2}')
    page.locator("#export-apply").click()
    wait_query(page, "microbatches", "2")
    assert "batch: got 'auto'" in status.text_content()
    assert (query_of(page)["batch"], query_of(page)["seq"]) == ("3", "512")
    assert page.locator("#export-paste img").count() == 0 and page.evaluate("window.__pwned") is None
    assert watched.errors == [] and watched.outside == []


# --- calibration ------------------------------------------------------------------------------------------------

def measured_case(label):
    """validation/measured.json: a case's inputs and its peak as measure.py recorded it (max_memory_allocated)."""
    case = next(c for c in json.loads((ROOT / "validation" / "measured.json").read_text())["cases"]
                if c["label"] == label)
    return compare.measured_inputs(case["inputs"]), case["peak_bytes"]


def shown_rows(page):
    return page.eval_on_selector_all("#calibrate-table tbody tr",
                                     "rs => rs.map(r => [...r.cells].map(c => c.textContent))")


def test_calibration_applies_its_overrides_to_the_link_and_they_survive_a_reload(watched, base_url):
    inputs, peak = measured_case("llama-3.2-1b bf16 adamw")
    query = urlencode(inputs)
    pasted = f"torch.cuda.max_memory_allocated(): {peak}\n"
    page = watched.open(base_url, "?" + query)
    open_tool(page, "calibrate")
    page.locator("#calibrate-text").fill(pasted)
    page.locator("#calibrate-run").click()
    page.wait_for_selector("#calibrate-result:not([hidden])")
    expected = json.loads(web.calibration(pasted, query))
    assert shown_rows(page) == [[r["label"], r["measured"], r["estimated"], r["difference"], r["calibrated"],
                                 r["override"]] for r in expected["display"]["rows"]]
    # on a phone each row is a card of labelled lines: nothing to scroll sideways
    page.set_viewport_size({"width": 390, "height": 844})
    box = page.locator("#calibrate-result .table-scroll")
    assert box.evaluate("b => b.scrollWidth <= b.clientWidth")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.set_viewport_size({"width": 1280, "height": 800})
    assert "GiB = 2^30 bytes" in page.locator("#calibrate-unit").text_content()
    overrides = dict(expected["overrides"])
    assert overrides["activations"] == "per-sample"
    page.locator("#calibrate-apply").click()
    wait_query(page, "act_per_sample", overrides["act_per_sample"])
    now = query_of(page)
    assert now["activations"] == "per-sample" and now["model"] == "llama-3.2-1b"
    # act_per_sample is whole bytes a sample: the calibrated peak is the measured one, or under by less than a
    # byte a sample (pycore.answers.calibrate's per_sample_rounding)
    result = json.loads(web.run(urlencode(now)))
    assert 0 <= peak - result["result"]["peak_bytes"] < int(inputs["batch"])
    page.reload()
    page.wait_for_selector("html.py-ready", timeout=READY_MS)
    page.wait_for_function("document.documentElement.dataset.totalBytes !== undefined")
    assert page.locator("#f-act_per_sample").input_value() == overrides["act_per_sample"]
    assert total(page) == result["total"]["bytes"]


def test_calibration_from_a_vllm_log_and_nvidia_smi(watched, base_url):
    # tests/test_calibrate.py's case: vLLM PR 10511's H100 table and an nvidia-smi line made up for the arithmetic
    sys.path.insert(0, str(ROOT / "tests"))
    from test_calibrate import VLLM_TABLE_H100
    pasted = VLLM_TABLE_H100 + "| N/A   30C    P0   120W / 700W |  74100MiB / 81559MiB |     0%      Default |\n"
    query = "model=llama-3-8b&mode=infer&engine=vllm&gpu_util=0.95"
    page = watched.open(base_url, "?" + query)
    open_tool(page, "calibrate")
    page.locator("#calibrate-text").fill(pasted)
    page.locator("#calibrate-run").click()
    page.wait_for_selector("#calibrate-apply:not([hidden])")
    page.locator("#calibrate-apply").click()
    outside = 74100 * 2**20 - round(71.29 * 2**30)
    wait_query(page, "overhead", str(outside))
    assert "gpu_util" not in query_of(page)                 # the log's 0.90 is the default: the link leaves it out
    assert page.locator("#f-gpu_util").input_value() == "0.9"
    result = json.loads(web.run(urlencode(query_of(page))))["result"]
    assert result["total_bytes"] - result["peak_bytes"] == outside
    # re-compared at once with the calibrated setup: pycore's checks say the figures are met
    checks = page.locator("#calibrate-checks").text_content()
    assert "(equal)" in checks


def test_unrecognised_text_is_refused_and_the_inputs_stay(watched, base_url):
    page = watched.open(base_url, "?batch=2")
    before = page.url
    open_tool(page, "calibrate")
    page.locator("#calibrate-text").fill("<b>hello</b> nothing measured here")
    page.locator("#calibrate-run").click()
    page.wait_for_function("document.getElementById('calibrate-status').textContent !== ''")
    status = page.locator("#calibrate-status").text_content()
    assert status.startswith("Pasted run figures: no figure recognised; expected a vLLM start-up log")
    assert page.locator("#calibrate-result").is_hidden() and page.url == before
    assert page.locator("#calibrate b").count() == 0
    assert watched.errors == [] and watched.outside == []


# --- how it looks -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("width", [390, 1440])
def test_the_panels_fit_phones_and_wide_screens(browser, base_url, width):
    sys.path.insert(0, str(ROOT / "tests"))
    from test_calibrate import VLLM_TABLE_H100
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.goto(base_url + "?model=llama-3-8b&mode=infer&engine=vllm&gpu_util=0.95")
        page.wait_for_selector("html.py-ready", timeout=READY_MS)
        settled(page)
        for name in ("export", "export-paste", "calibrate"):
            open_tool(page, name)
        page.locator("#calibrate-text").fill(VLLM_TABLE_H100)
        page.locator("#calibrate-run").click()
        page.wait_for_selector("#calibrate-result:not([hidden])")
        launch = page.locator("#launch")
        launch.scroll_into_view_if_needed()
        SHOTS.mkdir(parents=True, exist_ok=True)
        launch.screenshot(path=str(SHOTS / f"launch-{width}.png"))
        # nothing wider than the page: the page itself never scrolls sideways
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        box = launch.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
        for selector in ("#export-blocks pre", "#export-blocks button", "#calibrate-run", "#export-apply"):
            item = page.locator(selector).first.bounding_box()
            assert item["x"] >= 0 and item["x"] + item["width"] <= width, selector
    finally:
        context.close()


# --- reading a checkpoint's headers from local files ------------------------------------------------------------

# Every Blob.slice the page makes, recorded before its own scripts run (an init script, not subject to the CSP).
RECORD_SLICES = """
window.__slices = [];
const slice = Blob.prototype.slice;
Blob.prototype.slice = function (start, end, type) {
  window.__slices.push([this.name || '', this.size, start ?? 0, end ?? this.size]);
  return slice.call(this, start, end, type);
};
"""


def shard(path, tensors, data_bytes_each):
    """A safetensors file written here with struct: 8-byte length, the JSON header, then zeros for the tensors.
    tensors: name -> (dtype, shape); each tensor's bytes are data_bytes_each (the shape's elements x 2 for BF16).
    Returns its header's length (8 + JSON)."""
    header, at = {}, 0
    for name, (dtype, shape) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + data_bytes_each]}
        at += data_bytes_each
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + bytes(at))
    return 8 + len(raw)


def sharded_checkpoint(folder):
    """Two shards of 512 x 1024 BF16 tensors (1 MiB each) and transformers' index; (paths, header lengths)."""
    first = {"model.embed_tokens.weight": ("BF16", (512, 1024)),
             "model.layers.0.mlp.up_proj.weight": ("BF16", (512, 1024))}
    second = {"model.layers.0.self_attn.q_proj.weight": ("BF16", (512, 1024)), "lm_head.weight": ("BF16", (512, 1024))}
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    headers = {name: shard(folder / name, tensors, 512 * 1024 * 2) for name, tensors in zip(names, (first, second))}
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"metadata": {"total_size": 4 * 2**20},
                                 "weight_map": {t: n for n, ts in zip(names, (first, second)) for t in ts}}))
    return [index, *(folder / name for name in names)], headers


def weights_row(page):
    page.locator("#how").evaluate("node => node.open = true")
    return page.eval_on_selector_all("#formulas tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")


def test_reading_a_sharded_checkpoint_reads_only_its_headers_and_sets_weight_bytes(watched, base_url, tmp_path):
    paths, headers = sharded_checkpoint(tmp_path)
    # what the files hold after their headers: the weights' bytes, derived from the files themselves
    expected = sum(path.stat().st_size - headers[path.name] for path in paths[1:])
    assert expected == 4 * 512 * 1024 * 2
    watched.page.add_init_script(RECORD_SLICES)
    page = watched.open(base_url, "?model=llama-3.1-8b&batch=2")
    page.locator("#checkpoint > summary").click()
    page.locator("#checkpoint-files").set_input_files([str(p) for p in paths])
    wait_query(page, "weight_bytes", str(expected))
    query = query_of(page)
    assert query["weight_files"] == "2 files, model-00001-of-00002.safetensors ... model-00002-of-00002.safetensors"
    assert query["batch"] == "2"                                # the other inputs stay
    status = page.locator("#checkpoint-status").text_content()
    assert f"{expected:,} bytes = 0.004 GiB of weights (GiB = 2^30 bytes)" in status
    # only headers were read: no slice of a shard went past its 8 bytes and JSON
    slices = page.evaluate("window.__slices")
    assert slices and all(end <= headers[name] for name, size, start, end in slices if name in headers)
    assert max(end for name, _, _, end in slices if name in headers) == max(headers.values())
    # the table: pycore's rows by pool, exact bytes
    rows = page.eval_on_selector_all("#checkpoint-table tbody tr", "rs => rs.map(r => [...r.cells].map(c => c.textContent))")
    assert rows[:4] == [["embedding", "1,048,576", "0.001 GiB"], ["layers: attention (or other mixer)", "1,048,576", "0.001 GiB"],
                        ["layers: MLP", "1,048,576", "0.001 GiB"], ["head and final norm", "1,048,576", "0.001 GiB"]]
    # the estimate takes them: the weights' record says where they come from
    assert total(page) == json.loads(web.run(urlencode(query)))["total"]["bytes"]
    weights = next(r for r in weights_row(page) if r[0].startswith("Weights"))
    assert weights[1].startswith("W") and f"{expected:,}" in weights[1]
    assert "from the checkpoint's headers (2 files, model-00001-of-00002.safetensors" in weights[3]
    page.reload()
    page.wait_for_selector("html.py-ready", timeout=READY_MS)
    page.wait_for_function("document.documentElement.dataset.totalBytes !== undefined")
    assert page.locator("#f-weight_bytes").input_value() == str(expected)


def test_choosing_another_model_forgets_the_checkpoints_bytes(watched, base_url):
    # a checkpoint read for Llama 3.1 8B (its bf16 bytes), then another model picked or typed: the weights are that
    # model's again, not 8B's bytes under its name
    page = watched.open(base_url, "?model=llama-3.1-8b&batch=2&weight_bytes=16060522496&weight_files=model.safetensors")
    field = page.locator("#f-model")
    field.fill("llama-3.2-1b")
    wait_query(page, "model", "llama-3.2-1b")
    page.wait_for_function("new URLSearchParams(location.search).get('weight_bytes') === null")
    query = query_of(page)
    assert "weight_files" not in query and query["batch"] == "2"         # the other inputs stay
    assert page.locator("#f-weight_bytes").input_value() == "0"
    assert total(page) == json.loads(web.run(urlencode(query)))["total"]["bytes"]


def test_retyping_the_same_model_keeps_the_checkpoints_bytes(watched, base_url):
    # the name is judged once typing pauses: "llama-3.1-" on the way back to "llama-3.1-8b" forgets nothing
    page = watched.open(base_url, "?model=llama-3.1-8b&batch=2&weight_bytes=16060522496&weight_files=model.safetensors")
    field = page.locator("#f-model")
    field.click()
    field.press("End")
    for _ in range(2):
        field.press("Backspace")
    page.keyboard.type("8b", delay=60)
    page.keyboard.press("Escape")
    settled(page)
    page.wait_for_timeout(700)          # past the typing pause (app.js TYPING_PAUSE_MS) and the link's write
    assert query_of(page).get("weight_bytes") == "16060522496"
    assert page.locator("#f-weight_bytes").input_value() == "16060522496"


def test_a_malformed_or_incomplete_checkpoint_is_named_and_nothing_changes(watched, base_url, tmp_path):
    paths, _ = sharded_checkpoint(tmp_path)
    page = watched.open(base_url, "?batch=2")
    before = page.url
    page.locator("#checkpoint > summary").click()
    page.locator("#checkpoint-files").set_input_files([str(paths[0]), str(paths[1])])    # a shard left out
    page.wait_for_function("document.getElementById('checkpoint-status').className.includes('failed')")
    assert "the index names 'model-00002-of-00002.safetensors', which was not chosen with it" in \
        page.locator("#checkpoint-status").text_content()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", 10**12) + b"{<img src=x onerror=window.__pwned=1>}")
    page.locator("#checkpoint-files").set_input_files(str(bad))
    page.wait_for_function("document.getElementById('checkpoint-status').textContent.includes('bad.safetensors')")
    assert page.locator("#checkpoint-status").text_content().startswith("Checkpoint: bad.safetensors")
    assert page.url == before and page.locator("#checkpoint-table").is_hidden()
    assert page.locator("#checkpoint img").count() == 0 and page.evaluate("window.__pwned") is None
    assert watched.errors == [] and watched.outside == []


@pytest.mark.parametrize("width", [390, 1440])
def test_the_checkpoint_panel_fits_phones_and_wide_screens(browser, base_url, tmp_path, width):
    paths, _ = sharded_checkpoint(tmp_path)
    context = browser.new_context(viewport={"width": width, "height": 900})
    try:
        page = context.new_page()
        page.goto(base_url)
        page.wait_for_selector("html.py-ready", timeout=READY_MS)
        settled(page)
        page.locator("#checkpoint > summary").click()
        page.locator("#checkpoint-files").set_input_files([str(p) for p in paths])
        page.wait_for_selector("#checkpoint-table:not([hidden])")
        panel = page.locator("#checkpoint")
        panel.scroll_into_view_if_needed()
        SHOTS.mkdir(parents=True, exist_ok=True)
        panel.screenshot(path=str(SHOTS / f"checkpoint-{width}.png"))
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        box = page.locator("#checkpoint-table").bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width
    finally:
        context.close()


# --- the same from the hub, by range requests to a local stand-in ------------------------------------------------

def test_reading_from_the_hub_fetches_the_index_then_only_each_shards_header(watched, base_url, tmp_path):
    from hub_standin import StandInHub
    paths, headers = sharded_checkpoint(tmp_path)
    expected = sum(path.stat().st_size - headers[path.name] for path in paths[1:])
    with StandInHub(tmp_path) as hub:
        hub.forward(watched.context)
        page = watched.open(base_url, "?batch=2")
        page.locator("#checkpoint > summary").click()
        assert hub.requests == 0                                 # nothing before the click
        page.locator("#checkpoint-hub").fill("acme/tiny-model")
        page.locator("#checkpoint-fetch").click()
        wait_query(page, "weight_bytes", str(expected))
        # transferred: the index whole, then per shard its 8 bytes and then its 8 bytes and JSON (two ranges)
        assert hub.sent == paths[0].stat().st_size + sum(8 + headers[name] for name in headers)
        assert hub.requests == 1 + 2 * len(headers)
    assert "config.json could not be read (status 404)" in page.locator("#checkpoint-status").text_content()
    query = query_of(page)
    assert query["weight_files"].startswith("acme/tiny-model: 2 files, model-00001-of-00002.safetensors")
    assert query["batch"] == "2"
    assert "from the checkpoint's headers (acme/tiny-model: 2 files" in \
        next(r for r in weights_row(page) if r[0].startswith("Weights"))[3]
    assert [e for e in watched.errors if "404" not in e] == []         # the browser logs the missing config.json


def test_a_gated_model_on_the_hub_is_named_and_nothing_changes(watched, base_url):
    watched.context.route("https://huggingface.co/**", lambda route: route.fulfill(status=401, body="gated"))
    page = watched.open(base_url, "?batch=2")
    before = page.url
    page.locator("#checkpoint > summary").click()
    page.locator("#checkpoint-hub").fill("meta-llama/Llama-3.1-8B")
    page.locator("#checkpoint-fetch").click()
    page.wait_for_function("document.getElementById('checkpoint-status').className.includes('failed')")
    status = page.locator("#checkpoint-status").text_content()
    assert "status 401: a gated or private model" in status and "choose them above" in status
    page.locator("#checkpoint-hub").fill("not an id")
    page.locator("#checkpoint-fetch").click()
    page.wait_for_function("document.getElementById('checkpoint-status').textContent.startsWith('Hub id:')")
    assert page.url == before


def test_a_gguf_file_is_read_in_growing_slices_never_whole(watched, base_url, tmp_path):
    # tests/test_checkpoint.py's GGUF (its bytes per tensor from gguf-py's GGML_QUANT_SIZES), with a 200,000-string
    # metadata array that puts the header past the page's first 1 MiB read, and a 4 MiB F32 tensor after it
    sys.path.insert(0, str(ROOT / "tests"))
    from test_checkpoint import F32, GGUF_BYTES, GGUF_METADATA, GGUF_TENSORS, gguf_bytes
    merges = ("tokenizer.ggml.merges", 9, (8, [f"merge {i} {i + 1}" for i in range(200_000)]))
    data = gguf_bytes(GGUF_METADATA + [merges], GGUF_TENSORS + [("blk.0.extra.weight", F32, (1024 * 1024,))])
    path = tmp_path / "model-Q4_K_M.gguf"
    path.write_bytes(data)
    expected = sum(GGUF_BYTES.values()) + 1024 * 1024 * 4
    watched.page.add_init_script(RECORD_SLICES)
    page = watched.open(base_url)
    page.locator("#checkpoint > summary").click()
    page.locator("#checkpoint-files").set_input_files(str(path))
    wait_query(page, "weight_bytes", str(expected))
    assert query_of(page)["weight_files"] == "model-Q4_K_M.gguf"
    ends = [end for name, _, _, end in page.evaluate("window.__slices") if name == path.name]
    assert len(ends) >= 3 and ends == sorted(ends)          # 8 bytes, 1 MiB, then more until the header fits
    assert ends[-1] < len(data)                              # never the whole file
    assert "(gguf)" in page.locator("#checkpoint-status").text_content()


def test_reading_from_the_hub_imports_its_config_json_first(watched, base_url, tmp_path):
    # issue 30: a hub id's checkpoint is read with its config.json, so that the weights belong to the model in the
    # form; the config is tests/configs/qwen2.5-0.5b.json (transformers' own), the shards the tests write
    from hub_standin import StandInHub
    paths, headers = sharded_checkpoint(tmp_path)
    expected = sum(path.stat().st_size - headers[path.name] for path in paths[1:])
    config = Path(__file__).resolve().parent.parent / "configs" / "qwen2.5-0.5b.json"
    (tmp_path / "config.json").write_text(config.read_text())
    with StandInHub(tmp_path) as hub:
        hub.forward(watched.context)
        page = watched.open(base_url, "?batch=2")
        page.locator("#checkpoint > summary").click()
        page.locator("#checkpoint-hub").fill("acme/tiny-model")
        page.locator("#checkpoint-fetch").click()
        wait_query(page, "weight_bytes", str(expected))
    query = query_of(page)
    imported = dict(json.loads(web.import_config(config.read_text(), "acme/tiny-model"))["query"])
    assert {key: query.get(key) for key in imported} == imported and query["batch"] == "2"
    assert "Model read from its config.json." in page.locator("#checkpoint-status").text_content()
    assert watched.errors == []
