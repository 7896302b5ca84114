"""pycore.inputs.applies: the table of which inputs apply, checked against the schema and the estimate itself."""

import pytest

from pycore import estimate
from pycore.inputs.applies import APPLIES, applies, describe, ignored
from pycore.inputs.schema import BY_KEY

MODELS = set(BY_KEY["activations"].choices) | {"none"}
DERIVED_VALUES = {"act_model": MODELS, "counted_by": MODELS | {"transformer"},
                  "served_by": set(BY_KEY["engine"].choices) | {"pytorch"}}


def test_every_key_and_condition_names_a_real_input_and_value():
    for key, conditions in APPLIES.items():
        assert key in BY_KEY, key
        for other, allowed in conditions.items():
            if other == "kind":
                assert set(allowed) <= {"generic", "transformer"}
                continue
            if other in DERIVED_VALUES:                 # read from the inputs (applies.DERIVED)
                assert set(allowed["not"] if isinstance(allowed, dict) else allowed) <= DERIVED_VALUES[other], (key, other)
                continue
            values = allowed["not"] if isinstance(allowed, dict) else allowed
            field = BY_KEY[other]
            if field.kind == "choice":
                assert set(values) <= set(field.choices), (key, other)


def test_examples_from_the_tracker():
    assert not applies("lora_rank", {"method": "full"}) and applies("lora_rank", {"method": "qlora"})
    assert applies("optimizer", {"mode": "train"}) and not applies("optimizer", {"mode": "infer"})
    assert applies("kv_dtype", {"mode": "infer"}) and not applies("kv_dtype", {})
    assert applies("act_multiplier", {"activations": "multiplier"}) and not applies("act_per_sample", {})
    assert not applies("heads", {"kind": "generic"}) and applies("heads", {"model": "gpt2"})
    assert not applies("seq", {"params": "7B"})                     # a bare parameter count is generic
    assert applies("batch", {"mode": "infer", "kind": "generic"})   # keys with no entry always apply
    assert ignored({"method": "full"}, ["batch", "lora_rank", "kv_dtype"]) == ["lora_rank", "kv_dtype"]
    assert describe("lora_rank", {"method": "full"}) == "lora_rank is ignored: method=full"


# (situation, key, another value): where the key does not apply, changing it must not change the estimate.
NOT_APPLYING = [
    ({"mode": "infer"}, "optimizer", "sgd"), ({"mode": "infer"}, "recompute", "full"),
    ({"mode": "infer"}, "activations", "korthikanti"), ({"mode": "infer"}, "grad_dtype", "fp32"),
    ({"mode": "infer"}, "opt_dtype", "bf16"), ({"mode": "infer"}, "master_dtype", "bf16"),
    ({}, "kv_dtype", "fp8"), ({}, "new_tokens", "4096"), ({}, "lora_rank", "64"), ({}, "lora_targets", "all-linear"),
    ({}, "act_multiplier", "50"), ({}, "act_per_sample", "1GiB"), ({}, "interleave", "2"),
    ({"dp": "16", "fsdp": "FULL_SHARD"}, "shard_group", "4"),
    ({"model": "resnet-50", "batch": "8"}, "seq", "8192"), ({"model": "resnet-50", "batch": "8"}, "vocab", "5"),
]


@pytest.mark.parametrize("situation,key,value", NOT_APPLYING)
def test_a_key_that_does_not_apply_changes_nothing(situation, key, value):
    kind = "generic" if situation.get("model") == "resnet-50" else "transformer"
    assert not applies(key, {**situation, "kind": kind})
    assert estimate({**situation, key: value}).total_bytes == estimate(situation).total_bytes
