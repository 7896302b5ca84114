"""PPO as TRL 0.25.1's PPOTrainer runs it (pycore/memory/ppo.py): its inputs and defaults, its four models and their
placement, the phases of an update as moments, and the measured updates (validation/measure_ppo.py,
validation/measured_ppo.json)."""

import statistics
import sys
from pathlib import Path

import pytest

from pycore.base.errors import FieldError
from pycore.inputs import applies, frameworks, schema
from pycore.inputs.schema import parse
from pycore.memory.estimate import estimate_values
from pycore.memory.setup import resolve

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

# validation/measure_ppo.py's small Llama config (2 layers, hidden 512, 8 heads, 2 KV heads, FFN 1,408, vocabulary 32,000)
SMALL = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000")


def estimate(**inputs):
    return estimate_values(parse({**SMALL, **inputs}))


def pool(result, key):
    return next(p for p in result.pools if p.key == key)


def test_defaults_are_ppoconfigs():
    # TRL 0.25.1 trl/trainer/utils.py OnPolicyConfig: response_length 53 (L887-890), local_rollout_forward_batch_size 64
    # (L877-880), num_mini_batches 1 (L869-872); PPOTrainer.train never enables gradient checkpointing, and bf16=True
    # autocasts fp32 weights (pycore/inputs/frameworks.py RECIPES["ppo"])
    for key, default in (("response_length", 53), ("local_rollout_forward_batch_size", 64), ("num_mini_batches", 1)):
        assert schema.BY_KEY[key].default == default
    values = frameworks.apply(parse({"method": "ppo"}))
    assert (values["recompute"], values["precision"]) == ("none", "amp-bf16")
    setup = resolve(parse({**SMALL, "method": "ppo", "seq": "64", "response_length": "128"}))
    assert setup.workload.seq == 64 + 128 and setup.finetune.prompt == 64 and setup.finetune.completion == 128
    assert (setup.finetune.rollout_chunk, setup.finetune.mini_batches) == (64, 1)


def test_ppo_inputs_apply_only_to_ppo():
    for key in ("response_length", "local_rollout_forward_batch_size", "num_mini_batches"):
        assert applies.ignored({"method": "ppo", key: "7"}, [key]) == []
        assert applies.ignored({"method": "grpo", key: "7"}, [key]) == [key]
    assert applies.ignored({"method": "ppo-lora", "lora_rank": "8"}, ["lora_rank"]) == []


def test_four_models_and_their_weights():
    # validation/measured_ppo.json, "llama small ppo full bf16 b8 p64 r128": the policy and the reference 38,406,656
    # parameters each, the value and the reward model 22,023,168 (the backbone and a [1, 512] score head), bf16
    result = estimate(method="ppo", precision="bf16", recompute="none", batch="8", seq="64", response_length="128")
    assert pool(result, "weights").bytes == 38_406_656 * 2
    assert pool(result, "reference_model_weights").bytes == 38_406_656 * 2
    assert pool(result, "value_weights").bytes == 22_023_168 * 2
    assert pool(result, "reward_model_weights").bytes == 22_023_168 * 2
    # AdamW's two bf16 states of the policy and the value model, both in the one optimizer (PolicyAndValueWrapper)
    assert pool(result, "value_optimizer").bytes == 22_023_168 * 2 * 2
    groups = {p.group for p in result.pools}
    assert {"value_model", "reward_model", "reference_model", "rollout"} <= groups


def test_a_lora_policy_has_no_reference_copy_and_a_fully_trained_value_model():
    # PPOTrainer.__init__ L260-265: a PEFT policy's reference is itself with its adapters disabled; PEFT wraps the
    # policy only (L252), so the value model is trained whole
    result = estimate(method="ppo-lora", precision="bf16", batch="4", seq="64", response_length="128")
    assert not any(p.key == "reference_model_weights" for p in result.pools)
    # its gradients (the input embedding's made last, a pool of its own)
    assert pool(result, "value_gradients").bytes + pool(result, "value_embedding_gradient").bytes == 22_023_168 * 2
    assert pool(result, "reference_forward").bytes > 0


def test_every_phase_is_a_moment():
    result = estimate(method="ppo", precision="bf16", batch="8", seq="64", response_length="128")
    for moment in ("rollout, prefill", "rollout, generate", "rollout, logits padded", "reference log-probs",
                   "value scores", "reward scores", "forward end", "losses", "backward start", "optimizer step",
                   "entropy statistics"):
        assert moment in result.moments, moment
    # measured: the update's backward is this case's peak (validation/measured_ppo.json)
    assert result.peak_moment == "backward start"


def test_the_rollout_scores_live_through_the_update():
    # trl/trainer/utils.py L1149-1218: generate(output_scores=True) keeps [rows, response_length, vocabulary] fp32
    # scores, padded into logitss, which PPOTrainer.train never deletes: 8 × 128 × 32,000 × 4 bytes
    result = estimate(method="ppo", precision="bf16", batch="8", seq="64", response_length="128")
    logits = pool(result, "rollout_logits")
    assert logits.bytes == 8 * 128 * 32_000 * 4
    assert {"reference log-probs", "backward start", "optimizer step", "entropy statistics"} <= set(logits.moments)
    assert "rollout, generate" not in logits.moments
    assert pool(result, "previous_rollout_logits").moments == ("rollout, prefill", "rollout, generate",
                                                               "rollout, logits padded")


