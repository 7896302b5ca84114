"""Only what applies is shown, headings and words follow the state, sizes read well, the GPU list and
the bar are honest."""

import re

import pytest
from conftest import seen_text, settled, show, total

from pycore import estimate

pytestmark = pytest.mark.browser


def unfold(page, group):
    summary = page.locator(f"details[data-folded='{group}'] > summary")
    if summary.evaluate("n => !n.parentElement.open"):
        summary.click()


def visible(page, key):
    return page.locator(f"[data-field='{key}']").is_visible()


def test_fields_that_do_not_apply_are_hidden(shared, base_url):
    page = shared.page
    show(page, "")
    unfold(page, "precision")
    assert not visible(page, "lora_rank") and not visible(page, "new_tokens") and not visible(page, "kv_dtype")
    assert visible(page, "optimizer") and visible(page, "grad_dtype") and not visible(page, "act_multiplier")
    page.locator("#f-method").select_option("lora")
    page.wait_for_selector("[data-field='lora_rank']:visible")
    assert visible(page, "lora_targets")
    show(page, "mode=infer")
    unfold(page, "precision")
    assert visible(page, "new_tokens") and visible(page, "kv_dtype")
    assert not visible(page, "optimizer") and not visible(page, "recompute") and not visible(page, "grad_dtype")
    # serving splits with tp, pp and ep (pycore.memory.serving); data parallelism and sharding are training's
    unfold(page, "parallel")
    assert visible(page, "tp") and visible(page, "pp") and not visible(page, "zero") and not visible(page, "dp")
    show(page, "activations=multiplier")
    assert visible(page, "act_multiplier") and not visible(page, "act_per_sample")
    show(page, "model=resnet-50&batch=8")
    page.wait_for_function("document.getElementById('generic-note').hidden === false")
    assert not visible(page, "seq") and not visible(page, "heads") and visible(page, "batch")


def test_a_given_value_that_does_not_apply_stays_and_is_marked(shared, base_url):
    page = shared.page
    show(page, "lora_rank=64")
    assert visible(page, "lora_rank")
    assert "ignored" in page.locator("[data-field='lora_rank']").get_attribute("class")
    assert "lora_rank" in page.locator("#ignored-note").inner_text()
    show(page, "method=lora&lora_rank=64")
    assert "ignored" not in page.locator("[data-field='lora_rank']").get_attribute("class")
    assert page.locator("#ignored-note").is_hidden()


def test_headings_follow_the_state(shared, base_url):
    page = shared.page
    summary = page.locator("details[data-folded='parallel'] > summary")
    show(page, "")
    assert summary.inner_text() == "Single GPU — open to shard across GPUs"
    show(page, "tp=8&pp=4&precision=bf16-master")
    assert summary.inner_text() == "32 GPUs: tp 8 × pp 4"
    show(page, "dp=2&zero=3")
    assert summary.inner_text() == "2 GPUs: dp 2 · ZeRO-3"
    show(page, "layers=4")
    assert seen_text(page.locator("details[data-folded='model'] > summary")) == "Architecture overrides (1 set)"


def test_counts_have_their_plural_forms(shared, base_url):
    page = shared.page
    show(page, "model=gpt2")
    answers = page.locator("#answers").inner_text()
    assert re.search(r"\b1 GPU\b(?!s)", answers), answers
    show(page, "model=llama-3.1-8b&batch=1&seq=131072&gpu=rtx-4090")
    text = page.locator(".results").inner_text()
    assert not re.search(r"\b1 (GPUs|sequences|tokens|parameters|days)\b", text), text


# Records when the model field first turns red, and when the last key was pressed.
FLASH = """
window.__invalidAt = null; window.__lastKeyAt = 0;
addEventListener('keydown', () => { window.__lastKeyAt = performance.now(); }, true);
new MutationObserver(() => {
  if (window.__invalidAt === null && document.getElementById('f-model')?.classList.contains('invalid'))
    window.__invalidAt = performance.now();
}).observe(document, { subtree: true, attributes: true, attributeFilter: ['class'] });
"""


