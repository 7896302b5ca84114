"""A newcomer's run-through of the page and the command line: a layout's label names every degree of its GPU
count, the text tables keep their columns and never cut a label, notes are told from warnings, and the ZeRO
field says what an FSDP strategy sets."""

import math
import re

import pytest

from pycore import parse
from pycore.answers.answer import answer
from pycore.memory.estimate import estimate_values

TORCHTITAN_TP8 = {"framework": "torchtitan", "model": "llama-3.1-70b", "dp": "8", "tp": "8", "fsdp": "FULL_SHARD"}


def _plan(query):
    values = parse(query)
    return answer(values, estimate_values(values))["plan"]


def _degrees(label):
    return {key: int(n) for key, n in re.findall(r"\b(dp|tp|pp|cp)=(\d+)", label)}


@pytest.mark.parametrize("query", [TORCHTITAN_TP8, {"model": "llama-3.1-70b", "tp": "8"},
                                   {"model": "llama-3.1-70b", "dp": "4", "pp": "2", "microbatches": "2"}])
def test_a_layouts_label_names_every_degree_its_gpus_multiply(query):
    # The chip said "zero=3 dp=2 → 16 GPUs" with tp=8 kept from the inputs: 16 could not be worked out from it.
    plan = [o for o in _plan(query) if o["label"] != "as given"]
    assert plan
    for option in plan:
        assert math.prod(_degrees(option["label"]).values()) == option["gpus"], option["label"]


def test_a_kept_degree_is_said_to_be_kept():
    labels = [o["label"] for o in _plan(TORCHTITAN_TP8)]
    assert "zero=3 dp=2, tp=8 kept" in labels


# --- the command line's tables keep their columns ---------------------------------------------------------------

LONG_ID = "nvidia-nemotron-nano-12b-v2-base-with-a-longer-name"


def _fit_row(model_id, params):
    return {"id": model_id, "params": params, "total_bytes": 20 * 2**30, "headroom_bytes": 4 * 2**30,
            "status": "fits", "layout": {"tp": 2}, "note": "", "error": ""}


def test_the_fits_tables_columns_stay_put_for_a_long_model_id(monkeypatch, capsys):
    import pycore.answers.what_fits as what_fits
    from pycore.output import cli
    rows = [_fit_row("gpt2", 124_439_808), _fit_row(LONG_ID, 12_310_001_152), _fit_row("qwen2.5-7b", 7_615_616_512)]
    monkeypatch.setattr(what_fits, "what_fits", lambda values, count: rows)
    assert cli.main(["fits", "gpu=rtx-4090", "gpus=2", "mode=infer"]) == 0
    lines = capsys.readouterr().out.splitlines()[:4]
    assert LONG_ID in lines[2]
    # each column ends where the header's does: params, per GPU, headroom
    for header in ("params", "per GPU", "headroom"):
        end = lines[0].index(header) + len(header)
        for line in lines[1:]:
            assert line[end - 1] != " " and line[end] == " ", (header, line)


def test_the_gpu_rows_keep_their_columns_for_a_long_gpu_name():
    from pycore.answers.fit import gpu_fits
    from pycore.output import report
    fits = gpu_fits(30 * 2**30, "h100-sxm-80gb", "", parse({}))
    fits[1] = {**fits[1], "name": "A GPU whose catalog name is longer than thirty-eight characters"}
    lines = report.gpu_lines(fits, every=True)[:len(fits)]
    assert len({line.index(" GiB usable") for line in lines}) == 1, lines
    assert len({line.index("headroom") for line in lines}) == 1, lines


