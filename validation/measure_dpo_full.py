"""Measures one DPO training step as TRL 1.14.2's DPOTrainer runs it (the last release before the fused LM head:
TRL 1.15.0 added ``add_fused_lm_head``), on the CPU under PyTorch's MemTracker, as validation/measure_dpo.py measures
TRL 1.16's. pycore calls this path trl_head=full.

Dev-only: needs torch, transformers, peft, accelerate and trl==1.14.2 (read and run; transformers 5.24.0, peft 0.21.2,
accelerate 1.15.0 with it). The step is TRL's own code: ``trl.trainer.dpo_trainer.DPOTrainer._compute_loss`` (TRL
1.14.2) is called with the attributes ``DPOTrainer.__init__`` sets for DPOConfig's defaults (loss_type ["sigmoid"],
beta 0.1, reverse_kl, no ld_alpha, no WPO weighting, use_liger_kernel False), then ``loss.backward()``, the optimizer
step and ``zero_grad(set_to_none=True)`` as the Trainer's training_step does. What TRL 1.14.2 runs
(trl/trainer/dpo_trainer.py):

- L1366-1370: ``outputs = model(**model_kwargs)``, the model's own lm_head: logits [2 × pairs, T, V]; then
  ``selective_log_softmax_and_entropy(outputs.logits[..., :-1, :], ...)`` (trl/trainer/utils.py L643-681);
- L1396-1434: under ``torch.no_grad()`` the reference (a frozen copy, or the LoRA policy with its adapters disabled)
  returns its own full logits, then ``selective_log_softmax`` (utils.py L535-598); ``ref_outputs`` stays referenced
  until _compute_loss returns;
- L1661-1667: the logging of mean logits copies the chosen rows' completion logits (``chosen_logits[chosen_mask
  .bool()]``) while both models' logits are alive.

On a CUDA device both log-prob functions run TRL 1.14.2's Triton kernel (trl/kernels/logprob_entropy.py,
``_LogProbEntropyFunction``: utils.py L501-532 picks it for cuda/xpu tensors): its forward allocates four fp32
per-token tensors (logprobs, entropy, log_z, expected_logit; L165-168) and saves the logits (L192); its backward
allocates ``grad_logits = torch.empty_like(logits)`` (L210). Here that wrapper runs as it is (a stand-in ``triton``
module lets it import on the CPU) and only its two Triton kernels are replaced, by untracked fills of the tensors
they write: the allocations are TRL's own.

Under amp-bf16 the policy's and the reference's forward return fp32 logits: Accelerator.prepare_model wraps each
model's forward in autocast and ``convert_outputs_to_fp32`` (accelerate 1.15.0 accelerator.py L1824-1835; the
reference through ``prepare_model(ref_model, evaluation_mode=True)``, dpo_trainer.py L976); this script wraps both.

Usage:
    python3 -m venv /tmp/oldtrl/venv && /tmp/oldtrl/venv/bin/pip install torch==2.13.0 transformers==5.24.0 \
        peft==0.21.2 accelerate==1.15.0 trl==1.14.2
    python validation/measure_dpo_full.py                 # every case -> validation/measured_dpo_full.partial.jsonl
    python validation/measure_dpo_full.py --only lora     # the cases whose label says lora
    python validation/measure_dpo_full.py --write         # validation/measured_dpo_full.json from the cases finished
"""

import argparse
import contextlib
import copy
import json
import sys
import time
import types
from collections import defaultdict
from pathlib import Path

import torch
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils._python_dispatch import _disable_current_modes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
import measure_dpo  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402

OUT = ROOT / "validation" / "measured_dpo_full.json"
PARTIAL = ROOT / "validation" / "measured_dpo_full.partial.jsonl"
LLAMA, QWEN, QWEN4 = measure_dpo.LLAMA, measure_dpo.QWEN, measure_dpo.QWEN4
FULL = dict(trl_head="full")

