"""The page shows pycore's records and answers as pycore words them: formulas with the user's numbers,
the layouts that fit, vLLM's log lines, what fits on my GPUs."""

import json

import pytest
from conftest import seen_text, settled, show

from pycore import estimate
from pycore.output import web

pytestmark = pytest.mark.browser


def test_breakdown_rows_add_up_to_the_total_on_the_page(shared):
    page = shared.page
    show(page, "model=llama-3.1-70b&precision=bf16-master&recompute=full&seq=8192")
    rows = page.eval_on_selector_all("#breakdown tbody tr[data-component]", "rs => rs.map(r => r.dataset.component)")
    expected = estimate({"model": "llama-3.1-70b", "precision": "bf16-master", "recompute": "full", "seq": "8192"}).as_dict()
    assert rows == [row["key"] for row in expected["breakdown"] if row["bytes"] > 0]
    widths = page.eval_on_selector_all("#bar .segment", "ss => ss.map(s => Number(s.dataset.share))")
    assert abs(sum(widths) - 100) < 1e-6                    # the bar is to scale: its shares add up


def test_formulas_show_the_users_numbers(shared):
    page = shared.page
    show(page, "model=gpt2&batch=4")
    text = seen_text(page.locator("#formulas"))
    # GPT-2 has 124,439,808 parameters: the weights row shows P × 4 and the same with the number.
    assert "P × 4" in text and "124,439,808 × 4" in text
    # A keystroke redraws the numbers at once and the formulas once typing pauses: dimmed until then.
    assert page.evaluate("""() => { const field = document.getElementById('f-batch'); field.value = '5';
        field.dispatchEvent(new Event('input', { bubbles: true }));
        return document.getElementById('formulas').classList.contains('stale'); }""")
    settled(page)
    assert not page.locator("#formulas.stale").count()
    before, after = (json.loads(web.run(f"model=gpt2&batch={b}"))["formulas"] for b in (4, 5))
    changed = next(a["substituted"] for a, b in zip(after, before) if a["substituted"] != b["substituted"])
    assert changed in page.locator("#formulas").inner_text()


def test_answers_after_typing_are_those_of_the_last_input(shared):
    # While a person types, each keystroke's answers are begun in slices between keys (site/main.py,
    # pycore/base/steps.py) and dropped by the next key: once typing pauses the page shows pycore's answers
    # for the last input, not those begun for an earlier one.
    page = shared.page
    show(page, "model=llama-3.1-70b&precision=bf16&fsdp=FULL_SHARD&dp=8&recompute=full&batch=1")
    field = page.locator("#f-batch")
    field.click()
    field.press("End")
    page.keyboard.type("26", delay=90)         # typing speed: keys 90 ms apart, under the 120 ms pause
    page.wait_for_function("new URLSearchParams(location.search).get('batch') === '126'")
    settled(page)
    query = page.evaluate("location.search.slice(1)")
    expected = json.loads(web.answers(query))
    assert page.locator("#answers dd").all_inner_texts() == [row["text"] for row in expected["display"]]
    assert page.locator("#plans button").all_inner_texts() == \
        [option["label"] for option in expected["answers"]["plan"] if option["label"] != "as given"]


def test_layouts_that_fit_are_buttons_that_set_the_inputs(shared):
    page = shared.page
    show(page, "model=llama-3.1-70b")
    plans = page.locator("#plans button")
    assert plans.count() >= 1
    first = json.loads(web.answers("model=llama-3.1-70b"))["answers"]["plan"][0]
    assert plans.first.inner_text() == first["label"]
    plans.first.click()
    page.wait_for_function("document.documentElement.dataset.answersPending === undefined")
    for key, value in first["query"].items():
        assert page.locator(f'[data-key="{key}"]').input_value() == value
    assert "does not fit" not in page.locator("#total-badge").inner_text()


def test_vllm_log_lines_are_shown_as_vllm_prints_them(shared):
    page = shared.page
    show(page, "model=llama-3.1-8b&mode=infer&engine=vllm&seq=8192")
    lines = page.locator("#vllm-log li").all_inner_texts()
    expected = json.loads(web.answers("model=llama-3.1-8b&mode=infer&engine=vllm&seq=8192"))["answers"]["vllm_log"]
    assert lines == expected and lines[2].startswith("GPU KV cache size:")


def test_what_fits_on_my_gpus_lists_links(shared):
    page = shared.page
    show(page, "mode=infer&seq=8192&gpu=rtx-4090")
    page.locator("#fits-count").fill("2")
    page.locator("#fits-run").click()
    page.wait_for_selector("#fits-table:not([hidden]) tbody tr")
    rows = page.locator("#fits-table tbody tr")
    expected = json.loads(web.fits("mode=infer&seq=8192&gpu=rtx-4090&gpus=2"))["rows"]
    assert rows.count() == len(expected)
    assert rows.first.locator("a").inner_text() == expected[0]["id"]
    href = rows.first.locator("a").get_attribute("href")
    assert f"model={expected[0]['id']}" in href and "mode=infer" in href
    page.locator('#fits-table [data-sort="params"]').click()
    biggest = max(expected, key=lambda row: row["params"])["id"]
    assert rows.first.locator("a").inner_text() == biggest


def test_grpo_placements_are_buttons_that_set_the_rollout(shared):
    # Issue 31: which placement of the rollout needs fewer GPUs, colocated vLLM or a vLLM server (pycore's words)
    page = shared.page
    query = "model=qwen2.5-7b&method=grpo&rollout=vllm-colocate&dp=8&zero=3"
    show(page, query)
    expected = json.loads(web.answers(query))
    options = expected["answers"]["placements"]["options"]
    assert page.locator("#placements li").all_inner_texts()[0] == expected["answers"]["placements"]["lead"]
    buttons = page.locator("#placements button")
    assert buttons.all_inner_texts() == [o["label"] for o in options if o["query"]]
    shown = {row["key"]: row["text"] for row in expected["display"]}
    assert shown["generations"] in page.locator("#answers").inner_text()
    server = next(o for o in options if o["query"] and o["query"]["rollout"] == "vllm-server")
    page.locator("#placements button", has_text=server["label"]).click()
    page.wait_for_function("new URLSearchParams(location.search).get('rollout') === 'vllm-server'")
    settled(page)
    assert page.locator('[data-key="rollout"]').input_value() == "vllm-server"
