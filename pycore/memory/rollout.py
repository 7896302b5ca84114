"""GRPO (Shao et al. 2024) as huggingface/trl 1.16.0 runs it (trl/trainer/grpo_trainer.py, GRPOTrainer), with
transformers ``generate()`` as the rollout: the moments before the policy's update.

- The batch is GRPOConfig's ``per_device_train_batch_size``, which counts completions: the sampler repeats each prompt
  ``num_generations`` times (RepeatSampler), and GRPOConfig.__post_init__ (grpo_config.py L1096-1133) requires the
  generation batch, ``per_device_train_batch_size × num_processes × steps_per_generation``, to hold whole groups. So
  per GPU the memory follows the batch; num_generations only sets how many prompts the completions come from.
- Rollout (``_generate_single_turn``, L1836-1866): ``unwrapped_model.generate()`` under ``torch.no_grad()`` with
  gradient checkpointing disabled (``unwrap_model_for_generation``), once every ``steps_per_generation`` micro-batches
  (``_prepare_inputs``, L1538-1546; GRPOConfig sets it to gradient_accumulation_steps by default, L1097-1100) for all
  of their rows at once: batch × micro-batches sequences of the prompt, each grown by ``max_completion_length`` tokens.
  Its KV cache, prefill working set and decode copies are transformers ``generate()``'s as pycore.memory.serving counts
  them, beside the weights and the optimizer state (the gradients were freed by the last step's zero_grad).
- Reference log-probs (``_generate_and_score_completions``, L2711-2736): when beta > 0, the reference (a frozen copy,
  or a PEFT policy with its adapters disabled) scores the completions under ``torch.no_grad()``, a micro-batch of rows
  at a time (``batch_size=per_device_train_batch_size``), through TRL's fused head: one layer's working tensors or the
  head's tile, nothing saved (pycore.memory.posttraining.reference_pools).
- Old-policy log-probs (L2642-2657) are computed only when gradient_accumulation_steps is not a multiple of
  steps_per_generation × num_iterations, or under vLLM: never with GRPOConfig's defaults (num_iterations 1), so no
  such pass is counted.
- The update (``_compute_loss``, L3020): the policy's forward over prompt + completion with the fused head scoring the
  completion's tokens only (``labels[:, :-logits_to_keep] = -100``), then backward and the optimizer step, as a DPO
  step's (pycore.memory.posttraining.head_pools).
- Under autocast (TRL's default amp-bf16), accelerate's ``prepare_model`` wraps the model's forward in autocast, which
  ``generate()`` calls: a full policy generates in bf16, its weights cast and cached per forward; a PEFT policy's
  ``generate()`` goes through the base model's own forward (PeftModel.generate), unwrapped, and runs in fp32.
"""

from dataclasses import replace
from typing import Any

from pycore.base.expr import num, sym
from pycore.memory import parallel, vision_activations, vllm_multimodal
from pycore.memory.activations import pass_kernel
from pycore.memory.model_states import STATIC, stored_weights
from pycore.memory.parallel import Layout
from pycore.memory.pools import Pool, make
from pycore.memory.precision import POLICIES, serving_dtype
from pycore.memory.serving import serving, vllm_capacity
from pycore.memory.setup import Setup
from pycore.model.catalog import gpus as gpu_catalog

PREFILL, DECODE = "rollout, prefill", "rollout, decode"
ROLLOUT = (PREFILL, DECODE)
VLLM_ROLLOUT = "rollout (vLLM)"
REFERENCE_PASS = "reference log-probs"
OLD_PASS = "old-policy log-probs"
VLLM_BATCHED_TOKENS = 4096      # trl/generation/vllm_generation.py@v1.16.0 L359: LLM(max_num_batched_tokens=4096)
VLLM_SOURCE = "huggingface/trl 1.16.0 trl/generation/vllm_generation.py L347-368 (colocate: an LLM in the trainer's " \
              "process at vllm_gpu_memory_utilization, sleep(level=2) after each generate() when " \
              "vllm_enable_sleep_mode) with vLLM's start-up arithmetic (pycore.memory.serving): "
