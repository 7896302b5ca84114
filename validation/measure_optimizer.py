"""Measure the temporaries of ``optimizer.step()`` for each optimizer kernel, for pycore/memory/optimizer.py.

Dev-only: needs torch (never a dependency of pycore). For each optimizer shipped with torch that pycore
names (adamw, adam, sgd, sgd-momentum, adafactor), Lion from lion-pytorch, and each kernel:

- ``foreach``: foreach=True, what torch.optim picks on CUDA when neither foreach nor fused is given;
- ``fused``: fused=True (Hugging Face Trainer's ``adamw_torch_fused``);
- ``for-loop``: foreach=False, fused=False, the single-tensor path (torch's default on CPU);

build a model of Linear layers of several sizes, run one warm-up step (so the state exists, as in steady
state), give every parameter a fresh gradient, and record ``optimizer.step()`` alone with PyTorch's
MemTracker (which rounds every allocation up to 512 bytes as CUDA's caching allocator does). The
temporary is the peak during the step minus the memory live when it starts (parameters, gradients and
state). It is also counted exactly, without rounding, by a TorchDispatchMode that follows every storage
the step creates until it is freed.

The same step is run on three parameter sets (SHAPES): two that share their largest tensor and differ in
total, so each temporary can be written as a·params + b·largest_tensor (elements of the state dtype), and
one with two largest tensors side by side, which shows the single-tensor path's carried-over temporary.

This runs on CPU, where the kernels allocate as they do on CUDA (torch 2.13.0 source): foreach ops on CPU
take the slow path, one single-tensor op per tensor, but ``torch._foreach_sqrt`` still returns the whole
list before anything else runs (torch/optim/adam.py L762), as the CUDA multi-tensor kernel does; the fused
kernels update in place on both (``torch._fused_adamw_``, adam.py L877); the single-tensor path is the same
Python loop (adam.py L544). What differs is only which one runs when none is asked for: foreach on CUDA,
the single-tensor loop on CPU (torch/optim/optimizer.py L161-186, torch/utils/_foreach_utils.py L8-10).

Usage:
    python3 -m venv /work/venv-optim && /work/venv-optim/bin/pip install torch==2.13.0
    /work/venv-optim/bin/pip install --no-deps lion-pytorch==0.2.5       # Lion; torch ships none
    /work/venv-optim/bin/python validation/measure_optimizer.py      # -> validation/measured_optimizer.json
"""

import datetime
import importlib.metadata
import json
import platform
import sys
import time
import weakref
from pathlib import Path

import torch
from torch.distributed._tools.mem_tracker import MemTracker
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "validation" / "measured_optimizer.json"

# Parameter sets, with vectors (biases, norm weights) beside the matrices as in a transformer layer.
# "small" and "large" share their largest tensor (4096 x 2048 = 8.39M elements), first in the list, and
# differ in total; "adjacent" puts two tensors of that size next to each other, as gate_proj and up_proj
# are in a Llama layer, because the single-tensor path still holds the previous tensor's temporary.
SHAPES = {
    "small": [(4096, 2048), (4096,), (1024, 4096), (1024,), (1024, 1024), (1024,), (3000, 512), (512,)],
    "large": [(4096, 2048), (4096,), (1024, 4096), (1024,), (4096, 1024), (4096,), (1024, 1024), (1024,),
              (3000, 512), (512,), (2000, 1024), (1024,), (1024, 3000), (3000,)],
    "adjacent": [(1024,), (2048, 4096), (4096, 2048), (2048,), (1024, 1024), (1024,)],
}

# (pycore name, constructor) for the optimizers torch ships, with torch's default hyper-parameters
# except where the name asks for them (momentum for sgd-momentum).
OPTIMIZERS = {
    "adamw": lambda params, **kernel: torch.optim.AdamW(params, lr=1e-3, **kernel),
    "adam": lambda params, **kernel: torch.optim.Adam(params, lr=1e-3, **kernel),
    # Adam's weight decay is coupled (added to the gradient), which copies the gradients first.
    "adam weight_decay=0.01": lambda params, **kernel: torch.optim.Adam(params, lr=1e-3, weight_decay=0.01,
                                                                        **kernel),
    "sgd": lambda params, **kernel: torch.optim.SGD(params, lr=1e-3, **kernel),
    "sgd-momentum": lambda params, **kernel: torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kernel),
    "adafactor": lambda params, **kernel: torch.optim.Adafactor(params, lr=1e-3, **kernel),
    "lion": lambda params, **kernel: lion(params, **kernel),
}
KERNELS = {"foreach": dict(foreach=True), "fused": dict(fused=True),
           "for-loop": dict(foreach=False, fused=False)}
