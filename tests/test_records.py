"""Every number the estimate shows comes with the record that made it (pycore.memory.pools).

Two properties, over every preset and a grid of setups: the breakdown (pools live at the peak plus the
runtime overhead) has no negative row and adds up to the total exactly; and every formula row, evaluated
here from its substituted numbers by an evaluator independent of pycore's arithmetic, equals its bytes.
"""

import ast
import json
import math
import operator
import re
from pathlib import Path

import pytest

from pycore import FieldError, estimate
from pycore.model import catalog
from pycore.output.explain import formulas

SETUPS = [
    {},
    {"precision": "fp32", "optimizer_impl": "foreach"},
    {"precision": "bf16-master", "microbatches": "4", "optimizer_impl": "for-loop"},
    {"precision": "bf16", "recompute": "full", "batch": "4"},
    {"precision": "amp-fp16", "attention": "eager", "recompute": "selective", "seq": "512"},
    {"zero": "1", "dp": "8"}, {"zero": "2", "dp": "8"}, {"fsdp": "FULL_SHARD", "dp": "64", "tp": "2"},
    {"fsdp": "SHARD_GRAD_OP", "dp": "4"}, {"fsdp": "HYBRID_SHARD", "dp": "16"},
    {"tp": "8", "sp": "yes", "pp": "4", "microbatches": "16"}, {"pp": "2", "microbatches": "4", "interleave": "2"},
    {"cp": "2", "dp": "2", "zero": "3"}, {"zero": "3", "dp": "8", "offload": "optimizer"},
    {"method": "lora", "lora_targets": "all-linear"}, {"method": "qlora", "optimizer": "adam-8bit"},
    {"loss_chunks": "8", "precision": "bf16"}, {"activations": "korthikanti"},
    {"mode": "infer"}, {"mode": "infer", "quant": "awq-int4", "kv_dtype": "fp8", "seq": "8192"},
    {"mode": "infer", "tp": "2", "batch": "8"}, {"mode": "infer", "pp": "2", "quant": "q4_k_m"},
    {"mode": "infer", "engine": "vllm"}, {"mode": "infer", "engine": "vllm", "tp": "4"},
    {"overhead": "10%"},
]
MODELS = sorted(catalog.models())

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_FUNCS = {"ceil": math.ceil, "floor": math.floor, "round": round, "max": max}


def evaluate(text):
    """The value of a substituted formula: 1,234 × 5 / (6 − 7) with ceil/floor/round/max."""
    python = re.sub(r"(?<=\d),(?=\d{3})", "", text).replace("×", "*").replace("−", "-")
    return _walk(ast.parse(python, mode="eval").body)