SOURCE = "huggingface/trl 1.16.0 trl/trainer/grpo_trainer.py "
RENAMED = {"prefill": PREFILL, "decode": DECODE}


def lower_first(label: str) -> str:
    """A pool's label after a colon: "KV cache" stays, "Prefill working set" becomes "prefill working set"."""
    return label if label[1:2].isupper() else label[0].lower() + label[1:]


def sequences(setup: Setup) -> int:
    """Rows the rollout generates at once: a micro-batch of completions for each of steps_per_generation micro-batches
    (GRPOConfig's default, gradient_accumulation_steps)."""
    return setup.workload.batch * setup.layout.microbatches


def _generating(setup: Setup) -> Setup:
    """The setup generate() runs: serving the rollout's rows, prompt and completion in the dtype it computes in (a
    PEFT policy under autocast generates unwrapped, in its fp32 weights)."""
    work = replace(setup.workload, mode="infer", batch=sequences(setup), seq=setup.finetune.prompt,
                   new_tokens=setup.finetune.completion, engine="hf")
    policy = setup.policy
    if policy.autocast and setup.finetune.adapters:
        policy = POLICIES["fp32"] if policy.weight == "fp32" else replace(policy, act=policy.weight, kv=policy.weight)
    kernel = pass_kernel(setup.arch, work.attention, work.math_sm, policy.bytes("act"), policy.autocast)
    return replace(setup, workload=replace(work, attention=kernel), policy=policy)


def rollout_pools(setup: Setup, stage: parallel.Stage) -> "list[Pool]":
    """generate()'s KV cache and working tensors for the rollout's rows (pycore.memory.serving's), and under autocast
    a full policy's 16-bit weight copies, cached for the length of each forward."""
    rows = sequences(setup)
    served = serving(_generating(setup), gpu_catalog()[setup.gpu])["pools"]
    source = SOURCE + "_generate_single_turn: unwrapped_model.generate() under no_grad, " \
        f"{rows:,} rows (batch × steps_per_generation) of the prompt and max_completion_length new tokens; "
    pools = []
    for p in served:
        # the weights are the policy's; generate() runs on the training forward's thread and stream, whose cuBLAS
        # workspace the step already counts
        if p.key in ("weights", "blas_workspace") or not vision_activations.served_in_rollout(p):
            continue
        pools.append(replace(p, key="rollout_" + p.key, label="Rollout: " + lower_first(p.label),
                             moments=tuple(RENAMED[m] for m in p.moments), source=source + p.source,
                             group="rollout"))
    lay = setup.layout
    if lay.zero == 3 and lay.shard_group > 1 and lay.fsdp == "none":
        pools.append(make("rollout_gathered_weights", "Rollout: every weight gathered (DeepSpeed ZeRO-3)",
                          stored_weights(setup, stage) * (num(1) - num(1) / sym("g", lay.shard_group)), ROLLOUT,
                          "huggingface/trl 1.16.0 trl/models/utils.py unwrap_model_for_generation: under ZeRO-3 "
                          "deepspeed.zero.GatheredParameters(model.parameters()) for the whole generate() "
                          "(GRPOConfig.ds3_gather_for_generation default True, grpo_config.py L498-499)",
                          "W = the weights' bytes, unsharded; g = GPUs one shard spans (this GPU's own shard is "
                          "counted with the weights)", group="rollout"))
    if setup.policy.autocast and not setup.finetune.adapters:
        # FSDP gathers (and frees) a layer at a time even in generate(), so its copies are one layer's
        fsdp = lay.zero == 3 and lay.shard_group > 1 and lay.fsdp != "none"
        pools.append(make("rollout_autocast_copies", "Rollout: autocast 16-bit weight copies",
                          sym("Pl" if fsdp else "Pm", stage.largest_layer if fsdp else stage.matrix_params) * num(2),
                          ROLLOUT, "accelerate prepare_model wraps the forward generate() calls in torch.autocast, "
                          "which casts each weight once per forward and keeps the copy until the forward returns",
                          "Pm = parameters in matrices on this GPU; Pl = parameters of the largest layer (FSDP)",
                          group="rollout"))
    return pools


