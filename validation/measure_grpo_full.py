"""Measures one GRPO step as TRL 1.14.2's GRPOTrainer runs it (the last release before the fused LM head: TRL 1.15.0
added ``add_fused_lm_head``), on the CPU under PyTorch's MemTracker, with validation/measure_grpo.py's set-up (rollout
by ``generate()``, reference log-probs, the update) and validation/measure_dpo_full.py's old-TRL technique (TRL
1.14.2's Triton log-prob kernel wrapper run as it is, its two kernels replaced by untracked fills). pycore calls this
path trl_head=full.

Dev-only: needs torch, transformers, peft, accelerate and trl==1.14.2 (read and run; transformers 5.24.0, peft 0.21.2,
accelerate 1.15.0 with it). What TRL 1.14.2 runs (trl/trainer/grpo_trainer.py):

- ``_get_per_token_logps_and_entropies`` (L1380-1396) calls ``_full_logits_logps`` unless ``use_liger_kernel``
  (GRPOConfig default False); ``_full_logits_logps`` (L1491-1603) runs ``batch_size`` rows at a time through the
  model's own forward with ``logits_to_keep = completion + 1`` (L1562-1564: logits [rows, completion + 1, V]), slices
  ``[:, :-1, :]`` and ``[:, -logits_to_keep:, :]`` (L1575-1579), then ``selective_log_softmax_and_entropy`` (with
  entropy: the update) or ``selective_log_softmax`` (the reference), both TRL's Triton kernel on a GPU (trl/trainer/
  utils.py L501-532, L535-598, L643-681; trl/kernels/logprob_entropy.py ``_LogProbEntropyFunction``: four fp32
  per-token tensors L165-168, the logits saved L192, ``grad_logits = empty_like(logits)`` in backward L210);
- ``_generate_and_score_completions`` (L2696-2797): under ``torch.no_grad()`` with checkpointing off, no old-policy
  pass at GRPOConfig's defaults (L2706-2721), the reference's log-probs when beta != 0, ``batch_size =
  per_device_train_batch_size`` rows at a time (L2567) — a frozen copy of a full policy (L995), the PEFT policy with
  its adapters disabled (``use_adapter``) otherwise;
- ``_compute_loss`` (L3091-3362): the policy's log-probs and entropy over prompt + completion, the DAPO loss
  (GRPOConfig's default loss_type), no logits kept past ``_full_logits_logps`` but what the kernel saves.

Under amp-bf16 accelerate's prepare_model wraps each model's forward in autocast and ``convert_outputs_to_fp32``
(accelerate 1.15.0; the reference through ``prepare_model(ref_model, evaluation_mode=True)``, grpo_trainer.py L1149),
so both return fp32 logits; measure_grpo.accelerate_autocast does that here.

Usage:
    PYTHONPATH=/tmp/oldtrl/x1.14.2 python validation/measure_grpo_full.py            # -> measured_grpo_full.partial.jsonl
    PYTHONPATH=/tmp/oldtrl/x1.14.2 python validation/measure_grpo_full.py --only lora
    PYTHONPATH=/tmp/oldtrl/x1.14.2 python validation/measure_grpo_full.py --write    # measured_grpo_full.json
"""

import argparse
import contextlib
import copy
import functools
import json
import sys
import time
import types
from pathlib import Path

import torch
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
import measure_grpo  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402
from measure_dpo import Phases  # noqa: E402
from measure_dpo_full import triton_kernel_on_cpu  # noqa: E402

OUT = ROOT / "validation" / "measured_grpo_full.json"
PARTIAL = ROOT / "validation" / "measured_grpo_full.partial.jsonl"
LLAMA, QWEN, case = measure_grpo.LLAMA, measure_grpo.QWEN, measure_grpo.case
FULL = dict(trl_head="full")
GRPO_KEYS = measure_grpo.GRPO_KEYS + ("trl_head",)

# (label, pycore inputs): measure_grpo.py's cases, the policy's logits whole
CASES = [
    ("llama small grpo full bf16 beta0 g8 b8 p64 c192",
     case(LLAMA, "grpo", "bf16", "none", 8, 64, 192, 0.0, 8, **FULL)),
    ("llama small grpo full bf16 beta0.04 gc g4 b8 p64 c192",
     case(LLAMA, "grpo", "bf16", "full", 8, 64, 192, 0.04, 4, **FULL)),
    ("llama small grpo full amp-bf16 beta0.04 g4 b4 p64 c192",
     case(LLAMA, "grpo", "amp-bf16", "none", 4, 64, 192, 0.04, 4, **FULL)),
    ("llama small grpo lora qv amp-bf16 beta0.04 gc g8 b8 p64 c256",
     case(LLAMA, "grpo-lora", "amp-bf16", "full", 8, 64, 256, 0.04, 8, lora_targets="qv", **FULL)),
    ("llama small grpo lora all-linear bf16 beta0.04 g4 b8 p64 c192",
     case(LLAMA, "grpo-lora", "bf16", "none", 8, 64, 192, 0.04, 4, lora_targets="all-linear", **FULL)),
    ("qwen small grpo full bf16 beta0 g8 b16 p32 c128",
     case(QWEN, "grpo", "bf16", "none", 16, 32, 128, 0.0, 8, **FULL)),
    ("qwen small grpo full bf16 beta0.04 gc g2 b4 p64 c448",
     case(QWEN, "grpo", "bf16", "full", 4, 64, 448, 0.04, 2, **FULL)),
]


