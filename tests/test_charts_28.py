"""Charts people can read (issue 28), pycore's side: one style index per pool across the breakdown, both charts
and the comparison (report.chart_styles; site/palette.js draws an index), no label cut in the text table, and
the model picker's words for each preset (report.model_choices)."""

import json
from pathlib import Path

import pytest

from pycore.inputs.schema import parse
from pycore.memory.estimate import estimate_values
from pycore.output import report, web

URLS = ["model=llama-3.1-8b&batch=4", "precision=bf16-master&seq=128&compare=baseline",
        "model=llama-3.1-8b&mode=infer", "model=qwen3-next-80b-a3b&mode=infer&engine=vllm&tp=4",
        "model=mixtral-8x7b-v0.1&dp=8&ep=8", "model=llama-3.1-70b&precision=bf16&offload=optimizer&compare=serving",
        "model=qwen3-30b-a3b&precision=bf16-master&pp=2&dp=2&zero=1&compare=baseline"]


@pytest.mark.parametrize("query", URLS)
def test_every_pool_drawn_has_one_style_of_its_own(query):
    run, answers = json.loads(web.run(query)), json.loads(web.answers(query))
    styles = answers["styles"]
    assert sorted(styles.values()) == list(range(len(styles)))          # one index per pool, none shared
    # The breakdown's pools first, in its order: the bar's rows carry the same index.
    assert [row["style"] for row in run["breakdown"]] == list(range(len(run["breakdown"])))
    assert [styles[row["key"]] for row in run["breakdown"]] == [row["style"] for row in run["breakdown"]]
    for chart in (answers["answers"]["charts"] or {}).values():
        assert {s["key"] for s in chart["series"]} <= set(styles)
    for row in (answers["answers"]["comparison"] or {}).get("components", ()):
        assert row["component"] in styles


def test_the_comparison_bars_share_one_scale():
    shown = json.loads(web.answers("precision=bf16-master&seq=128&compare=baseline"))["comparison"]
    parts = [row for row in shown["rows"] if "this_percent" in row]
    this, base = sum(r["this_percent"] for r in parts), sum(r["baseline_percent"] for r in parts)
    assert max(this, base) == pytest.approx(100)        # the larger column fills its bar
    assert min(this, base) < 100


def test_the_text_table_prints_every_label_in_full():
    values = parse({"precision": "bf16-master", "seq": "128"})
    result = estimate_values(values)
    text = report.table(result)
    long = [row["label"] for row in report.breakdown(result) if len(row["label"]) > 46]
    assert "Optimizer step temporaries (+ fp32 gradient copies)" in long
    for label in long:
        assert label in text


def test_the_model_picker_says_what_each_preset_is():
    entries = {entry["id"]: entry for entry in report.model_choices()}
    assert entries["llama-3.1-8b"]["what"] == "dense"
    assert entries["llama-3.1-8b"]["detail"] == "8.03B parameters · context 131,072 tokens"
    assert "meta-llama/llama-3.1-8b" in entries["llama-3.1-8b"]["words"]
    assert entries["mixtral-8x7b-v0.1"]["what"] == "MoE"
    assert entries["qwen3-next-80b-a3b-instruct"]["what"] == "hybrid MoE"
    assert entries["qwen2.5-vl-7b-instruct"]["what"] == "dense VL"
    assert entries["qwen3.5-9b"]["what"] == "hybrid VL"
    assert entries["t5-small"]["what"] == "encoder-decoder"
    assert entries["qwen3-30b-a3b"]["family"] == "Qwen3Moe"


def test_an_import_is_worded_for_the_picker_as_a_preset_is():
    text = (Path(__file__).parent / "configs" / "qwen3-30b-a3b.json").read_text(encoding="utf-8")
    answer = json.loads(web.import_config(text, "Qwen/Qwen3-30B-A3B-Base"))
    assert answer["choice"] == {"label": "Qwen/Qwen3-30B-A3B-Base", "what": "imported, MoE",
                                "detail": "30.5B parameters · context 32,768 tokens"}
    assert "choice" not in json.loads(web.import_config("{not json"))
