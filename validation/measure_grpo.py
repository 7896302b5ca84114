"""Measures one GRPO step as TRL's GRPOTrainer runs it with transformers ``generate()`` as the rollout, on the CPU under
PyTorch's MemTracker, as validation/measure_dpo.py measures a DPO step.

Dev-only: needs torch, transformers, peft, accelerate and trl (TRL 1.16.0 was read and run). The step is TRL's own code
where it touches memory: what ``GRPOTrainer._generate_single_turn`` (rollout), ``_generate_and_score_completions`` (the
reference log-probs under ``torch.no_grad()``) and ``_compute_loss`` (the policy's forward and the DAPO loss, GRPOConfig's
default loss_type) do, then ``loss.backward()``, the optimizer step and ``zero_grad(set_to_none=True)`` as the Trainer's
training_step does. ``_get_per_token_logps_and_entropies`` and ``_compute_loss`` are TRL's functions, called with the
attributes ``GRPOTrainer.__init__`` sets for GRPOConfig's defaults. What it runs:

- rollout: ``unwrapped_model.generate()`` under ``torch.no_grad()`` with gradient checkpointing disabled
  (``unwrap_model_for_generation``), sampling (do_sample, temperature 1, top_k 0, top_p 1) ``max_completion_length``
  tokens for each of the batch's rows (no EOS: every completion runs to the limit, the longest the padded batch can
  be). The batch is TRL's ``per_device_train_batch_size`` rows, each a completion (``num_generations`` rows per prompt;
  GRPOConfig.__post_init__ checks that the generation batch is a whole number of prompt groups);
- reference log-probs when ``beta > 0`` (GRPOConfig's default beta is 0.0: no reference): a frozen copy of a full policy
  (``create_model_from_path`` in the policy's dtype), or a PEFT policy with its adapters disabled (``use_adapter(model,
  None)``), through the fused head, under ``torch.no_grad()``;
- policy update: ``_compute_loss`` runs the policy over prompt + completion with TRL's fused log-prob head
  (``add_fused_lm_head(..., outputs=("log_probs", "entropy"))``), scoring only the completion's tokens; the old-policy
  log-probs are ``per_token_logps.detach()`` (GRPOConfig defaults: num_iterations 1, steps_per_generation =
  gradient_accumulation_steps, so ``_generate_and_score_completions`` computes none);
- gradient accumulation (``ga`` cases): GRPOConfig's steps_per_generation defaults to gradient_accumulation_steps, so
  the rollout generates every micro-batch's rows at once, the reference scores them a micro-batch at a time, then
  each micro-batch runs ``_compute_loss`` and backward into the same gradients before the optimizer step;
- gradient checkpointing where recompute=full (GRPOConfig's default gradient_checkpointing=True), use_reentrant=False,
  ``enable_input_require_grads()`` for a PEFT policy;
- amp-bf16 (TRL's default for a model it loads by name: fp32 weights, bf16=True): accelerate's prepare_model wraps the
  model's forward in autocast, so a full policy's ``generate()`` runs under it; a PEFT policy's ``generate()`` goes
  through the base model's own forward and runs in fp32. The loss's forward runs under ``accelerator.autocast()``.

CUDA-like allocation as validation/measure_dpo.py sets it up (512-byte rounding, CUDA's autocast lists, the fused head's
CUDA path: only scored positions gathered, tile folds untracked as Triton runs them).

Usage:
    python validation/measure_grpo.py                 # every case -> validation/measured_grpo.partial.jsonl
    python validation/measure_grpo.py --only lora     # the cases whose label says lora
    python validation/measure_grpo.py --write         # validation/measured_grpo.json from the cases finished
"""

import argparse
import contextlib
import copy
import functools
import json
import sys
import time
import types
from collections import defaultdict
from pathlib import Path

import torch
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402
from measure_dpo import Phases, cuda_like_fused_head  # noqa: E402

OUT = ROOT / "validation" / "measured_grpo.json"
PARTIAL = ROOT / "validation" / "measured_grpo.partial.jsonl"

