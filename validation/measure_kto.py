"""Measures one KTO training step as TRL's KTOTrainer runs it, on the CPU under PyTorch's MemTracker, with
validation/measure_dpo.py's set-up.

Dev-only: needs torch, transformers, peft, accelerate and trl (TRL 1.16.0 was read and run; ``from trl import
KTOTrainer``, trl/trainer/kto_trainer.py, the stable API since trl.experimental.kto became a deprecated alias). The
step is TRL's own code: ``trl.trainer.kto_trainer.KTOTrainer._compute_loss`` is called with the trainer's attributes
set as ``KTOTrainer.__init__`` sets them for KTOConfig's defaults (loss_type "kto", so calculate_KL; beta 0.1,
desirable and undesirable weights 1.0), then ``loss.backward()``, the optimizer step and
``zero_grad(set_to_none=True)`` as the Trainer's training_step does. What it runs, as KTOTrainer sets it up:

- the batch is ``DataCollatorForUnpairedPreference``'s: batch unpaired rows (not doubled as DPO's pairs), each with a
  desirable or undesirable label, a 32-token prompt masked out of the labels (completion_mask), and the KL rows
  (``KL_input_ids``: each prompt with the previous row's completion, ``_prepare_dataset``'s add_kl_completion_ids);
- ``_compute_loss``: the policy's forward on the KL rows under ``torch.no_grad()`` (``_compute_kl_logps``), the
  policy's forward with grad, then under ``torch.no_grad()`` the reference's forward on the KL rows and on the batch;
- the policy and the reference get TRL's fused LM head (``add_fused_lm_head``, KTOTrainer.__init__), the policy's with
  outputs log_probs, entropy and mean_logits;
- full fine-tuning: a second copy of the model as the reference; LoRA: none, the policy with its adapters disabled
  (``use_adapter(model, None)``); ref_model=precomputed: ``ref_logps`` and ``ref_KL_logps`` come with the batch;
- gradient checkpointing where recompute=full (KTOConfig's default, base_config.py), use_reentrant=False.

Usage:
    python validation/measure_kto.py                 # every case -> validation/measured_kto.partial.jsonl
    python validation/measure_kto.py --only lora     # the cases whose label says lora
    python validation/measure_kto.py --write         # validation/measured_kto.json from the cases finished
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
import torch.nn.functional as F  # noqa: F401  (TRL's loss reads it)
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
import measure_dpo  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402
from measure_dpo import LLAMA, LLAMA4, QWEN, QWEN4, WIDE  # noqa: E402

OUT = ROOT / "validation" / "measured_kto.json"
PARTIAL = ROOT / "validation" / "measured_kto.partial.jsonl"     # one line per finished case
PROMPT = measure_dpo.PROMPT

# (label, pycore inputs). batch counts unpaired examples (KTOConfig's per_device_train_batch_size, which must be > 1).
CASES = [
    ("llama small kto full bf16 b2s512", dict(**LLAMA, method="kto", precision="bf16", recompute="none",
                                              batch="2", seq="512")),
    ("llama small kto full bf16 gc b4s512", dict(**LLAMA, method="kto", precision="bf16", recompute="full",
                                                 batch="4", seq="512")),
    ("llama small kto full amp-bf16 b2s512", dict(**LLAMA, method="kto", precision="amp-bf16", recompute="none",
                                                  batch="2", seq="512")),
    ("llama small kto full precomputed bf16 b2s512", dict(**LLAMA, method="kto", ref_model="precomputed",
                                                          precision="bf16", recompute="none", batch="2", seq="512")),
    ("llama wide-MLP kto full bf16 b2s1024", dict(**WIDE, method="kto", precision="bf16", recompute="none",
                                                  batch="2", seq="1024")),
    ("llama wide-MLP kto lora qv bf16 gc b2s1024", dict(**WIDE, method="kto-lora", lora_targets="qv",
                                                        precision="bf16", recompute="full", batch="2", seq="1024")),
    ("llama small kto lora qv bf16 b4s512", dict(**LLAMA, method="kto-lora", lora_targets="qv", precision="bf16",
                                                 recompute="none", batch="4", seq="512")),
    ("llama small kto lora all-linear amp-bf16 gc b2s512", dict(**LLAMA, method="kto-lora", lora_targets="all-linear",
                                                                precision="amp-bf16", recompute="full", batch="2",
                                                                seq="512")),
    ("qwen small kto full bf16 b2s256", dict(**QWEN, method="kto", precision="bf16", recompute="none",
                                             batch="2", seq="256")),
    ("qwen 4L kto full amp-bf16 gc b2s512", dict(**QWEN4, method="kto", precision="amp-bf16", recompute="full",
                                                 batch="2", seq="512")),
    ("llama small kto full fp32 b2s512", dict(**LLAMA, method="kto", precision="fp32", recompute="none",
                                              batch="2", seq="512")),
    ("llama 4L kto full bf16 b4s256", dict(**LLAMA4, method="kto", precision="bf16", recompute="none",
                                           batch="4", seq="256")),
    ("qwen small kto lora attention bf16 b2s512", dict(**QWEN, method="kto-lora", lora_targets="attention",
                                                       precision="bf16", recompute="none", batch="2", seq="512")),
]


def policy_method(inputs):
    return {"kto": "full", "kto-lora": "lora"}[inputs["method"]]


def build(inputs):
    """The policy (and the reference) as plain fine-tuning builds them, with TRL's fused heads as KTOTrainer adds
    them (kto_trainer.py L967-972)."""
    from trl.trainer.utils import add_fused_lm_head

    plain = {k: v for k, v in inputs.items() if k != "ref_model"}
    plain["method"] = policy_method(inputs)
    values, arch, model = measure.build(plain)
    ref = None
    if plain["method"] == "full" and inputs.get("ref_model", "auto") == "auto":
        ref = copy.deepcopy(model)
        ref.eval()
        for p in ref.parameters():
            p.requires_grad_(False)
        add_fused_lm_head(ref)
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "mean_logits"))
    if plain["method"] == "lora":
        model = measure.with_lora(model, values)
    model.train()
    if values["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if plain["method"] == "lora":
            model.enable_input_require_grads()
    return values, arch, model, ref


def make_batch(values, arch, precomputed):
    """DataCollatorForUnpairedPreference's batch: batch rows, labels alternating desirable and undesirable, and the KL
    rows: each prompt followed by the previous row's completion (add_kl_completion_ids, kto_trainer.py L1150-1151)."""
    rows = values["batch"]
    ids = torch.randint(1, arch.vocab, (rows, values["seq"]))
    completion = torch.ones_like(ids)
    completion[:, :PROMPT] = 0
    kl_ids = torch.cat((ids[:, :PROMPT], torch.roll(ids[:, PROMPT:], 1, dims=0)), dim=1)
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "completion_mask": completion,
             "KL_input_ids": kl_ids, "KL_attention_mask": torch.ones_like(kl_ids),
             "KL_completion_mask": completion.clone(), "label": torch.arange(rows) % 2 == 0}
    if precomputed:
        batch["ref_logps"] = -torch.rand(rows) * 100
        batch["ref_KL_logps"] = -torch.rand(rows) * 100
    return batch


