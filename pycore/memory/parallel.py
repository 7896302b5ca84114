"""Parallel layouts: how parameters, gradients, optimizer state and activations split across GPUs.

- Data parallel with ZeRO (Rajbhandari et al. 2020): stage 1 shards optimizer state (and fp32 master
  weights) over the data-parallel group, stage 2 gradients too, stage 3 the weights too. PyTorch FSDP:
  NO_SHARD = 0, SHARD_GRAD_OP = 2, FULL_SHARD = 3, HYBRID_SHARD = 3 within a shard group. The sharding
  group is dp × cp, as Megatron's distributed optimizer and torchtitan's FSDP mesh do.
- Tensor parallel t (Shoeybi et al. 2019): attention and MLP matrices and the vocabulary-parallel
  embedding and head split t ways; norms are replicated.
- Pipeline parallel p: layers split into p stages; the first holds the embedding, the last the head.
- Expert parallel e: routed experts split e ways (and t ways inside each expert).
- Context parallel c: the sequence splits c ways; activations per GPU follow the local tokens.
"""

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from pycore.base.errors import InputError
from pycore.model.architecture import count_parameters, layer_params
from pycore.model.mixers import mixer_at, mlp_at

if TYPE_CHECKING:
    from pycore.inputs.schema import Values
    from pycore.model.architecture import Architecture, ParameterCount

FSDP_STAGES = {"none": None, "NO_SHARD": 0, "SHARD_GRAD_OP": 2, "FULL_SHARD": 3, "HYBRID_SHARD": 3}


@dataclass(frozen=True)
class Layout:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    zero: int = 0
    shard_group: int = 1        # GPUs one ZeRO/FSDP shard spans
    sp: bool = False
    microbatches: int = 1
    interleave: int = 1
    offload: str = "none"
    fsdp: str = "none"          # the FSDP strategy named, if any

    @property
    def world(self) -> int:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def single(self) -> bool:
        return self.world == 1 and self.ep == 1


def layout(values: "Values", arch: "Architecture") -> Layout:
    """The Layout of parsed inputs, checked against the architecture; InputError names the key."""
    zero = int(values["zero"])
    if values["fsdp"] != "none":
        zero = FSDP_STAGES[values["fsdp"]] or 0
    shard = _shard_group(values)
    _check_split(values, arch)
    if values["offload"] == "params" and zero != 3:
        raise InputError("offload", "offloading parameters needs ZeRO-3 / FULL_SHARD (zero=3)")
    if values["interleave"] > 1 and values["microbatches"] % values["pp"]:
        key = "microbatches" if values["microbatches"] != 1 else "interleave"
        raise InputError(key, f"the interleaved schedule needs a multiple of pp ({values['pp']}) micro-batches, "
                              f"got {values['microbatches']}")
    return Layout(values["dp"], values["tp"], values["pp"], values["cp"], values["ep"], zero, shard,
                  values["sp"] == "yes", values["microbatches"], values["interleave"], values["offload"],
                  values["fsdp"])


def _shard_group(values: "Values") -> int:
    """GPUs one ZeRO/FSDP shard spans: every data- and context-parallel GPU, or HYBRID_SHARD's group."""
    replicas: int = values["dp"] * values["cp"]
    if values["fsdp"] != "HYBRID_SHARD":
        return replicas
    shard: int = values["shard_group"] or min(replicas, 8)
    if replicas % shard:
        raise InputError("shard_group", f"must divide dp × cp ({replicas}), got {shard}")
    return shard


def _check_split(values: "Values", arch: "Architecture") -> None:
    """Tensor, pipeline and expert parallelism must split the model evenly; InputError names the key."""
    tp, pp, ep = values["tp"], values["pp"], values["ep"]
    if arch.kind == "generic":
        if tp > 1 or pp > 1 or ep > 1:
            raise InputError("tp" if tp > 1 else "pp" if pp > 1 else "ep",
                             "a generic network (params only) supports data parallelism and ZeRO only")
        return
    if arch.heads % tp or (arch.kv_heads % tp and tp % arch.kv_heads):
        raise InputError("tp", f"must divide the attention heads ({arch.heads}), got {tp}")
    if pp > arch.layers:
        raise InputError("pp", f"at most one stage per layer ({arch.layers}), got {pp}")
    if ep > 1 and (not arch.experts or arch.experts % ep):
        raise InputError("ep", f"must divide the routed experts ({arch.experts}), got {ep}")
    # In training, expert-parallel groups are carved out of the data- and context-parallel GPUs
    # (Megatron-LM parallel_state.initialize_model_parallel). Serving (vLLM --enable-expert-parallel)
    # puts ep GPUs side by side, attention replicated where tp is smaller: any ep dividing the experts.
    hosts = values["dp"] * values["cp"]
    if values["mode"] == "train" and ep > 1 and hosts % ep:
        raise InputError("ep", f"expert parallelism spreads experts over the dp × cp GPUs ({hosts}), which "
                               f"must be a multiple of ep ({ep})")