def build(inputs):
    """The policy (and the reference copy) as plain fine-tuning builds them: their own lm_head, no fused head."""
    plain = {k: v for k, v in inputs.items() if k not in GRPO_KEYS}
    plain["method"] = measure_grpo.policy_method(inputs)
    values, arch, model = measure.build(plain)
    model.config.use_cache = True               # as measure_grpo.build: generate() follows a checkpoint's config
    model.generation_config.use_cache = True
    ref = None
    if plain["method"] == "full" and float(inputs["beta"]) > 0:
        ref = copy.deepcopy(model)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
    if plain["method"] == "lora":
        model = measure.with_lora(model, values)
    model.train()
    if values["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if plain["method"] == "lora":
            model.enable_input_require_grads()
    if values["precision"].startswith("amp-"):
        for m in (model, ref):
            if m is not None:
                measure_grpo.accelerate_autocast(m)
    return values, arch, model, ref


def trainer(model, ref, beta, autocast, steps=1):
    """measure_grpo.trainer's attributes, with what TRL 1.14.2's full-logits path reads as GRPOTrainer.__init__ sets
    them for GRPOConfig's defaults (use_liger_kernel False, temperature 1.0; model_kwarg_keys from the base model's
    forward, L365-369)."""
    import inspect

    from trl.trainer.grpo_trainer import GRPOTrainer

    grpo = measure_grpo.trainer(model, ref, beta, autocast, steps)
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    grpo.use_liger_kernel, grpo.temperature, grpo.is_fsdp_enabled = False, 1.0, False
    grpo.model_kwarg_keys = inspect.signature(base.forward).parameters.keys()
    grpo.state, grpo.args.report_to = types.SimpleNamespace(global_step=0), []
    grpo._full_logits_logps = functools.partial(GRPOTrainer._full_logits_logps, grpo)
    grpo._get_per_token_logps_and_entropies = functools.partial(GRPOTrainer._get_per_token_logps_and_entropies, grpo)
    return grpo


def reference_logps(grpo, input_ids, attention_mask, completion, batch):
    """_generate_and_score_completions L2696-2797: under no_grad with checkpointing off, no accelerator.autocast()
    around it (the prepared models' forwards carry their own), batch rows at a time."""
    from trl.models.utils import disable_gradient_checkpointing
    from trl.trainer.utils import use_adapter

    with torch.no_grad(), disable_gradient_checkpointing(grpo.model, grpo.args.gradient_checkpointing_kwargs):
        if grpo.ref_model is not None:
            logps, _, _ = grpo._get_per_token_logps_and_entropies(grpo.ref_model, input_ids, attention_mask,
                                                                  completion, batch_size=batch)
        else:
            with use_adapter(grpo.model, adapter_name=None):
                logps, _, _ = grpo._get_per_token_logps_and_entropies(grpo.model, input_ids, attention_mask,
                                                                      completion, batch_size=batch)
    return logps


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
        measure_grpo.step(grpo, values, arch, optimizer, completion)            # warm-up: optimizer state
    tracker = MemTracker()
    track = tracker._track_module_params_and_buffers
    tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(
        module, install_grad_hooks and measure_grpo.policy_method(inputs) == "full")
    tracker.track_external(model, optimizer, *([ref] if ref is not None else []))
    # as measure_grpo.py: module statistics skip no_grad forwards (every allocation is still counted)
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
        measure_grpo.step(grpo, values, arch, optimizer, completion, phases)
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
    parser.add_argument("--write", action="store_true", help="write validation/measured_grpo_full.json from the cases "
                                                             "finished so far (PARTIAL), in CASES' order")
    args = parser.parse_args()
    triton_kernel_on_cpu()
    import trl
    assert trl.__version__ == "1.14.2", trl.__version__
    # measure_grpo.step reads the reference's log-probs through its own reference_logps: TRL 1.14.2's here
    measure_grpo.reference_logps = reference_logps
    if args.write:
        import accelerate
        import peft
        done = {r["label"]: r for r in map(json.loads, PARTIAL.read_text().splitlines())}
        results = [done[label] for label, _ in CASES if label in done]
        measure.write_record(OUT, f"Peak tensor bytes of one GRPO step as TRL {trl.__version__}'s GRPOTrainer runs it "
                             "with generate() as the rollout (the model's full logits, then its Triton log-prob "
                             "kernel's allocations; rollout, reference log-probs, _compute_loss, backward, AdamW step), "
                             "recorded by validation/measure_grpo_full.py", results)
        record = json.loads(OUT.read_text())
        record = {**{k: v for k, v in record.items() if k != "cases"}, "trl": trl.__version__,
                  "peft": peft.__version__, "accelerate": accelerate.__version__, "cases": record["cases"]}
        OUT.write_text(json.dumps(record, indent=1) + "\n")
        return
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