def test_smaller_rollout_chunks_hold_fewer_rows_at_once():
    # local_rollout_forward_batch_size rows are generated and scored at a time: 2 rows of 8 hold a quarter of what a
    # chunk of 8 holds in the reference's pass, beside one row's log-softmax (128 × 32,000 fp32) either way
    whole = estimate(method="ppo", precision="bf16", batch="8", seq="64", response_length="128")
    chunked = estimate(method="ppo", precision="bf16", batch="8", seq="64", response_length="128",
                       local_rollout_forward_batch_size="2")
    row = 128 * 32_000 * 4
    assert pool(whole, "reference_forward").bytes - row == 4 * (pool(chunked, "reference_forward").bytes - row)
    assert chunked.moments["reference log-probs"] < whole.moments["reference log-probs"]


def test_frozen_models_are_zero3_sharded_under_deepspeed_and_whole_under_fsdp():
    # prepare_deepspeed (trl/trainer/utils.py L1068-1123) keeps ZeRO-3 for the reference and the reward model; under
    # FSDP PPOTrainer moves them to the device whole (ppo_trainer.py L391-396)
    whole = estimate(method="ppo", precision="bf16", batch="2", seq="64", response_length="64")
    zero3 = estimate(method="ppo", precision="bf16", batch="2", seq="64", response_length="64", dp="4", zero="3")
    fsdp = estimate(method="ppo", precision="bf16", batch="2", seq="64", response_length="64", dp="4",
                    fsdp="FULL_SHARD")
    for key in ("reference_model_weights", "reward_model_weights"):
        assert pool(zero3, key).bytes == pytest.approx(pool(whole, key).bytes / 4, abs=1)
        assert pool(fsdp, key).bytes == pool(whole, key).bytes
    # unwrap_model_for_generation (trl/models/utils.py L339-348) gathers the policy's and the value model's weights
    # for generate() under ZeRO-3 (ds3_gather_for_generation default True): the 3 shards of 4 this GPU does not hold
    gathered = pool(zero3, "rollout_gathered_weights")
    assert gathered.bytes == pytest.approx((38_406_656 + 22_023_168) * 2 * 3 / 4, abs=2)
    assert gathered.moments == ("rollout, prefill", "rollout, generate")
    assert not any(p.key == "rollout_gathered_weights" for p in fsdp.pools)


def test_pipeline_parallelism_is_refused():
    with pytest.raises(FieldError) as error:
        resolve(parse({**SMALL, "method": "ppo", "pp": "2", "layers": "4"}))
    assert error.value.key == "pp"


def test_later_microbatches_of_one_minibatch_run_beside_the_previous_outputs():
    # PPOTrainer.train deletes a micro-batch's outputs at the end of its mini-batch (L696-703): with 4 micro-batches in
    # 2 mini-batches a later micro-batch's forward holds the previous one's logits; with 4 mini-batches none
    carried = estimate(method="ppo", precision="bf16", batch="2", seq="64", response_length="128", microbatches="4",
                       num_mini_batches="2")
    apart = estimate(method="ppo", precision="bf16", batch="2", seq="64", response_length="128", microbatches="4",
                     num_mini_batches="4")
    assert any(p.key == "previous_outputs" for p in carried.pools)
    assert not any(p.key == "previous_outputs" for p in apart.pools)


def test_notes_name_the_rollout_and_a_refused_split():
    result = estimate(method="ppo", batch="3", num_mini_batches="2")
    assert any("PPO: batch counts responses" in w for w in result.warnings)
    assert any("must be a multiple of num_mini_batches" in w for w in result.warnings)


# validation/measure_ppo.py (validation/measured_ppo.json): one update of TRL 0.25.1's PPOTrainer.train on small Llama
# and Qwen2 configs: full and LoRA policies, bf16 and amp-bf16, gradient checkpointing, accumulation, mini-batches and
# rollout chunks
PPO = compare.ppo_rows()[1]


@pytest.mark.parametrize("case", PPO, ids=[c["label"] for c in PPO])
def test_ppo_peak_within_10_percent_of_measured(case):
    assert abs(case["error"]) <= 0.10


def test_ppo_median_error_within_3_percent():
    assert statistics.median(abs(c["error"]) for c in PPO) <= 0.03


@pytest.mark.parametrize("case", PPO, ids=[c["label"] for c in PPO])
def test_ppo_each_phase_within_5_percent(case):
    # the rollout, the reference, value and reward passes, the update's forward, losses, backward, optimizer step and
    # entropy statistics: each phase's measured peak against the largest estimated moment in it
    for name, (measured, estimated) in case["phases"].items():
        assert abs(estimated - measured) <= 0.05 * measured, name