@dataclass(frozen=True)
class Stage:
    """What one GPU of a pipeline stage holds, before ZeRO sharding."""

    index: int
    layers: int
    params: int                 # parameters on this GPU
    matrix_params: int          # of which in matrices autocast casts to 16 bit
    largest_layer: int          # parameters of its biggest layer (ZeRO-3 gathers one at a time)
    root_params: int            # embeddings and head: FSDP's root group, gathered through the step
    has_embedding: bool
    has_head: bool
    in_flight: float            # micro-batches whose activations it holds at once (1F1B)


def stages(arch: "Architecture", lay: Layout) -> list[Stage]:
    """One Stage per pipeline stage (a single one without pipeline parallelism)."""
    return list(_place(arch, lay))


# The answers' searches re-estimate one setup dozens of times with another batch or sequence length: the
# placement is kept per architecture and layout.
@lru_cache(maxsize=256)
def _place(arch: "Architecture", lay: Layout) -> "tuple[Stage, ...]":
    counts = count_parameters(arch)
    if arch.kind == "generic":
        return (Stage(0, 0, counts.total, 0, 0, 0, True, True, 1),)
    t, e = lay.tp, lay.ep
    alike: "dict[tuple[str, str], int]" = {}       # (mixer, MLP) -> one such layer's parameters on this GPU
    for layer in range(arch.layers):
        kind = (mixer_at(arch, layer), mlp_at(arch, layer))
        if kind not in alike:
            alike[kind] = layer_params(arch, layer, t, e)
    if arch.kind == "encoder-decoder":       # no pipeline split modelled: counts as one stage
        per_layer = math.ceil((counts.layers_total) / t)
        return (Stage(0, arch.layers, math.ceil(counts.total / t), math.ceil(counts.total / t), per_layer,
                      math.ceil(counts.embedding / t), True, True, 1),)
    embedding = math.ceil(counts.embedding / t)
    tower = math.ceil(counts.parts.get("vision", 0) / t)     # a vision tower sits with the embedding, its matrices split
    head = _head_params(arch, counts, t)
    result = []
    first = 0
    for index in range(lay.pp):
        n = arch.layers // lay.pp + (1 if index < arch.layers % lay.pp else 0)
        placed = [alike[(mixer_at(arch, layer), mlp_at(arch, layer))] for layer in range(first, first + n)]
        first += n
        params = sum(placed)
        has_embedding, has_head = index == 0, index == lay.pp - 1
        if has_embedding:
            params += embedding + tower
        if has_head:
            params += head
            if arch.tied_embeddings and lay.pp > 1:
                params += embedding        # the last stage keeps its own copy of the tied matrix
        # the matrices autocast casts: as pycore.memory.estimate counts them for one GPU (two norms a layer)
        matrix = params - (embedding if has_embedding else 0) - n * 2 * arch.norm_params
        if has_head and arch.tied_embeddings:
            matrix += embedding if lay.pp == 1 else 0
        root = params - sum(placed)
        result.append(Stage(index, n, params, matrix, max(placed, default=0), root, has_embedding, has_head,
                            _in_flight(lay, index)))
    return tuple(result)


def _head_params(arch: "Architecture", counts: "ParameterCount", t: int) -> int:
    """Parameters of the last stage's head on one GPU: the output matrix (and bias) vocabulary-parallel, t
    ways; the final norm and an encoder's other head layers replicated."""
    if arch.kind == "decoder":
        return math.ceil((counts.head - arch.norm_params) / t) + arch.norm_params
    lm = arch.task_head in ("causal-lm", "masked-lm") and not arch.tied_embeddings
    return math.ceil((arch.vocab * arch.hidden if lm else 0) / t) + counts.head - \
        (arch.vocab * arch.hidden if lm else 0)


def _in_flight(lay: Layout, index: int) -> float:
    """Micro-batches whose activations stage ``index`` holds at once: 1F1B keeps pp − index of them (at most
    every micro-batch). The interleaved schedule with v model chunks per stage runs 2·(p − i − 1) + (v − 1)·p
    chunk forwards before its first backward, and one more with it (Megatron-LM schedules.py
    forward_backward_pipelining_with_interleaving, num_warmup_microbatches; torch.distributed.pipelining
    ScheduleInterleaved1F1B, _get_warmup_ops), at most every chunk of every micro-batch: in micro-batches of
    the stage's layers, p·(1 + (p − 1)/(p·v)) on the first stage (validation/measured_pipeline.json)."""
    if lay.interleave > 1:
        v = lay.interleave
        return min(2 * (lay.pp - index - 1) + (v - 1) * lay.pp + 1, lay.microbatches * v) / v
    return min(lay.pp - index, lay.microbatches)