def test_typing_a_model_name_does_not_flash_errors_and_offers_a_preset(watched, base_url):
    watched.page.add_init_script(FLASH)
    page = watched.open(base_url)
    page.locator("#f-model").fill("")
    page.locator("#f-model").press_sequentially("mixtral", delay=60)
    page.wait_for_selector("#e-model .suggest")
    invalid_at, last_key = page.evaluate("[window.__invalidAt, window.__lastKeyAt]")
    assert invalid_at is not None and invalid_at - last_key >= 300     # red only once typing paused
    button = page.locator("#e-model .suggest")
    assert button.inner_text() == "Did you mean mixtral-8x7b-v0.1?"
    button.click()
    page.wait_for_function("new URLSearchParams(location.search).get('model') === 'mixtral-8x7b-v0.1'")
    settled(page)
    assert page.locator("#e-model").inner_text() == ""
    assert total(page) == estimate({"model": "mixtral-8x7b-v0.1"}).total_bytes


def test_sizes_use_tib_separators_and_gb_beside(shared, base_url):
    page = shared.page
    show(page, "model=llama-3.1-405b&batch=8")
    assert page.locator("#total-unit").inner_text() == "TiB"
    expected = estimate({"model": "llama-3.1-405b", "batch": "8"}).total_bytes
    assert float(page.locator("#total-gib").inner_text().replace(",", "")) == pytest.approx(expected / 2**40, abs=0.005)
    gb = page.locator("#total-gb")
    assert re.fullmatch(r"\(\d{1,3}(,\d{3})+\.\d\d GB\)", gb.inner_text()), gb.inner_text()
    assert gb.evaluate("n => getComputedStyle(n).whiteSpace") == "nowrap"
    assert float(gb.evaluate("n => parseFloat(getComputedStyle(n).fontSize)")) < \
        float(page.locator("#total-gib").evaluate("n => parseFloat(getComputedStyle(n).fontSize)"))


def test_gpu_list_is_sorted_filterable_and_not_a_scroll_box(shared, base_url):
    page = shared.page
    show(page, "model=llama-3.1-8b&gpu=a100-40gb")
    gpus = page.locator("#gpus")
    assert gpus.evaluate("n => getComputedStyle(n).overflowY") == "visible"
    assert gpus.evaluate("n => n.scrollHeight <= n.clientHeight + 1")
    rows = gpus.locator("li.gpu")
    count = rows.count()
    assert count >= 20 and rows.first.get_attribute("data-gpu") == "a100-40gb"
    headroom = [int(h) for h in rows.evaluate_all("ns => ns.slice(1).map(n => n.dataset.headroom)")]
    assert headroom == sorted(headroom, reverse=True)
    page.locator("#gpu-filter").fill("h100")
    names = rows.evaluate_all("ns => ns.map(n => n.querySelector('.gpu-name').textContent)")
    assert names and all("H100" in name for name in names) and len(names) < count
    page.locator("#gpu-filter").fill("")
    assert rows.count() == count


def test_the_bar_is_to_scale(shared, base_url):
    page = shared.page
    show(page, "model=llama-3.2-1b&batch=8")
    bar_width = page.locator("#bar").evaluate("n => n.getBoundingClientRect().width")
    widths = page.locator("#bar .segment").evaluate_all("ns => ns.map(n => n.getBoundingClientRect().width)")
    rows = page.locator("#breakdown tbody tr:not(.total-row)")
    shares = [float(s.rstrip("%")) for s in rows.evaluate_all("ns => ns.map(n => n.cells[2].textContent)")]
    assert len(widths) == len(shares) >= 4
    assert sum(widths) == pytest.approx(bar_width, abs=2)
    for width, share in zip(widths, shares):
        assert width == pytest.approx(bar_width * share / 100, abs=bar_width * 0.001 + 0.6)


def test_the_page_shows_pycores_own_text(watched, base_url):
    import json

    from pycore.output import web
    page = watched.open(base_url, "?model=llama-3.1-405b&batch=8")
    payload = json.loads(web.run("model=llama-3.1-405b&batch=8"))
    number, unit = payload["total"]["text"].rsplit(" ", 1)
    assert page.locator("#total-gib").inner_text() == number and unit == "TiB"      # above 1,024 GiB
    assert page.locator("#total-gb").inner_text() == f"({payload['total']['gb_text']})"
    first = payload["breakdown"][0]
    assert page.locator(f"tr[data-component='{first['key']}'] td").nth(1).inner_text() == first["text"]
    assert page.locator("#peak-line").inner_text() == payload["summary"]["peak"]
    # The breakdown's overhead rows come from pycore, once each: the page adds none of its own.
    keys = page.eval_on_selector_all("#breakdown tr[data-component]", "rs => rs.map(r => r.dataset.component)")
    assert keys == [row["key"] for row in payload["breakdown"] if row["bytes"]] and "overhead" not in keys
    assert watched.errors == []


