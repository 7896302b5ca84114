"""Inputs reported as ignored change nothing (issue #27, part 4).

`params=7B layers=32 hidden=4096` said "seq is ignored", yet seq 512 / 2048 / 4096 gave 55.31 / 63.28 /
73.90 GiB (the multiplier model: batch·seq·hidden·layers·17·2 bytes). Over every schema key and a set of
situations, a key that pycore.inputs.applies reports as ignored must leave total_bytes unchanged.
"""

import pytest

from pycore.base.errors import InputError
from pycore.base.units import GIB
from pycore.inputs.applies import applies, describe, ignored
from pycore.inputs.schema import FIELDS, parse
from pycore.memory.estimate import estimate, estimate_values

SITUATIONS = {
    "train": {"model": "llama-3.1-8b"},
    "train-fp32": {"model": "gpt2", "batch": "4", "seq": "1024"},
    "serve-hf": {"model": "llama-3.1-8b", "mode": "infer"},
    "serve-vllm": {"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm"},
    "serve-awq": {"model": "qwen2.5-7b", "mode": "infer", "quant": "awq-int4"},
    "lora": {"model": "llama-3.1-8b", "method": "lora"},
    "qlora": {"model": "llama-3.1-8b", "method": "qlora"},
    "pipeline": {"model": "llama-3.1-8b", "pp": "2", "microbatches": "4"},
    "hybrid-shard": {"model": "llama-3.1-8b", "dp": "16", "fsdp": "HYBRID_SHARD"},
    "encoder": {"model": "bert-large-uncased", "batch": "8", "seq": "512"},
    "generic-bare": {"params": "7B"},
    "generic-shaped": {"params": "7B", "layers": "32", "hidden": "4096"},
    "generic-per-sample": {"params": "1B", "activations": "per-sample", "act_per_sample": "1GiB"},
    "generic-multiplier": {"params": "7B", "layers": "32", "hidden": "4096", "activations": "multiplier"},
    "generic-korthikanti": {"params": "7B", "layers": "32", "hidden": "4096", "heads": "32",
                            "activations": "korthikanti"},
    "transformer-per-sample": {"model": "gpt2", "seq": "1024", "activations": "per-sample", "act_per_sample": "1GiB"},
    "generic-preset": {"model": "resnet-50", "batch": "32"},
}

# A value other than the situation's for each kind of key (choices: every other choice is tried).
OTHER = {"int": ("3", "64"), "count": ("3B", "1T"), "float": ("0.5", "2"), "size": ("2GiB",),
         "overhead": ("2GiB", "10%"), "dtype": ("fp32", "fp8", "bf16"), "text": ()}


def alternatives(field, current):
    if field.kind == "choice":
        return [c for c in field.choices if c != str(current)]
    return [v for v in OTHER[field.kind] if v != str(current)]


def total(raw):
    try:
        return estimate(raw).total_bytes
    except InputError:
        return None


def cases():
    for name, raw in SITUATIONS.items():
        for field in FIELDS:
            yield pytest.param(name, raw, field, id=f"{name}-{field.key}")


@pytest.mark.parametrize("name,raw,field", cases())
def test_an_ignored_input_changes_nothing(name, raw, field):
    values = parse(raw)
    result = estimate_values(values)
    situation = {**values, "kind": result.model.kind}
    if applies(field.key, situation):
        return
    for value in alternatives(field, values.get(field.key)):
        changed = total({**raw, field.key: value})
        if changed is None:
            continue                # refused outright: the user is told, not misled
        assert changed == result.total_bytes, (f"{describe(field.key, situation)}, yet {field.key}={value} gives "
                                               f"{changed / GIB:.2f} GiB against {result.total_bytes / GIB:.2f}")


def test_the_issues_case_counts_seq():
    # The multiplier model: 7B parameters with 32 layers of 4096 counts seq (issue #27's 55.31 / 63.28 / 73.90 GiB,
    # each 0.30 GiB more since the two cuBLAS workspaces on the H100 are counted and the CUDA context is an H200's
    # reading, 758 MiB, not the 512 MiB allowance: pycore/memory/device.py).
    raw = {"params": "7B", "layers": "32", "hidden": "4096"}
    totals = [round(estimate({**raw, "seq": seq}).total_bytes / GIB, 2) for seq in ("512", "2048", "4096")]
    assert totals == [55.61, 63.58, 74.21]
    values = {**parse(raw), "kind": "generic"}
    assert ignored(values, ["seq", "batch"]) == []


def test_a_bare_parameter_count_still_ignores_seq():
    values = {**parse({"params": "7B"}), "kind": "generic"}
    assert ignored(values, ["seq"]) == ["seq"]
    assert total({"params": "7B", "seq": "512"}) == total({"params": "7B", "seq": "8192"})
