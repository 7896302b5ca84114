"""Model states on one GPU: weights, master weights, gradients, optimizer state and the step's temporaries,
with ZeRO/FSDP sharding (Rajbhandari et al. 2020) and CPU offload. Each is a Pool (pycore.memory.pools)."""

from dataclasses import dataclass

from pycore.base.expr import Q, ceil, num, rnd, sym
from pycore.base.remember import remembered
from pycore.memory import finetune, quantization
from pycore.memory import optimizer as opt
from pycore.memory.parallel import Stage
from pycore.memory.pools import Pool, make
from pycore.memory.precision import BITS
from pycore.memory.setup import Setup

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
    """Bytes of the weights one GPU of ``stage`` stores, in their storage format (quantized or not)."""
    total = setup.counts.total
    stored = quantization.weight_bytes_q(setup.quant, setup.group_size, setup.arch, setup.counts,
                                         setup.policy.bytes("weight"))
    return rnd(stored * sym("S", stage.params) / sym("P", total)) if stage.params != total else stored


@remembered(lambda setup, stage: (setup.arch, setup.policy, setup.layout, setup.finetune, setup.quant,
                                  setup.group_size, setup.optimizer, setup.optimizer_impl, stage.params,
                                  stage.root_params))     # all it reads
def model_states(setup: Setup, stage: Stage) -> States:
    """Weights, master weights, gradients, optimizer state and step temporaries of one pipeline stage.

    They do not depend on the batch, the sequence or the stage's place in the pipeline, so they are
    remembered: the answers' searches and the middle stages of a pipeline ask for the same ones again."""
    arch, lay, policy = setup.arch, setup.layout, setup.policy
    total = setup.counts.total
    group, zero = lay.shard_group, lay.zero
    stored = stored_weights(setup, stage)
    weight_formula = f"{setup.quant} storage" if setup.quant != "none" else policy.weight
    if not setup.finetune.adapters:
        trainable = stage.params
        # Megatron and DeepSpeed accumulate 16-bit gradients in an fp32 buffer across micro-batches.
        grad_bytes = 4 if (policy.master != "none" and lay.microbatches > 1) else policy.bytes("grad")
        state_bytes, master_bytes = policy.bytes("opt"), policy.bytes("master")
        trainable_q = sym("S", trainable)
    else:
        whole = finetune.adapter_params(arch, setup.finetune.rank, setup.finetune.targets)
        trainable = round(whole * stage.params / total)
        grad_bytes = state_bytes = BITS[setup.finetune.dtype] / 8
        master_bytes = 0
        trainable_q = sym("A", trainable)
        stored = stored + rnd(trainable_q * grad_bytes)
    sharded3 = zero == 3 and group > 1
    weights = _sharded(stored, group, 3, zero)
    pools = []
    host = []
    source_zero = "ZeRO (Rajbhandari et al. 2020): stage 1 shards optimizer state, 2 gradients, 3 weights over g"
    symbols = "P = parameters of the model; S = parameters on this GPU (its tensor/pipeline part); " \
              "Pq = parameters in quantized matrices; bits = bits per quantized weight; g = GPUs one shard spans"
    if lay.offload == "params":
        host.append(make("weights", "Weights (in CPU memory)", weights, (), source_zero, symbols))
    else:
        pools.append(make("weights", f"Weights ({weight_formula})", weights, STATIC,
                          "parameters counted layer by layer, exact against transformers (docs/validation.md)",
                          symbols))
    # FSDP2 and ZeRO-3 gather one layer at a time, but keep the root group (embeddings and head) gathered
    # through forward and backward (validation/measured_fsdp.json). SHARD_GRAD_OP keeps its shard beside
    # the full copy.
    if lay.fsdp == "SHARD_GRAD_OP" and group > 1:
        pools.append(make("gathered_weights", "Weight shard kept beside the full copy (SHARD_GRAD_OP)",
                          ceil(stored / sym("g", group)), STATIC, "PyTorch FSDP SHARD_GRAD_OP", symbols,
                          group="weights"))
    elif sharded3 and stage.root_params:
        pools.append(make("gathered_weights", "Gathered embeddings and head (FSDP root group)",
                          sym("R", stage.root_params) * policy.bytes("gather"), STATIC, "validation/measured_fsdp.json (FSDP2)",
                          "R = parameters of the root group (embeddings, final norm, head)", group="weights"))
    gradients = _sharded(rnd(trainable_q * grad_bytes), group, 2, zero)
    master = _sharded(rnd(trainable_q * master_bytes), group, 1, zero) if master_bytes else None
    states_per_param = opt.STATES[setup.optimizer]
    if setup.optimizer == "adam-8bit":
        # bitsandbytes: two uint8 states plus an fp32 absmax per 2048-element block for each
        state = trainable_q * 2 + ceil(trainable_q / 2048) * 8
    else:
        state = rnd(trainable_q * num(states_per_param) * state_bytes)
    optimizer = _sharded(state, group, 1, zero)
    temporaries = _step_temporaries(setup, trainable_q, state_bytes)
    temporaries = _sharded(temporaries, group, 1, zero) if temporaries is not None else None
    opt_source = opt.__doc__.split("\n\n")[1].replace("\n", " ")
    offloaded = lay.offload != "none"
    # The fp32 master weights receive fp32 copies of the gradients before the step; the 16-bit
    # gradients are not needed then. Offloaded steps run on the CPU.
    step_gradients = not master and not offloaded
    grad_moments = GRADIENT_MOMENTS + (("optimizer step",) if step_gradients else ())
    pools.append(make("gradients", f"Gradients ({_dtype_name(grad_bytes)})", gradients, grad_moments,
                      "one gradient per trainable parameter" + (
                          "; fp32 accumulation across micro-batches (Megatron, DeepSpeed)"
                          if grad_bytes == 4 and policy.bytes("grad") != 4 else ""),
                      "S = trainable parameters on this GPU; A = LoRA adapter parameters; g = GPUs one shard spans"))
    target = host if offloaded else pools
    moments_static = () if offloaded else STATIC
    label_host = " (in CPU memory)" if offloaded else ""
    if master is not None:
        target.append(make("master_weights", f"Master weights (fp32){label_host}", master, moments_static,
                           "Micikevicius et al. 2018, mixed precision training", "S = parameters on this GPU"))
    target.append(make("optimizer", f"Optimizer state ({setup.optimizer}){label_host}", optimizer, moments_static,
                       opt_source, f"S = trainable parameters; {states_per_param:g} states per parameter"))
    step: "list[Q]" = [q for q in (temporaries,) if q is not None and q.value]
    if master is not None:
        step.append(master)
    if step:
        combined = step[0] if len(step) == 1 else step[0] + step[1]
        label = "Optimizer step temporaries" + (" (+ fp32 gradient copies)" if master is not None else "")
        if offloaded:
            host.append(make("optimizer_step_temporaries", label + " (in CPU memory)", combined, (), opt_source))
        else:
            pools.append(make("optimizer_step_temporaries", label, combined, ("optimizer step",),
                              KERNEL_SOURCES[setup.optimizer_impl],
                              "S = trainable parameters; n, n_prev = the largest parameter tensor and the "
                              "one updated before it"))
    if offloaded:
        host.append(make("offloaded_gradients", "Gradient copies (in CPU memory)", gradients, (), opt_source))
    return States(tuple(pools), tuple(host), grad_bytes, trainable)


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


def _dtype_name(element_bytes: float) -> str:
    return {4: "fp32", 2: "16-bit", 1: "8-bit", 0.5: "4-bit"}.get(element_bytes, f"{element_bytes:g} B")