def test_a_comparisons_labels_are_never_cut_and_its_columns_line_up(capsys):
    from pycore.output import cli
    assert cli.main(["model=llama-3.1-8b", "precision=bf16-master", "--compare", "precision=fp32"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("Compared with"):].splitlines()[3:]
    assert any(line.startswith("Optimizer step temporaries (+ fp32 gradient copies) ") for line in table), table
    header = table[0]
    for line in table[1:]:
        for word in ("This setup", "Baseline", "Δ"):
            end = header.index(word) + len(word)
            assert line[end:].strip() == "" if word == "Δ" else line[end] == " ", (word, line)
            assert line[end - 1] != " " or word == "Δ" and line.startswith("GPUs needed"), (word, line)


# --- the ZeRO field under an FSDP strategy ------------------------------------------------------------------------

@pytest.mark.parametrize("fsdp,stage", [("FULL_SHARD", 3), ("SHARD_GRAD_OP", 2), ("NO_SHARD", 0), ("HYBRID_SHARD", 3)])
def test_the_zero_fields_line_says_the_stage_fsdp_sets(fsdp, stage):
    # The form showed "ZeRO stage 0" beside fsdp=FULL_SHARD, which pycore.memory.parallel.layout reads as stage 3.
    import json

    from pycore.memory.parallel import layout
    from pycore.memory.setup import resolve_architecture
    from pycore.output import web
    query = f"framework=torchtitan&model=llama-3.1-70b&dp=8&tp=8&fsdp={fsdp}"
    text = json.loads(web.run(query))["field_defaults"]["zero"]["text"]
    values = parse(dict(pair.split("=") for pair in query.split("&")))
    assert layout(values, resolve_architecture(values)).zero == stage
    assert text.startswith(f"fsdp={fsdp} sets the ZeRO stage to {stage}") and "not read" in text


def test_the_zero_fields_line_is_empty_without_fsdp():
    import json

    from pycore.output import web
    assert json.loads(web.run("dp=8&zero=3"))["field_defaults"]["zero"]["text"] == ""


# --- notes against warnings ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("query,kinds", [
    # what the estimate assumes: a recipe's batch and rollout, a hybrid's scans, the tokens images add
    ("model=qwen2.5-7b&method=grpo&rollout=vllm-colocate&dp=8&zero=3", [("note", "GRPO: batch counts completions")]),
    # (the update computes in fp32, where CUDA's SDPA runs its math kernel for Qwen2.5's grouped-query heads)
    ("model=qwen2.5-7b&method=distill", [("note", "attention: transformers' SDPA meets grouped-query heads"),
                                         ("note", "Distillation: batch counts prompts"),
                                         ("note", "Distillation under autocast: ")]),
    ("model=qwen2.5-0.5b&method=ppo", [("note", "PPO: batch counts responses")]),
    ("model=qwen3-next-80b-a3b", [("note", "this hybrid's 36 gated DeltaNet")]),
    ("model=qwen2.5-vl-7b-instruct&images=1", [("note", "the images of each sequence add 1,198 tokens")]),
    ("model=qwen2.5-vl-7b-instruct&mode=infer&engine=vllm", [("note", "vLLM profiles the vision encoder at start-up")]),
    ("model=qwen2.5-vl-7b-instruct&mode=infer&engine=vllm&mm_profiling=off",
     [("note", "vLLM skips its start-up profiling")]),
    # a tower whose profiling pycore does not model: the KV cache is overstated by it
    ("model=lfm2.5-vl-1.6b&mode=infer&engine=vllm", [("warning", "vLLM's start-up profiling also runs")]),
    # what is wrong: a run TRL or vLLM refuses, positions past the model's, a runtime whose overhead is unknown
    ("model=qwen2.5-7b&method=grpo&batch=3", [("note", "GRPO: batch counts"), ("warning", "TRL 1.16 refuses")]),
    ("model=llama-3.1-70b&mode=infer&engine=vllm&tp=2&seq=32768", [("warning", "vLLM would refuse to start")]),
    ("seq=200000", [("warning", "seq = 200,000 tokens is beyond llama-3.1-8b's 131,072 positions")]),
    ("gpu=mi300x", [("warning", "this accelerator runs ROCm")]),
    # an input that does nothing here: said, as a note
    ("lora_rank=8", [("note", "lora_rank is ignored: method=full")]),
])
def test_each_message_says_whether_it_is_a_warning_or_a_note(query, kinds):
    import json

    from pycore.output import web
    payload = json.loads(web.run(query))
    assert [(m["kind"], m["text"][:len(opening)]) for m, (_, opening) in zip(payload["messages"], kinds,
                                                                             strict=True)] == kinds
    assert [m["text"] for m in payload["messages"]] == payload["warnings"]      # every message, each once


def test_a_message_no_opening_names_is_a_warning():
    from pycore.output import report
    assert report.message_kinds(["something new the estimate cannot vouch for"], []) == \
        [{"kind": "warning", "text": "something new the estimate cannot vouch for"}]
