"""Charts people can read (issue 28): in every chart the page draws — the breakdown bar, memory against
micro-batch, memory against sequence length, their legend and the comparison's two bars and table — no two
pools share a colour (site/palette.js: Paul Tol's muted scheme, hatched past its ninth colour), a pool has one
colour wherever it is drawn, every label is pycore's own in full (never cut), and each chart's numbers are in
its accessible text. At a phone's width and a desktop's."""

import json

import pytest
from conftest import show

from pycore.output import web

pytestmark = pytest.mark.browser

URLS = [
    "model=llama-3.1-8b&batch=4",                                           # training
    "precision=bf16-master&seq=128&compare=baseline",                       # the longest label, a comparison
    "model=llama-3.1-8b&mode=infer",                                        # serving, transformers
    "model=llama-3.1-70b&mode=infer&engine=vllm&tp=2",                      # serving, vLLM (no charts)
    "model=qwen3-next-80b-a3b&mode=infer&engine=vllm&tp=4",                 # a hybrid
    "model=mixtral-8x7b-v0.1&dp=8&ep=8",                                    # an MoE
    "model=llama-3.1-70b&precision=bf16&offload=optimizer&compare=serving",  # training against serving
    "model=qwen3-30b-a3b&precision=bf16-master&pp=2&dp=2&zero=1&compare=baseline",  # 14 pools: hatches
]

# Every chart on the page as [chart, [[pool key, style name], ...]]: the name is "colour pattern" (palette.js).
DRAWN = """() => {
  const out = [];
  const pairs = (nodes) => [...nodes].map((n) => [n.dataset.pool, n.dataset.style]);
  out.push(["bar", pairs(document.querySelectorAll("#bar .segment"))]);
  out.push(["breakdown table", [...document.querySelectorAll("#breakdown tbody tr[data-component]")]
    .map((tr) => [tr.dataset.component, tr.querySelector(".swatch").dataset.style])]);
  for (const name of ["batch", "seq"]) {
    const holder = document.getElementById(`chart-${name}`);
    if (holder.chart && !holder.closest("[hidden]")) out.push([name, JSON.parse(holder.dataset.styles)]);
  }
  if (!document.getElementById("charts").hidden) {
    out.push(["legend", [...document.querySelectorAll("#chart-legend li")]
      .map((li) => [li.dataset.pool, li.querySelector(".swatch").dataset.style])]);
  }
  if (!document.getElementById("comparison").hidden) {
    document.querySelectorAll("#compare-bars .bar").forEach((bar, i) => out.push([`comparison bar ${i}`, pairs(bar.children)]));
    out.push(["comparison table", [...document.querySelectorAll("#compare-table tbody tr")]
      .filter((tr) => tr.querySelector(".swatch")).map((tr) => [tr.dataset.row, tr.querySelector(".swatch").dataset.style])]);
  }
  return out;
}"""

# Every label drawn, with whether it is cut: wider than its box, an ellipsis, or past the window's edge.
LABELS = """(selector) => [...document.querySelectorAll(selector)].map((n) => {
  const box = n.getBoundingClientRect();
  const style = getComputedStyle(n);
  const cut = n.scrollWidth > n.clientWidth + 1 || style.textOverflow === "ellipsis" ||
    box.right > document.documentElement.clientWidth + 1 || box.left < -1;
  return [n.textContent, cut];
})"""


def expected(query):
    run, answers = json.loads(web.run(query)), json.loads(web.answers(query))
    charts = (answers["answers"] or {}).get("charts") or {}
    legend = list(dict.fromkeys(s["label"] for chart in charts.values() for s in chart["series"]))
    comparison = answers["comparison"]
    return {"breakdown": [row["label"] for row in run["breakdown"] if row["bytes"] > 0], "charts": charts,
            "legend": legend, "styles": answers["styles"],
            "comparison": [row["label"] for row in comparison["rows"] if "this_percent" in row] if comparison else None}


