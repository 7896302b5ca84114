"""torch DDP's gradient buckets (issue 27: "DDP's gradient buckets are counted where DDP is used").

validation/measured_ddp.json: validation/measure_ddp.py wraps the model in DistributedDataParallel (gloo, one
rank) inside PyTorch's MemTracker and records the peak of a real step (torch 2.13.0, transformers 5.24).
"""

import json
import sys
from pathlib import Path

import pytest

from pycore import estimate

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

CASES = json.loads((ROOT / "validation" / "measured_ddp.json").read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["label"])
def test_a_ddp_rank_within_3_percent_of_the_measured_step(case):
    estimated = estimate({**compare.measured_inputs(case["inputs"]), "dp": "2"}).peak_bytes
    assert abs(estimated - case["peak_bytes"]) <= 0.03 * case["peak_bytes"]


def _buckets(setup):
    return sum(p.bytes for p in estimate(setup).pools if p.key == "ddp_buckets")


def test_the_buckets_are_a_second_copy_of_the_gradients_where_ddp_is_used():
    base = {"model": "llama-3.1-8b", "dp": "8"}
    # the gradients and the embedding's, made last (pycore.memory.model_states): bf16, the preset's parameter count
    gradients = sum(p.bytes for p in estimate(base).pools if p.key in ("gradients", "embedding_gradient"))
    assert _buckets(base) == gradients == 2 * 8_030_261_248
    assert _buckets({**base, "dp": "1"}) == 0                       # no data parallelism, no DDP
    assert _buckets({**base, "zero": "2"}) == 0                     # DeepSpeed shards instead
    assert _buckets({**base, "fsdp": "FULL_SHARD"}) == 0
    assert _buckets({**base, "framework": "megatron"}) == 0         # Megatron's own contiguous buffer
    lora = {**base, "method": "lora"}
    assert _buckets(lora) == sum(p.bytes for p in estimate(lora).pools if p.key == "gradients")
