"""Which GPUs an estimate fits on: computed once, after the estimate, from its total bytes."""

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pycore.base.errors import FieldError
from pycore.base.units import format_bytes
from pycore.memory.estimate import Estimate, estimate_values
from pycore.memory.precision import POLICIES
from pycore.memory.serving import NO_METAL
from pycore.model.catalog import gpus as gpu_catalog

TIGHT = 0.9     # above 90% of a GPU's memory the fit is "tight": fragmentation can tip it over


@lru_cache(maxsize=None)
def _usable_text(usable: int) -> str:
    """A catalog GPU's usable memory as text (the same for every keystroke)."""
    return format_bytes(usable)["text"]


WORDS = {"fits": "fits", "tight": "tight", "no": "does not fit"}


def fit_status(total_bytes: int, usable: int, preallocated: bool = False) -> str:
    """fits, tight (above TIGHT of the usable memory) or no. ``preallocated``: vLLM, which takes gpu_util of the GPU
    by design, its KV cache taking what is left: no fragmentation can tip it over once it has started, and whether it
    starts is its start-up check (the estimate's refused), so it is never tight."""
    status = "fits" if total_bytes <= TIGHT * usable else "tight" if total_bytes <= usable else "no"
    return "fits" if preallocated and status == "tight" else status


def gpu_fit(total_bytes: int, gpu_id: str, chosen: str, refused: str = "", own: bool = False) -> dict[str, Any]:
    """One catalog GPU's status and headroom for a total per GPU. ``refused``: why the engine would not start
    (vLLM's start-up check) on the chosen GPU, or on this one when ``own`` (its own estimate), which makes it not
    fit whatever its bytes."""
    gpu = gpu_catalog()[gpu_id]
    usable = gpu["usable_bytes"]
    status = fit_status(total_bytes, usable, own)
    why = refused if gpu_id == chosen or own else ""
    if why:
        status = "no"
    headroom = usable - total_bytes
    short = ("vLLM does not run" if why == NO_METAL else "vLLM would refuse to start") if why else ""
    return {"id": gpu_id, "name": gpu["name"], "memory_bytes": usable, "fits": status != "no",
            "status": status, "headroom_bytes": headroom, "chosen": gpu_id == chosen, "why": why, "short_why": short,
            "verdict": f"{short or WORDS[status]} on {gpu['name']}",
            "memory_text": _usable_text(usable),
            "headroom_text": short or f"{format_bytes(abs(headroom))['text']} {'free' if headroom >= 0 else 'short'}"}


def sizes_itself(values: "Mapping[str, Any]") -> bool:
    """Whether the engine sizes itself to the GPU: vLLM serving, which takes gpu_util of its memory."""
    return values.get("mode") == "infer" and values.get("engine") == "vllm"


def _vllm_on_each(values: "Mapping[str, Any]") -> "dict[str, tuple[int, str]]":
    """vLLM takes gpu_util of each GPU's own memory and gives the rest of it to the KV cache: its total and start-up
    refusal on every catalog GPU, each its own estimate (empty for any other engine or for training)."""
    if not sizes_itself(values):
        return {}
    out = {}
    for gpu_id, gpu in gpu_catalog().items():
        try:
            result = estimate_values({**values, "gpu": gpu_id}, explain=False)     # its total and refusal only
        except FieldError:
            continue
        out[gpu_id] = (result.total_bytes, NO_METAL if gpu.get("runtime") == "Metal" else result.refused)
    return out


def gpu_fits(total_bytes: int, chosen: str, refused: str = "",
             values: "Mapping[str, Any] | None" = None) -> "list[dict[str, Any]]":
    """Every catalog GPU with its status and headroom: the chosen one first, then by headroom. With ``values`` of a
    vLLM setup, each GPU is judged by its own estimate (the engine sizes itself to the GPU)."""
    own = _vllm_on_each(values) if values else {}
    rows = [gpu_fit(own[gpu_id][0], gpu_id, chosen, own[gpu_id][1], own=True) if gpu_id in own else
            gpu_fit(total_bytes, gpu_id, chosen, refused) for gpu_id in gpu_catalog()]
    rows.sort(key=lambda r: (not r["chosen"], -r["headroom_bytes"]))
    return rows


FP32_RATE_SOURCE = ("PyTorch's torch.backends.cuda.matmul.allow_tf32 is False by default since 1.12, so fp32 "
                    "matmuls run at the GPU's fp32 rate, not on tensor cores")


def matmul_rate(gpu: "dict[str, Any]", compute_dtype: str) -> "tuple[float | None, str]":
    """(dense TFLOPS, its name) of the GPU for matmuls computed in ``compute_dtype``: fp32 at the fp32 rate
    (FP32_RATE_SOURCE), every 16-bit or narrower dtype at the bf16 tensor-core rate; None when the datasheet
    gives no figure (presets/gpus.json)."""
    if compute_dtype == "fp32":
        return gpu.get("fp32_TFLOPS"), "fp32"
    return gpu.get("bf16_dense_TFLOPS"), "bf16"


def compute_dtype(values: dict[str, Any], result: Estimate) -> str:
    """The dtype the step's matmuls run in: the activations' (autocast computes fp32 weights in 16 bit)."""
    return str(values.get("act_dtype") or POLICIES[result.setup.precision].act)