# (label, pycore inputs). batch counts preference pairs: 2 × batch sequences.
CASES = [
    ("llama small dpo full bf16 b1s512", dict(**LLAMA, **FULL, method="dpo", precision="bf16", recompute="none",
                                              batch="1", seq="512")),
    ("llama small dpo full bf16 b2s512", dict(**LLAMA, **FULL, method="dpo", precision="bf16", recompute="none",
                                              batch="2", seq="512")),
    ("llama small dpo full bf16 gc b2s512", dict(**LLAMA, **FULL, method="dpo", precision="bf16", recompute="full",
                                                 batch="2", seq="512")),
    ("llama small dpo full precomputed bf16 b2s512", dict(**LLAMA, **FULL, method="dpo", ref_model="precomputed",
                                                          precision="bf16", recompute="none", batch="2", seq="512")),
    ("llama small dpo full amp-bf16 b2s512", dict(**LLAMA, **FULL, method="dpo", precision="amp-bf16",
                                                  recompute="none", batch="2", seq="512")),
    ("llama small dpo lora qv amp-bf16 gc b2s512", dict(**LLAMA, **FULL, method="dpo-lora", lora_targets="qv",
                                                        precision="amp-bf16", recompute="full", batch="2",
                                                        seq="512")),
    ("llama small dpo lora qv bf16 b2s512", dict(**LLAMA, **FULL, method="dpo-lora", lora_targets="qv",
                                                 precision="bf16", recompute="none", batch="2", seq="512")),
    ("qwen small dpo full bf16 b2s256", dict(**QWEN, **FULL, method="dpo", precision="bf16", recompute="none",
                                             batch="2", seq="256")),
    ("qwen 4L dpo full bf16 gc b1s512", dict(**QWEN4, **FULL, method="dpo", precision="bf16", recompute="full",
                                             batch="1", seq="512")),
]


