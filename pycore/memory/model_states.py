"""Model states on one GPU: weights, master weights, gradients, optimizer state and the step's temporaries,
with ZeRO/FSDP sharding (Rajbhandari et al. 2020) and CPU offload. Each is a Pool (pycore.memory.pools)."""

import math
from dataclasses import dataclass

from pycore.base.expr import Q, ceil, num, rnd, sym
from pycore.base.remember import remembered
from pycore.base.units import printable
from pycore.memory import finetune, quantization
from pycore.memory import optimizer as opt
from pycore.memory.parallel import Stage
from pycore.memory.pools import Pool, make
from pycore.memory.precision import BITS, dtype_name
from pycore.memory.setup import Setup
from pycore.model import vision

STATIC = ("forward end", "backward start", "backward, first layer", "backward, last layer", "backward end",
          "optimizer step")
GRADIENT_MOMENTS = ("backward, last layer", "backward end")
KERNEL_SOURCES = {
    "foreach": "foreach kernel (torch.optim _multi_tensor_adam): torch._foreach_sqrt(exp_avg_sqs) makes one "
               "state-sized temporary per parameter, all at once (validation/measured_optimizer.json)",
    "fused": "fused kernel (torch._fused_adamw_): updates in place, no temporaries "
             "(validation/measured_optimizer.json)",
    "for-loop": "for-loop kernel (torch.optim _single_tensor_adam): two temporaries the size of the parameter "
                "being updated and one of the one before it (validation/measured_optimizer.json)",
}
SOURCE_ZERO = "ZeRO (Rajbhandari et al. 2020): stage 1 shards optimizer state, 2 gradients, 3 weights over g"
WEIGHT_SYMBOLS = "P = parameters of the model; S = parameters on this GPU (its tensor/pipeline part); " \
                 "Pq = parameters in quantized matrices; bits = bits per quantized weight; g = GPUs one shard spans"


@dataclass(frozen=True)
class States:
    """The model-state pools of one GPU and the bytes kept in host memory instead."""

    pools: "tuple[Pool, ...]"
    host: "tuple[Pool, ...]"
    grad_bytes: float           # bytes per gradient element (fp32 when accumulating 16-bit gradients)
    trainable: int              # trainable parameters on this GPU, before sharding


def _sharded(q: Q, group: int, needed: int, zero: int) -> Q:
    """``q`` divided over the ZeRO group when the stage shards it."""
    return ceil(q / sym("g", group)) if zero >= needed and group > 1 else q


def stored_weights(setup: Setup, stage: Stage) -> Q:
    """Bytes of the weights one GPU of ``stage`` stores, in their storage format (quantized or not); with
    ``weight_bytes`` (a checkpoint's headers) those exact bytes instead, this GPU holding its share S / P."""
    total = setup.counts.total
    stored = sym("W", setup.weight_bytes) if setup.weight_bytes else \
        quantization.weight_bytes_q(setup.quant, setup.group_size, setup.arch, setup.counts,
                                    setup.policy.bytes("weight"))
    return rnd(stored * sym("S", stage.params) / sym("P", total)) if stage.params != total else stored


FROM_PARAMETERS = "parameters counted layer by layer, exact against transformers (docs/validation.md)"


def weights_source(setup: Setup, counted: str = FROM_PARAMETERS) -> str:
    """The weights pool's source: the checkpoint's headers and their files when ``weight_bytes`` was given (W),
    else ``counted``, the source of the estimate from parameters."""
    if not setup.weight_bytes:
        return counted
    files = printable(setup.weight_files, 200) or "files not named"
    return (f"from the checkpoint's headers ({files}): W = {setup.weight_bytes:,} bytes, every tensor's dtype x shape "
            "as stored, in place of parameters x bits per weight (python -m pycore header=PATH reads them)")


def weight_symbols(setup: Setup, symbols: str = WEIGHT_SYMBOLS) -> str:
    """The weights' ``symbols``, with W when the checkpoint's bytes are used."""
    return symbols + ("; W = the weights' bytes in the checkpoint's headers" if setup.weight_bytes else "")