def trainer(model, ref, precomputed, autocast):
    """The attributes KTOTrainer._compute_loss reads, as KTOTrainer.__init__ sets them for KTOConfig's defaults."""
    from accelerate import Accelerator

    args = types.SimpleNamespace(gradient_checkpointing_kwargs={"use_reentrant": False})
    return types.SimpleNamespace(
        model=model, ref_model=ref, accelerator=Accelerator(cpu=True), args=args, precompute_ref_logps=precomputed,
        autocast=autocast,                              # not KTOTrainer's: what the Trainer's step wraps it in
        calculate_KL=True, loss_type="kto", beta=0.1, desirable_weight=1.0, undesirable_weight=1.0,
        aux_loss_enabled=False, _metrics=defaultdict(lambda: defaultdict(list)), _total_train_tokens=0, _tp_size=1,
        _compute_kl_logps=None)


class Phases(measure_dpo.Phases):
    """measure_dpo's phases, the policy's no_grad forward before its forward with grad named the KL forward."""

    def hooks(self, module, reference=False):
        def before(mod, args, kwargs):
            self.mark("before")

        def after(mod, args, kwargs, output):
            if torch.is_grad_enabled():
                self.graded = True
                self.mark("policy forward")
            else:
                self.mark("reference forward" if reference or getattr(self, "graded", False) else "KL forward")
        return (module.register_forward_pre_hook(before, with_kwargs=True),
                module.register_forward_hook(after, with_kwargs=True))


