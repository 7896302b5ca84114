"""What the GPU shows beyond the peak of live tensors: three views of one estimate.

- ``peak_bytes``: the largest moment's live tensors, what ``torch.cuda.max_memory_allocated()`` reports;
- ``reserved_bytes``: plus what PyTorch's caching allocator keeps reserved but not in use at that peak,
  what ``torch.cuda.max_memory_reserved()`` reports. Freed blocks of one size cannot always serve
  requests of another, so the pools allocated and freed every step (activations, logits, loss buffers,
  working tensors, autocast copies) leave a share of their size stranded. With
  ``expandable_segments:True`` in PYTORCH_CUDA_ALLOC_CONF, segments grow in place and most of it goes;
- ``device_bytes``: plus the CUDA context and, with more than one GPU, NCCL's buffers: what nvidia-smi
  shows for the process. Fit badges use it.

The allocator's stranded share is an allowance fit to the published readings in docs/validation.md (the
transformers docs' bert-large run on a V100 read with nvidia-smi; torchtitan's max_memory_reserved with
expandable segments on); on an H200 (validation/measured_cuda.json) the stranded bytes over the transient ones
had a median of 0.22 over the 80 peaks above 1 GiB, from 0.02 (a step whose transient bytes are one loss buffer) to
0.71. The lazily loaded CUDA context is that H200's reading. Each can be replaced by ``overhead``.
"""

from typing import TYPE_CHECKING, Any

from pycore.base.expr import num, rnd, sym
from pycore.memory.pools import Pool, make

if TYPE_CHECKING:
    from pycore.inputs.schema import Overhead

# Pools allocated and freed within every step, whose freed blocks fragment the cache.
TRANSIENT = ("activations", "logits", "log_softmax", "logits_upcast", "loss_gradients", "backward_working",
             "autocast_weight_copies", "prefill_working", "cache_append_copy", "head_gradient",
             "end_of_backward_buffers", "gradient_buckets", "gathered_layer", "optimizer_step_temporaries")
FRAGMENTATION = {"no": 0.25, "yes": 0.03}      # stranded share of the transient bytes at the peak
# The CUDA context with cuBLAS/cuDNN handles, by CUDA_MODULE_LOADING. lazy (PyTorch sets it from 2.0 on,
# aten/src/ATen/cuda/detail/CUDAHooks.cpp maybe_set_cuda_module_loading("LAZY"); CUDA 11.7 or later): the driver's
# figure for the process less max_memory_reserved after a training step on an H200 (validation/measured_cuda.json:
# 742 to 760 MiB over 83 training steps, 758 the median; 678 to 754 after 12 generate() calls; driver
# 580.159.04, CUDA 13.0, torch 2.11). eager (PyTorch 1.x, or CUDA before 11.7): every
# kernel loaded at start-up, 1,343 MiB on a V100 before any tensor (transformers docs,
# model_memory_anatomy.md: "GPU memory occupied: 1343 MB" read with pynvml).
CUDA_CONTEXT = {"lazy": 758 * 2**20, "eager": 1343 * 2**20}
LOADED = {"lazy": "as first used", "eager": "all at start-up"}
NCCL_BUFFERS = 512 * 2**20                      # NCCL communicators' buffers once GPUs talk (world > 1)
# Runtimes (presets/gpus.json 'runtime') whose figures above apply: CUDA all of them; ROCm the caching
# allocator (PyTorch's HIP build compiles c10/cuda/CUDACachingAllocator.cpp, hipified), not the context or
# RCCL's buffers, which no reading here gives. The others run no CUDA allocator: nothing is borrowed for them.
ALLOCATOR_RUNTIMES = ("CUDA", "ROCm")

# The BLAS workspace PyTorch gives each cuBLAS handle (one a thread) from its caching allocator, so it counts in
# max_memory_allocated (aten/src/ATen/cuda/CublasHandlePool.cpp, parseChosenWorkspaceSize / getNewWorkspace):
# CUBLAS_WORKSPACE_CONFIG's default ":4096:2:16:8" (8 MiB + 128 KiB), 32 MiB on Hopper and Blackwell (compute
# capability 9.x, 10.x, 11.x and 12.x since PyTorch 2.11; Hopper alone before); hipBLAS's 32 MiB, 128 MiB on gfx942
# and gfx950 (ROCm builds of the same file, which read CUBLAS_WORKSPACE_CONFIG first; hipBLASLt's own 76 MiB a
# handle, taken where hipBLASLt runs a product, is not counted). A training
# step's forward runs on the Python thread and its backward on autograd's device thread: two handles, two
# workspaces (validation/measured_cuda.json: every training case of a real model 64 MiB over the CPU's
# MemTracker on an H200, generate() 32 MiB).
BLAS_WORKSPACE = {"CUDA": (8 * 2**20 + 128 * 2**10, {f"sm_{major}": 32 * 2**20 for major in (9, 10, 11, 12)}),
                  "ROCm": (32 * 2**20, {"gfx94": 128 * 2**20, "gfx95": 128 * 2**20})}


def compute_capability(gpu: "dict[str, Any]") -> int:
    """An NVIDIA GPU's compute capability as a number (sm_90 -> 90) from its arch in presets/gpus.json; 0 off CUDA,
    where no CUDA kernel choice applies."""
    return int(gpu.get("arch", "sm_90")[3:]) if gpu.get("runtime", "CUDA") == "CUDA" else 0


