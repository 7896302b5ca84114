"""Measures torch DistributedDataParallel's gradient buckets with PyTorch's MemTracker, as validation/measure.py
measures single-GPU steps.

Dev-only: needs torch and transformers. One process forms a gloo group of one on this machine's loopback
(no other machine is contacted): the reducer builds the same buckets on every rank whatever the world size,
so a rank of a dp = N job holds what this one does. DDP wraps the model inside the tracked region, as the
Hugging Face Trainer wraps it before training, so the buckets it allocates are counted; two steps run, the
second with optimizer state, and the peak is the larger. pycore's estimate for the same inputs with dp=2
(data parallelism through DDP) is compared in tests/test_ddp.py.

Usage:
    pip install torch==2.13.0 transformers
    python validation/measure_ddp.py             # -> validation/measured_ddp.json
"""

import os
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402

OUT = ROOT / "validation" / "measured_ddp.json"

CASES = [
    ("llama small fp32 ddp b4s512", dict(model="llama-3.1-8b", **measure.SMALL, kv_heads="2", vocab="32000",
                                         precision="fp32", batch="4", seq="512")),
    ("llama small bf16 ddp b4s512", dict(model="llama-3.1-8b", **measure.SMALL, kv_heads="2", vocab="32000",
                                         precision="bf16", batch="4", seq="512")),
    ("gpt2 fp32 ddp b2s512", dict(model="gpt2", precision="fp32", batch="2", seq="512")),
]


def run_case(label, inputs):
    torch.manual_seed(0)
    started = time.time()
    values, arch, model = measure.build(inputs)
    model.train()
    batch = measure.make_batch(values, arch)
    impl = measure.optimizer_impl(inputs)
    tracker = MemTracker()
    tracker.track_external(model, *batch.values())
    with tracker, cuda_autocast(True):
        wrapped = torch.nn.parallel.DistributedDataParallel(model)
        optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
        for _ in range(2):
            measure.train_step(wrapped, batch, optimizer, values["precision"], None)
            tracker.reset_mod_stats()
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    return {"label": label, "inputs": inputs, "tensor_mode": "real", "optimizer_impl": impl,
            "params": sum(p.numel() for p in model.parameters()), "peak_bytes": peak["Total"],
            "peak_breakdown": {k: v for k, v in peak.items() if k != "Total"}, "seconds": round(time.time() - started, 1)}


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        results = []
        for label, inputs in CASES:
            result = run_case(label, inputs)
            print(f"{label:36s} peak {result['peak_bytes'] / 2**20:9.1f} MiB  params {result['params']:>12,d}", flush=True)
            results.append(result)
    finally:
        dist.destroy_process_group()
    measure.write_record(OUT, "Peak tensor bytes of real PyTorch steps of a DDP-wrapped model (gloo, one rank), recorded by "
                         "validation/measure_ddp.py", results)


if __name__ == "__main__":
    main()