def test_ppo_cases_cover_policies_precisions_and_batching():
    labels = " ".join(c["label"] for c in PPO)
    for word in ("llama", "qwen", " full ", " lora ", " qv ", " attention ", " all-linear ", " bf16 ", " amp-bf16 ",
                 " gc ", " ga2 ", " ga4 ", " mb2 ", " chunk2 ", " chunk4 "):
        assert word in labels, word


def test_under_autocast_the_rollout_and_scoring_passes_run_in_the_weights_fp32():
    # accelerate wraps only PolicyAndValueWrapper.forward in autocast (ppo_trainer.py L367); the rollout and the
    # reference, value and reward passes call the inner models (L513-558): fp32 weights compute in fp32, so the
    # reference's logits, hidden states and KV cache take twice a bf16 model's bytes, beside one fp32 row either way
    bf16 = estimate(method="ppo", precision="bf16", batch="4", seq="64", response_length="128")
    amp = estimate(method="ppo", precision="amp-bf16", batch="4", seq="64", response_length="128")
    row = 128 * 32_000 * 4
    assert pool(amp, "reference_forward").bytes - row == 2 * (pool(bf16, "reference_forward").bytes - row)
    # while the update's logits are fp32 under autocast (convert_outputs_to_fp32) and bf16 without it
    assert pool(amp, "update_logits").bytes == 4 * (64 + 128) * 32_000 * 4 == 2 * pool(bf16, "update_logits").bytes


def test_ddp_copies_the_value_models_gradients_too():
    # accelerate.prepare wraps PolicyAndValueWrapper in one DistributedDataParallel (ppo_trainer.py L367): its buckets
    # (gradient_as_bucket_view=False) hold a second copy of the value model's gradients beside the policy's
    result = estimate(method="ppo", precision="bf16", batch="2", seq="64", response_length="64", dp="2")
    gradients = pool(result, "value_gradients").bytes + pool(result, "value_embedding_gradient").bytes
    assert pool(result, "value_ddp_buckets").bytes == gradients == 22_023_168 * 2
    assert "Policy DDP gradient buckets" in pool(result, "ddp_buckets").label


def test_the_reward_and_value_models_can_be_other_checkpoints():
    # reward_model=llama-3.2-1b: its 1,235,814,400 parameters (validation/param_counts.json) with a [1, 2,048] score head
    # in place of its tied LM head, bf16; the value model follows it (trl/examples/scripts/ppo/ppo.py loads both from
    # reward_model_path) unless value_model names another: llama-3.1-8b's 8,030,261,248 less its [128,256, 4,096] LM
    # head, plus a [1, 4,096] score head
    inputs = {"model": "llama-3.1-8b", "method": "ppo", "precision": "bf16", "reward_model": "llama-3.2-1b"}
    result = estimate_values(parse(inputs))
    assert pool(result, "reward_model_weights").bytes == (1_235_814_400 + 2_048) * 2
    assert pool(result, "value_weights").bytes == (1_235_814_400 + 2_048) * 2
    assert pool(result, "reference_model_weights").bytes == 8_030_261_248 * 2
    result = estimate_values(parse({**inputs, "value_model": "llama-3.1-8b"}))
    assert pool(result, "value_weights").bytes == (8_030_261_248 - 128_256 * 4_096 + 4_096) * 2
    assert any("the reward model is llama-3.2-1b's backbone" in w for w in result.warnings)
    with pytest.raises(FieldError) as error:
        resolve(parse({**inputs, "reward_model": "no-such-model"}))
    assert error.value.key == "reward_model"


def test_a_scorer_with_a_smaller_vocabulary_is_refused():
    # TRL 0.25.1 get_reward feeds the policy's token ids to the reward and value models: gpt2's 50,257-token
    # embedding cannot look up Qwen2.5's ids (its vocabulary 151,936)
    with pytest.raises(FieldError) as error:
        resolve(parse({"model": "qwen2.5-0.5b", "method": "ppo", "value_model": "gpt2"}))
    assert error.value.key == "value_model" and "50,257" in error.value.message


def test_a_single_forwards_cache_holds_every_token_in_sliding_layers():
    # transformers 5.24 DynamicSlidingWindowLayer keeps the forward's whole keys and values (its window is a view of
    # them, cache_utils.py): all 42 of Gemma 2 9B's layers, half of them sliding with a 4,096 window, hold the
    # update's prompt + response tokens
    from pycore import estimate
    from pycore.inputs import frameworks, schema
    from pycore.memory import setup as setups
    from pycore.model import catalog
    query = {"model": "gemma-2-9b", "method": "ppo", "seq": "8192"}
    tokens = setups.resolve(frameworks.apply(schema.parse(query))).workload.seq
    arch = catalog.architecture("gemma-2-9b")
    assert arch.sliding_window == 4096 < tokens
    pools = {pool.key: pool.bytes for pool in estimate(query).pools}
    assert pools["update_kv_cache"] == 42 * tokens * 2 * arch.kv_heads * arch.dim_head * 2