def step(kto, model, optimizer, batch, phases=None):
    """KTOTrainer._compute_loss, then backward, the optimizer step and zero_grad as the Trainer does."""
    from trl.trainer.kto_trainer import KTOTrainer

    kto._compute_kl_logps = types.MethodType(KTOTrainer._compute_kl_logps, kto)
    if phases:
        phases.graded = False
    with torch.autocast("cpu", dtype=torch.bfloat16) if kto.autocast else contextlib.nullcontext():
        loss = KTOTrainer._compute_loss(kto, model, batch, False)
    if phases:
        phases.mark("loss")
    loss.backward()
    del loss
    if phases:
        phases.mark("backward")
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if phases:
        phases.mark("optimizer step")


def run_case(label, inputs):
    torch.manual_seed(0)
    started = time.time()
    precomputed = inputs.get("ref_model") == "precomputed"
    values, arch, model, ref = build(inputs)
    impl = measure.optimizer_impl({k: v for k, v in inputs.items() if k != "ref_model"} | {"method": "full"})
    optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
    batch = make_batch(values, arch, precomputed)
    kto = trainer(model, ref, precomputed, values["precision"].startswith("amp-"))
    with cuda_autocast(True):
        step(kto, model, optimizer, batch)            # warm-up: optimizer state
    tracker = MemTracker()
    track = tracker._track_module_params_and_buffers
    tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(
        module, install_grad_hooks and policy_method(inputs) == "full")
    tracker.track_external(model, optimizer, *([ref] if ref is not None else []),
                           *(v for v in batch.values() if isinstance(v, torch.Tensor)))
    # as measure_dpo.py: the module hooks skip the forwards under no_grad (the policy runs three of them under LoRA)
    for name in ("_pre_fw_hook", "_post_fw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda *args, hook=hook: hook(*args) if torch.is_grad_enabled() else None)
    for name in ("_pre_bw_hook", "_post_bw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda module, args, hook=hook: hook(module, args)
                if module in tracker.memory_tracking else None)
    phases = Phases(tracker)
    handles = phases.hooks(model) + (phases.hooks(ref, reference=True) if ref is not None else ())
    with tracker, cuda_autocast(True):
        phases.mark("before")
        step(kto, model, optimizer, batch, phases)
    for handle in handles:
        handle.remove()
    overall = max(phases.peaks.values(), key=lambda p: p["Total"])
    params = sum(p.numel() for p in model.parameters())
    return {"label": label, "inputs": inputs, "tensor_mode": "real", "optimizer_impl": impl, "params": params,
            "reference_params": sum(p.numel() for p in ref.parameters()) if ref is not None else 0,
            "prompt_tokens": PROMPT, "peak_bytes": overall["Total"],
            "peak_breakdown": {k: v for k, v in overall.items() if k != "Total"},
            "phase_peaks": {name: p["Total"] for name, p in phases.peaks.items() if name != "before"},
            "phase_breakdown": {name: {k: v for k, v in p.items() if k != "Total"}
                                for name, p in phases.peaks.items() if name != "before"},
            "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text (a|b: either)")
    parser.add_argument("--write", action="store_true", help="write validation/measured_kto.json from the cases "
                                                             "finished so far (PARTIAL), in CASES' order")
    args = parser.parse_args()
    if args.write:
        import accelerate
        import peft
        import trl
        done = {r["label"]: r for r in map(json.loads, PARTIAL.read_text().splitlines())}
        results = [done[label] for label, _ in CASES if label in done]
        measure.write_record(OUT, f"Peak tensor bytes of one KTO step as TRL {trl.__version__}'s KTOTrainer runs it "
                             "(_compute_loss, backward, AdamW step), recorded by validation/measure_kto.py", results)
        record = json.loads(OUT.read_text())
        record = {**{k: v for k, v in record.items() if k != "cases"}, "trl": trl.__version__,
                  "peft": peft.__version__, "accelerate": accelerate.__version__, "cases": record["cases"]}
        OUT.write_text(json.dumps(record, indent=1) + "\n")
        return
    measure_dpo.cuda_like_fused_head()
    done = {json.loads(line)["label"] for line in PARTIAL.read_text().splitlines()} if PARTIAL.exists() else set()
    for label, inputs in CASES:
        if args.only and not any(word in label for word in args.only.split("|")):
            continue
        if label in done:           # finished in an earlier run (PARTIAL keeps it)
            continue
        result = run_case(label, inputs)
        phases = "  ".join(f"{k} {v / 2**20:7.1f}" for k, v in result["phase_peaks"].items())
        print(f"{label:52s} peak {result['peak_bytes'] / 2**20:8.1f} MiB  [{phases}]  {result['seconds']:5.1f}s",
              flush=True)
        with PARTIAL.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
