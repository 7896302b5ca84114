"""GRPO as TRL 1.16's GRPOTrainer runs it with generate() as the rollout (pycore/memory/rollout.py,
pycore/memory/posttraining.py): its inputs, its moments, and the estimate against validation/measure_grpo.py's steps
(validation/measured_grpo.json)."""

import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from pycore.inputs import applies, schema
from pycore.memory.estimate import estimate
from pycore.memory.rollout import DECODE, OLD_PASS, PREFILL, REFERENCE_PASS, VLLM_ROLLOUT
from pycore.memory.serving import kv_cache_bytes
from pycore.memory.setup import resolve
from pycore.model.catalog import gpus

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

BASE = {"model": "llama-3.2-1b", "precision": "bf16", "batch": "8", "seq": "256", "max_completion_length": "512"}


def pools(result):
    return {p.key: p for p in result.pools}


def test_trl_grpo_defaults():
    """GRPOConfig defaults, TRL 1.16 trl/trainer/grpo_config.py: num_generations 8 (L480-481), max_completion_length
    512 (L494-495), beta 0.0 (L681-682); gradient_checkpointing True and bf16 True (base_config.py L62-63, L108) with a
    model loaded in fp32 (create_model_from_path): recompute full, amp-bf16."""
    values = schema.parse({})
    assert (values["num_generations"], values["max_completion_length"], values["beta"]) == (8, 512, 0.0)
    setup = resolve(schema.parse({"model": "llama-3.2-1b", "method": "grpo"}))
    assert setup.workload.recompute == "full" and setup.policy.autocast and setup.policy.weight == "fp32"
    assert setup.finetune.reference == "none"          # beta 0.0: GRPOTrainer.__init__ makes no ref_model


@pytest.mark.parametrize("key,bad", [("num_generations", "1"), ("max_completion_length", "0"), ("beta", "-1")])
def test_inputs_refuse_what_trl_refuses(key, bad):
    # num_generations < 2: GRPOConfig.__post_init__ raises ("GRPO requires at least 2 generations per prompt")
    with pytest.raises(schema.InputError, match=key):
        schema.parse({key: bad})


def test_grpo_inputs_apply_only_to_grpo():
    for key in ("num_generations", "max_completion_length", "beta"):
        assert applies.applies(key, {"method": "grpo"}) and applies.applies(key, {"method": "grpo-lora"})
        assert not applies.applies(key, {"method": "dpo"}) and not applies.applies(key, {"method": "full"})
    assert applies.applies("lora_rank", {"method": "grpo-lora"}) and not applies.applies("lora_rank", {"method": "grpo"})
    assert not applies.applies("ref_model", {"method": "grpo"})


def test_the_update_runs_over_prompt_and_completion_scoring_the_completion():
    result = estimate({**BASE, "method": "grpo", "recompute": "none"})
    assert result.tokens == 8 * (256 + 512)
    plain = estimate({**BASE, "method": "full", "recompute": "none", "seq": str(256 + 512)})
    assert pools(result)["activations"].bytes == pools(plain)["activations"].bytes
    # the fused head's tile: min(N, 4096) tokens × 32,768 columns, N = the completions' 8 × 512 tokens
    n, h = 8 * 512, 2048
    assert pools(result)["fused_head_backward"].bytes == min(n, 4096) * 32768 * 2 + n * h * (4 + 2) + 128256 * h * (4 + 2)


@pytest.mark.parametrize("method,beta,weights,reference", [
    ("grpo", "0", False, False), ("grpo", "0.04", True, True), ("grpo-lora", "0", False, False),
    ("grpo-lora", "0.04", False, True)])
def test_which_reference_is_held(method, beta, weights, reference):
    """GRPOTrainer.__init__ (L984-1003): none when beta == 0.0; a PEFT policy's reference is its base with the adapters
    disabled; else a frozen copy, its log-probs computed under no_grad before the update."""
    result = estimate({**BASE, "method": method, "beta": beta})
    keys = set(pools(result))
    assert ("reference_weights" in keys) == weights
    assert ("reference_forward" in keys) == reference == (REFERENCE_PASS in result.moments)


def test_rollout_moments_come_first_and_hold_generates_kv_cache():
    result = estimate({**BASE, "method": "grpo", "beta": "0.04", "microbatches": "2"})
    moments = list(result.moments)
    assert moments[:3] == [PREFILL, DECODE, REFERENCE_PASS]
    by_key = pools(result)
    # steps_per_generation = gradient_accumulation_steps: 2 micro-batches of 8 completions generated at once, each
    # cached to prompt + completion - 1 tokens (transformers DynamicCache), in bf16
    arch = resolve(schema.parse({**BASE, "method": "grpo"})).arch
    assert by_key["rollout_kv_cache"].bytes == 16 * kv_cache_bytes(arch, 256 + 511, 2)
    live = {p.key for p in result.pools if DECODE in p.moments}
    assert {"weights", "optimizer", "reference_weights", "rollout_kv_cache"} <= live
    assert not live & {"gradients", "activations", "fused_head_forward", "reference_forward"}


