"""PyTorch's cuBLAS workspaces in the peak (pycore/memory/device.py): one a thread that runs matrix products, from
the caching allocator, sized by CUBLAS_WORKSPACE_CONFIG or the GPU's default (aten/src/ATen/cuda/CublasHandlePool.cpp)."""

from pycore import estimate

MIB = 2**20
BASE = {"model": "llama-3.2-1b", "batch": "1", "seq": "512"}


def _workspace(inputs):
    return {p.key: p for p in estimate(inputs).breakdown}.get("blas_workspace")


def test_two_hopper_workspaces_in_a_training_step_one_in_generate():
    # validation/measured_cuda.json on an H200: every training case of a real model 64 MiB over the CPU's MemTracker,
    # generate() about 32 MiB
    assert _workspace({**BASE, "gpu": "h200-141gb"}).bytes == 2 * 32 * MIB
    assert _workspace({**BASE, "gpu": "h200-141gb", "mode": "infer"}).bytes == 32 * MIB


def test_other_gpus_take_the_default_config_and_amd_hipblas_its_own():
    # ":4096:2:16:8": 2 × 4 MiB + 8 × 16 KiB off Hopper; hipBLAS 128 MiB on gfx94x (MI300X), 32 MiB on gfx90a
    assert _workspace({**BASE, "gpu": "a100-40gb"}).bytes == 2 * (8 * MIB + 128 * 1024)
    assert _workspace({**BASE, "gpu": "mi300x"}).bytes == 2 * 128 * MIB
    assert _workspace({**BASE, "gpu": "mi250x-gcd"}).label == "hipBLAS workspaces"
    assert _workspace({**BASE, "gpu": "tpu-v5e"}) is None and _workspace({**BASE, "gpu": "apple-m4-max-128gb"}) is None


def test_the_config_sets_the_size_and_zero_removes_the_row():
    # ":16:8", what torch.use_deterministic_algorithms accepts beside ":4096:8": 8 × 16 KiB a handle
    small = _workspace({**BASE, "cublas_workspace": ":16:8"})
    assert small.bytes == 2 * 8 * 16 * 1024 and "CUBLAS_WORKSPACE_CONFIG=:16:8" in small.source
    assert _workspace({**BASE, "cublas_workspace": ":0:0"}) is None
    full, none = estimate(BASE), estimate({**BASE, "cublas_workspace": ":0:0"})
    assert full.peak_bytes - none.peak_bytes == 2 * 32 * MIB      # the default GPU, an H100


def test_blackwell_takes_hoppers_size_and_a_rollout_reuses_the_steps_workspace():
    # PyTorch 2.11's CublasHandlePool.cpp: 32 MiB for compute capability 9.x to 12.x; generate() in a GRPO step runs on
    # the training forward's thread and stream, so its handle's workspace is the one the step counts
    assert _workspace({**BASE, "gpu": "b200-180gb"}).bytes == 2 * 32 * MIB
    assert _workspace({**BASE, "gpu": "rtx-5090"}).bytes == 2 * 32 * MIB
    grpo = estimate({"model": "qwen2.5-0.5b", "method": "grpo"})
    assert [p.key for p in grpo.pools if "blas" in p.key] == ["blas_workspace"]
