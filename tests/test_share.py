"""Copy and share (issue 28): the Markdown and plain text of a result, the same from the command line's
--markdown and the page's payload (web.run's ``share``, which the page's "Copy results" copies)."""

import json
import re
from urllib.parse import parse_qsl, urlencode

import pytest

from pycore.base.units import GIB
from pycore.inputs.schema import parse
from pycore.memory.estimate import estimate_values
from pycore.model.catalog import gpus
from pycore.output import cli, report, web

QUERIES = ["", "model=gpt2&seq=1024&batch=4", "model=llama-3.1-70b&mode=infer&engine=vllm&tp=2",
           "model=mixtral-8x7b-v0.1&dp=8&ep=8&zero=3", "model=llama-3.1-8b&method=qlora&gpu=rtx-4090",
           "model=qwen2.5-0.5b&precision=fp32&compare=baseline", "model=llama-3.1-405b&gpu=a10g",
           urlencode({"model": "gpt2", "seq": "512", "name": "a|b *c* <img src=x> & [l](u) \u202e"})]


def cli_markdown(capsys, query):
    words = [f"{k}={v}" for k, v in parse_qsl(query)]
    assert cli.main(["--markdown", *words]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("query", QUERIES)
def test_the_command_lines_markdown_is_the_pages(capsys, query):
    shared = json.loads(web.run(query))["share"]
    assert cli_markdown(capsys, query) == shared["markdown"]
    title = shared["text"].split("\n")[0]
    assert re.fullmatch(r".+: [0-9,.]+ (GiB|TiB) per GPU \([0-9,.]+ GB\)", title)
    assert shared["markdown"].split("\n")[0] == "**" + report._md(title) + "**"


def table(markdown):
    """The Markdown table's body rows as cells (escaped pipes kept inside their cell)."""
    lines = [line for line in markdown.splitlines() if line.startswith("| ") and not line.startswith("| Component")]
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]


@pytest.mark.parametrize("query", QUERIES)
def test_the_table_is_the_breakdown_in_gib_with_each_share(query):
    values, _ = parse(dict(parse_qsl(query)), strict=False)
    result = estimate_values(values)
    shared = report.share(values, result)
    rows = table(shared["markdown"])
    assert "|---|--:|--:|" in shared["markdown"]
    assert all(len(row) == 3 for row in rows)                       # a name holding | stays in its cell
    expected = report.breakdown(result)
    assert [row[1] for row in rows[:-1]] == [f"{r['bytes'] / GIB:,.2f}" for r in expected]
    assert [row[2] for row in rows[:-1]] == [f"{r['percent']:.1f}%" for r in expected]
    assert rows[-1] == ["**Total per GPU**", f"**{result.total_bytes / GIB:,.2f}**", "100%"]
    assert sum(r["bytes"] for r in expected) == result.total_bytes
    # The plain text carries the same numbers, aligned, with no Markdown in it.
    for row in expected:
        assert re.search(rf"{re.escape(row['label'])} +{row['bytes'] / GIB:,.2f} +{row['percent']:.1f}%",
                         shared["text"]), row["label"]
    assert "|" not in shared["text"].replace(result.model.name, "") and "**" not in shared["text"]


def test_user_text_cannot_become_markup():
    values = parse({"model": "gpt2", "seq": "512", "name": "<img src=x onerror=alert(1)> *b* [l](javascript:x) |\u202e"})
    shared = report.share(values, estimate_values(values))
    assert not re.search(r"(?<!\\)[<>]", shared["markdown"])            # every < and > escaped
    assert "\\<img src=x onerror=alert(1)\\>" in shared["markdown"]
    assert "\\*b\\*" in shared["markdown"] and "\\[l\\](javascript:x)" in shared["markdown"]
    assert "\u202e" not in shared["markdown"] + shared["text"]
    assert shared["text"].startswith("<img src=x onerror=alert(1)> *b* [l](javascript:x) |?: ")


def test_the_setup_and_fit_lines():
    values = parse({"model": "llama-3.1-8b", "batch": "2", "seq": "4096", "gpu": "a100-40gb"})
    result = estimate_values(values)
    text = report.share(values, result)["text"]
    assert ("Setup: llama-3.1-8b (8,030,261,248 parameters), training, batch 2, sequence 4,096 tokens, precision "
            "bf16, optimizer adamw (fused); 1 GPU of NVIDIA A100 40GB.") in text
    fits = [g for g in gpus().values() if g["usable_bytes"] >= result.total_bytes]
    short = [g for g in gpus().values() if g["usable_bytes"] < result.total_bytes]
    smallest = min(fits, key=lambda g: g["usable_bytes"])
    largest = max(short, key=lambda g: g["usable_bytes"])
    assert "Fit: does not fit on NVIDIA A100 40GB (40.00 GiB usable, " in text
    assert f"Smallest GPU that fits: {smallest['name']} (" in text
    assert f"Largest that does not: {largest['name']} (" in text


def test_the_framework_defaults_used_are_the_inputs_left_to_it():
    def line(**given):
        values = parse(given)
        return report.framework_line(values, estimate_values(values))
    assert line() == ("Framework defaults used (Hugging Face Trainer 5.23.0): precision=bf16, optimizer_impl=fused, "
                      "attention=flash, recompute=none, loss_chunks=1.")
    assert line(optimizer_impl="foreach", precision="amp-bf16") == (
        "Framework defaults used (Hugging Face Trainer 5.23.0): attention=flash, recompute=none, loss_chunks=1.")
    assert line(framework="torchtune").startswith("Framework defaults used (torchtune ")
    assert line(precision="fp32", optimizer_impl="foreach", attention="eager", recompute="none",
                loss_chunks="1") == "Framework defaults used: none (every input Hugging Face Trainer would set was given)."
    assert "optimizer_impl" not in line(mode="infer")        # serving has no optimizer


def test_a_vllm_refusal_names_no_smaller_gpu_as_fitting(capsys):
    words = ["model=llama-3.1-70b", "mode=infer", "engine=vllm", "seq=131072", "method=qlora"]
    values = parse(dict(w.split("=") for w in words))
    shared = report.share(values, estimate_values(values))
    assert "vLLM would refuse to start on NVIDIA H100 SXM 80GB" in shared["text"]
    assert "Smallest GPU that fits: not judged (vLLM's start-up check is made for the chosen GPU)." in shared["text"]
    assert cli.main(words) == 0
    assert "smallest that fits" not in capsys.readouterr().out
