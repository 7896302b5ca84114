"""DPO as TRL 1.16's DPOTrainer runs it (pycore/memory/posttraining.py): the reference model, the concatenated
chosen and rejected batch, the fused log-prob head and the reference forward as its own moment. The measured
cases are held in tests/test_validation.py (validation/measured_dpo.json)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pycore.inputs import applies, schema
from pycore.memory.estimate import estimate
from pycore.memory.posttraining import REFERENCE, TOKEN_TILE, VOCAB_TILE
from pycore.memory.setup import resolve

ROOT = Path(__file__).resolve().parent.parent
BASE = {"model": "llama-3.2-1b", "precision": "bf16", "batch": "2", "seq": "1024"}


def pools(result):
    return {p.key: p for p in result.pools}


def test_the_reference_copy_weighs_what_the_policy_weighs_and_is_live_in_every_moment():
    result = estimate({**BASE, "method": "dpo"})
    by_key = pools(result)
    assert by_key["reference_weights"].bytes == by_key["weights"].bytes
    assert set(by_key["reference_weights"].moments) == set(result.moments)
    assert by_key["reference_weights"].group == "reference_model"


def test_chosen_and_rejected_rows_make_twice_the_batch():
    plain = estimate({**BASE, "recompute": "none"})
    dpo = estimate({**BASE, "method": "dpo", "recompute": "none"})
    assert dpo.tokens == 2 * plain.tokens == 2 * 2 * 1024
    assert pools(dpo)["activations"].bytes == 2 * pools(plain)["activations"].bytes


def test_the_reference_forward_is_a_moment_between_the_forward_and_backward():
    result = estimate({**BASE, "method": "dpo", "recompute": "none"})
    moments = list(result.moments)
    assert moments.index("forward end") + 1 == moments.index(REFERENCE) < moments.index("backward start")
    live = {p.key for p in result.pools if REFERENCE in p.moments}
    # the policy's saved activations, its weights and optimizer state stay; its gradients do not exist yet
    assert {"weights", "optimizer", "activations", "reference_weights", "reference_forward"} <= live
    assert "gradients" not in live and "fused_head_forward" not in live


def test_no_logits_under_the_fused_head():
    keys = set(pools(estimate({**BASE, "method": "dpo"})))
    assert not keys & {"logits", "log_softmax", "loss_gradients", "logits_upcast"}
    assert {"fused_head_forward", "fused_head_backward"} <= keys


def test_fused_head_tile_and_the_trained_heads_fp32_gradient():
    """mm_buf [min(N, 4096), 32768] in bf16; the head's gradient accumulated in fp32 [V, h] then cast (full policy
    only: a LoRA policy's head is frozen)."""
    result = estimate({**BASE, "method": "dpo", "recompute": "none"})
    n, h, vocab = 4096 - 4, 2048, 128256          # 2 pairs: 4 rows × 1024 tokens, each row's last not scored
    tile = min(n, TOKEN_TILE) * VOCAB_TILE * 2
    assert pools(result)["fused_head_backward"].bytes == tile + n * h * (4 + 2) + vocab * h * (4 + 2)
    lora = estimate({**BASE, "method": "dpo-lora", "recompute": "none"})
    assert pools(lora)["fused_head_backward"].bytes == tile + n * h * (4 + 2)


@pytest.mark.parametrize("method,ref_model,weights,forward", [
    ("dpo", "auto", True, True), ("dpo-lora", "auto", False, True), ("dpo-qlora", "auto", False, True),
    ("dpo", "precomputed", False, False), ("dpo", "none", False, False), ("dpo-lora", "precomputed", False, False)])
def test_which_reference_is_held(method, ref_model, weights, forward):
    """TRL DPOTrainer.__init__: a frozen copy for a full policy; a PEFT policy's reference is its base with the
    adapters disabled; precompute_ref_log_probs (or a reference-free loss) holds none and runs no reference forward."""
    result = estimate({**BASE, "method": method, "ref_model": ref_model})
    keys = set(pools(result))
    assert ("reference_weights" in keys) == weights
    assert ("reference_forward" in keys) == forward == (REFERENCE in result.moments)