GIB = 2**30
# Known chart data (answers.charts as CONTRACT.md describes it) put into pycore's answer, so the drawing can be
# checked against numbers worked by hand.
# The page takes its answers from pycoreAnswersFor (site/main.py: those made while typing, or made then).
CHARTS = """
let realAnswers;
const GIB = 2 ** 30;
const chart = (x, step, one, many) => ({ x, usable_bytes: 10 * GIB, largest_fitting: x[2], unit_one: one, unit_many: many,
  series: [{ key: 'weights', label: 'Weights', bytes: x.map(() => 2 * GIB) },
           { key: 'activations', label: 'Activations', bytes: x.map((_, i) => (i + 1) * step * GIB) }] });
Object.defineProperty(window, 'pycoreAnswersFor', { configurable: true, get: () => realAnswers && ((q) => {
  const p = JSON.parse(realAnswers(q));
  if (p.answers) p.answers.charts = { batch: chart([1, 2, 4, 8, 16], 2, 'sequence', 'sequences'),
                                      seq: chart([1024, 2048, 4096, 8192], 3, 'token', 'tokens') };
  return JSON.stringify(p);
}), set: (f) => { realAnswers = f; } });
window.__violations = [];
document.addEventListener('securitypolicyviolation', e => window.__violations.push(e.violatedDirective));
"""


def test_charts_stack_components_and_mark_the_usable_line_and_largest_fit(watched, base_url):
    watched.page.add_init_script(CHARTS)
    page = watched.open(base_url)
    page.wait_for_selector("#charts:not([hidden]) #chart-seq canvas")
    assert page.locator("#charts .uplot canvas").count() == 2           # drawn by uPlot, served from ./uplot/
    assert page.locator("#chart-batch").get_attribute("data-largest") == "4"
    assert page.locator("#chart-seq").get_attribute("data-largest") == "4096"
    assert page.locator("#chart-batch-note").inner_text() == "Largest that fits: 4 sequences (marked)."
    plot = page.evaluate("""() => { const u = document.getElementById('chart-batch').chart;
        return { data: u.data, labels: u.series.map(s => s.label), min: u.scales.y.min,
                 zero: u.valToPos(0, 'y'), pos: u.data[1].map(v => u.valToPos(v, 'y')),
                 usable: u.valToPos(10 * 2 ** 30, 'y') + u.bbox.top / devicePixelRatio }; }""")
    # Stacked: the top of the stack (activations) is drawn first, up to the running sum over the components.
    assert plot["labels"] == ["sequences", "Activations", "Weights"]
    assert plot["data"][2] == [2 * GIB] * 5
    assert plot["data"][1] == [2 * GIB + (i + 1) * 2 * GIB for i in range(5)]
    # To scale from zero: the x=16 column (2 + 10 GiB) stands three times as high as the x=1 one (2 + 2 GiB).
    assert plot["min"] == 0
    assert plot["zero"] - plot["pos"][4] == pytest.approx(3 * (plot["zero"] - plot["pos"][0]), rel=1e-6)
    # The usable line is drawn where 10 GiB is on the axis (canvas pixels from the top, in CSS pixels).
    assert float(page.locator("#chart-batch").get_attribute("data-usable-y")) == pytest.approx(plot["usable"], abs=1)
    assert page.locator("#chart-legend li").count() == 2
    assert "10.00 GiB" in page.locator("#chart-batch .uplot").get_attribute("aria-label")
    assert page.evaluate("window.__violations") == []


def test_charts_follow_pycores_chart_data(shared, base_url):
    import json

    from pycore.output import web
    page = shared.page
    show(page, "model=gpt2")
    expected = json.loads(web.answers("model=gpt2"))["answers"]["charts"]
    assert page.locator("#charts").is_visible()
    assert page.locator("#chart-batch canvas").count() == 1 and page.locator("#chart-seq canvas").count() == 1
    assert str(expected["batch"]["largest_fitting"]) in page.locator("#chart-batch-note").inner_text()
    show(page, "model=llama-3.1-8b&mode=infer&engine=vllm")      # vLLM pre-allocates: no curve to draw
    assert page.locator("#charts").is_hidden()
