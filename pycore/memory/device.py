"""What the GPU shows beyond the peak of live tensors: three views of one estimate.

- ``peak_bytes``: the largest moment's live tensors, what ``torch.cuda.max_memory_allocated()`` reports;
- ``reserved_bytes``: plus what PyTorch's caching allocator keeps reserved but not in use at that peak,
  what ``torch.cuda.max_memory_reserved()`` reports. Freed blocks of one size cannot always serve
  requests of another, so the pools allocated and freed every step (activations, logits, loss buffers,
  working tensors, autocast copies) leave a share of their size stranded. With
  ``expandable_segments:True`` in PYTORCH_CUDA_ALLOC_CONF, segments grow in place and most of it goes;
- ``device_bytes``: plus the CUDA context and, with more than one GPU, NCCL's buffers: what nvidia-smi
  shows for the process. Fit badges use it.

The shares and sizes below are allowances fit to the published readings in docs/validation.md (the
transformers docs' bert-large run on a V100 read with nvidia-smi; torchtitan's max_memory_reserved with
expandable segments on), not measured here: this project has had no GPU to measure them on
(validation/measure_cuda.py is ready for one). Each can be replaced by ``overhead``.
"""

from typing import TYPE_CHECKING

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
# aten/src/ATen/cuda/detail/CUDAHooks.cpp maybe_set_cuda_module_loading("LAZY"); CUDA 11.7 or later): the
# allowance fit to published readings (docs/validation.md). eager (PyTorch 1.x, or CUDA before 11.7): every
# kernel loaded at start-up, 1,343 MiB on a V100 before any tensor (transformers docs,
# model_memory_anatomy.md: "GPU memory occupied: 1343 MB" read with pynvml).
CUDA_CONTEXT = {"lazy": 512 * 2**20, "eager": 1343 * 2**20}
LOADED = {"lazy": "as first used", "eager": "all at start-up"}
NCCL_BUFFERS = 512 * 2**20                      # NCCL communicators' buffers once GPUs talk (world > 1)
# Runtimes (presets/gpus.json 'runtime') whose figures above apply: CUDA all of them; ROCm the caching
# allocator (PyTorch's HIP build compiles c10/cuda/CUDACachingAllocator.cpp, hipified), not the context or
# RCCL's buffers, which no reading here gives. The others run no CUDA allocator: nothing is borrowed for them.
ALLOCATOR_RUNTIMES = ("CUDA", "ROCm")



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
                 f"the CUDA context, cuBLAS workspace and the kernels loaded {LOADED[cuda_modules]} "
                 f"(CUDA_MODULE_LOADING={cuda_modules.upper()}), outside PyTorch's allocator (nvidia-smi counts it; "
                 "max_memory_reserved does not)", group="device")]
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