@pytest.fixture(scope="module")
def page(browser, base_url):
    from conftest import Watched
    context = browser.new_context()
    watched = Watched(context, base_url)
    watched.open(base_url)
    yield watched
    assert not watched.errors, watched.errors
    context.close()


@pytest.mark.parametrize("width", [390, 1440])
@pytest.mark.parametrize("query", URLS)
def test_no_two_pools_share_a_colour_and_no_label_is_cut(page, query, width):
    p = page.page
    p.set_viewport_size({"width": width, "height": 900})
    show(p, query)
    want = expected(query)
    charts = want["charts"]
    if charts:
        p.wait_for_function("(n) => document.querySelectorAll('#chart-legend li').length === n", arg=len(want["legend"]))
    drawn = p.evaluate(DRAWN)
    names = [name for name, _ in drawn]
    assert ("batch" in names) == ("batch" in charts) and ("seq" in names) == ("seq" in charts)
    assert (want["comparison"] is not None) == ("comparison table" in names)
    colour_of = {}
    for name, pairs in drawn:
        assert pairs, name
        keys = [key for key, _ in pairs]
        styles = [style for _, style in pairs]
        assert len(set(keys)) == len(keys), (name, keys)
        assert len(set(styles)) == len(styles), f"{query}: two pools share a colour in the {name}: {pairs}"
        for key, style in pairs:
            assert colour_of.setdefault(key, style) == style, f"{key} drawn in two colours"
    # One colour per pool across the page, none shared: the table is pycore's (web.answers' styles).
    assert len(set(colour_of.values())) == len(colour_of)
    assert set(colour_of) <= set(want["styles"])

    # Labels: pycore's own, in full, never cut.
    assert p.evaluate(LABELS, "#breakdown tbody tr[data-component] td:first-child") == [
        [label, False] for label in want["breakdown"]]
    if charts:
        assert p.evaluate(LABELS, "#chart-legend .legend-label") == [[label, False] for label in want["legend"]]
    if want["comparison"] is not None:
        assert p.evaluate(LABELS, "#compare-table tbody tr .row-label")[:len(want["comparison"])] == [
            [label, False] for label in want["comparison"]]
    # The total row is no pool: it has no swatch to be mistaken for one.
    assert p.eval_on_selector("#breakdown tr.total-row .swatch", "s => !s.dataset.style && s.offsetWidth === 0")
    titles = p.eval_on_selector_all("#bar .segment", "ss => ss.map(s => s.title)")
    assert [title.rsplit(": ", 1)[0] for title in titles] == want["breakdown"]

    # Accessible text: the bar's name holds every row's size; each chart's hidden table every series' label.
    run = json.loads(web.run(query))
    bar_name = p.get_attribute("#bar", "aria-label")
    for row in run["breakdown"]:
        if row["bytes"] > 0:
            assert f"{row['label']} {row['text']}" in bar_name
    for name, chart in charts.items():
        rows = p.eval_on_selector_all(f"#chart-{name}-data tbody tr", "rs => rs.map(r => r.cells[0].textContent)")
        assert rows == [s["label"] for s in chart["series"]] + ["Total per GPU"]
        assert p.get_attribute(f"#chart-{name} .uplot", "aria-label").startswith("Memory per GPU against")


def test_hovering_a_bar_shows_each_component_in_full(page):
    p = page.page
    p.set_viewport_size({"width": 1440, "height": 900})
    show(p, "precision=bf16-master&seq=128")
    chart = json.loads(web.answers("precision=bf16-master&seq=128"))["answers"]["charts"]["batch"]
    over = p.locator("#chart-batch .u-over")
    over.scroll_into_view_if_needed()
    box = over.bounding_box()
    p.mouse.move(box["x"] + box["width"] * 0.5 / len(chart["x"]), box["y"] + box["height"] / 2)
    tip = p.locator("#chart-batch .chart-tip")
    tip.wait_for(state="visible")
    text = tip.inner_text()
    for series in chart["series"]:
        if series["bytes"][0] > 0:
            assert series["label"] in text