def workspace_bytes(config: str) -> int:
    """Bytes of a CUBLAS_WORKSPACE_CONFIG such as ":4096:8" or ":4096:2:16:8": the sum of SIZE KiB × COUNT."""
    numbers = [int(n) for n in config.split(":")[1:]]
    return sum(size * 1024 * count for size, count in zip(numbers[::2], numbers[1::2]))


def blas_workspaces(gpu: "dict[str, Any]", threads: int, moments: "tuple[str, ...]",
                    config: str = "auto") -> "list[Pool]":
    """The cuBLAS (hipBLAS) workspaces of ``threads`` threads that run matrix products, live through every moment;
    none on runtimes PyTorch gives no such workspace from its allocator. ``config``: CUBLAS_WORKSPACE_CONFIG, or
    auto for PyTorch's default on this GPU."""
    runtime, arch = gpu.get("runtime", "CUDA"), gpu.get("arch", "")
    if runtime not in BLAS_WORKSPACE:
        return []
    default, by_arch = BLAS_WORKSPACE[runtime]
    size = next((bytes_ for prefix, bytes_ in by_arch.items() if arch.startswith(prefix)), default)
    each = size if config == "auto" else workspace_bytes(config)
    if not each:
        return []
    chosen = f"{arch or runtime}'s default size" if config == "auto" else f"CUBLAS_WORKSPACE_CONFIG={config}"
    library = "cuBLAS" if runtime == "CUDA" else "hipBLAS"
    return [make("blas_workspace", f"{library} workspaces",
                 sym("n", threads) * sym("W", each), moments,
                 f"PyTorch gives each thread's {library} handle a workspace from its caching allocator "
                 f"(ATen/cuda/CublasHandlePool.cpp; {chosen})" +
                 ("; measured on an H200: validation/measured_cuda.json" if runtime == "CUDA" else ""),
                 "n = threads running matrix products (training: the forward's and autograd's backward thread; "
                 "inference: one); W = workspace bytes of one handle")]


def runtime_note(runtime: str) -> str:
    """What an estimate on a non-CUDA runtime leaves out, in words ("" on CUDA)."""
    if runtime == "CUDA":
        return ""
    if runtime in ALLOCATOR_RUNTIMES:
        counted = "of what the device holds beyond the tensors only PyTorch's caching-allocator cache is counted"
    else:
        counted = "nothing the device holds beyond the tensors is counted"
    return (f"this accelerator runs {runtime}: {counted}; the {runtime} runtime's own context and buffers are not "
            "known here and CUDA's are not borrowed, so leave headroom or give overhead=")


def overhead_pools(live: "list[Pool]", overhead: "Overhead | None", expandable: str, world: int,
                   peak: int, cuda_modules: str = "lazy", runtime: str = "CUDA") -> "list[Pool]":
    """The rows between the peak of live tensors and what the GPU shows; one row if ``overhead`` is given.
    Off CUDA only what is known of the ``runtime`` is counted, and a row says what is not."""
    if overhead is not None:
        kind, amount = overhead
        if kind == "percent":
            q = rnd(sym("peak", peak) * amount / 100)
            return [make("overhead", "Runtime overhead (as given)", q, (), "a share of the peak, as given",
                         "peak = peak tensor bytes")]
        return [make("overhead", "Runtime overhead (as given)", num(amount), (), "as given")]
    if runtime != "CUDA":
        return _other_runtime(live, expandable, runtime)
    transient = sum(p.bytes for p in live if p.key in TRANSIENT)
    share = FRAGMENTATION[expandable]
    rows = [make("allocator_cache", "Allocator cache (freed blocks kept reserved)",
                 rnd(sym("X", transient) * share), (),
                 "PyTorch's caching allocator: freed blocks stay reserved (max_memory_reserved); share fit to "
                 "published readings (docs/validation.md)",
                 f"X = bytes allocated and freed within the step that are live at the peak; {share:g} of them "
                 f"stay stranded ({'expandable segments' if expandable == 'yes' else 'default segments'})",
                 group="reserved"),
            make("cuda_context", "CUDA context", num(CUDA_CONTEXT[cuda_modules]), (),
                 f"the CUDA context and the kernels loaded {LOADED[cuda_modules]} "
                 f"(CUDA_MODULE_LOADING={cuda_modules.upper()}), outside PyTorch's allocator (nvidia-smi counts it; "
                 "max_memory_reserved does not); " + ("measured after a training step on an H200, driver 580, CUDA 13.0 "
                 "(validation/measured_cuda.json; other GPUs and versions differ by tens of MiB)" if cuda_modules ==
                 "lazy" else "the transformers docs' V100 reading before any tensor"), group="device")]
    if world > 1:
        rows.append(make("nccl_buffers", "NCCL communication buffers", num(NCCL_BUFFERS), (),
                         "NCCL communicators' channel buffers, outside PyTorch's allocator", group="device"))
    return rows


def _other_runtime(live: "list[Pool]", expandable: str, runtime: str) -> "list[Pool]":
    rows = []
    if runtime in ALLOCATOR_RUNTIMES:
        transient = sum(p.bytes for p in live if p.key in TRANSIENT)
        share = FRAGMENTATION[expandable]
        rows.append(make("allocator_cache", "Allocator cache (freed blocks kept reserved)",
                         rnd(sym("X", transient) * share), (),
                         f"PyTorch's caching allocator, which its {runtime} build shares with CUDA's; share fit to "
                         "CUDA readings (docs/validation.md)",
                         f"X = bytes allocated and freed within the step that are live at the peak; {share:g} of them",
                         group="reserved"))
    return rows
