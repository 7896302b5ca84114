"""Memory pools as records: each pool knows its bytes, its formula, its source and the moments it is live.

A moment's total is the sum of the pools live in it, so the breakdown at the peak adds up by
construction. ``report`` and ``explain`` only format these records.
"""

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, NotRequired, TypedDict

from pycore.base.expr import Q, rnd

if TYPE_CHECKING:
    from pycore.memory.activations import Term


@dataclass(frozen=True)
class Pool:
    """One memory pool of one GPU."""

    key: str                    # stable id: weights, gradients, kv_cache, ...
    label: str                  # what people call it
    bytes: int                  # per GPU, exact
    quantity: Q                 # the arithmetic that made ``bytes``: its formula in symbols and in numbers
    symbols: str                # what each symbol stands for, "P = parameters on this GPU; ..."
    source: str                 # where the rule comes from
    moments: tuple[str, ...]    # the moments of the step in which it is live
    group: str = ""             # the component it belongs to (CSV "component" rows); its key by default

    @property
    def formula(self) -> str:
        return self.quantity.symbols

    @property
    def substituted(self) -> str:
        return self.quantity.numbers

    def as_dict(self) -> "dict[str, Any]":
        """The record as JSON: its formula written out in symbols and in numbers."""
        return {"key": self.key, "label": self.label, "bytes": self.bytes, "formula": self.formula,
                "substituted": self.substituted, "symbols": self.symbols, "source": self.source,
                "moments": list(self.moments), "group": self.group or self.key}


class Peak(TypedDict):
    """Each moment's total, each phase's largest moment, and the first largest moment (``peak_of``)."""

    moments: dict[str, int]
    phases: dict[str, int]
    peak_moment: str
    peak_phase: str
    peak_bytes: int


class StageSummary(TypedDict):
    """One pipeline stage in the worst stage's ``stages`` (``worst_stage``)."""

    stage: int
    layers: int
    peak_bytes: int
    peak_phase: str
    pools: list[Pool]
    moments: tuple[str, ...]


class StageResult(Peak):
    """What pycore.memory.training and pycore.memory.serving return for one pipeline stage: its pools, the
    moments' totals and the peak, with every stage's summary (``stages``) when there are several."""

    pools: list[Pool]
    host: list[Pool]                    # kept in CPU memory (offload)
    activation_terms: "list[Term]"      # the detailed activation model's terms of one layer
    tokens: int                         # per micro-batch (training) or per prompt batch (serving) on this GPU
    layers: int
    stage: int
    params_per_gpu: int
    host_bytes: int
    kv_bytes_per_token: NotRequired[int]    # serving only
    state_bytes_per_sequence: NotRequired[int]  # vLLM serving: a hybrid's recurrent and convolution state per request
    vllm_pages: NotRequired["dict[str, int]"]   # vLLM serving of a hybrid: its page layout (memory.recurrent.vllm_pages)
    vllm_available: NotRequired[int]    # vLLM serving: the bytes left for the KV cache before whole blocks (may be < 0)
    stages: NotRequired[list[StageSummary]]


def make(key: str, label: str, q: Q, moments: "tuple[str, ...]", source: str, symbols: str = "",
         group: str = "") -> Pool:
    """A Pool from a quantity; the bytes are its rounded value."""
    q = rnd(q)
    return Pool(key, label, int(q.value), q, symbols, source, tuple(dict.fromkeys(moments)), group or key)


def moment_totals(pools: "list[Pool]", moments: "tuple[str, ...]") -> "dict[str, int]":
    """Bytes live in each moment: the sum of the pools live in it."""
    totals = dict.fromkeys(moments, 0)
    for p in pools:
        for m in p.moments:
            if m in totals:
                totals[m] += p.bytes
    return totals


def live(pools: "list[Pool]", moment: str) -> "list[Pool]":
    """The pools live at ``moment`` with any bytes, in the order they were made."""
    return [p for p in pools if moment in p.moments and p.bytes]


def components(pools: "list[Pool]", moments: "tuple[str, ...]") -> "dict[str, int]":
    """Each group's largest live size over the moments (the size of that component at its largest)."""
    out: "dict[str, int]" = {}
    for p in pools:
        out.setdefault(p.group, 0)
    for group in out:
        members = [p for p in pools if p.group == group]
        out[group] = max((sum(p.bytes for p in members if m in p.moments) for m in moments), default=0)
    return out


@lru_cache(maxsize=None)               # a few dozen moment names in all
def phase_of(moment: str) -> str:
    """The coarse phase a moment belongs to: forward, backward or optimizer (prefill, decode when serving)."""
    return moment.split()[0].rstrip(",")


def peak_of(pools: "list[Pool]", moments: "tuple[str, ...]") -> Peak:
    """Each moment's total, each phase's largest moment, and the peak (the first largest moment)."""
    totals = moment_totals(pools, moments)
    peak_moment = max(moments, key=lambda m: totals[m])
    phases: "dict[str, int]" = {}
    for m in moments:
        phases[phase_of(m)] = max(phases.get(phase_of(m), 0), totals[m])
    return {"moments": totals, "phases": phases, "peak_moment": peak_moment, "peak_phase": phase_of(peak_moment),
            "peak_bytes": totals[peak_moment]}


def worst_stage(results: "list[StageResult]",
                rank: "Callable[[StageResult], float] | None" = None) -> StageResult:
    """The pipeline stage with the highest peak (or the highest ``rank``), carrying every stage's summary when
    there are several (with its pools: ``stage_components`` turns them into components where the estimate is
    explained)."""
    worst = max(results, key=rank or (lambda r: r["peak_bytes"]))
    if len(results) > 1:
        worst["stages"] = [{"stage": r["stage"], "layers": r["layers"], "peak_bytes": r["peak_bytes"],
                            "peak_phase": r["peak_phase"], "pools": r["pools"], "moments": tuple(r["moments"])}
                           for r in results]
    return worst


def stage_components(stages: "list[StageSummary]") -> "list[dict[str, Any]]":
    """Stage summaries with each stage's components in place of its pools (JSON: stage, layers, peak_bytes,
    peak_phase, components)."""
    return [{**{k: v for k, v in s.items() if k not in ("pools", "moments")},
             "components": components(s["pools"], s["moments"])} for s in stages]
