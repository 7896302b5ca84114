"""Measures gradient accumulation as the Hugging Face Trainer runs it, with PyTorch's MemTracker, as
validation/measure.py measures single micro-batch steps (the same model builder, batches, optimizers, CUDA
autocast rules and dropout masks).

Dev-only: needs torch and transformers (peft for the LoRA case). The measured step is the Trainer's loop
(transformers 5 Trainer.training_step): for each of N micro-batches, forward, ``loss / N``, ``backward()``
into ``.grad`` (the parameters' dtype); then ``optimizer.step()`` and ``zero_grad(set_to_none=True)``. A
warm-up step with the same loop creates the optimizer state first. MemTracker's per-module statistics
cannot follow a module entered again, so ``reset_mod_stats()`` runs between micro-batches; the device-wide
peak it records is kept across the resets (torch/distributed/_tools/mem_tracker.py: reset_mod_stats clears
the module statistics only). Each micro-batch is a fresh batch made before tracking.

Usage:
    pip install torch==2.13.0 transformers peft
    python validation/measure_accumulation.py          # -> validation/measured_accumulation.json
"""

import contextlib
import sys
import time
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402

OUT = ROOT / "validation" / "measured_accumulation.json"

SMALL = dict(measure.SMALL, kv_heads="2", vocab="32000")
# Each the twin of a validation/measure.py case (measured.json) with micro-batches added.
CASES = [
    ("llama-3.2-1b bf16 accum 4 b2s2048", dict(model="llama-3.2-1b", precision="bf16", batch="2", seq="2048",
                                               microbatches="4")),
    ("llama-3.2-1b amp-bf16 accum 4 b1s2048", dict(model="llama-3.2-1b", precision="amp-bf16", batch="1",
                                                   seq="2048", microbatches="4")),
    ("llama-3.2-1b bf16 full-recompute accum 2 b8s2048", dict(model="llama-3.2-1b", precision="bf16",
                                                              recompute="full", batch="8", seq="2048",
                                                              microbatches="2")),
    ("llama-3.1-8b bf16 accum 4 b1s1024", dict(model="llama-3.1-8b", precision="bf16", batch="1", seq="1024",
                                               microbatches="4")),
    ("qwen2.5-0.5b fp32 accum 4 b4s1024", dict(model="qwen2.5-0.5b", precision="fp32", batch="4", seq="1024",
                                               microbatches="4")),
    ("gpt2 fp32 accum 8 b8s1024", dict(model="gpt2", precision="fp32", batch="8", seq="1024", microbatches="8")),
    ("mistral-7b bf16 accum 2 b1s2048", dict(model="mistral-7b-v0.1", precision="bf16", batch="1", seq="2048",
                                             microbatches="2")),
    ("llama small lora all-linear bf16 accum 4 b4s1024 real", dict(model="llama-3.1-8b", **SMALL, method="lora",
                                                                   lora_targets="all-linear", precision="bf16",
                                                                   batch="4", seq="1024", microbatches="4")),
]


def accumulate(model, batches, optimizer, precision, tracker=None):
    """The Trainer's loop over the micro-batches, then the optimizer step."""
    for batch in batches:
        with torch.autocast("cpu", dtype=measure.DTYPES[precision[4:]]) if precision.startswith("amp-") \
                else contextlib.nullcontext():
            loss = model(**batch).loss / len(batches)
        loss.backward()
        del loss
        if tracker is not None:
            tracker.reset_mod_stats()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def run_case(label, inputs):
    torch.manual_seed(0)
    started = time.time()
    fake = "real" not in label
    impl = measure.optimizer_impl(inputs)
    with FakeTensorMode(allow_non_fake_inputs=False) if fake else contextlib.nullcontext():
        values, arch, model = measure.build(inputs)
        if values["method"] == "lora":
            model = measure.with_lora(model, values)
        model.train()
        if values["recompute"] == "full":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
        batches = [measure.make_batch(values, arch) for _ in range(values["microbatches"])]
        with cuda_autocast(True):
            accumulate(model, batches, optimizer, values["precision"])        # warm-up: optimizer state
        tracker = MemTracker()
        if values["method"] != "full":       # as measure.py: frozen parameters take no gradient hooks
            track = tracker._track_module_params_and_buffers
            tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(module, False)
        tracker.track_external(model, optimizer, *(t for b in batches for t in b.values()))
        with tracker, cuda_autocast(True):
            accumulate(model, batches, optimizer, values["precision"], tracker)
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    return {"label": label, "inputs": inputs, "tensor_mode": "fake" if fake else "real", "optimizer_impl": impl,
            "params": sum(p.numel() for p in model.parameters()), "peak_bytes": peak["Total"],
            "peak_breakdown": {k: v for k, v in peak.items() if k != "Total"}, "seconds": round(time.time() - started, 1)}


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    results = []
    for label, inputs in CASES:
        if only and only not in label:
            continue
        result = run_case(label, inputs)
        print(f"{label:56s} peak {result['peak_bytes'] / 2**30:8.3f} GiB  {result['seconds']:6.1f}s", flush=True)
        results.append(result)
    if only:
        return
    measure.write_record(OUT, "Peak tensor bytes of real PyTorch steps with gradient accumulation (the Trainer's loop), "
                         "recorded by validation/measure_accumulation.py", results)


if __name__ == "__main__":
    main()
