"""torchtitan's selective activation checkpointing, by op and by layer (issue 27), against measured steps.

validation/measured_sac.json: validation/measure_sac.py applies torchtitan's checkpoint policy
(torchtitan/distributed/activation_checkpoint.py@v0.2.2) to transformers' Llama and records the peak of a real
step with PyTorch's MemTracker (torch 2.13.0, transformers 5.24; full-size models under FakeTensorMode).
"""

import json
import sys
from pathlib import Path

import pytest

from pycore import FieldError, estimate
from pycore.inputs import frameworks, schema

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

CASES = json.loads((ROOT / "validation" / "measured_sac.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["label"])
def test_within_3_percent_of_the_measured_step(case):
    estimated = estimate(compare.measured_inputs(case["inputs"])).peak_bytes
    assert abs(estimated - case["peak_bytes"]) <= 0.03 * case["peak_bytes"]


def test_the_modes_save_what_their_names_say():
    # per layer and token, bf16 Llama 3.1 8B with flash attention: op keeps the block input, q, v, the
    # attention output with its logsumexp, gate and down outputs: 2·(4096 + 4096 + 1024 + 4096 + 14336 + 4096)
    # + 4·32 bytes; layer keeps everything in every other layer and the input in the rest.
    base = {"model": "llama-3.1-8b", "precision": "bf16", "attention": "flash", "batch": "1", "seq": "2048"}
    none, op, layer, full = (estimate({**base, "recompute": r}) for r in ("none", "op", "layer", "full"))
    tokens, layers = 2048, 32
    saved = {name: next(p.bytes for p in r.pools if p.key == "activations")
             for name, r in (("none", none), ("op", op), ("layer", layer), ("full", full))}
    per_token_op = 2 * (4096 + 4096 + 1024 + 4096 + 14336 + 4096) + 4 * 32
    final_norm = saved["op"] - per_token_op * tokens * layers
    assert 0 <= final_norm < 32 * 4096 * tokens              # the final norm's few bytes per token, once
    everything, layer_input = saved["none"] - final_norm, 2 * 4096 * tokens * layers
    assert saved["layer"] - final_norm == pytest.approx((everything + layer_input) / 2, abs=layers)
    assert saved["full"] < saved["op"] < saved["layer"] < saved["none"]


def test_torchtitan_defaults_to_its_llama_3_recipe_op_mode():
    values = frameworks.apply(schema.parse({"model": "llama-3.1-8b", "framework": "torchtitan"}))
    assert values["recompute"] == "op"
    assert "selective_ac_option = 'op'" in frameworks.FRAMEWORKS["torchtitan"].sources["recompute"]


@pytest.mark.parametrize("setup", [{"model": "mixtral-8x7b-v0.1"}, {"model": "gpt2", "seq": "1024"},
                                   {"model": "llama-3.1-8b", "activations": "korthikanti"}])
def test_op_mode_is_refused_where_it_is_not_modelled(setup):
    with pytest.raises(FieldError) as error:
        estimate({**setup, "recompute": "op"})
    assert error.value.key == "recompute"