def _engine_setup(setup: Setup) -> Setup:
    """The vLLM engine TRL colocates (trl/generation/vllm_generation.py L347-362): the checkpoint loaded in its own
    dtype (vLLM's --dtype auto), split over vllm_tensor_parallel_size GPUs (default 1), max_num_seqs = batch ×
    vllm_tensor_parallel_size × steps_per_generation (grpo_trainer.py L1124-1126: a TP group gathers its ranks'
    prompts), max_model_len = vllm_max_model_length (default None: the model's positions, which vLLM then checks one
    request of against its KV cache), max_num_batched_tokens 4,096, at vllm_gpu_memory_utilization."""
    ft = setup.finetune
    rows = sequences(setup) * ft.vllm_tp
    longest = ft.vllm_max_len or setup.arch.max_positions or ft.prompt + ft.completion
    # TRL's LLM(...) sets neither limit_mm_per_prompt nor skip_mm_profiling: vLLM's own encoder profiling
    work = replace(setup.workload, mode="infer", engine="vllm", batch=rows, seq=ft.prompt, new_tokens=ft.completion,
                   gpu_util=ft.vllm_util, max_batched_tokens=VLLM_BATCHED_TOKENS, max_num_seqs=rows,
                   max_model_len=longest, mm_profiling="auto")
    return replace(setup, workload=work, layout=Layout(tp=ft.vllm_tp),
                   policy=POLICIES[serving_dtype(setup.arch.dtype, "vllm")])


def engine_capacity(setup: Setup) -> "dict[str, Any]":
    """The colocated engine's start-up figures (pycore.memory.serving.vllm_capacity): its KV cache in tokens, and
    whether one request of max_model_len fits in it, else vLLM refuses to start (check_enough_kv_cache_memory)."""
    engine = _engine_setup(setup)
    result = serving(engine, gpu_catalog()[setup.gpu])
    components = {p.key: p.bytes for p in result["pools"]}
    capacity = vllm_capacity({"kv_bytes_per_token": result["kv_bytes_per_token"], "components": components,
                              "state_bytes_per_sequence": result.get("state_bytes_per_sequence", 0),
                              "vllm_pages": result.get("vllm_pages"), "max_positions": setup.arch.max_positions},
                             engine.workload)
    # its refusal in the trainer's words (pycore.memory.serving.refusal)
    return {**capacity, "engine": "The colocated vLLM engine", "inputs": {
        "gpu_util": "vllm_gpu_memory_utilization", "max_model_len": "vllm_max_model_length",
        "split": "vllm_tensor_parallel_size"}}


def vllm_pools(setup: Setup) -> "list[Pool]":
    """The colocated engine's weights, KV cache, profiling reserve and non-torch memory: live through the whole step,
    or with sleep mode (level 2: weights and KV cache discarded after each generate()) only in the rollout, its
    non-torch memory excepted."""
    engine = _engine_setup(setup)
    served = serving(engine, gpu_catalog()[setup.gpu])["pools"]
    whole = (VLLM_ROLLOUT,) + STATIC
    out = []
    for p in served:
        moments = (VLLM_ROLLOUT,) if setup.finetune.vllm_sleep and p.key != "non_torch" else whole
        out.append(replace(p, key="vllm_" + p.key, label="vLLM engine: " + lower_first(p.label),
                           moments=moments, source=VLLM_SOURCE + p.source, group="rollout_engine"))
    return out