def test_trl_checkpoints_by_default():
    """DPOConfig's gradient_checkpointing defaults to True (trl/trainer/base_config.py@v1.16.0 L62-63); the
    Trainer's own default stays False."""
    def recompute(**given):
        return resolve(schema.parse({**BASE, **given})).workload.recompute
    assert recompute(method="dpo") == recompute(method="dpo-lora") == "full"
    assert recompute(method="full") == "none" and recompute(method="dpo", recompute="none") == "none"
    assert recompute(method="dpo", framework="torchtune") == "full"        # torchtune's own default


def test_zero3_shards_the_reference_as_the_policy():
    """trl/models/utils.py prepare_deepspeed keeps ZeRO-3 for the reference (any other stage becomes 0)."""
    sharded = pools(estimate({**BASE, "method": "dpo", "dp": "4", "zero": "3"}))
    assert sharded["reference_weights"].bytes == sharded["weights"].bytes
    replicated = pools(estimate({**BASE, "method": "dpo", "dp": "4", "zero": "2"}))
    assert replicated["reference_weights"].bytes == pools(estimate({**BASE, "method": "dpo"}))["weights"].bytes


def test_ref_model_applies_only_to_dpo():
    assert applies.applies("ref_model", {"method": "dpo"})
    assert not applies.applies("ref_model", {"method": "lora"})
    assert applies.applies("lora_rank", {"method": "dpo-lora"}) and not applies.applies("lora_rank", {"method": "dpo"})


def test_dpo_needs_a_causal_lm():
    with pytest.raises(Exception, match="DPO"):
        estimate({"model": "bert-base-uncased", "method": "dpo"})


