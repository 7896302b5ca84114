"""Vision-language training with images against validation/measure_vl.py's measured steps
(validation/measured_vl.json: small Qwen2.5-VL and Gemma 3 configs, transformers 5.24, real tensors, MemTracker),
and the vision tower's saved tensors (pycore/memory/vision_activations.py) against what autograd saved."""

import statistics
import sys
from pathlib import Path

import pytest

from pycore import estimate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

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


def test_other_towers_are_said_to_be_left_out():
    result = estimate({"model": "llama-4-scout-17b-16e-instruct", "seq": "512", "images": "1", "tp": "8"})
    assert "vision_activations" not in result.components
    assert any("saved activations are not modelled for this tower yet" in w for w in result.warnings)


def test_a_chunked_scan_counts_its_sequence_padded_to_whole_chunks():
    # transformers' torch_chunk_gated_delta_rule pads to 64 tokens, Mamba-2's torch scan to chunk_size; Mamba-1's
    # token-by-token scan and the fused kernels do not (pycore/memory/scan_activations.py padding)
    from pycore.memory.scan_activations import padding
    from pycore.model import catalog
    qwen = catalog.architecture("qwen3.5-9b")
    assert padding(qwen, "L", 200) == 256 / 200 and padding(qwen, "L", 256) == 1.0
    assert padding(qwen, "L", 200, fused=True) == 1.0 and padding(qwen, "m", 200) == 1.0