def with_rollout(setup: Setup, stage: parallel.Stage, pools: "list[Pool]") -> "tuple[list[Pool], tuple[str, ...]]":
    """The rollout's moments before the step's own: every pool live through the whole step (weights, optimizer state,
    a reference copy) is live in them too, beside generate()'s pools or the colocated vLLM engine's (none on this GPU
    for a vLLM server on GPUs of its own)."""
    kind = setup.finetune.rollout
    moments = ROLLOUT if kind == "generate" else (VLLM_ROLLOUT,)
    out = [replace(p, moments=moments + p.moments) if all(m in p.moments for m in STATIC) else p for p in pools]
    if kind == "generate":
        return out + rollout_pools(setup, stage), moments
    return out + (vllm_pools(setup) if kind == "vllm-colocate" else []), moments


def old_policy_pass(setup: Setup) -> bool:
    """Whether _generate_and_score_completions (L2642-2657) scores the completions with the policy before the update:
    under vLLM (vllm_importance_sampling_correction, default True: GRPOConfig L925-926); never with generate() at
    GRPOConfig's defaults (num_iterations 1, steps_per_generation = gradient_accumulation_steps)."""
    return setup.finetune.rollout != "generate"


def _engine_notes(setup: Setup) -> "list[str]":
    """What TRL or vLLM would refuse of a colocated engine (GRPO, distill): its GPUs not dividing the processes, or a
    max_model_len under the prompt and completion it is given."""
    lay, ft = setup.layout, setup.finetune
    if ft.rollout != "vllm-colocate" or ft.recipe not in ("grpo", "distill"):
        return []
    out = []
    if lay.world % ft.vllm_tp:
        out.append(f"TRL 1.16 refuses this setup: vllm_tensor_parallel_size = {ft.vllm_tp:,} must divide the "
                   f"{lay.world:,} training processes (trl/generation/vllm_generation.py L312-318); the memory per GPU "
                   "is estimated all the same")
    if ft.vllm_max_len and ft.vllm_max_len < ft.prompt + ft.completion:
        out.append(f"vLLM would reject this rollout's requests: vllm_max_model_length = {ft.vllm_max_len:,} is under "
                   f"the prompt and completion, {ft.prompt + ft.completion:,} tokens (TRL 1.16 grpo_config.py L664-670: "
                   "at least the longest prompt plus max_completion_length)")
    if setup.arch.vision_layers:
        engine = _engine_setup(setup)
        out.append(vllm_multimodal.note(engine, engine.workload.max_num_seqs, levers=False))
        item = vllm_multimodal.profiled_item(engine, engine.workload.max_model_len)
        steps = vllm_multimodal.profile_steps(engine)
        # the first step is where a video takes over from the image, where one does (not Qwen3-VL's: always a video)
        below = vllm_multimodal.profiled_item(engine, steps[0] - 1) if steps else None
        if item and item.modality == "video" and below and below.modality == "image":
            image = vllm_multimodal.profiled_item(replace(engine, workload=replace(engine.workload,
                                                                                   mm_profiling="image")), 0)
            out[-1] += (f"; TRL's LLM(...) passes no limit_mm_per_prompt, so the colocated engine profiles this "
                        f"video: a vllm_max_model_length under {steps[0]:,} tokens profiles an image of "
                        f"{image.tokens:,} instead" if image else "")
    return out


def notes(setup: Setup) -> "list[str]":
    """What a GRPO estimate assumes, and the generation batch TRL would refuse."""
    out = _engine_notes(setup)
    if setup.finetune.recipe != "grpo":
        return out
    lay, ft = setup.layout, setup.finetune
    generation = setup.workload.batch * lay.dp * lay.microbatches
    out.insert(0, f"GRPO: batch counts completions (TRL's per_device_train_batch_size); the rollout generates "
                  f"{sequences(setup):,} of them at once, each of seq {ft.prompt:,} + max_completion_length "
                  f"{ft.completion:,} tokens, every completion taken to the limit")
    if generation % ft.generations:
        out.append(f"TRL 1.16 refuses this GRPO setup: the generation batch, batch × dp × micro-batches = "
                   f"{generation:,}, must be a multiple of num_generations = {ft.generations:,} "
                   "(GRPOConfig.__post_init__); the memory per GPU is estimated all the same")
    return out