def test_command_line():
    done = subprocess.run([sys.executable, "-m", "pycore", "method=dpo", "model=llama-3.2-1b", "batch=2"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Reference model weights" in done.stdout
    done = subprocess.run([sys.executable, "-m", "pycore", "--json", "method=dpo-lora", "ref_model=auto",
                           "model=llama-3.2-1b", "batch=2"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert REFERENCE in result["moments"] and "reference_weights" not in {p["key"] for p in result["pools"]}


def test_a_qlora_reference_forward_dequantizes_a_layer():
    """The reference forward of a QLoRA policy runs its NF4 base: bitsandbytes dequantizes each layer's weights to
    16 bit to compute, as in the policy's own passes (pycore.memory.training._detailed_activations)."""
    lora = pools(estimate({**BASE, "method": "dpo-lora", "recompute": "none", "batch": "8", "seq": "4096"}))
    qlora = pools(estimate({**BASE, "method": "dpo-qlora", "recompute": "none", "batch": "8", "seq": "4096"}))
    extra = qlora["reference_forward"].bytes - lora["reference_forward"].bytes
    assert extra > 0 and extra % 2 == 0          # Pl × 2 bytes: the largest layer in bf16


def test_the_trainer_export_checkpoints_as_dpo_does():
    """--export trainer: gradient_checkpointing as in force, DPOConfig's True for method=dpo left at auto."""
    for method, expected in (("dpo", True), ("full", False)):
        done = subprocess.run([sys.executable, "-m", "pycore", "--export", "trainer", f"method={method}",
                               "model=llama-3.2-1b"], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["gradient_checkpointing"] is expected


def test_trl_loads_a_model_in_fp32_and_autocasts():
    """precision=auto under DPO is TRL's: create_model_from_path loads in float32 (trl/trainer/utils.py@v1.16.0 L1332)
    and DPOConfig's bf16=True autocasts (base_config.py L108): amp-bf16, the reference copy in fp32 too."""
    result = estimate({"model": "llama-3.2-1b", "method": "dpo", "batch": "2"})
    assert result.as_dict()["setup"]["precision"] == "amp-bf16"
    by_key = pools(result)
    assert by_key["reference_weights"].bytes == by_key["weights"].bytes == 4 * result.as_dict()["params"]["total"]
    assert estimate({"model": "llama-3.2-1b", "method": "full"}).as_dict()["setup"]["precision"] == "bf16"
    assert estimate({"model": "llama-3.2-1b", "method": "dpo", "precision": "bf16"}).as_dict()["setup"]["precision"] == "bf16"


def test_autocast_keeps_no_copy_of_the_fused_head():
    """Under autocast TRL's fused head casts its weight a tile at a time, so autocast's weight copies leave the head
    out (validation/measured_dpo.json, the amp-bf16 cases)."""
    inputs = {"model": "llama-3.2-1b", "precision": "amp-bf16", "recompute": "none", "batch": "1", "seq": "512"}
    plain = pools(estimate({**inputs, "method": "full"}))["autocast_weight_copies"].bytes
    dpo = pools(estimate({**inputs, "method": "dpo"}))["autocast_weight_copies"].bytes
    assert plain - dpo == 128256 * 2048 * 2


def test_the_plain_baseline_of_a_dpo_qlora_run_is_dpo_lora_on_a_16_bit_base():
    # the comparison's baseline has no quantization (answers.compare.PLAIN): QLoRA's policy becomes LoRA's
    from pycore.answers.compare import baseline_values
    from pycore.inputs.schema import parse
    values = parse({"model": "llama-3.1-8b", "method": "dpo-qlora", "compare": "baseline"})
    assert baseline_values(values, {})["method"] == "dpo-lora"
    assert baseline_values(parse({"model": "llama-3.1-8b", "method": "qlora", "compare": "baseline"}), {})["method"] == "lora"


def test_the_answers_count_what_the_batch_counts_and_name_the_method():
    # TRL's DPOConfig.per_device_train_batch_size counts preference pairs (a chosen and a rejected sequence in one
    # forward), GRPOConfig's counts completions; the summary names the method estimated
    from pycore.answers.answer import answer
    from pycore.memory.estimate import estimate_values
    from pycore.output.report import display_answers, summary
    for method, unit in (("dpo", "preference pairs"), ("grpo", "completions"), ("full", "sequences")):
        values = schema.parse({"model": "qwen2.5-0.5b", "method": method, "batch": "2", "seq": "512"})
        result = estimate_values(values)
        rows = {row["key"]: row["text"] for row in display_answers(result, answer(values, result))}
        assert unit in rows["max_batch"]
        assert (f"method {method}," in summary(result)["model"]) == (method != "full")
    dpo = schema.parse({"model": "qwen2.5-0.5b", "method": "dpo", "batch": "2", "seq": "512"})
    found = answer(dpo, estimate_values(dpo))
    assert display_answers(estimate_values(dpo), found)[1]["text"].endswith(f"({2 * found['max_batch']:,} sequences)")


def test_reward_model_steps_against_trl():
    # validation/measure_reward.py (validation/measured_reward.json): TRL 1.16's RewardTrainer.compute_loss on small
    # one-label classifiers; docs/validation.md's reward section. Without checkpointing within 3%; with it up to
    # 10% over (on the safe side), as the section says
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "validation"))
    import compare
    rows = compare.reward_rows()[1]
    assert all(row["params_match"] for row in rows)
    assert all(abs(row["error"]) <= 0.03 for row in rows if " gc " not in row["label"])
    assert all(0 <= row["error"] <= 0.10 for row in rows if " gc " in row["label"])
    # the nearest plain fine-tuning estimate (the LM head's logits over the vocabulary) is far off
    assert min(row["plain_error"] for row in rows) > 0.5


def test_a_reward_model_has_a_one_output_head_and_counts_pairs():
    result = estimate({"model": "llama-3.1-8b", "method": "reward", "batch": "2", "seq": "1024"})
    # LlamaForSequenceClassification, num_labels=1: the decoder and a 4,096 x 1 score in place of lm_head
    # (8,030,261,248 - 128,256 x 4,096 + 4,096)
    assert result.params_total == 8_030_261_248 - 128_256 * 4_096 + 4_096
    assert result.tokens == 2 * 2 * 1024
