"""DPO as TRL 1.14.2 runs it, before TRL 1.15.0's fused log-prob head (trl_head=full; pycore/memory/posttraining.py
full_head_pools, metrics_pools): the policy's and the reference's full logits, the log-prob kernel's per-token
statistics and the logits' gradient. The expected bytes are worked by hand from the config below; the measured cases
(validation/measure_dpo_full.py, validation/measured_dpo_full.json) are held at the end."""

import statistics
import sys
from pathlib import Path

import pytest

from pycore.inputs import applies, schema
from pycore.memory.estimate import estimate
from pycore.memory.posttraining import METRICS, REFERENCE

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

# measure_dpo.py's small Llama: hidden 512, vocabulary 32,000. One pair of 512 tokens: 2 rows, T = 1,024 tokens, and
# N = 1,022 scored (each row's last token is not: labels[..., 1:]).
SMALL = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000",
             method="dpo", batch="1", seq="512", recompute="none", trl_head="full")
T, N, V, H = 1024, 1022, 32000, 512


def pools(inputs):
    result = estimate(inputs)
    return result, {p.key: p for p in result.pools}


def test_the_policys_logits_and_their_gradient_in_bf16():
    """TRL 1.14.2 dpo_trainer.py L1366-1370: outputs.logits [2, 512, 32000] in bf16, saved by the log-prob kernel
    (trl/kernels/logprob_entropy.py L192) until its backward allocates grad_logits = empty_like of the [2, 511, 32000]
    slice (L210); four fp32 values a scored token (L165-168)."""
    _, by_key = pools({**SMALL, "precision": "bf16"})
    assert by_key["logits"].bytes == T * V * 2 == 65_536_000
    assert by_key["loss_gradients"].bytes == N * V * 2 == 65_408_000
    assert by_key["log_probs"].bytes == N * 4 * 4 == 16_352
    assert set(by_key["logits"].moments) >= {"forward end", REFERENCE, METRICS, "backward start"}
    assert by_key["loss_gradients"].moments == ("backward start",)
    assert not set(by_key) & {"fused_head_forward", "fused_head_backward", "log_softmax", "logits_autocast"}


def test_the_reference_logits_and_the_metrics_copy():
    """L1396-1434: the reference's logits [2, 512, 32000] under no_grad, referenced until _compute_loss returns;
    L1661-1667: the chosen half of the scored tokens' logits copied by a boolean mask, N / 2 × V × 2 bytes."""
    result, by_key = pools({**SMALL, "precision": "bf16"})
    assert by_key["reference_logits"].bytes == T * V * 2 == 65_536_000
    assert by_key["logit_metrics"].bytes == N // 2 * V * 2 == 32_704_000
    assert by_key["reference_logits"].moments == (METRICS,)
    # the reference forward's own pool ends with its logits: larger than one layer's working tensors here
    # (pycore.memory.posttraining._layer_working: (3 · 2 · 1408 + (2 · 2 + 4) · 512) bytes a token × 1,024 tokens)
    assert (3 * 2 * 1408 + 8 * 512) * T < T * V * 2
    assert by_key["reference_forward"].bytes == T * V * 2
    moments = list(result.moments)
    assert moments.index("forward end") + 1 == moments.index(REFERENCE) == moments.index(METRICS) - 1
    assert moments.index(METRICS) + 1 == moments.index("backward start")
    # in the metrics moment: both models' logits and the copy beside what the step holds
    live = {p.key for p in result.pools if METRICS in p.moments}
    assert {"logits", "reference_logits", "logit_metrics", "weights", "reference_weights", "activations"} <= live
    assert "reference_forward" not in live


def test_under_autocast_the_logits_are_fp32_with_their_bf16_original_and_the_heads_weight_copy():
    """accelerate convert_outputs_to_fp32 (Accelerator.prepare_model under native amp) copies the bf16 logits to fp32
    for the policy and the reference; the lm_head's bf16 weight copy V × h × 2 is saved for its backward."""
    _, by_key = pools({**SMALL, "precision": "amp-bf16"})
    assert by_key["logits"].bytes == T * V * 4 == 131_072_000
    assert by_key["logits_autocast"].bytes == T * V * 2 and by_key["logits_autocast"].moments == ("forward end",)
    assert by_key["loss_gradients"].bytes == N * V * 4
    assert by_key["logit_metrics"].bytes == N // 2 * V * 4
    assert by_key["reference_logits"].bytes == T * V * 4
    assert by_key["reference_forward"].bytes == T * V * (4 + 2) == 196_608_000
    assert by_key["head_autocast_copy"].bytes == V * H * 2 == 32_768_000


def test_precomputed_reference_log_probs_hold_no_reference_logits():
    result, by_key = pools({**SMALL, "ref_model": "precomputed", "precision": "bf16"})
    assert "reference_logits" not in by_key and REFERENCE not in result.moments
    moments = list(result.moments)
    assert moments.index("forward end") + 1 == moments.index(METRICS)


def test_a_lora_policy_scores_its_reference_with_the_same_full_logits():
    _, by_key = pools({**SMALL, "method": "dpo-lora", "lora_targets": "qv", "precision": "bf16"})
    assert by_key["reference_logits"].bytes == by_key["logits"].bytes == T * V * 2
    assert "reference_weights" not in by_key


def test_the_full_head_holds_more_than_the_fused_one_and_fused_is_the_default():
    fused = estimate({k: v for k, v in SMALL.items() if k != "trl_head"})
    assert estimate({**SMALL, "trl_head": "fused"}).peak_bytes == fused.peak_bytes
    assert estimate(SMALL).peak_bytes > fused.peak_bytes


def test_trl_head_is_a_dpo_and_grpo_input_only():
    field = next(f for f in schema.FIELDS if f.key == "trl_head")
    assert field.default == "fused" and field.choices == ("fused", "full")
    assert "1.15.0" in field.default_source and "1.14.2" in field.default_source
    for method in ("dpo", "dpo-lora", "dpo-qlora", "grpo", "grpo-lora"):
        assert applies.applies("trl_head", {"mode": "train", "kind": "transformer", "method": method})
    for method in ("full", "lora", "kto", "ppo", "distill"):
        assert not applies.applies("trl_head", {"mode": "train", "kind": "transformer", "method": method})
    # KTO keeps TRL 1.16's fused head whatever trl_head says (its old path is not measured; GRPO's is:
    # tests/test_grpo_full.py)
    kto = dict(SMALL, method="kto", batch="2")
    assert estimate(kto).peak_bytes == estimate({**kto, "trl_head": "fused"}).peak_bytes


# validation/measure_dpo_full.py (validation/measured_dpo_full.json): one step of TRL 1.14.2's DPOTrainer on small
# Llama and Qwen2 configs, full and LoRA, bf16 and amp-bf16, with and without checkpointing
MEASURED = compare.dpo_rows(compare.DPO_FULL)[1]


@pytest.mark.parametrize("case", MEASURED, ids=[c["label"] for c in MEASURED])
def test_peak_within_10_percent_of_measured(case):
    assert abs(case["error"]) <= 0.10


def test_median_error_within_3_percent():
    assert statistics.median(abs(c["error"]) for c in MEASURED) <= 0.03


def test_the_measured_cases_cover_policies_precisions_and_checkpointing():
    labels = " ".join(c["label"] for c in MEASURED)
    for word in ("llama", "qwen", " full ", " lora ", "precomputed", " gc ", " bf16 ", " amp-bf16 "):
        assert word in labels, word