def test_a_peft_policy_generates_in_fp32_under_autocast():
    """accelerate wraps the model's forward in autocast; PeftModel.generate calls the base model's own forward, so a
    LoRA policy under amp-bf16 generates in its fp32 weights while a full policy generates in bf16 and caches its
    weights' 16-bit copies for each forward."""
    amp = {**BASE, "precision": "amp-bf16"}
    full, lora = pools(estimate({**amp, "method": "grpo"})), pools(estimate({**amp, "method": "grpo-lora"}))
    assert lora["rollout_kv_cache"].bytes == 2 * full["rollout_kv_cache"].bytes
    assert "rollout_autocast_copies" in full and "rollout_autocast_copies" not in lora


def test_a_generation_batch_of_partial_groups_is_named():
    """GRPOConfig.__post_init__: the generation batch must be a multiple of num_generations."""
    assert any("num_generations" in w for w in estimate({**BASE, "method": "grpo", "batch": "4"}).warnings)
    assert not any("refuses" in w for w in estimate({**BASE, "method": "grpo", "batch": "8"}).warnings)
    assert not any("refuses" in w for w in estimate({**BASE, "method": "grpo", "batch": "4", "dp": "2"}).warnings)


def test_grpo_needs_a_causal_lm():
    with pytest.raises(Exception, match="GRPO"):
        estimate({"model": "bert-base-uncased", "method": "grpo"})