def ungraded_params(setup: Setup) -> int:
    """A vision-language model's tower parameters that get no gradient in a training step, and so no optimizer state
    (PyTorch's optimizers skip a parameter whose grad is None): the whole tower and its projector when the step has
    no images (the model's forward never runs them), LLaVA's blocks past its feature layer and post-LayerNorm when it
    has (VisionTower.unused_params). Where ZeRO or FSDP flatten parameters into buffers, or fp32 master weights or
    gradient buffers are kept, every trainable parameter has its share whatever reaches it: 0 then."""
    seeing = vision.tower(setup.arch)
    if not seeing or setup.layout.zero or setup.policy.master != "none":
        return 0
    return seeing.unused_params() if setup.workload.images else setup.counts.parts.get("vision", 0)


@dataclass(frozen=True)
class Trainable:
    """What the optimizer updates on one GPU, before sharding, and the bytes it keeps per element of it."""

    count: int                  # trainable parameters on this GPU
    q: Q                        # the same as a quantity: S (the stage's parameters) or A (its LoRA adapters)
    grad_bytes: float           # per gradient element
    state_bytes: float          # per optimizer-state element
    master_bytes: float         # per fp32 master weight (0: none kept)


def trainable(setup: Setup, stage: Stage) -> Trainable:
    """Full training updates every parameter of the stage in the policy's dtypes; LoRA only the adapters
    (their share of the stage's parameters), whose gradients and states PEFT keeps in the adapters' dtype,
    with no master copy (pycore.memory.finetune)."""
    policy = setup.policy
    if not setup.finetune.adapters:
        # Megatron and DeepSpeed accumulate 16-bit gradients in an fp32 buffer across micro-batches.
        grad_bytes = 4 if (policy.master != "none" and setup.layout.microbatches > 1) else policy.bytes("grad")
        ungraded = math.ceil(ungraded_params(setup) / setup.layout.tp) if stage.has_embedding else 0
        return Trainable(stage.params - ungraded, sym("S", stage.params - ungraded), grad_bytes, policy.bytes("opt"),
                         policy.bytes("master"))
    whole = finetune.adapter_params(setup.arch, setup.finetune.rank, setup.finetune.targets, setup.finetune.dora)
    count = round(whole * stage.params / setup.counts.total)
    adapter_bytes = BITS[setup.finetune.dtype] / 8
    return Trainable(count, sym("A", count), adapter_bytes, adapter_bytes, 0)


@remembered(lambda setup, stage: (setup.arch, setup.policy, setup.layout, setup.finetune, setup.quant,
                                  setup.group_size, setup.optimizer, setup.optimizer_impl, stage.params,
                                  stage.root_params, setup.weight_bytes, setup.weight_files,
                                  bool(setup.workload.images)))     # all it reads
def model_states(setup: Setup, stage: Stage) -> States:
    """Weights, master weights, gradients, optimizer state and step temporaries of one pipeline stage.

    They do not depend on the batch, the sequence or the stage's place in the pipeline, so they are
    remembered: the answers' searches and the middle stages of a pipeline ask for the same ones again.
    With offload the optimizer's pools live in host memory, and with offload=params the weights too."""
    lay = setup.layout
    train = trainable(setup, stage)
    stored = stored_weights(setup, stage)
    if setup.finetune.adapters:
        stored = stored + rnd(train.q * train.grad_bytes)       # the adapters, beside the frozen base
    offloaded = lay.offload != "none"
    gradients = _sharded(rnd(train.q * train.grad_bytes), lay.shard_group, 2, lay.zero)
    master = _sharded(rnd(train.q * train.master_bytes), lay.shard_group, 1, lay.zero) \
        if train.master_bytes else None
    pools: "list[Pool]" = []
    host: "list[Pool]" = []
    (host if lay.offload == "params" else pools).append(_weights(setup, stored))
    pools += _gathered_weights(setup, stage, stored)
    # The fp32 master weights receive fp32 copies of the gradients before the step; the 16-bit
    # gradients are not needed then. Offloaded steps run on the CPU.
    late = _embedding_gradient(setup, stage, train)
    if late:
        # the input embedding's gradient is made when backward reaches it, after the first layer's
        embedding = _sharded(rnd(sym("Ve", late) * train.grad_bytes), lay.shard_group, 2, lay.zero)
        pools.append(_gradients(setup, train, gradients - embedding, in_step=master is None and not offloaded))
        pools.append(make("embedding_gradient", f"Embedding gradient ({dtype_name(train.grad_bytes)})", embedding,
                          ("backward end",) + (("optimizer step",) if master is None and not offloaded else ()),
                          "made when backward reaches the input embedding, after the first layer",
                          "Ve = the input embedding's parameters", group="gradients"))
    else:
        pools.append(_gradients(setup, train, gradients, in_step=master is None and not offloaded))
    optimizer_pools = host if offloaded else pools
    if master is not None:
        optimizer_pools.append(_master_weights(master, offloaded))
    optimizer_pools.append(_optimizer_state(setup, train, offloaded))
    optimizer_pools += _step_temporaries_pool(setup, train, master, offloaded)
    if offloaded:
        host.append(make("offloaded_gradients", "Gradient copies (in CPU memory)", gradients, (), _opt_source()))
    return States(tuple(pools), tuple(host), train.grad_bytes, train.count)


