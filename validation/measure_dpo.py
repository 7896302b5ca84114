"""Measures one DPO training step as TRL's DPOTrainer runs it, on the CPU under PyTorch's MemTracker, as
validation/measure.py measures the other training cases.

Dev-only: needs torch, transformers, peft, accelerate and trl (TRL 1.16.0 was read and run). The step is TRL's own
code, not a re-implementation: ``trl.trainer.dpo_trainer.DPOTrainer._compute_loss`` is called with the trainer's
attributes set as ``DPOTrainer.__init__`` sets them for DPOConfig's defaults (loss_type ["sigmoid"], beta 0.1,
f_divergence_type reverse_kl, no ld_alpha, no WPO weighting), then ``loss.backward()``, the optimizer step and
``zero_grad(set_to_none=True)`` as the Trainer's training_step does. What it runs, as DPOTrainer sets it up:

- the policy and the reference model each get TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``,
  DPOTrainer.__init__): log-probabilities through ``trl.kernels.chunked_logprob.ChunkedLogProbFunction``, tiles of
  TOKEN_CHUNK_SIZE tokens × 32,768 vocabulary columns, the logits never whole; the policy's head also computes
  entropy, mean logits and top-1 (its ``outputs``);
- chosen and rejected sequences are one batch of 2 × pairs rows ([chosen; rejected], DataCollatorForPreference),
  the prompt masked out of the labels (completion_mask);
- full fine-tuning: a second copy of the model as the reference (``create_model_from_path`` in the policy's dtype),
  in eval mode, run under ``torch.no_grad()`` after the policy's forward; LoRA (a peft_config): no reference model,
  the policy with its adapters disabled (``use_adapter(model, None)``); ref_model=precomputed
  (``precompute_ref_log_probs=True``): the reference log-probs come with the batch and no reference model is held;
- gradient checkpointing where recompute=full (DPOConfig's default gradient_checkpointing=True), use_reentrant=False,
  and ``enable_input_require_grads()`` for a PEFT policy as DPOTrainer.__init__ does.

CUDA-like allocation: besides measure.py's set-up (512-byte rounding, CUDA's dropout mask), the fused head takes its
CUDA path: on a Triton device only the scored positions are gathered (``compact``, trl/trainer/utils.py
add_fused_lm_head), and the tile folds and fp32 accumulations run inside Triton kernels and ``torch.addmm(...,
out_dtype=float32, out=acc)``, allocating nothing. On the CPU TRL folds with torch ops; those run here untracked
(their results are written in place into tracked tensors), so the CPU's temporaries a GPU never makes are not counted.

Every case runs real tensors on small configs (PEFT and the fused head need them), in bf16 (the model loaded in
bf16) or amp-bf16 (TRL's default for a model it loads by name: fp32 weights, DPOConfig's bf16=True autocast). Each record holds the peak
by category and the peak of each phase: the policy's forward, the reference forward (under no_grad), the
backward, the optimizer step.

Usage:
    pip install torch==2.13.0 transformers peft trl
    python validation/measure_dpo.py                 # every case -> validation/measured_dpo.partial.jsonl
    python validation/measure_dpo.py --only lora     # the cases whose label says lora
    python validation/measure_dpo.py --write         # validation/measured_dpo.json from the cases finished
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
from torch.utils._python_dispatch import _disable_current_modes

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402

OUT = ROOT / "validation" / "measured_dpo.json"
PARTIAL = ROOT / "validation" / "measured_dpo.partial.jsonl"     # one line per finished case
PROMPT = 32         # prompt tokens of each sequence, masked out of the labels; the rest is the completion

LLAMA = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000")
LLAMA4 = dict(model="llama-3.1-8b", layers="4", hidden="768", heads="12", kv_heads="4", ffn="2048", vocab="32000")
QWEN = dict(model="qwen2.5-0.5b", layers="2", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000")
# An MLP 32 times the hidden size (Llama 3 8B's is 3.5), so that the reference forward's peak is a layer's MLP under
# no_grad rather than the fused head's 4,096 × 32,768 tile, as in full-size models at a few thousand tokens
WIDE = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="16384", vocab="32000")
QWEN4 = dict(model="qwen2.5-0.5b", layers="4", hidden="896", heads="14", kv_heads="2", ffn="2432", vocab="16000")

# (label, pycore inputs). batch counts preference pairs (TRL's per_device_train_batch_size): 2 × batch sequences.
CASES = [
    ("llama small dpo full bf16 b1s512", dict(**LLAMA, method="dpo", precision="bf16", recompute="none",
                                              batch="1", seq="512")),
    ("llama small dpo full bf16 b2s512", dict(**LLAMA, method="dpo", precision="bf16", recompute="none",
                                              batch="2", seq="512")),
    ("llama small dpo full bf16 gc b2s512", dict(**LLAMA, method="dpo", precision="bf16", recompute="full",
                                                 batch="2", seq="512")),
    ("llama 4L dpo full bf16 b2s256", dict(**LLAMA4, method="dpo", precision="bf16", recompute="none",
                                           batch="2", seq="256")),
    ("llama small dpo full precomputed bf16 b2s512", dict(**LLAMA, method="dpo", ref_model="precomputed",
                                                          precision="bf16", recompute="none", batch="2", seq="512")),
    ("llama wide-MLP dpo full bf16 b2s1024", dict(**WIDE, method="dpo", precision="bf16", recompute="none",
                                                  batch="2", seq="1024")),
    ("llama wide-MLP dpo lora qv bf16 gc b2s1024", dict(**WIDE, method="dpo-lora", lora_targets="qv", precision="bf16",
                                                        recompute="full", batch="2", seq="1024")),
    ("llama small dpo full amp-bf16 b2s512", dict(**LLAMA, method="dpo", precision="amp-bf16", recompute="none",
                                                  batch="2", seq="512")),
    ("llama small dpo lora qv amp-bf16 gc b2s512", dict(**LLAMA, method="dpo-lora", lora_targets="qv",
                                                        precision="amp-bf16", recompute="full", batch="2",
                                                        seq="512")),
    ("qwen small dpo full bf16 b2s256", dict(**QWEN, method="dpo", precision="bf16", recompute="none",
                                             batch="2", seq="256")),
    ("qwen 4L dpo full bf16 gc b1s512", dict(**QWEN4, method="dpo", precision="bf16", recompute="full",
                                             batch="1", seq="512")),
    ("llama small dpo lora qv bf16 b2s512", dict(**LLAMA, method="dpo-lora", lora_targets="qv", precision="bf16",
                                                 recompute="none", batch="2", seq="512")),
    ("llama small dpo lora all-linear bf16 gc b2s512", dict(**LLAMA, method="dpo-lora", lora_targets="all-linear",
                                                            precision="bf16", recompute="full", batch="2",
                                                            seq="512")),
    ("qwen small dpo lora attention bf16 b1s512", dict(**QWEN, method="dpo-lora", lora_targets="attention",
                                                       precision="bf16", recompute="none", batch="1", seq="512")),
]


def cuda_like_fused_head():
    """The fused head's CUDA path on the CPU (the module docstring): compact gathering, untracked tile folds."""
    import trl.kernels.chunked_logprob as chunked
    import trl.trainer.utils as trl_utils

    trl_utils._use_triton = lambda device: True

    def untracked(fn):
        def run(*args, **kwargs):
            with _disable_current_modes():
                return fn(*args, **kwargs)
        return run
    chunked._forward_tile = untracked(chunked._forward_tile)
    chunked._backward_tile = untracked(chunked._backward_tile)
    chunked._addmm_fp32 = untracked(chunked._addmm_fp32)


