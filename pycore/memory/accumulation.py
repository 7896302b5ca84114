"""Gradient accumulation and pipeline micro-batches: the moments of a later micro-batch.

With ``microbatches`` > 1 a step runs several forwards and backwards before the optimizer steps. The
gradients the first micro-batch's backward makes stay alive while every later micro-batch runs forward
and backward (the Hugging Face Trainer: ``loss / N``, ``backward()`` per micro-batch into ``.grad``, then
``optimizer.step()`` and ``zero_grad(set_to_none=True)``; transformers 5 ``Trainer.training_step``). So a
later micro-batch's moments hold the accumulated gradients beside that micro-batch's own activations: the
peak is at least weights + gradients + optimizer state + one micro-batch's saved activations.

The accumulated gradient is the gradients pool as the setup keeps it: in the parameters' dtype for the
Trainer, in an fp32 buffer for Megatron and DeepSpeed with master weights (pycore.memory.model_states), and
sharded under ZeRO-2/3 and FSDP, which reduce-scatter every micro-batch by default (FSDP2
``FSDPModule.set_requires_gradient_sync`` is True unless the loop turns it off; DeepSpeed ZeRO-2/3 reduce
each micro-batch into the partitioned gradient). With the optimizer offloaded, DeepSpeed accumulates the
partitioned gradients in CPU memory, so they are not on the GPU between micro-batches.

A pipeline stage accumulates its gradients over its micro-batches the same way (1F1B: after the first
backward, each forward is followed by a backward, so the stage again holds its micro-batches in flight,
now beside its gradients; when no micro-batch is left to start, one fewer).
"""

from dataclasses import replace

from pycore.memory.pools import Pool

LATER = ", later micro-batch"


def later(moment: str) -> str:
    """The same moment of a later micro-batch: "backward start" -> "backward start, later micro-batch"."""
    return moment + LATER


def moments(per_microbatch: "tuple[str, ...]", once: "tuple[str, ...]") -> "tuple[str, ...]":
    """The step's moments in order: the first micro-batch's, a later micro-batch's, then those of the step."""
    return per_microbatch + tuple(later(m) for m in per_microbatch) + once


def in_flight_later(in_flight: float, microbatches: int) -> float:
    """Micro-batches a stage holds during a later micro-batch: as many as in the first while a micro-batch is
    still to start (1F1B steady state), else one fewer (the cool-down's backwards)."""
    return in_flight if microbatches > in_flight else in_flight - 1


def with_later_moments(pools: "list[Pool]", per_microbatch: "tuple[str, ...]", gradients_stay: bool,
                       later_activations: "list[Pool] | None" = None,
                       unsynced: "Pool | None" = None) -> "list[Pool]":
    """Each pool made per micro-batch is live in the same moments of a later micro-batch; the gradients are
    live in all of them (``gradients_stay``: on the GPU between micro-batches); pools of the whole step keep
    their moments. ``later_activations``, when given, replace the activation pools in the later moments (a
    pipeline stage holding one micro-batch fewer). ``unsynced``, when given, is what stays of the gradients
    between micro-batches instead of the gradients pool: every gradient unsharded, when sync is skipped until
    the last micro-batch (``no_sync`` under FSDP)."""
    replaced = {p.key for p in later_activations or ()}
    if unsynced is not None:
        gradients_stay = False
    out = []
    for pool in pools:
        if pool.key == "gradients":
            extra = tuple(later(m) for m in per_microbatch) if gradients_stay else ()
        elif pool.key in replaced:
            extra = ()
        else:
            extra = tuple(later(m) for m in pool.moments if m in per_microbatch)
        out.append(replace(pool, moments=pool.moments + extra) if extra else pool)
    if unsynced is not None:
        out.append(replace(unsynced, moments=tuple(later(m) for m in per_microbatch)))
    for pool in later_activations or ():
        out.append(replace(pool, key=pool.key + "_later", moments=tuple(later(m) for m in pool.moments),
                           group=pool.group or pool.key))
    return out
