"""GRPO as TRL 1.14.2 runs it, before TRL 1.15.0's fused log-prob head (trl_head=full; pycore/memory/posttraining.py
full_head_pools, no_grad_working): the policy's and the reference's logits over each row's completion and one more
position, the log-prob kernel's per-token statistics and the logits' gradient. The expected bytes are worked by hand
from the config below; the measured cases (validation/measure_grpo_full.py, validation/measured_grpo_full.json) are
held at the end."""

import statistics
import sys
from pathlib import Path

import pytest

from pycore.inputs import applies
from pycore.memory.estimate import estimate
from pycore.memory.posttraining import METRICS
from pycore.memory.rollout import OLD_PASS, REFERENCE_PASS

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

# measure_grpo.py's small Llama: hidden 512, vocabulary 32,000. 8 completions of 192 tokens after a 64-token prompt:
# TRL 1.14.2 asks for logits_to_keep = 192 + 1 positions a row (grpo_trainer.py L1562-1564), T = 8 × 193 = 1,544, and
# scores N = 8 × 192 = 1,536 tokens (the [:, :-1, :] slice, L1577-1579).
SMALL = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000",
             method="grpo", batch="8", seq="64", max_completion_length="192", beta="0.04", num_generations="8",
             recompute="none", precision="bf16", trl_head="full")
T, N, V, H = 8 * 193, 8 * 192, 32000, 512


def pools(inputs):
    result = estimate(inputs)
    return result, {p.key: p for p in result.pools}


def test_the_policys_logits_over_the_completion_and_their_gradient_in_bf16():
    """TRL 1.14.2 grpo_trainer.py L1575-1590: outputs.logits [8, 193, 32000] in bf16, saved by the log-prob kernel
    (trl/kernels/logprob_entropy.py L192) until its backward allocates grad_logits = empty_like of the [8, 192, 32000]
    slice (L210); four fp32 values a scored token (L165-168)."""
    result, by_key = pools(SMALL)
    assert by_key["logits"].bytes == T * V * 2 == 98_816_000
    assert by_key["loss_gradients"].bytes == N * V * 2 == 98_304_000
    assert by_key["log_probs"].bytes == N * 4 * 4 == 24_576
    assert set(by_key["logits"].moments) >= {"forward end", "backward start"}
    assert by_key["loss_gradients"].moments == ("backward start",)
    assert not set(by_key) & {"fused_head_forward", "fused_head_backward", "logits_autocast", "logit_metrics",
                              "reference_logits"}
    # GRPO's loss copies no logits for its metrics (grpo_trainer.py L3324-3360 log masked means of [rows, C] tensors)
    assert METRICS not in result.moments


def test_the_reference_pass_ends_with_its_logits():
    """_generate_and_score_completions L2765-2797: the reference's logits [8, 193, 32000] under no_grad, larger here
    than one layer's working tensors ((3 · 2 · 1408 + (2 · 2 + 4) · 512) bytes a token × 8 × 256 tokens,
    pycore.memory.posttraining._layer_working)."""
    result, by_key = pools(SMALL)
    assert (3 * 2 * 1408 + 8 * 512) * 8 * 256 < T * V * 2
    assert by_key["reference_forward"].bytes == T * V * 2
    assert by_key["reference_forward"].moments == (REFERENCE_PASS,)
    moments = list(result.moments)
    assert moments.index(REFERENCE_PASS) < moments.index("forward end")


def test_under_autocast_the_logits_are_fp32_with_their_bf16_original_and_the_heads_weight_copy():
    """accelerate convert_outputs_to_fp32 (Accelerator.prepare_model under native amp, the reference's through
    prepare_model(evaluation_mode=True), grpo_trainer.py L1149) copies the bf16 logits to fp32; the lm_head's bf16 weight
    copy V × h × 2 is saved for its backward."""
    _, by_key = pools({**SMALL, "precision": "amp-bf16"})
    assert by_key["logits"].bytes == T * V * 4 == 197_632_000
    assert by_key["logits_autocast"].bytes == T * V * 2 and by_key["logits_autocast"].moments == ("forward end",)
    assert by_key["loss_gradients"].bytes == N * V * 4
    assert by_key["reference_forward"].bytes == T * V * (4 + 2) == 296_448_000
    assert by_key["head_autocast_copy"].bytes == V * H * 2 == 32_768_000


def test_beta_zero_runs_no_reference_pass():
    result, by_key = pools({**SMALL, "beta": "0"})
    assert "reference_forward" not in by_key and REFERENCE_PASS not in result.moments
    assert by_key["logits"].bytes == T * V * 2


def test_a_lora_policy_scores_its_reference_with_the_same_full_logits():
    _, by_key = pools({**SMALL, "method": "grpo-lora", "lora_targets": "qv"})
    assert by_key["reference_forward"].bytes == by_key["logits"].bytes == T * V * 2
    assert "reference_weights" not in by_key


def test_under_vllm_the_old_policy_pass_ends_with_its_logits_too():
    """L2706-2721: under vLLM the policy scores the completions under no_grad (vllm_importance_sampling_correction),
    through the same _full_logits_logps."""
    result, by_key = pools({**SMALL, "rollout": "vllm-colocate"})
    assert OLD_PASS in result.moments
    assert by_key["old_policy_forward"].bytes == T * V * 2


def test_fused_is_the_default_and_the_full_head_differs():
    """Which head holds more depends on the shapes: at this small vocabulary the fused head's backward (its tile of
    min(N, 4,096) × 32,768 columns and the head weight's fp32 gradient) outweighs the [8, 193, 32000] logits, as
    measured (measured_grpo.json, TRL 1.16's fused head, 507.8 MiB; measured_grpo_full.json, TRL 1.14.2, 501.6 MiB:
    'llama small grpo full bf16 beta0 g8 b8 p64 c192'); at Llama 3's 128,256-token vocabulary the logits dominate."""
    fused = estimate({k: v for k, v in SMALL.items() if k != "trl_head"})
    assert estimate({**SMALL, "trl_head": "fused"}).peak_bytes == fused.peak_bytes
    assert estimate(SMALL).peak_bytes < fused.peak_bytes
    wide = {**SMALL, "vocab": "128256"}
    assert estimate(wide).peak_bytes > estimate({**wide, "trl_head": "fused"}).peak_bytes
    assert applies.applies("trl_head", {"mode": "train", "kind": "transformer", "method": "grpo-lora"})


# validation/measure_grpo_full.py (validation/measured_grpo_full.json): one step of TRL 1.14.2's GRPOTrainer on small
# Llama and Qwen2 configs, full and LoRA, bf16 and amp-bf16, beta 0 and 0.04, with and without checkpointing
MEASURED = compare.grpo_rows(compare.GRPO_FULL)[1]


@pytest.mark.parametrize("case", MEASURED, ids=[c["label"] for c in MEASURED])
def test_peak_within_10_percent_of_measured(case):
    assert abs(case["error"]) <= 0.10


def test_median_error_within_3_percent():
    assert statistics.median(abs(c["error"]) for c in MEASURED) <= 0.03


def test_the_measured_cases_cover_policies_precisions_and_beta():
    labels = " ".join(c["label"] for c in MEASURED)
    for word in ("llama", "qwen", " full ", " lora ", " gc ", " bf16 ", " amp-bf16 ", " beta0 ", " beta0.04 "):
        assert word in labels, word