class _Anything(types.ModuleType):
    """A stand-in ``triton`` / ``triton.language``: ``@triton.jit`` keeps the function, annotations resolve."""

    def __getattr__(self, name):
        if name == "jit":
            return lambda fn=None, **kw: fn if fn is not None else (lambda f: f)
        if name == "cdiv":
            return lambda a, b: -(-a // b)
        if name == "language":
            return sys.modules["triton.language"]
        return object


def triton_kernel_on_cpu():
    """TRL 1.14.2's CUDA log-prob path on the CPU: the kernel wrapper's own allocations, its kernels' writes untracked."""
    sys.modules.setdefault("triton.language", _Anything("triton.language"))
    sys.modules.setdefault("triton", _Anything("triton"))
    import trl.kernels.logprob_entropy as kernel
    import trl.trainer.utils as trl_utils

    class Fill:
        """``kernel[grid](tensors..., **constants)``: write zeros into the outputs, allocating nothing tracked."""

        def __init__(self, outputs):
            self.outputs = outputs

        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                with _disable_current_modes(), torch.no_grad():
                    for i in self.outputs:
                        args[i].zero_()
            return launch
    kernel._forward_kernel = Fill((3, 4, 5, 6))      # logprobs, entropy, log_z, expected_logit
    kernel._backward_kernel = Fill((7,))             # grad_logits
    trl_utils._fused_logprob_entropy = kernel.selective_log_softmax_and_entropy
    trl_utils._supports_trl_loss_kernel = lambda *args, **kwargs: True


def build(inputs):
    """The policy (and the reference copy) as plain fine-tuning builds them: their own lm_head, no fused head."""
    plain = {k: v for k, v in inputs.items() if k not in ("ref_model", "trl_head")}
    plain["method"] = measure_dpo.policy_method(inputs)
    values, arch, model = measure.build(plain)
    ref = None
    if plain["method"] == "full" and inputs.get("ref_model", "auto") == "auto":
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
        from accelerate.utils import convert_outputs_to_fp32
        for m in (model, ref):
            if m is not None:
                m.forward = convert_outputs_to_fp32(m.forward)
    return values, arch, model, ref


def trainer(model, ref, precomputed, autocast):
    """The attributes TRL 1.14.2's DPOTrainer._compute_loss reads, as its __init__ sets them for the defaults."""
    from accelerate import Accelerator

    args = types.SimpleNamespace(gradient_checkpointing_kwargs={"use_reentrant": False})
    return types.SimpleNamespace(
        model=model, ref_model=ref, accelerator=Accelerator(cpu=True), args=args, precompute_ref_logps=precomputed,
        autocast=autocast, use_liger_kernel=False, is_fsdp_enabled=False,
        aux_loss_enabled=False, ld_alpha=None, f_divergence_type="reverse_kl", loss_types=["sigmoid"],
        loss_weights=[1.0], beta=0.1, label_smoothing=0.0, use_weighting=False, _metrics=defaultdict(
            lambda: defaultdict(list)), _total_train_tokens=0, _tp_size=1)


def run_case(label, inputs):
    torch.manual_seed(0)
    started = time.time()
    precomputed = inputs.get("ref_model") == "precomputed"
    values, arch, model, ref = build(inputs)
    plain = {k: v for k, v in inputs.items() if k not in ("ref_model", "trl_head")}
    impl = measure.optimizer_impl(plain | {"method": "full"})
    optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
    batch = measure_dpo.make_batch(values, arch, precomputed)
    dpo = trainer(model, ref, precomputed, values["precision"].startswith("amp-"))
    with cuda_autocast(True):
        measure_dpo.step(dpo, model, optimizer, batch)        # warm-up: optimizer state
    tracker = MemTracker()
    track = tracker._track_module_params_and_buffers
    tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(
        module, install_grad_hooks and measure_dpo.policy_method(inputs) == "full")
    tracker.track_external(model, optimizer, *([ref] if ref is not None else []), *batch.values())
    # as measure_dpo.py: a LoRA policy runs twice (the reference with its adapters off); module statistics skip no_grad
    for name in ("_pre_fw_hook", "_post_fw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda *args, hook=hook: hook(*args) if torch.is_grad_enabled() else None)
    for name in ("_pre_bw_hook", "_post_bw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda module, args, hook=hook: hook(module, args)
                if module in tracker.memory_tracking else None)
    phases = measure_dpo.Phases(tracker)
    handles = phases.hooks(model) + (phases.hooks(ref) if ref is not None else ())
    with tracker, cuda_autocast(True):
        phases.mark("before")
        measure_dpo.step(dpo, model, optimizer, batch, phases)
    for handle in handles:
        handle.remove()
    overall = max(phases.peaks.values(), key=lambda p: p["Total"])
    return {"label": label, "inputs": inputs, "tensor_mode": "real", "optimizer_impl": impl,
            "params": sum(p.numel() for p in model.parameters()),
            "reference_params": sum(p.numel() for p in ref.parameters()) if ref is not None else 0,
            "prompt_tokens": measure_dpo.PROMPT, "peak_bytes": overall["Total"],
            "peak_breakdown": {k: v for k, v in overall.items() if k != "Total"},
            "phase_peaks": {name: p["Total"] for name, p in phases.peaks.items() if name != "before"},
            "phase_breakdown": {name: {k: v for k, v in p.items() if k != "Total"}
                                for name, p in phases.peaks.items() if name != "before"},
            "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text (a|b: either)")
    parser.add_argument("--write", action="store_true", help="write validation/measured_dpo_full.json from the cases "
                                                             "finished so far (PARTIAL), in CASES' order")
    args = parser.parse_args()
    triton_kernel_on_cpu()
    import trl
    assert trl.__version__ == "1.14.2", trl.__version__
    if args.write:
        import accelerate
        import peft
        done = {r["label"]: r for r in map(json.loads, PARTIAL.read_text().splitlines())}
        results = [done[label] for label, _ in CASES if label in done]
        measure.write_record(OUT, f"Peak tensor bytes of one DPO step as TRL {trl.__version__}'s DPOTrainer runs it "
                             "(the model's full logits, then its Triton log-prob kernel's allocations; _compute_loss, "
                             "backward, AdamW step), recorded by validation/measure_dpo_full.py", results)
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
        print(f"{label:48s} peak {result['peak_bytes'] / 2**20:8.1f} MiB  [{phases}]  {result['seconds']:5.1f}s",
              flush=True)
        with PARTIAL.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