def _walk(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_walk(node.left), _walk(node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        return _FUNCS[node.func.id](*[_walk(a) for a in node.args])
    raise ValueError(f"not a formula: {ast.dump(node)}")


def test_the_evaluator_reads_what_it_should():
    assert evaluate("ceil(128,256 / 8) × 2,048 × 4") == 16032 * 2048 * 4
    assert evaluate("max(1,000, 2 × (3 − 1))") == 1000
    with pytest.raises(ValueError):
        evaluate("__import__('os')")


@pytest.mark.parametrize("model", MODELS)
def test_breakdown_adds_up_and_every_formula_evaluates_to_its_bytes(model):
    checked = 0
    limit = catalog.architecture(model).max_positions if catalog.architecture(model).positions == "learned" else 0
    for setup in SETUPS:
        inputs = {"model": model, **setup}
        if limit:       # at sequences a learned position table embeds (GPT-2 1,024, BERT 512 positions)
            room = limit - (256 if setup.get("mode") == "infer" else 0)
            inputs["seq"] = str(min(int(setup.get("seq", 2048)), room))
        try:
            record = estimate(inputs)
        except FieldError as error:
            # Some setups cannot work for some models (LoRA on an encoder, serving a ResNet, tp not
            # dividing heads): the refusal names one of the keys given.
            assert error.key in setup or error.key in ("mode", "method", "activations", "layers", "tp", "pp", "ep")
            continue
        result = record.as_dict()
        rows = result["breakdown"]
        assert all(row["bytes"] >= 0 for row in rows)
        assert sum(row["bytes"] for row in rows) == result["total_bytes"]
        assert result["total_bytes"] == result["peak_bytes"] + result["overhead_bytes"]
        assert result["peak_bytes"] == max(result["moments"].values())
        for row in formulas(record) + result["breakdown"]:
            assert evaluate(row["substituted"]) == row["bytes"], (setup, row["name"] if "name" in row else row["key"])
            assert isinstance(row["bytes"], int)
        checked += 1
    assert checked >= len(SETUPS) // 3


def test_the_default_page_breakdown_is_its_records():
    # The example: 70B, bf16-master, full recompute, batch 1, seq 8192 — rows summed to more
    # than the total before; now each row is a pool live at the peak.
    result = estimate({"model": "llama-3.1-70b", "precision": "bf16-master", "recompute": "full", "seq": "8192"}).as_dict()
    keys = [row["key"] for row in result["breakdown"]]
    assert "other" not in keys and keys[-2:] == ["allocator_cache", "cuda_context"]
    assert sum(row["bytes"] for row in result["breakdown"]) == result["total_bytes"]
    assert abs(sum(row["percent"] for row in result["breakdown"]) - 100) < 1e-9


@pytest.mark.parametrize("setup", SETUPS[::3] + [{"hidden": "188"}, {"model": "no-such-model"}])
def test_the_keystroke_payload_and_the_formulas_after_it_are_the_full_estimate(setup):
    # The page draws web.run(query, False) within the frame and the formulas of web.answers(query) once
    # typing pauses: together they must be exactly what one web.run(query) gives, bad inputs included.
    from urllib.parse import urlencode

    from pycore.output import web

    query = urlencode({"model": "llama-3.1-8b", **setup})
    full, light = json.loads(web.run(query)), json.loads(web.run(query, False))
    assert "formulas" not in light and len(light) == len(full) - 1
    for key in ("errors", "query", "warnings", "summary", "total", "gpus"):
        assert light.get(key) == full.get(key), key
    fields = ("key", "label", "bytes", "text", "gb_text", "percent", "source", "group")
    assert [[row[f] for f in fields] for row in light["breakdown"]] == \
        [[row[f] for f in fields] for row in full["breakdown"]]
    assert json.loads(web.answers(query))["formulas"] == full["formulas"]


# The recipes, hybrids and vision inputs of issues 29-31, one model each (SETUPS runs over every preset without them)
RECIPE_SETUPS = [{"model": "llama-3.2-1b", "method": method} for method in
                 ("dpo", "dpo-lora", "kto", "kto-lora", "grpo", "ppo", "distill", "reward")] + [
    {"model": "llama-3.2-1b", "method": "dpo", "trl_head": "full"},
    {"model": "qwen2.5-7b", "method": "grpo", "trl_head": "full", "rollout": "vllm-colocate", "dp": "8"},
    {"model": "llama-3.1-8b", "method": "ppo", "reward_model": "llama-3.2-1b"},
    {"model": "qwen3-next-80b-a3b-instruct", "mode": "infer", "engine": "vllm", "tp": "4"},
    {"config": str(Path(__file__).parent / "configs" / "families" / "granitemoehybrid.json"), "mode": "infer",
     "engine": "vllm", "tp": "2"},
    {"model": "qwen2.5-vl-7b-instruct", "images": "2", "image_size": "1920x1080"},
    {"model": "llama-3.1-70b", "mode": "infer", "engine": "vllm", "tp": "4", "speculative": "draft",
     "draft_model": "llama-3.2-1b"}]


@pytest.mark.parametrize("inputs", RECIPE_SETUPS, ids=[str(i) for i in range(len(RECIPE_SETUPS))])
def test_the_recipes_and_hybrids_add_up_and_their_formulas_evaluate(inputs):
    record = estimate(inputs)
    result = record.as_dict()
    assert sum(row["bytes"] for row in result["breakdown"]) == result["total_bytes"] == \
        result["peak_bytes"] + result["overhead_bytes"]
    for row in formulas(record) + result["breakdown"]:
        assert evaluate(row["substituted"]) == row["bytes"], row["name"] if "name" in row else row["key"]