def test_command_line():
    done = subprocess.run([sys.executable, "-m", "pycore", "--json", "method=grpo-lora", "beta=0.04",
                           "model=llama-3.2-1b", "batch=8"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert {PREFILL, DECODE, REFERENCE_PASS} <= set(result["moments"])


QWEN7B = {"model": "qwen2.5-7b", "method": "grpo", "batch": "8", "seq": "512", "max_completion_length": "1024",
          "beta": "0.04", "dp": "8", "zero": "3", "gpu": "h100-sxm-80gb", "rollout": "vllm-colocate"}


def test_a_colocated_vllm_engine_is_vllms_own_arithmetic():
    """rollout=vllm-colocate: TRL's LLM(gpu_memory_utilization=vllm_gpu_memory_utilization, max_num_batched_tokens=4096,
    max_num_seqs=batch × steps_per_generation) in the checkpoint's dtype, sized by vLLM's start-up arithmetic, which
    pycore.memory.serving reproduces (docs/validation.md, Serving with vLLM: published start-up logs): its pools are
    those of serving the same model with engine=vllm at that utilisation."""
    grpo = pools(estimate(QWEN7B))
    served = pools(estimate({"model": "qwen2.5-7b", "mode": "infer", "engine": "vllm", "gpu_util": "0.3",
                             "max_batched_tokens": "4096", "batch": "8", "seq": "512", "new_tokens": "1024",
                             "max_num_seqs": "8", "gpu": "h100-sxm-80gb"}))
    for key in ("weights", "kv_cache", "profile_activations", "non_torch"):
        assert grpo["vllm_" + key].bytes == served[key].bytes, key
        assert grpo["vllm_" + key].group == "rollout_engine"
    # the engine takes its share of the GPU: 0.3 of the H100's usable memory (presets/gpus.json), all but the KV
    # cache's last partial block (one block of 16 tokens: 16 × 57,344 bytes for Qwen2.5-7B)
    engine = sum(p.bytes for k, p in grpo.items() if k.startswith("vllm_"))
    requested = int(0.3 * gpus()["h100-sxm-80gb"]["usable_bytes"])
    assert requested - 16 * 57344 <= engine <= requested


def test_sleep_mode_frees_the_engine_outside_the_rollout():
    """vllm_enable_sleep_mode: LLM.sleep(level=2) after each generate() discards its weights and KV cache
    (trl/generation/vllm_generation.py L750-752)."""
    awake = estimate(QWEN7B)
    asleep = estimate({**QWEN7B, "vllm_enable_sleep_mode": "yes"})
    kv = pools(asleep)["vllm_kv_cache"]
    assert kv.moments == (VLLM_ROLLOUT,)
    assert set(pools(awake)["vllm_kv_cache"].moments) == set(awake.moments)
    assert asleep.moments["backward end"] < awake.moments["backward end"]
    assert asleep.moments[VLLM_ROLLOUT] == awake.moments[VLLM_ROLLOUT]


@pytest.mark.parametrize("rollout,old_pass,engine", [("generate", False, False), ("vllm-colocate", True, True),
                                                     ("vllm-server", True, False)])
def test_vllm_rollouts_score_the_old_policy(rollout, old_pass, engine):
    """Under vLLM the policy scores the completions under no_grad before its update (importance sampling correction,
    GRPOConfig.vllm_importance_sampling_correction default True); a vLLM server runs on GPUs of its own."""
    result = estimate({**QWEN7B, "rollout": rollout})
    assert (OLD_PASS in result.moments) == old_pass
    assert any(p.group == "rollout_engine" for p in result.pools) == engine


def test_a_colocated_engine_without_room_for_its_cache_is_named():
    """vLLM refuses to start when its share of the GPU leaves no KV cache (determine_available_memory)."""
    small = {**QWEN7B, "vllm_gpu_memory_utilization": "0.15"}
    assert pools(estimate(small))["vllm_kv_cache"].bytes == 0
    assert "colocated vLLM engine would refuse to start: no memory is left" in estimate(small).refused
    assert "vllm_gpu_memory_utilization" in estimate(small).refused
    assert not estimate(QWEN7B).refused


def test_the_colocated_engine_checks_one_request_of_the_models_positions():
    """TRL 1.16 leaves vllm_max_model_length None (grpo_config.py L664-670), so vLLM takes the model's positions as
    max_model_len and refuses to start when one such request does not fit its KV cache (kv_cache_utils.py
    check_enough_kv_cache_memory). Qwen2.5-7B: 131,072 positions (its config.json), 57,344 bytes a token of bf16 KV
    (28 layers × 2 × 4 KV heads × 128 × 2 bytes): 7.0 GiB, more than a 0.2 share of an H100 leaves."""
    tight = {**QWEN7B, "vllm_gpu_memory_utilization": "0.2"}
    result = estimate(tight)
    assert result.vllm["context"] == 131072 and result.vllm["kv_bytes_needed"] == 131072 * 57344
    assert "one request of max_model_len 131,072 tokens" in result.refused
    assert "the longest vllm_max_model_length it would accept" in result.refused
    capped = estimate({**tight, "vllm_max_model_length": "1536"})       # seq 512 + max_completion_length 1,024
    assert not capped.refused and capped.vllm["context"] == 1536
    assert capped.total_bytes == result.total_bytes         # the cap changes the check, not the memory taken


def test_the_engines_sampler_warm_up_holds_trls_max_num_seqs():
    """TRL passes max_num_seqs = batch × vllm_tensor_parallel_size × steps_per_generation (grpo_trainer.py
    L1124-1126), and vLLM's sampler warm-up holds three fp32 copies of that many rows of logits: 12 bytes a row and
    vocabulary entry (Qwen2.5-7B: 152,064), not vLLM's default 1,024 rows."""
    one, two = (pools(estimate({**QWEN7B, "batch": b}))["vllm_profile_activations"].bytes for b in ("8", "9"))
    assert two - one == 152064 * 12
    assert pools(estimate({**QWEN7B, "microbatches": "2"}))["vllm_profile_activations"].bytes - one == 8 * 152064 * 12


def test_a_colocated_engine_split_over_gpus_holds_its_share_on_each():
    """vllm_tensor_parallel_size = 2 (trl/generation/vllm_generation.py L312-355): each GPU holds half the engine's
    weights, and its KV cache is what the same share of the GPU leaves; the world must be a multiple of it."""
    one, two = (pools(estimate({**QWEN7B, "vllm_tensor_parallel_size": tp})) for tp in ("1", "2"))
    assert two["vllm_weights"].bytes < 0.51 * one["vllm_weights"].bytes
    assert two["vllm_kv_cache"].bytes > one["vllm_kv_cache"].bytes
    odd = estimate({**QWEN7B, "dp": "3", "vllm_tensor_parallel_size": "2"})
    assert any("vllm_tensor_parallel_size = 2 must divide the 3 training processes" in w for w in odd.warnings)


def test_deepspeed_zero3_gathers_every_weight_for_generate():
    """unwrap_model_for_generation under ZeRO-3 with ds3_gather_for_generation (default True): the whole model
    gathered for generate()."""
    by_key = pools(estimate({**QWEN7B, "rollout": "generate"}))
    gathered, shard = by_key["rollout_gathered_weights"].bytes, by_key["weights"].bytes
    assert gathered > 6 * shard


def test_the_issues_qwen_7b_setup_breaks_down_by_model_and_phase():
    """Issue 31: GRPO for Qwen2.5-7B with colocated vLLM on 8 × H100, a breakdown by model and phase."""
    result = estimate(QWEN7B)
    groups = {p.group for p in result.breakdown}
    assert {"rollout_engine", "reference_model", "weights", "optimizer"} <= groups
    assert {"rollout", "old-policy", "reference", "forward", "backward", "optimizer"} <= set(result.phases)
    assert all(p.source and p.formula for p in result.pools)


# validation/measure_grpo.py (validation/measured_grpo.json): one step of TRL 1.16's GRPOTrainer with generate() as the
# rollout (generate(), the reference's log-probs, TRL's own _compute_loss, backward, AdamW) on small Llama and Qwen2
# configs: full and LoRA policies, beta 0 and 0.04, bf16 and amp-bf16, with and without gradient checkpointing
GRPO = compare.grpo_rows()[1]


@pytest.mark.parametrize("case", GRPO, ids=[c["label"] for c in GRPO])
def test_grpo_peak_within_10_percent_of_measured(case):
    assert abs(case["error"]) <= 0.10


def test_grpo_median_error_within_3_percent():
    assert statistics.median(abs(c["error"]) for c in GRPO) <= 0.03


@pytest.mark.parametrize("case", GRPO, ids=[c["label"] for c in GRPO])
def test_grpo_each_phase_within_5_percent(case):
    # the rollout (generate()'s cache and working set beside the weights and optimizer state), the reference's
    # log-probs, the policy's forward, backward and the optimizer step: each phase's measured peak against the largest
    # estimated moment in it. One exception, stated in docs/validation.md: with a LoRA policy under gradient
    # checkpointing, MemTracker's own bookkeeping keeps two to four [tokens, hidden] tensors of each micro-batch after
    # its backward (lists and dicts of the tracker hold them; the same step run untracked leaves none), so the phases
    # after the first backward (the optimizer step; with accumulation, the later micro-batches' forward and backward)
    # are held only to measuring more than the estimate
    for name, (measured, estimated) in case["phases"].items():
        if tracker_residue(case, name):
            assert estimated < measured, name
        else:
            assert abs(estimated - measured) <= 0.05 * measured, name


def tracker_residue(case, phase):
    """Whether a measured phase holds what MemTracker keeps of a LoRA policy's earlier backward under checkpointing."""
    if " lora " not in case["label"] or " gc " not in case["label"]:
        return False
    return phase == "optimizer step" or (" ga" in case["label"] and phase in ("policy forward", "backward"))


def test_grpo_cases_cover_the_policies_references_and_precisions():
    labels = " ".join(c["label"] for c in GRPO)
    for word in ("llama", "qwen", " full ", " lora ", "beta0 ", "beta0.04", " gc ", " bf16 ", " amp-bf16 ", " g2 ",
                 " g8 ", " ga2 ", " ga8 "):
        assert word in labels, word
    # the peak falls in the backward, the policy's forward or the optimizer step, each where the estimate puts it
    assert {"policy forward", "backward", "optimizer step"} <= {c["measured_phase"] for c in GRPO}


@pytest.mark.parametrize("case", GRPO, ids=[c["label"] for c in GRPO])
def test_grpo_peak_in_the_phase_measured(case):
    phases = {"rollout": "rollout", "reference log-probs": "reference", "policy forward": "forward",
              "backward": "backward", "optimizer step": "optimizer"}
    measured = case["measured_phase"]
    if tracker_residue(case, measured):
        # the tracker's residue (test_grpo_each_phase_within_5_percent) lifts the later micro-batches above the
        # rollout, the estimate's peak, which is measured as estimated
        measured = max((p for p in case["phases"] if not tracker_residue(case, p)), key=lambda p: case["phases"][p][0])
    assert case["phase"].split()[0].rstrip(",") == phases[measured]


def test_the_largest_batch_is_found_when_a_batch_free_moment_peaks_at_small_batches():
    """At batch 1 and 2 a GRPO step's peak can be a moment the batch does not change (the optimizer step, beside the
    colocated engine); the batch still bounds the memory, so the answers give its largest value, not "unbounded"."""
    from pycore.answers.answer import answer
    values = schema.parse({**QWEN7B, "batch": "8"})
    found = answer(values, estimate(QWEN7B))
    assert found["max_batch"] and found["max_batch"] >= 8 and "max_batch_unbounded" not in found
    assert estimate({**QWEN7B, "batch": str(found["max_batch"] + 1)}).total_bytes > \
        estimate({**QWEN7B, "batch": str(found["max_batch"])}).total_bytes
