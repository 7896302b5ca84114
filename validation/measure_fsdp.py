"""Measure the per-GPU peak of FSDP2-sharded training steps, for validating pycore's ZeRO/FSDP model.

Dev-only (torch, transformers). One process plays rank 0 of a world of N with PyTorch's "fake" process
group (collectives return at once, tensors are real), so FSDPMemTracker sees exactly what one GPU of N
would hold: its shards, the all-gathered layers in flight, the reduce-scatter buffers. Each transformer
layer and the root are wrapped with fully_shard, as torchtitan does; the optimizer is foreach AdamW.

Usage: python validation/measure_fsdp.py      # writes validation/measured_fsdp.json
"""

import json
import platform
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import transformers
from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.testing._internal.distributed.fake_pg import FakeStore

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402

OUT = ROOT / "validation" / "measured_fsdp.json"
SMALL = dict(model="llama-3.1-8b", layers="4", hidden="1024", heads="16", kv_heads="4", ffn="2816", vocab="32000")
CASES = [
    ("llama small fp32 FULL_SHARD dp4 b4s1024", dict(**SMALL, precision="fp32", fsdp="FULL_SHARD", dp="4", batch="4", seq="1024")),
    ("llama small fp32 FULL_SHARD dp8 b1s256", dict(**SMALL, precision="fp32", fsdp="FULL_SHARD", dp="8", batch="1", seq="256")),
    ("llama small bf16 FULL_SHARD dp8 b8s1024", dict(**SMALL, precision="bf16", fsdp="FULL_SHARD", dp="8", batch="8", seq="1024")),
    ("llama small bf16 FULL_SHARD dp2 b2s512", dict(**SMALL, precision="bf16", fsdp="FULL_SHARD", dp="2", batch="2", seq="512")),
    ("llama small fp32 SHARD_GRAD_OP dp4 b2s512", dict(**SMALL, precision="fp32", fsdp="SHARD_GRAD_OP", dp="4", batch="2", seq="512")),
    ("llama small bf16 SHARD_GRAD_OP dp8 b1s128", dict(**SMALL, precision="bf16", fsdp="SHARD_GRAD_OP", dp="8", batch="1", seq="128")),
    ("llama small bf16 FULL_SHARD full-recompute dp4 b8s1024", dict(**SMALL, precision="bf16", fsdp="FULL_SHARD", dp="4", recompute="full", batch="8", seq="1024")),
    # gradient accumulation, FSDP2's default: every micro-batch reduce-scatters into the sharded gradient
    ("llama small bf16 FULL_SHARD dp4 b4s1024 accum 4", dict(**SMALL, precision="bf16", fsdp="FULL_SHARD", dp="4", batch="4", seq="1024", microbatches="4", grad_sync="every")),
    # and as the Trainer runs it (accelerator.no_sync until the last micro-batch: every gradient unsharded)
    ("llama small bf16 FULL_SHARD dp4 b4s1024 accum 4 no-sync", dict(**SMALL, precision="bf16", fsdp="FULL_SHARD", dp="4", batch="4", seq="1024", microbatches="4", grad_sync="last")),
    ("llama small fp32 FULL_SHARD dp8 b2s1024 accum 2", dict(**SMALL, precision="fp32", fsdp="FULL_SHARD", dp="8", batch="2", seq="1024", microbatches="2", grad_sync="every")),
    ("qwen small fp32 FULL_SHARD dp4 b4s512", dict(model="qwen2.5-0.5b", layers="4", hidden="896", heads="14", kv_heads="2", ffn="4864", vocab="32000", precision="fp32", fsdp="FULL_SHARD", dp="4", batch="4", seq="512")),
]


def run_case(label, inputs):
    world = int(inputs["dp"])
    dist.init_process_group("fake", rank=0, world_size=world, store=FakeStore())
    try:
        torch.manual_seed(0)
        values, arch, model = measure.build(inputs)
        params = sum(p.numel() for p in model.parameters())
        model.train()
        if values["recompute"] == "full":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        mesh = init_device_mesh("cpu", (world,))
        reshard = values["fsdp"] == "FULL_SHARD"
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
        batches = [measure.make_batch(values, arch) for _ in range(values["microbatches"])]

        def step(tracker=None):
            # the Trainer's accumulation loop (one micro-batch when microbatches=1); FSDP2 keeps gradient sync
            # on, its default (FSDPModule.set_requires_gradient_sync), so each backward reduce-scatters
            for i, batch in enumerate(batches):
                if values["grad_sync"] == "last":
                    model.set_requires_gradient_sync(i == len(batches) - 1)
                (model(**batch).loss / len(batches)).backward()
                if tracker is not None:      # its module statistics cannot follow a module entered again
                    tracker.reset_mod_stats()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        started = time.time()
        step()
        tracker = FSDPMemTracker(model, optimizer)
        tracker.track_inputs(tuple(t for batch in batches for t in batch.values()))
        with tracker:
            step(tracker)
        (device_peak,) = tracker.get_tracker_snapshot("peak").values()
        return {"label": label, "inputs": inputs, "params": params, "peak_bytes": device_peak["Total"],
                "peak_breakdown": {str(k): v for k, v in device_peak.items() if k != "Total"},
                "seconds": round(time.time() - started, 1)}
    finally:
        dist.destroy_process_group()


def main():
    results = []
    for label, inputs in CASES:
        result = run_case(label, inputs)
        print(f"{label:56s} peak {result['peak_bytes'] / 2**30:8.3f} GiB  {result['seconds']:6.1f}s", flush=True)
        results.append(result)
    OUT.write_text(json.dumps({
        "about": "Per-GPU peak of FSDP2 training steps, recorded by validation/measure_fsdp.py",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "machine": platform.machine(), "cases": results}, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(results)} cases)")


if __name__ == "__main__":
    main()
