"""Accelerators as they run (issue 28): each GPU preset names its runtime, and off CUDA nothing of CUDA's
overheads is borrowed (pycore/memory/device.py; presets/gpus.json 'runtime')."""

import pytest

from pycore import estimate
from pycore.model import catalog

RUNTIMES = {"NVIDIA": "CUDA", "AMD": "ROCm", "Intel": "Gaudi", "Apple": "Metal", "Google": "XLA"}


@pytest.mark.parametrize("gpu", sorted(catalog.gpus()))
def test_every_gpu_names_the_runtime_of_its_vendor(gpu):
    entry = catalog.gpus()[gpu]
    assert entry["runtime"] == RUNTIMES[entry["vendor"]]


def test_cuda_keeps_its_context_and_allocator_cache():
    keys = {p.key for p in estimate({"model": "llama-3.1-8b", "gpu": "h100-sxm-80gb"}).breakdown}
    assert {"cuda_context", "allocator_cache"} <= keys


def test_rocm_keeps_pytorchs_allocator_cache_but_no_cuda_context():
    result = estimate({"model": "llama-3.1-8b", "gpu": "mi300x"})
    keys = {p.key for p in result.breakdown}
    assert "allocator_cache" in keys and "cuda_context" not in keys
    assert any("runs ROCm" in w and "not borrowed" in w for w in result.warnings)


@pytest.mark.parametrize("gpu", ["tpu-v5p", "apple-m4-max-128gb", "gaudi3"])
def test_other_runtimes_count_the_tensors_and_say_so(gpu):
    result = estimate({"model": "llama-3.1-8b", "gpu": gpu})
    assert result.total_bytes == result.peak_bytes
    assert any("nothing the device holds beyond the tensors is counted" in w for w in result.warnings)


def test_a_given_overhead_replaces_the_note():
    result = estimate({"model": "llama-3.1-8b", "gpu": "tpu-v5p", "overhead": "2GiB"})
    assert result.total_bytes == result.peak_bytes + 2 * 2**30
    assert not any("runs XLA" in w for w in result.warnings)
