"""generate() with images against validation/measure_vl.py --generate's measured calls
(validation/measured_vl_generate.json: small Qwen2.5-VL, Qwen3.5, Gemma 3, Llama 4 and LFM2-VL configs, transformers 5.24,
real tensors, MemTracker), and the vision tower's working set per patch (pycore/memory/vision_activations.py)."""

import statistics
import sys
from pathlib import Path

import pytest

from pycore import estimate
from pycore.inputs import frameworks, schema
from pycore.memory import setup as setups
from pycore.memory import vision_activations

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

CASES = compare.vl_generate_rows()[1]


@pytest.mark.parametrize("case", CASES, ids=[c["label"] for c in CASES])
def test_generate_with_images_within_5_percent(case):
    assert case["params_match"] and abs(case["error"]) <= 0.05


def test_generate_with_images_within_3_percent_median():
    assert statistics.median(abs(c["error"]) for c in CASES) <= 0.03


def test_qwen2_5_vls_tower_peaks_in_its_fp32_rotary():
    # Qwen2.5-VL-7B's tower: h = 1,280, 16 heads, bf16. apply_rotary_pos_emb_vision (transformers 5.24) holds, beside the
    # block's input, its norm and the fused qkv output (5·2·h), fp32 copies of q and k (2·4·h) and four fp32
    # temporaries (q·cos, rotate_half's cat, its product with sin, the sum: 4·4·h): 43,520 bytes a patch, more than
    # the output projection's 10·2·h or the gated MLP's 2·2·h + 3·2·3,420
    setup = setups.resolve(frameworks.apply(schema.parse({"model": "qwen2.5-vl-7b-instruct", "mode": "infer",
                                                         "images": "1", "image_size": "1280x720"})))
    block, rest = vision_activations.inference_per_patch(setup)
    assert block == 5 * 2 * 1280 + 2 * 4 * 1280 + 4 * 4 * 1280 == 43_520
    # the rotary cos and sin (fp32, 80 each), two int64 position ids, one int64 window index per merged token
    assert rest == 2 * 4 * 80 + 16 + 8 / 4


def test_the_tower_runs_before_the_prefill_only_with_images():
    base = {"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "seq": "256"}
    text = estimate(base).as_dict()
    assert "vision encoder" not in text["moments"] and "vision_working" not in text["components"]
    # a large image: 16,384 tokens of 28² pixels, 65,536 patches of 43,520 + 658 bytes beside the weights and the
    # pixel values (3 channels x 2 frames x 14² values a patch, bf16); its prefill of 16,448 tokens is larger still
    big = estimate({**base, "images": "1", "image_size": "3584x3584", "seq": "64"}).as_dict()
    working = round(65_536 * (43_520 + 2 * 4 * 80 + 16 + 8 / 4))
    pixels = 65_536 * 3 * 2 * 14 * 14 * 2
    assert big["moments"]["vision encoder"] == big["components"]["weights"] + working + pixels + \
        big["components"]["blas_workspace"]
    assert big["moments"]["prefill"] > big["moments"]["vision encoder"] and big["components"]["image_inputs"] == pixels


def test_lfm2_vls_padding_mask_is_counted_once_a_picture_is_padded():
    base = {"model": "lfm2.5-vl-1.6b", "mode": "infer", "seq": "256", "images": "1"}
    square = estimate({**base, "image_size": "512x512"}).components["vision_working"]       # 32 x 32 patches
    wide = estimate({**base, "image_size": "640x480"}).components["vision_working"]         # 40 x 30, padded
    assert wide > square
