"""The estimate as one typed, frozen record: what every caller of ``estimate`` receives.

The searches read its totals, the output stage formats it, and ``Estimate.as_dict()`` is the JSON that
``--json`` prints and the page reads (CONTRACT.md is generated from these types by tools/contract.py).
Numbers only: display text (GiB strings, sentences) is added by the output stage.
"""

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from pycore.memory.pools import Pool
from pycore.memory.pools import components as component_sizes
from pycore.memory.serving import refusal

JSON = dict[str, Any]


@dataclass(frozen=True)
class ModelInfo:
    """The model estimated, as the user named or imported it."""

    name: str                   # preset id, or the imported config's own name
    kind: str                   # transformer | generic
    source: str                 # where its architecture came from
    max_positions: "int | None"  # max_position_embeddings; None where unknown
    preset: str = ""            # the preset it was built from, when it is not that preset itself
    layers_read: "tuple[tuple[str, int], ...]" = ()   # (layer kind, how many) for models whose layers differ by index


@dataclass(frozen=True)
class SetupInfo:
    """The policy in force, after ``auto`` inputs took their framework's defaults."""

    precision: str              # the precision policy's name (pycore.memory.precision)
    weight_dtype: str
    kv_dtype: str
    engine: "str | None"        # serving engine; None when training
    optimizer_impl: "str | None"  # foreach | fused | for-loop; None when serving
    method: "str | None" = None   # what is trained (the schema's method: lora, dpo, grpo, ...); None for full
                                  # fine-tuning and serving
    attention: str = "flash"      # the attention kernel counted: flash, flash-repeat, flash-math (SDPA's math
                                  # kernel: pycore.memory.activations.gqa_math_kernel) or eager


@dataclass(frozen=True)
class LayoutInfo:
    """The parallel layout estimated: the GPUs it spans are dp × tp × pp × cp (experts split inside dp)."""

    gpus: int
    dp: int
    tp: int
    pp: int
    cp: int
    ep: int


@dataclass(frozen=True)
class Estimate:
    """Memory per GPU of one setup: the pools of its most loaded GPU, the moments of the step, and the
    totals in each memory view. ``breakdown`` (the pools live at the peak plus the runtime overhead) adds up
    to ``total_bytes`` exactly."""

    model: ModelInfo            # the model estimated
    params_total: int           # parameters of the whole model
    params_active: int          # per token (MoE: the experts one token reaches)
    setup: SetupInfo            # the precision policy, dtypes, engine and optimizer kernel in force
    layout: LayoutInfo          # the parallel layout estimated (after any refusal, never the one typed)
    # the step: bytes live in each moment, the largest moment of each phase, and the peak
    moments: "dict[str, int]"   # bytes live in each moment of the step, in the step's order
    phases: "dict[str, int]"    # each phase's largest moment: forward, backward, optimizer; prefill, decode
    peak_moment: str            # the first largest moment
    peak_phase: str             # the phase of the peak moment
    # the memory views: torch.cuda.max_memory_allocated, max_memory_reserved, and what nvidia-smi shows
    peak_bytes: int             # the peak's live tensors: torch.cuda.max_memory_allocated()
    reserved_bytes: int         # plus the caching allocator's cache: torch.cuda.max_memory_reserved()
    total_bytes: int            # plus the CUDA context and NCCL buffers: what nvidia-smi shows; the fit uses it
    overhead_bytes: int         # total_bytes - peak_bytes: allocator cache, CUDA context, NCCL buffers
    host_bytes: int             # host RAM per GPU for offloaded states
    # the GPU estimated
    stage: int                  # the pipeline stage it holds (the most loaded one)
    layers: int                 # transformer layers on it
    params_per_gpu: int         # parameters held by this GPU (its stage, its tensor and expert shards)
    tokens: int                 # tokens of one micro-batch on it
    kv_bytes_per_token: "int | None"  # serving: KV cache bytes per token; None when training
    # the records: every pool built, the pools at the peak with the overhead, and host-RAM pools
    pools: "tuple[Pool, ...]"   # every pool built for this GPU, live or not at the peak
    breakdown: "tuple[Pool, ...]"  # the pools live at the peak plus the runtime overhead: they sum to total_bytes
    host_pools: "tuple[Pool, ...]"  # pools in host RAM (offloaded states)
    activation_terms: "tuple[JSON, ...]"  # the saved activations per token and layer, term by term
    stages: "tuple[JSON, ...]"  # every pipeline stage's summary (pp > 1, explained estimates only)
    vllm: "JSON | None"         # vLLM's KV-cache capacity (engine=vllm; a GRPO or distill step's colocated engine)
    warnings: "tuple[str, ...]" = field(default=())  # what the estimate cannot vouch for, in words

    @property
    def refused(self) -> str:
        """Why the engine would refuse to start (vLLM's KV cache too small for one request), else ""."""
        return refusal(self.vllm)

    @cached_property
    def components(self) -> "dict[str, int]":
        """Each component's largest live size over the moments (made on first use: the searches never ask)."""
        return component_sizes(list(self.pools), tuple(self.moments))

    def as_dict(self, formulas: bool = True) -> JSON:
        """The JSON form (CONTRACT.md). ``formulas=False`` leaves out the records' formulas: the pools'
        formulas, the host pools and the activation terms (the page's keystroke update)."""
        total = self.total_bytes
        out: JSON = {
            "model": vars(self.model), "params": {"total": self.params_total, "active": self.params_active},
            "setup": vars(self.setup), "layout": vars(self.layout),
            "moments": self.moments, "phases": self.phases, "peak_moment": self.peak_moment,
            "peak_phase": self.peak_phase, "peak_bytes": self.peak_bytes, "reserved_bytes": self.reserved_bytes,
            "total_bytes": total, "overhead_bytes": self.overhead_bytes, "host_bytes": self.host_bytes,
            "stage": self.stage, "layers": self.layers, "params_per_gpu": self.params_per_gpu,
            "tokens": self.tokens, "kv_bytes_per_token": self.kv_bytes_per_token,
            "breakdown": [_row(p, total, formulas) for p in self.breakdown],
            "components": self.components, "stages": list(self.stages), "vllm": self.vllm,
            "warnings": list(self.warnings),
        }
        if formulas:
            out.update(pools=[p.as_dict() for p in self.pools], host_pools=[p.as_dict() for p in self.host_pools],
                       activation_terms=list(self.activation_terms))
        return out


def _row(pool: Pool, total: int, formulas: bool) -> JSON:
    row = pool.as_dict() if formulas else {"key": pool.key, "label": pool.label, "bytes": pool.bytes,
                                           "source": pool.source, "group": pool.group or pool.key}
    row["percent"] = 100 * pool.bytes / total if total else 0.0
    return row
