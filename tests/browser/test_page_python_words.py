"""The page computes no count, difference or label: the answers, the parallel section's summary and the
comparison show pycore's own words, at first paint (the build-time payloads) and once Python answers."""

import json

import pytest
from conftest import READY_MS, settled

from pycore.output import web

pytestmark = pytest.mark.browser

URLS = [
    "",                                                     # first paint: the inline build-time payload
    "model=gpt2",                                           # first paint: prerendered/gpt2.json
    "model=llama-3.1-8b&batch=4",
    "model=mixtral-8x7b-v0.1&dp=8&ep=8",
    "model=llama-3.1-70b&mode=infer&engine=vllm&tp=2",
    "precision=bf16-master&seq=128&compare=baseline",
    "model=llama-3.1-70b&precision=bf16&offload=optimizer&compare=serving",
]
PARALLEL = "details[data-folded='parallel'] > summary"


def hold_pyodide(context):
    """Python never starts until the held requests go on: Pyodide's WebAssembly is not answered."""
    held = []
    context.route("**/pyodide.asm.wasm", lambda route: held.append(route))
    return held


def shown_answers(page):
    return page.eval_on_selector("#answers", "dl => [...dl.children].map(n => [n.tagName, n.textContent])")


def expected_answers(display):
    return [cell for row in display for cell in (["DT", row["label"]], ["DD", row["text"]])]


def shown_comparison(page):
    if page.locator("#comparison").evaluate("n => n.hidden"):
        return None
    return {"what": page.locator("#compare-what").text_content(),
            "message": page.locator("#compare-message").text_content(),
            "rows": page.eval_on_selector_all("#compare-table tbody tr",
                                              "rs => rs.map(r => [...r.cells].map(c => c.textContent))")}


def expected_comparison(comparison):
    if comparison is None:
        return None
    return {"what": comparison["what"], "message": comparison["message"],
            "rows": [[r["label"], r["this"], r["baseline"], r["difference"]] for r in comparison["rows"]]}


@pytest.mark.parametrize("query", URLS)
def test_the_page_shows_pythons_words_before_and_after_python_starts(watched, base_url, query):
    held = hold_pyodide(watched.context)
    page = watched.page
    expected = json.loads(web.answers(query))
    heading = json.loads(web.run(query))["parallel_heading"]
    page.goto(base_url + ("?" + query if query else ""))
    page.wait_for_selector("#startup progress")
    first_paint = query == "" or query.startswith("model=") and "&" not in query
    if first_paint:
        page.wait_for_function("document.documentElement.dataset.prerendered === 'painted'")
        assert not page.evaluate("document.documentElement.classList.contains('py-ready')")
        # The build-time payload carries pycore's display rows: the same words Python gives later.
        assert shown_answers(page) == expected_answers(expected["display"])
        assert page.locator(PARALLEL).text_content() == heading
        assert shown_comparison(page) == expected_comparison(expected["comparison"])
    else:
        # No build-time estimate for these inputs: nothing is shown but what Python will say.
        assert shown_answers(page) == []
        assert "64" not in page.locator(PARALLEL).text_content()
    watched.context.unroute("**/pyodide.asm.wasm")
    for route in held:
        route.continue_()
    page.wait_for_selector("html.py-ready", timeout=READY_MS)
    page.wait_for_function("document.documentElement.dataset.totalBytes !== undefined")
    settled(page)
    assert page.evaluate("location.search.slice(1)") == query    # the page asked Python for this very query
    assert shown_answers(page) == expected_answers(expected["display"])
    assert page.locator(PARALLEL).text_content() == heading
    assert shown_comparison(page) == expected_comparison(expected["comparison"])
    assert watched.errors == []


def test_the_parallel_summary_says_the_gpus_estimated(watched, base_url):
    # dp=8 ep=8: experts split inside the 8 data-parallel GPUs, 8 GPUs in all (not dp × ep = 64).
    page = watched.open(base_url, "?model=mixtral-8x7b-v0.1&dp=8&ep=8")
    summary = page.locator(PARALLEL).text_content()
    assert summary == json.loads(web.run("model=mixtral-8x7b-v0.1&dp=8&ep=8"))["parallel_heading"]
    assert summary.startswith("8 GPUs:") and "64" not in summary


def test_the_comparison_cells_are_pythons(watched, base_url):
    query = "model=llama-3.1-70b&precision=bf16&train_tokens=1e9&compare=baseline"
    page = watched.open(base_url, "?" + query)
    expected = json.loads(web.answers(query))["comparison"]
    assert shown_comparison(page) == expected_comparison(expected)
    labels = [row[0] for row in shown_comparison(page)["rows"]]
    assert {"Total per GPU", "GPUs needed", "Training cost"} <= set(labels)
    total = next(r for r in expected["rows"] if r["key"] == "total")
    assert page.locator("#compare-table tr.total-row td").all_text_contents() == \
        [total["label"], total["this"], total["baseline"], total["difference"]]