def _opt_source() -> str:
    """The optimizer module's second paragraph: the states each optimizer keeps per parameter, and why."""
    return (opt.__doc__ or "").split("\n\n")[1].replace("\n", " ")


def _host(offloaded: bool) -> str:
    """The label's note for a pool kept in CPU memory."""
    return " (in CPU memory)" if offloaded else ""


def _weights(setup: Setup, stored: Q) -> Pool:
    """The weights in their storage format, sharded by ZeRO-3/FSDP; in CPU memory with offload=params."""
    weights = _sharded(stored, setup.layout.shard_group, 3, setup.layout.zero)
    if setup.layout.offload == "params":
        return make("weights", "Weights (in CPU memory)", weights, (), SOURCE_ZERO, weight_symbols(setup))
    weight_format = "checkpoint" if setup.weight_bytes else f"{setup.quant} storage" if setup.quant != "none" \
        else setup.policy.weight
    return make("weights", f"Weights ({weight_format})", weights, STATIC, weights_source(setup), weight_symbols(setup))


def _gathered_weights(setup: Setup, stage: Stage, stored: Q) -> "list[Pool]":
    """Weights kept whole beside the shards: FSDP2 and ZeRO-3 gather one layer at a time, but keep the root
    group (embeddings and head) gathered through forward and backward (validation/measured_fsdp.json);
    SHARD_GRAD_OP keeps its shard beside the full copy."""
    lay = setup.layout
    group = lay.shard_group
    if lay.fsdp == "SHARD_GRAD_OP" and group > 1:
        return [make("gathered_weights", "Weight shard kept beside the full copy (SHARD_GRAD_OP)",
                     ceil(stored / sym("g", group)), STATIC, "PyTorch FSDP SHARD_GRAD_OP", WEIGHT_SYMBOLS,
                     group="weights")]
    if lay.zero == 3 and group > 1 and stage.root_params:
        return [make("gathered_weights", "Gathered embeddings and head (FSDP root group)",
                     sym("R", stage.root_params) * setup.policy.bytes("gather"), STATIC,
                     "validation/measured_fsdp.json (FSDP2)",
                     "R = parameters of the root group (embeddings, final norm, head)", group="weights")]
    return []