def policy_method(inputs):
    return {"dpo": "full", "dpo-lora": "lora", "dpo-qlora": "qlora"}[inputs["method"]]


def build(inputs):
    """The policy (and the reference) as plain fine-tuning builds them, with TRL's fused heads."""
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
    add_fused_lm_head(model, outputs=("log_probs", "entropy", "mean_logits", "is_top1"))
    if plain["method"] == "lora":
        model = measure.with_lora(model, values)
    model.train()
    if values["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if plain["method"] == "lora":
            model.enable_input_require_grads()
    return values, arch, model, ref


def make_batch(values, arch, precomputed):
    """DataCollatorForPreference's batch: chosen rows then rejected rows, the prompt out of completion_mask."""
    rows = 2 * values["batch"]
    ids = torch.randint(1, arch.vocab, (rows, values["seq"]))
    completion = torch.ones_like(ids)
    completion[:, :PROMPT] = 0
    batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "completion_mask": completion}
    if precomputed:
        batch["ref_chosen_logps"] = -torch.rand(values["batch"]) * 100
        batch["ref_rejected_logps"] = -torch.rand(values["batch"]) * 100
    return batch


def trainer(model, ref, precomputed, autocast):
    """The attributes DPOTrainer._compute_loss reads, as DPOTrainer.__init__ sets them for DPOConfig's defaults."""
    from accelerate import Accelerator

    args = types.SimpleNamespace(gradient_checkpointing_kwargs={"use_reentrant": False})
    return types.SimpleNamespace(
        model=model, ref_model=ref, accelerator=Accelerator(cpu=True), args=args, precompute_ref_logps=precomputed,
        autocast=autocast,                              # not DPOTrainer's: what the Trainer's step wraps it in
        aux_loss_enabled=False, ld_alpha=None, f_divergence_type="reverse_kl", loss_types=["sigmoid"],
        loss_weights=[1.0], beta=0.1, label_smoothing=0.0, use_weighting=False, _metrics=defaultdict(
            lambda: defaultdict(list)), _total_train_tokens=0, _tp_size=1)


