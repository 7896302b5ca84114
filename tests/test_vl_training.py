"""Vision-language training with images against validation/measure_vl.py's measured steps
(validation/measured_vl.json: small Qwen2.5-VL, Qwen3.5, Gemma 3, Llama 4 and LFM2-VL configs, transformers 5.24, real
tensors, MemTracker),
and the vision tower's saved tensors (pycore/memory/vision_activations.py) against what autograd saved."""

import json
import statistics
import sys
from pathlib import Path

import pytest

from pycore import estimate
from pycore.memory.setup import resolve_architecture
from pycore.model import catalog

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

VL_RECORD = ROOT / "validation" / "measured_vl.json"

VL = compare.vl_rows()[1]


@pytest.mark.parametrize("case", VL, ids=[c["label"] for c in VL])
def test_a_training_step_with_images_within_5_percent(case):
    assert case["params_match"] and abs(case["error"]) <= 0.05


def test_training_with_images_within_3_percent_median():
    assert statistics.median(abs(c["error"]) for c in VL) <= 0.03


@pytest.mark.parametrize("case", [c for c in VL if "amp" not in c["label"]],
                         ids=[c["label"] for c in VL if "amp" not in c["label"]])
def test_the_towers_saved_tensors_per_patch(case):
    # without autocast, every saved tensor scales with the patches: within 1.7% at both tower widths
    measured, estimated = case["tower"]
    assert abs(estimated - measured) <= 0.02 * measured


def test_a_frozen_tower_keeps_nothing_and_full_recompute_keeps_each_blocks_input():
    base = {"model": "qwen2.5-vl-7b-instruct", "seq": "512", "images": "1", "image_size": "1280x720"}
    full = estimate(base).components["vision_activations"]
    assert "vision_activations" not in estimate({**base, "method": "lora"}).components
    assert "vision_activations" not in estimate({**base, "mode": "infer"}).components
    checkpointed = estimate({**base, "recompute": "full"}).components["vision_activations"]
    # 4,784 patches (1,196 tokens x 2 x 2) x 32 blocks x their 1,280-wide bf16 input, and the merger's terms
    assert 4784 * 32 * 1280 * 2 < checkpointed < full / 5


@pytest.mark.parametrize("model", ["llama-4-scout-17b-16e-instruct", "lfm2.5-vl-1.6b"])
def test_llama_4s_and_lfm2_vls_towers_are_counted_with_their_pixels(model):
    result = estimate({"model": model, "seq": "512", "images": "1", "ep": "1"})
    assert result.components["vision_activations"] > 0 and result.components["image_inputs"] > 0
    assert not any("not modelled for this tower" in w for w in result.warnings)
    # a frozen tower keeps nothing, and the pixels are still held
    lora = estimate({"model": model, "seq": "512", "images": "1", "method": "lora"}).components
    assert "vision_activations" not in lora and lora["image_inputs"] == result.components["image_inputs"]


def test_an_lfm2_vl_picture_padded_to_max_num_patches_keeps_its_padding_mask_in_every_block():
    # 256x256 and 512x512 are both one picture of 1,024 patches after padding (tests/test_vision.py); only the first is
    # padded, so SDPA's additive mask (1,024 x 1,024 in bf16, made at each call: aten's convert_boolean_attn_mask) is
    # kept by each of the tower's blocks (validation/measured_vl.json, lfm2_vl 256x256 against 512x512)
    base = {"model": "lfm2.5-vl-1.6b", "seq": "512", "images": "1", "precision": "bf16"}
    padded = estimate({**base, "image_size": "256x256"}).components["vision_activations"]
    whole = estimate({**base, "image_size": "512x512"}).components["vision_activations"]
    layers = catalog.architecture("lfm2.5-vl-1.6b").vision_layers
    assert padded - whole == 1024 * 1024 * 2 * layers


def test_a_chunked_scan_counts_its_sequence_padded_to_whole_chunks():
    # transformers' torch_chunk_gated_delta_rule pads to 64 tokens, Mamba-2's torch scan to chunk_size; Mamba-1's
    # token-by-token scan and the fused kernels do not (pycore/memory/scan_activations.py padding)
    from pycore.memory.scan_activations import padding
    from pycore.model import catalog
    qwen = catalog.architecture("qwen3.5-9b")
    assert padding(qwen, "L", 200) == 256 / 200 and padding(qwen, "L", 256) == 1.0
    assert padding(qwen, "L", 200, fused=True) == 1.0 and padding(qwen, "m", 200) == 1.0


def test_lora_on_lfm2_vl_adapts_its_attention_layers_only():
    # validation/measured_vl.json's lfm2_vl LoRA case: its 2-layer decoder is one attention and one short-convolution
    # layer; PEFT's q_proj/v_proj adapters go in the attention layer only, so the weights MemTracker measured
    # (5,295,104 bytes: the bf16 model and one layer's fp32 adapters) are pycore's, and the adapters' AdamW state
    # (114,704 measured, with the step counters) is 2 × 4 bytes × 14,336: rank 16 × ((256 + 256) for q_proj + (256 + 128)
    # for v_proj), hidden 256, 4 heads of 64, 2 KV heads (its config_json)
    from pycore.memory import finetune
    case = next(c for c in json.loads(VL_RECORD.read_text())["cases"] if c["label"].endswith("1280x720 lora"))
    result = estimate({**compare.measured_inputs(case["inputs"]), "config": json.dumps(case["config_json"])})
    assert result.components["weights"] == case["peak_breakdown"]["Param"] == 5_295_104
    assert result.components["optimizer"] == 2 * 4 * 14_336
    arch = resolve_architecture({"config": json.dumps(case["config_json"]), "model": "llama-3.1-8b"})
    assert finetune.layers_with(arch, "q") == 1 and finetune.layers_with(arch, "gate") == 2
