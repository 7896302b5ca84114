"""Measures torchtitan's selective activation checkpointing (recompute=op and recompute=layer) on transformers'
Llama with PyTorch's MemTracker, as validation/measure.py measures the other cases.

Dev-only: needs torch and transformers. torchtitan itself is not installed: its policy is applied to the
transformers model exactly as pytorch/torchtitan torchtitan/distributed/activation_checkpoint.py@v0.2.2 writes
it: every decoder layer is checkpointed (use_reentrant=False) with a selective-checkpoint context whose policy
saves the outputs of the ops on torchtitan's save list, except every second aten.mm counted per layer (op), or
every 2nd layer is checkpointed whole (layer, selective_ac_option = "2"). On the CPU, SDPA's flash kernel is
aten._scaled_dot_product_flash_attention_for_cpu, which stands in for the CUDA kernel on the save list.

Usage:
    pip install torch==2.13.0 transformers
    python validation/measure_sac.py             # -> validation/measured_sac.json
"""

import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402

OUT = ROOT / "validation" / "measured_sac.json"
# torchtitan's _save_list (activation_checkpoint.py@v0.2.2), with the CPU's flash kernel for the CUDA one.
SAVE = {torch.ops.aten.mm.default, torch.ops.aten._scaled_dot_product_efficient_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention.default,
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default, torch.ops.aten.max.default}

CASES = [
    ("llama-3.1-8b bf16 op-sac b4s8192", dict(model="llama-3.1-8b", precision="bf16", recompute="op",
                                              batch="4", seq="8192")),
    ("llama-3.1-8b bf16 layer-sac b2s8192", dict(model="llama-3.1-8b", precision="bf16", recompute="layer",
                                                 batch="2", seq="8192")),
    ("llama-3.1-8b amp-bf16 op-sac b2s8192", dict(model="llama-3.1-8b", precision="amp-bf16", recompute="op",
                                                  batch="2", seq="8192")),
    ("llama-3.2-1b bf16 op-sac b4s2048", dict(model="llama-3.2-1b", precision="bf16", recompute="op",
                                              batch="4", seq="2048")),
    ("llama-3.2-1b bf16 layer-sac b4s2048", dict(model="llama-3.2-1b", precision="bf16", recompute="layer",
                                                 batch="4", seq="2048")),
]


def op_context():
    """A fresh selective-checkpoint context per checkpointed call, counting its matmuls (torchtitan's)."""
    meta: "defaultdict[str, int]" = defaultdict(int)

    def policy(ctx, func, *args, **kwargs):
        key = f"{'recompute' if ctx.is_recompute else 'forward'}_mm_count"
        if func == torch.ops.aten.mm.default:
            meta[key] += 1
        keep = func in SAVE and not (func == torch.ops.aten.mm.default and meta[key] % 2 == 0)
        return CheckpointPolicy.MUST_SAVE if keep else CheckpointPolicy.PREFER_RECOMPUTE
    return create_selective_checkpoint_contexts(policy)


def checkpoint_as_torchtitan(model, mode):
    if mode == "op":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False,
                                                                           "context_fn": op_context})
    else:                                        # layer: torchtitan wraps the 2nd, 4th, ... block whole
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        for index, layer in enumerate(model.model.layers):
            layer.gradient_checkpointing = (index + 1) % 2 == 0


def run_case(label, inputs):
    torch.manual_seed(0)
    started = time.time()
    with FakeTensorMode(allow_non_fake_inputs=False):
        values, arch, model = measure.build(inputs)
        checkpoint_as_torchtitan(model, values["recompute"])
        tracker = measure.measure_train({**values, "recompute": "none"}, arch, model, measure.optimizer_impl(inputs))
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    return {"label": label, "inputs": inputs, "tensor_mode": "fake", "optimizer_impl": measure.optimizer_impl(inputs),
            "peak_bytes": peak["Total"], "peak_breakdown": {k: v for k, v in peak.items() if k != "Total"},
            "seconds": round(time.time() - started, 1)}


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else None
    results = []
    for label, inputs in CASES:
        if only and only not in label:
            continue
        result = run_case(label, inputs)
        print(f"{label:40s} peak {result['peak_bytes'] / 2**30:8.3f} GiB  {result['seconds']:6.1f}s", flush=True)
        results.append(result)
    if only:
        return
    measure.write_record(OUT, "Peak tensor bytes of real PyTorch steps under torchtitan's selective activation checkpointing, "
                         "recorded by validation/measure_sac.py", results)


if __name__ == "__main__":
    main()