def _embedding_gradient(setup: Setup, stage: Stage, train: Trainable) -> int:
    """Parameters of an untied input embedding trained on this stage, in a step of one micro-batch (0 otherwise:
    tied to the head, whose gradient comes first, frozen, on another stage, or made by an earlier micro-batch)."""
    arch, lay = setup.arch, setup.layout
    if setup.finetune.adapters or not stage.has_embedding or arch.tied_embeddings or arch.kind != "decoder" \
            or lay.microbatches > 1:       # a later micro-batch's backward has the first's embedding gradient beside
        return 0
    return -(-arch.vocab * arch.hidden // lay.tp)      # split t ways, as parallel._place stores it


def _gradients(setup: Setup, train: Trainable, gradients: Q, in_step: bool) -> Pool:
    """One gradient per trainable parameter, from the last layer's backward on; through the optimizer step
    too when the step reads them (``in_step``: no fp32 master copy takes them over, no offload)."""
    moments = GRADIENT_MOMENTS + (("optimizer step",) if in_step else ())
    accumulated = train.grad_bytes == 4 and setup.policy.bytes("grad") != 4
    return make("gradients", f"Gradients ({dtype_name(train.grad_bytes)})", gradients, moments,
                "one gradient per trainable parameter" + (
                    "; fp32 accumulation across micro-batches (Megatron, DeepSpeed)" if accumulated else ""),
                "S = trainable parameters on this GPU; A = LoRA adapter parameters; g = GPUs one shard spans")


def _master_weights(master: Q, offloaded: bool) -> Pool:
    """The fp32 copy mixed-precision training updates (Micikevicius et al. 2018), sharded from ZeRO-1 on."""
    return make("master_weights", f"Master weights (fp32){_host(offloaded)}", master, () if offloaded else STATIC,
                "Micikevicius et al. 2018, mixed precision training", "S = parameters on this GPU")


def _optimizer_state(setup: Setup, train: Trainable, offloaded: bool) -> Pool:
    """The optimizer's states per trainable parameter (pycore.memory.optimizer), sharded from ZeRO-1 on."""
    states_per_param = opt.STATES[setup.optimizer]
    if setup.optimizer == "adam-8bit":
        # bitsandbytes: two uint8 states plus an fp32 absmax per 2048-element block for each
        state = train.q * 2 + ceil(train.q / 2048) * 8
    else:
        state = rnd(train.q * num(states_per_param) * train.state_bytes)
    optimizer = _sharded(state, setup.layout.shard_group, 1, setup.layout.zero)
    return make("optimizer", f"Optimizer state ({setup.optimizer}){_host(offloaded)}", optimizer,
                () if offloaded else STATIC, _opt_source(),
                f"S = trainable parameters; {states_per_param:g} states per parameter")


def _step_temporaries_pool(setup: Setup, train: Trainable, master: "Q | None", offloaded: bool) -> "list[Pool]":
    """What the optimizer step allocates for itself: the kernel's temporaries and, with master weights,
    the fp32 copies of the gradients; none when there are neither."""
    temporaries = _step_temporaries(setup, train.q, train.state_bytes)
    if temporaries is not None:
        temporaries = _sharded(temporaries, setup.layout.shard_group, 1, setup.layout.zero)
    step: "list[Q]" = [q for q in (temporaries,) if q is not None and q.value]
    if master is not None:
        step.append(master)
    if not step:
        return []
    combined = step[0] if len(step) == 1 else step[0] + step[1]
    label = "Optimizer step temporaries" + (" (+ fp32 gradient copies)" if master is not None else "")
    if offloaded:
        return [make("optimizer_step_temporaries", label + " (in CPU memory)", combined, (), _opt_source())]
    return [make("optimizer_step_temporaries", label, combined, ("optimizer step",),
                 KERNEL_SOURCES[setup.optimizer_impl],
                 "S = trainable parameters; n, n_prev = the largest parameter tensor and the "
                 "one updated before it")]


def _step_temporaries(setup: Setup, trainable: Q, state_bytes: float) -> "Q | None":
    """The optimizer step's own temporaries for the chosen kernel (pycore.memory.optimizer)."""
    kernel = setup.optimizer_impl
    if kernel == "fused" and setup.optimizer not in opt.NO_FUSED_KERNEL:
        return None
    if kernel == "foreach":
        per_param = opt.STEP_TEMPORARIES[setup.optimizer]
        return rnd(trainable * num(per_param) * state_bytes) if per_param else None
    # for-loop (validation/measured_optimizer.json, torch 2.13): a tensors the size of the one being
    # updated and b the size of the one before it. The embedding, usually the largest, comes first; when an
    # MLP matrix is the largest, gate_proj sits just before up_proj, of the same size.
    a, b = opt.FOR_LOOP_TEMPORARIES[setup.optimizer]
    if not a:
        return None
    arch = setup.arch
    mlp = arch.hidden * (arch.expert_ffn or arch.ffn)
    embedding = arch.vocab * arch.hidden
    size, before = max(((embedding, 0), (mlp, mlp if arch.mlp == "gated" else 0)),
                       key=lambda pair: a * pair[0] + b * pair[1])
    count = int(trainable.value)
    size = min(size or count, count)
    before = min(before, count - size)
    return rnd((sym("n", size) * a + sym("n_prev", before) * b) * state_bytes)