LLAMA = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000")
LLAMA4 = dict(model="llama-3.1-8b", layers="4", hidden="768", heads="12", kv_heads="4", ffn="2048", vocab="32000")
QWEN = dict(model="qwen2.5-0.5b", layers="2", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000")
# Every head its own keys and values (multi-head attention), so that the rollout's KV cache outweighs what a LoRA
# policy under checkpointing keeps for its update: the rollout is the step's peak
MHA = dict(model="llama-3.1-8b", layers="4", hidden="512", heads="8", kv_heads="8", ffn="1408", vocab="32000")

GRPO_KEYS = ("num_generations", "max_completion_length", "beta")


def case(model, method, precision, recompute, batch, prompt, completion, beta, generations, **extra):
    return dict(**model, method=method, precision=precision, recompute=recompute, batch=str(batch), seq=str(prompt),
                max_completion_length=str(completion), beta=str(beta), num_generations=str(generations), **extra)


# (label, pycore inputs). batch is per_device_train_batch_size: completions, num_generations of them per prompt; seq is
# the prompt's tokens.
CASES = [
    ("llama small grpo full bf16 beta0 g8 b8 p64 c192",
     case(LLAMA, "grpo", "bf16", "none", 8, 64, 192, 0.0, 8)),
    ("llama small grpo full bf16 beta0.04 gc g4 b8 p64 c192",
     case(LLAMA, "grpo", "bf16", "full", 8, 64, 192, 0.04, 4)),
    ("llama small grpo full bf16 beta0.04 g2 b4 p128 c384",
     case(LLAMA, "grpo", "bf16", "none", 4, 128, 384, 0.04, 2)),
    ("llama small grpo full amp-bf16 beta0.04 g4 b4 p64 c192",
     case(LLAMA, "grpo", "amp-bf16", "none", 4, 64, 192, 0.04, 4)),
    ("llama 4L grpo full bf16 beta0.04 gc g8 b8 p32 c224",
     case(LLAMA4, "grpo", "bf16", "full", 8, 32, 224, 0.04, 8)),
    ("llama small grpo lora qv bf16 beta0 gc g8 b8 p64 c256",
     case(LLAMA, "grpo-lora", "bf16", "full", 8, 64, 256, 0.0, 8, lora_targets="qv")),
    ("llama small grpo lora all-linear bf16 beta0.04 g4 b8 p64 c192",
     case(LLAMA, "grpo-lora", "bf16", "none", 8, 64, 192, 0.04, 4, lora_targets="all-linear")),
    ("llama small grpo lora qv amp-bf16 beta0.04 gc g8 b8 p64 c256",
     case(LLAMA, "grpo-lora", "amp-bf16", "full", 8, 64, 256, 0.04, 8, lora_targets="qv")),
    ("llama MHA grpo lora qv bf16 beta0.04 gc g8 b16 p64 c448",
     case(MHA, "grpo-lora", "bf16", "full", 16, 64, 448, 0.04, 8, lora_targets="qv")),
    ("qwen small grpo full bf16 beta0 g8 b16 p32 c128",
     case(QWEN, "grpo", "bf16", "none", 16, 32, 128, 0.0, 8)),
    ("qwen small grpo full bf16 beta0.04 gc g2 b4 p64 c448",
     case(QWEN, "grpo", "bf16", "full", 4, 64, 448, 0.04, 2)),
    ("qwen small grpo lora attention bf16 beta0.04 g4 b4 p64 c448",
     case(QWEN, "grpo-lora", "bf16", "none", 4, 64, 448, 0.04, 4, lora_targets="attention")),
    # gradient accumulation: steps_per_generation = gradient_accumulation_steps micro-batches generated at once, the
    # reference scoring them a micro-batch at a time, each micro-batch's backward adding to the gradients
    ("llama MHA grpo lora qv bf16 beta0 gc g8 b2 ga8 p64 c448",
     case(MHA, "grpo-lora", "bf16", "full", 2, 64, 448, 0.0, 8, lora_targets="qv", microbatches="8")),
    ("qwen small grpo full bf16 beta0.04 gc g4 b2 ga2 p64 c192",
     case(QWEN, "grpo", "bf16", "full", 2, 64, 192, 0.04, 4, microbatches="2")),
]


def policy_method(inputs):
    return {"grpo": "full", "grpo-lora": "lora"}[inputs["method"]]


def accelerate_autocast(model):
    """accelerate's prepare_model under mixed precision: the model's own forward wrapped in autocast, outputs in fp32."""
    from accelerate.utils import convert_outputs_to_fp32

    forward = model.forward
    model.forward = convert_outputs_to_fp32(torch.autocast("cpu", dtype=torch.bfloat16)(forward))


def build(inputs):
    """The policy (and the reference) as plain fine-tuning builds them, with TRL's fused heads (GRPOTrainer.__init__)."""
    from trl.trainer.utils import add_fused_lm_head

    plain = {k: v for k, v in inputs.items() if k not in GRPO_KEYS}
    plain["method"] = policy_method(inputs)
    values, arch, model = measure.build(plain)
    # measure.hf_config turns the cache off for training; a checkpoint's config keeps use_cache=True, which generate()
    # follows (TRL's GenerationConfig leaves use_cache at its default); TRL's fused forward passes use_cache=False
    model.config.use_cache = True
    model.generation_config.use_cache = True
    ref = None
    if plain["method"] == "full" and float(inputs["beta"]) > 0:
        ref = copy.deepcopy(model)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        add_fused_lm_head(ref)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    if plain["method"] == "lora":
        model = measure.with_lora(model, values)
    model.train()
    if values["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if plain["method"] == "lora":
            model.enable_input_require_grads()
    if values["precision"].startswith("amp-"):
        accelerate_autocast(model)
        if ref is not None:
            accelerate_autocast(ref)
    return values, arch, model, ref


def trainer(model, ref, beta, autocast, steps=1):
    """The attributes GRPOTrainer's _compute_loss and _get_per_token_logps_and_entropies read, as GRPOTrainer.__init__
    sets them for GRPOConfig's defaults (loss_type dapo, epsilon 0.2, token-level importance sampling)."""
    from accelerate import Accelerator
    from trl.trainer.grpo_trainer import GRPOTrainer

    args = types.SimpleNamespace(use_bias_correction_kl=True, delta=None, steps_per_generation=steps,
                                 gradient_checkpointing_kwargs={"use_reentrant": False})
    grpo = types.SimpleNamespace(
        autocast=autocast,              # not GRPOTrainer's: what accelerator.autocast() does under bf16=True, run below
        model=model, ref_model=ref, accelerator=Accelerator(cpu=True), args=args, beta=beta, top_entropy_quantile=1.0,
        off_policy_mask_threshold=None, importance_sampling_level="token", loss_type="dapo", epsilon_low=0.2,
        epsilon_high=0.2, use_vllm=False, vllm_importance_sampling_correction=True,
        current_gradient_accumulation_steps=steps,
        _entropy_bonus_enabled=False, aux_loss_enabled=False, _metrics={"train": defaultdict(list)})
    grpo._get_per_token_logps_and_entropies = functools.partial(GRPOTrainer._get_per_token_logps_and_entropies, grpo)
    return grpo


def autocast_if(enabled):
    return torch.autocast("cpu", dtype=torch.bfloat16) if enabled else contextlib.nullcontext()


def rollout(grpo, values, arch, completion):
    """GRPOTrainer._generate_single_turn's transformers path: generate() under no_grad, checkpointing off, for the rows
    of steps_per_generation (GRPOConfig's default: gradient_accumulation_steps) micro-batches at once."""
    from transformers import GenerationConfig

    model = grpo.model
    prompt_ids = torch.randint(1, arch.vocab, (values["batch"] * values["microbatches"], values["seq"]))
    config = GenerationConfig(max_new_tokens=completion, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                              pad_token_id=0, eos_token_id=None, bos_token_id=None)
    was = model.is_gradient_checkpointing
    if was:
        model.gradient_checkpointing_disable()
    with torch.no_grad():
        out = model.generate(input_ids=prompt_ids, attention_mask=torch.ones_like(prompt_ids),
                             generation_config=config)
    if was:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return prompt_ids, out[:, prompt_ids.size(1):].contiguous()


def reference_logps(grpo, input_ids, attention_mask, completion, batch):
    """GRPOTrainer._generate_and_score_completions: the reference's log-probs under no_grad, checkpointing off, a
    micro-batch of rows at a time (batch_size=per_device_train_batch_size)."""
    from trl.models.utils import disable_gradient_checkpointing
    from trl.trainer.utils import use_adapter

    with torch.no_grad(), disable_gradient_checkpointing(grpo.model, grpo.args.gradient_checkpointing_kwargs), \
            autocast_if(grpo.autocast):
        if grpo.ref_model is not None:
            logps, _, _ = grpo._get_per_token_logps_and_entropies(grpo.ref_model, input_ids, attention_mask,
                                                                  completion, batch_size=batch)
        else:
            with use_adapter(grpo.model, adapter_name=None):
                logps, _, _ = grpo._get_per_token_logps_and_entropies(grpo.model, input_ids, attention_mask,
                                                                      completion, batch_size=batch)
    return logps


def step(grpo, values, arch, optimizer, completion, phases=None):
    """Rollout, reference log-probs, then _compute_loss, backward, the optimizer step and zero_grad."""
    from trl.trainer.grpo_trainer import GRPOTrainer

    def mark(name):
        if phases:
            phases.mark(name)
    prompt_ids, completion_ids = rollout(grpo, values, arch, completion)
    mark("rollout")
    prompt_mask, completion_mask = torch.ones_like(prompt_ids), torch.ones_like(completion_ids)
    generated = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
                 "completion_mask": completion_mask, "advantages": torch.randn(prompt_ids.size(0))}
    if grpo.beta:
        generated["ref_per_token_logps"] = reference_logps(
            grpo, torch.cat([prompt_ids, completion_ids], 1), torch.cat([prompt_mask, completion_mask], 1), completion,
            values["batch"])
        mark("reference log-probs")
    # _prepare_inputs: the generation batch split into steps_per_generation micro-batches, each a training_step
    batch = values["batch"]
    for start in range(0, prompt_ids.size(0), batch):
        if phases and start:
            # MemTracker's per-module statistics allow one forward and backward of each module (not read here)
            phases.tracker.reset_mod_stats()
        inputs = {k: v[start:start + batch] for k, v in generated.items()}
        inputs["num_items_in_batch"] = completion_mask.sum()
        hooks = phases.hooks(grpo.model) if phases else ()
        with autocast_if(grpo.autocast):            # accelerator.autocast() under bf16=True
            loss = GRPOTrainer._compute_loss(grpo, grpo.model, inputs)
        for handle in hooks:
            handle.remove()
        mark("loss")
        loss.backward()
        del loss, inputs
        mark("backward")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    mark("optimizer step")


def run_case(label, inputs):
    torch.manual_seed(0)
    started = time.time()
    values, arch, model, ref = build(inputs)
    completion = int(inputs["max_completion_length"])
    plain = {k: v for k, v in inputs.items() if k not in GRPO_KEYS} | {"method": "full"}
    impl = measure.optimizer_impl(plain)
    optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
    grpo = trainer(model, ref, float(inputs["beta"]), values["precision"].startswith("amp-"), values["microbatches"])
    with cuda_autocast(True):
        step(grpo, values, arch, optimizer, completion)            # warm-up: optimizer state
    tracker = MemTracker()
    track = tracker._track_module_params_and_buffers
    tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(
        module, install_grad_hooks and policy_method(inputs) == "full")
    tracker.track_external(model, optimizer, *([ref] if ref is not None else []))
    # generate() and the reference pass call each module many times under no_grad; MemTracker's per-module statistics
    # allow one call, and are not read here: its module hooks skip no_grad forwards (every allocation is still counted)
    for name in ("_pre_fw_hook", "_post_fw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda *args, hook=hook: hook(*args) if torch.is_grad_enabled() else None)
    for name in ("_pre_bw_hook", "_post_bw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda module, args, hook=hook: hook(module, args)
                if module in tracker.memory_tracking else None)
    phases = Phases(tracker)
    with tracker, cuda_autocast(True):
        phases.mark("before")
        step(grpo, values, arch, optimizer, completion, phases)
    overall = max((p for name, p in phases.peaks.items() if name != "before"), key=lambda p: p["Total"])
    return {"label": label, "inputs": inputs, "tensor_mode": "real", "optimizer_impl": impl,
            "params": sum(p.numel() for p in model.parameters()),
            "reference_params": sum(p.numel() for p in ref.parameters()) if ref is not None else 0,
            "peak_bytes": overall["Total"], "peak_breakdown": {k: v for k, v in overall.items() if k != "Total"},
            "phase_peaks": {name: p["Total"] for name, p in phases.peaks.items() if name != "before"},
            "phase_breakdown": {name: {k: v for k, v in p.items() if k != "Total"}
                                for name, p in phases.peaks.items() if name != "before"},
            "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text (a|b: either)")
    parser.add_argument("--write", action="store_true", help="write validation/measured_grpo.json from the cases "
                                                             "finished so far (PARTIAL), in CASES' order")
    args = parser.parse_args()
    if args.write:
        import accelerate
        import peft
        import trl
        done = {r["label"]: r for r in map(json.loads, PARTIAL.read_text().splitlines())}
        results = [done[label] for label, _ in CASES if label in done]
        measure.write_record(OUT, f"Peak tensor bytes of one GRPO step as TRL {trl.__version__}'s GRPOTrainer runs it "
                             "with generate() as the rollout (rollout, reference log-probs, _compute_loss, backward, "
                             "AdamW step), recorded by validation/measure_grpo.py", results)
        record = json.loads(OUT.read_text())
        record = {**{k: v for k, v in record.items() if k != "cases"}, "trl": trl.__version__,
                  "peft": peft.__version__, "accelerate": accelerate.__version__, "cases": record["cases"]}
        OUT.write_text(json.dumps(record, indent=1) + "\n")
        return
    cuda_like_fused_head()
    for label, inputs in CASES:
        if args.only and not any(word in label for word in args.only.split("|")):
            continue
        result = run_case(label, inputs)
        phases = "  ".join(f"{k} {v / 2**20:7.1f}" for k, v in result["phase_peaks"].items())
        print(f"{label:60s} peak {result['peak_bytes'] / 2**20:8.1f} MiB  [{phases}]  {result['seconds']:5.1f}s",
              flush=True)
        with PARTIAL.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