class Phases:
    """The peak of each phase of the step, by category: MemTracker's peak is read and restarted at each mark; the
    step's peak is the largest of them."""

    def __init__(self, tracker):
        self.tracker, self.peaks = tracker, {}

    def mark(self, name):
        (peak,) = self.tracker.get_tracker_snapshot("peak").values() or ({"Total": 0},)
        self.peaks[name] = max(self.peaks.get(name, {"Total": -1}), dict(peak), key=lambda p: p["Total"])
        # MemTracker keeps the peak's total apart from its snapshot: both restart from the bytes live now
        current = self.tracker.get_tracker_snapshot("current")
        self.tracker._peak_mem_snap = current
        self.tracker._peak_mem = {device: snap["Total"] for device, snap in current.items()}

    def hooks(self, module):
        """Mark at each forward of ``module``: the policy's (with grad) and the reference's (no_grad)."""
        def before(mod, args, kwargs):
            self.mark("before")

        def after(mod, args, kwargs, output):
            self.mark("policy forward" if torch.is_grad_enabled() else "reference forward")
        return (module.register_forward_pre_hook(before, with_kwargs=True),
                module.register_forward_hook(after, with_kwargs=True))


def step(dpo, model, optimizer, batch, phases=None):
    """DPOTrainer._compute_loss, then backward, the optimizer step and zero_grad as the Trainer does."""
    from trl.trainer.dpo_trainer import DPOTrainer

    # amp-bf16: the Trainer computes the loss under autocast (bf16=True, fp32 weights; accelerate wraps the forward)
    with torch.autocast("cpu", dtype=torch.bfloat16) if dpo.autocast else contextlib.nullcontext():
        loss = DPOTrainer._compute_loss(dpo, model, batch, False)
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
    dpo = trainer(model, ref, precomputed, values["precision"].startswith("amp-"))
    with cuda_autocast(True):
        step(dpo, model, optimizer, batch)            # warm-up: optimizer state
    tracker = MemTracker()
    # as measure.py: frozen parameters take no gradient hooks (the reference, a LoRA policy's base)
    track = tracker._track_module_params_and_buffers
    tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(
        module, install_grad_hooks and policy_method(inputs) == "full")
    tracker.track_external(model, optimizer, *([ref] if ref is not None else []), *batch.values())
    # A LoRA policy is called twice (its reference forward runs it with the adapters disabled); MemTracker's per-module
    # statistics allow one call of a module. They are not read here, so the module hooks skip the forwards run under
    # no_grad; every allocation is still counted (MemTracker's dispatch mode sees them all).
    # (ModTracker still reports those modules to the backward hooks, which skip them too.)
    for name in ("_pre_fw_hook", "_post_fw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda *args, hook=hook: hook(*args) if torch.is_grad_enabled() else None)
    for name in ("_pre_bw_hook", "_post_bw_hook"):
        hook = getattr(tracker, name)
        setattr(tracker, name, lambda module, args, hook=hook: hook(module, args)
                if module in tracker.memory_tracking else None)
    phases = Phases(tracker)
    handles = phases.hooks(model) + (phases.hooks(ref) if ref is not None else ())
    overall = None
    with tracker, cuda_autocast(True):
        phases.mark("before")
        step(dpo, model, optimizer, batch, phases)
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
    parser.add_argument("--write", action="store_true", help="write validation/measured_dpo.json from the cases "
                                                             "finished so far (PARTIAL), in CASES' order")
    args = parser.parse_args()
    if args.write:
        import trl
        done = {r["label"]: r for r in map(json.loads, PARTIAL.read_text().splitlines())}
        results = [done[label] for label, _ in CASES if label in done]
        measure.write_record(OUT, f"Peak tensor bytes of one DPO step as TRL {trl.__version__}'s DPOTrainer runs it "
                             "(_compute_loss, backward, AdamW step), recorded by validation/measure_dpo.py", results)
        import accelerate
        import peft
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
        print(f"{label:48s} peak {result['peak_bytes'] / 2**20:8.1f} MiB  [{phases}]  {result['seconds']:5.1f}s",
              flush=True)
        with PARTIAL.open("a") as handle:
            handle.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