NO_FUSED = {"adafactor"}        # torch.optim.Adafactor takes no fused argument (foreach only)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def lion(params, foreach=False, fused=False):
    """Lion as lucidrains/lion-pytorch ships it (torch has none): lion_pytorch.foreach.Lion for foreach,
    lion_pytorch.Lion for the single-tensor loop; its fused kernel (use_triton=True) needs CUDA."""
    if fused:
        raise ValueError("lion-pytorch's fused kernel (use_triton=True) needs Triton on CUDA")
    if foreach:
        from lion_pytorch.foreach import Lion
    else:
        from lion_pytorch import Lion
    return Lion(params, lr=1e-4)


class LiveBytes(TorchDispatchMode):
    """Exact bytes of the storages created inside the mode that are still alive, and their peak."""

    def __init__(self):
        super().__init__()
        self.live = self.peak = 0
        self.seen = set()

    def _free(self, key, size):
        self.live -= size
        self.seen.discard(key)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key in self.seen or any(key == arg.untyped_storage().data_ptr()
                                       for arg in tree_leaves((args, kwargs)) if isinstance(arg, torch.Tensor)):
                continue        # an in-place result or a view of an input: nothing new allocated
            self.seen.add(key)
            size = storage.nbytes()
            self.live += size
            self.peak = max(self.peak, self.live)
            weakref.finalize(storage, self._free, key, size)
        return out


def build(shapes, dtype):
    torch.manual_seed(0)
    return [torch.nn.Parameter(torch.randn(shape, dtype=dtype) * 0.02) for shape in shapes]


def fresh_grads(params):
    for param in params:
        param.grad = torch.randn_like(param) * 1e-3


def measure(name, kernel, dtype, shapes):
    params = build(shapes, dtype)
    kernel_args = dict(KERNELS[kernel])
    if name in NO_FUSED:
        if kernel_args.pop("fused", False):
            raise ValueError(f"torch.optim ships no fused {name}")
    optimizer = OPTIMIZERS[name](params, **kernel_args)
    fresh_grads(params)
    optimizer.step()                      # warm-up: creates the state
    fresh_grads(params)
    state = sum(t.nbytes for s in optimizer.state.values() for t in s.values() if isinstance(t, torch.Tensor))
    tracker = MemTracker()
    tracker.track_external(optimizer, *params, *(p.grad for p in params))
    started = time.perf_counter()
    with tracker:
        (start,) = tracker.get_tracker_snapshot("current").values()
        optimizer.step()
    seconds = time.perf_counter() - started
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    fresh_grads(params)
    exact = LiveBytes()
    with exact:
        optimizer.step()
    element = torch.finfo(dtype).bits // 8
    sizes = [p.numel() for p in params]
    return {
        "params": sum(sizes),
        "largest_tensor": max(sizes),
        # the largest tensor just before one of the largest size (0 when it comes first)
        "preceding_tensor": max(sizes[i - 1] if i else 0 for i, n in enumerate(sizes) if n == max(sizes)),
        "state_bytes": state,
        "memtracker_live_at_start_bytes": start["Total"],
        "memtracker_peak_bytes": peak["Total"],
        "temporary_bytes": peak["Total"] - start["Total"],
        "temporary_bytes_exact": exact.peak,
        "temporary_elements": exact.peak / element,
        "step_seconds": round(seconds, 3),
    }


def fit(small, large):
    """a, b with temporary = a·params + b·largest (elements), from two sets sharing the largest tensor,
    first in both."""
    a = (large["temporary_elements"] - small["temporary_elements"]) / (large["params"] - small["params"])
    b = (small["temporary_elements"] - a * small["params"]) / small["largest_tensor"]
    return round(a, 4), round(b, 4)


def _version(package):
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def main():
    cases = []
    for name in OPTIMIZERS:
        for kernel in KERNELS:
            for dtype_name, dtype in DTYPES.items():
                label = f"{name} {kernel} {dtype_name}"
                try:
                    runs = {size: measure(name, kernel, dtype, shapes) for size, shapes in SHAPES.items()}
                except (RuntimeError, TypeError, ValueError, ImportError) as error:   # a kernel not shipped
                    print(f"{label}: not available: {error}", flush=True)
                    cases.append({"optimizer": name, "kernel": kernel, "dtype": dtype_name,
                                  "unavailable": str(error).splitlines()[0]})
                    continue
                a, b = fit(runs["small"], runs["large"])
                print(f"{label}: temporary = {a}·params + {b}·largest_tensor elements; bytes exact / MemTracker: "
                      + ", ".join(f"{size} {run['temporary_bytes_exact']} / {run['temporary_bytes']}"
                                  for size, run in runs.items()), flush=True)
                cases.append({"optimizer": name, "kernel": kernel, "dtype": dtype_name,
                              "params_coefficient": a, "largest_tensor_coefficient": b, "runs": runs})
    OUT.write_text(json.dumps({
        "about": "optimizer.step() temporaries above parameters + gradients + state, per kernel; "
                 "written by validation/measure_optimizer.py",
        "torch": torch.__version__,
        "lion_pytorch": _version("lion-pytorch"),
        "device": "cpu",
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
        "shapes": SHAPES,
        "cases": cases,
    }, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
