"""A training step on one GPU as moments, each the sum of the pools live in it.

The moments, as ``torch.cuda.max_memory_allocated()`` sees them after a warm-up step with
``zero_grad(set_to_none=True)``:

- forward end: weights, optimizer state and every saved activation, while the loss is computed (logits,
  their fp32 copy and log-softmax alive); gradients do not exist yet;
- backward start: the loss gradients next to every activation;
- backward, first layer: activations still saved, the head's weight gradient, one layer's working tensors;
- backward, last layer: activations freed, every gradient made, one layer's working tensors;
- backward end: every gradient plus the buffers that exist only at the end (tied-embedding gradient sum,
  FSDP's root reduce-scatter buffer);
- optimizer step: weights, gradients, state and the step's own temporaries.

Saved activations shrink and gradients grow monotonically through backward, so its peak is at one of
the four backward moments. Every pipeline stage is estimated and the worst one reported.
"""

from dataclasses import replace

from pycore.base.expr import floor, maximum, num, rnd, split, sym
from pycore.memory import accumulation, distillation, finetune, parallel, posttraining, ppo, vision_activations
from pycore.memory import activations as act
from pycore.memory.device import blas_workspaces
from pycore.memory.model_states import STATIC, model_states, trainable
from pycore.memory.pools import Pool, StageResult, make, peak_of, worst_stage
from pycore.memory.precision import BITS, dtype_name
from pycore.memory.setup import Setup
from pycore.model.catalog import gpus as gpu_catalog

MOMENTS = STATIC
SAVED = ("forward end", "backward start", "backward, first layer")
WORKING = ("backward, first layer", "backward, last layer")
GENERIC_MOMENTS = ("forward end", "backward", "optimizer step")


def training(setup: Setup, every_stage: bool = True) -> StageResult:
    """Pools, moments and phases of the worst pipeline stage; every stage's summary when pp > 1.

    ``every_stage=False`` (totals only) leaves out a stage when another holds the same layers with more
    micro-batches in flight, or as many and comes first: only the activations depend on the micro-batches
    in flight, so its peak cannot be the worst."""
    per_token = None
    if setup.arch.kind != "generic" and setup.workload.activation_model == "detailed":
        per_token = act.per_token(setup)            # the same for every stage
    stages = parallel.stages(setup.arch, setup.layout)
    if not every_stage:
        stages = _most_loaded_of_each_kind(stages)
    return worst_stage([stage_estimate(setup, stage, per_token) for stage in stages])


def _most_loaded_of_each_kind(stages: "list[parallel.Stage]") -> "list[parallel.Stage]":
    """Of the stages that differ only in index and micro-batches in flight, the first with the most."""
    most: "dict[parallel.Stage, parallel.Stage]" = {}
    for stage in stages:
        kind = replace(stage, index=0, in_flight=0)
        if kind not in most or stage.in_flight > most[kind].in_flight:
            most[kind] = stage
    return sorted(most.values(), key=lambda stage: stage.index)


def stage_estimate(setup: Setup, stage: parallel.Stage, per_token: "act.PerToken | None" = None) -> StageResult:
    """Every pool of one stage, the total of each moment and the peak."""
    arch, lay, work = setup.arch, setup.layout, setup.workload
    states = model_states(setup, stage)
    tokens = work.batch * work.seq // lay.cp
    generic = arch.kind == "generic"
    pools: "list[Pool]" = list(states.pools)
    terms: "list[act.Term]" = []
    if not generic and work.activation_model == "detailed":
        terms = (per_token or act.per_token(setup))[1]
    pools += _activations(setup, stage, tokens, per_token)
    pools += vision_activations.pools(setup, stage, SAVED + WORKING)     # freed by the tower's backward, the last
    if not generic and stage.has_head and work.mode == "train" and arch.output_width:
        # DPO's and GRPO's policy scores its tokens through TRL's fused head, not the logits (pycore.memory.posttraining)
        if setup.finetune.recipe in ("dpo", "grpo", "kto"):
            pools += posttraining.head_pools(setup, tokens)
        elif setup.finetune.recipe != "distill":    # the divergence's pools come with the teacher's (distill_step)
            pools += _loss_pools(setup, tokens)
    pools += _gradient_buffers(setup, stage, states.grad_bytes)
    pools += _weight_copies(setup, stage)
    pools += _dora_norm(setup, stage)
    pools += _pipeline_buffers(setup, stage, tokens)
    per_microbatch: "tuple[str, ...]"
    per_microbatch, once = (GENERIC_MOMENTS[:2], GENERIC_MOMENTS[2:]) if generic else (MOMENTS[:-1], MOMENTS[-1:])
    if generic:
        pools = [_generic_moments(p) for p in pools]
    before: "tuple[str, ...]" = ()       # GRPO's rollout and reference pass, once before the micro-batches
    if setup.finetune.recipe in ("dpo", "kto"):
        pools, per_microbatch = posttraining.preference_step(setup, stage, pools, tokens, per_microbatch)
    elif setup.finetune.recipe == "grpo":
        pools, before = posttraining.grpo_step(setup, stage, pools, tokens)
    elif setup.finetune.recipe == "distill":
        pools, before, per_microbatch = distillation.distill_step(setup, stage, pools, tokens, per_microbatch)
    # PPO's rollout, scoring passes and update (pycore.memory.ppo); any other recipe's pools and moments unchanged
    pools, before, per_microbatch = ppo.with_ppo(setup, stage, pools, tokens, (before, per_microbatch))
    moments = before + per_microbatch + once
    if lay.microbatches > 1:
        pools = accumulation.with_later_moments(pools, per_microbatch, lay.offload == "none",
                                                _later_activations(setup, stage, tokens, per_token),
                                                _unsynced_gradients(setup, stage, states.grad_bytes))
        moments = before + accumulation.moments(per_microbatch, once)
    pools += blas_workspaces(gpu_catalog()[setup.gpu], 2, moments, setup.cublas_workspace)     # the forward's thread and autograd's
    peak = peak_of(pools, moments)
    return {"pools": pools, "host": list(states.host), "moments": peak["moments"], "phases": peak["phases"],
            "peak_moment": peak["peak_moment"], "peak_phase": peak["peak_phase"], "peak_bytes": peak["peak_bytes"],
            "activation_terms": terms, "tokens": tokens, "layers": stage.layers, "stage": stage.index,
            "params_per_gpu": stage.params, "host_bytes": sum(p.bytes for p in states.host)}


def _activations(setup: Setup, stage: parallel.Stage, tokens: int, per_token: "act.PerToken | None") -> "list[Pool]":
    """The saved activations of the micro-batches the stage holds, and one layer's working tensors."""
    if setup.arch.kind == "generic" or setup.workload.activation_model != "detailed":
        return [_whole_model_activations(setup, stage, tokens)]
    per_layer, _, final, working = per_token or act.per_token(setup)
    return _detailed_activations(setup, stage, tokens, per_layer, final, working)


def _unsynced_gradients(setup: Setup, stage: parallel.Stage, grad_bytes: float) -> "Pool | None":
    """Under FSDP with gradient sync only on the last micro-batch (grad_sync=last, the Trainer's no_sync), every
    gradient stays unsharded between micro-batches, in the dtype FSDP reduces in; None when they are sharded
    each time (or were never sharded)."""
    lay = setup.layout
    if setup.sync_every_microbatch or lay.fsdp == "none" or lay.zero < 2 or lay.shard_group == 1 \
            or lay.offload != "none":
        return None
    return make("gradients_unsynced", f"Gradients accumulated unsharded ({dtype_name(grad_bytes)}, no_sync)",
                rnd(sym("S", trainable(setup, stage).count) * grad_bytes), (),
                "FSDP no_sync / set_requires_gradient_sync(False) until the last micro-batch (the Trainer's "
                "accelerator.no_sync): each gradient is kept unsharded (FSDP2 accumulates it in its reduce dtype)",
                "S = trainable parameters on this GPU, before sharding", group="gradients")


def _later_activations(setup: Setup, stage: parallel.Stage, tokens: int,
                       per_token: "act.PerToken | None") -> "list[Pool] | None":
    """A pipeline stage's saved activations (with its output held and autocast's weight copies, one per
    micro-batch) during a later micro-batch, when it holds fewer micro-batches then than during the first
    (pycore.memory.accumulation.in_flight_later); None when as many."""
    fewer = accumulation.in_flight_later(stage.in_flight, setup.layout.microbatches)
    if fewer == stage.in_flight or setup.arch.kind == "generic":
        return None
    fewer_stage = replace(stage, in_flight=fewer)
    held = _activations(setup, fewer_stage, tokens, per_token) + _pipeline_buffers(setup, fewer_stage, tokens) + \
        _weight_copies(setup, fewer_stage)
    saved = [p for p in held if p.key in ("activations", "stage_output", "autocast_weight_copies")]
    return [replace(p, label=f"{p.label}, {fewer:g} micro-batches in flight") for p in saved]


def _pipeline_buffers(setup: Setup, stage: parallel.Stage, tokens: int) -> "list[Pool]":
    """What torch.distributed.pipelining holds beside the layers' own activations (pycore.inputs.frameworks
    .OWN_PIPELINE; validation/measured_pipeline.json): a receive buffer per micro-batch for the activations a
    later stage receives and for the gradients an earlier stage receives, allocated once and kept; and the
    stage's output, kept for backward while its micro-batch is in flight. Each is tokens × hidden in the
    residual stream's dtype (the weights'). Where a chunk's first layer saves its input tensor itself (fp32:
    its norm's fp32 input; full recompute: the checkpoint's input), that is a receive buffer already counted
    among the activations: there the output held and that input cancel, and the last stage counts one buffer
    twice."""
    lay = setup.layout
    if not setup.torch_pipelining or setup.arch.kind == "generic":
        return []
    e = setup.policy.bytes("weight")
    hidden = split(sym("T", tokens), "t", lay.tp if lay.sp else 1) * sym("h", setup.arch.hidden) * num(e)
    # each model chunk (lay.interleave of them) receives its own; the first and the last of all receive one kind
    directions = 2 * lay.interleave - stage.has_embedding - stage.has_head
    pools = [make("pipeline_receive_buffers", "Pipeline receive buffers (activations and gradients)",
                  hidden * sym("n", lay.microbatches) * sym("r", directions), STATIC,
                  "torch.distributed.pipelining PipelineStage: one receive buffer per micro-batch, kept",
                  "T = tokens per micro-batch; t = tensor-parallel degree (sequence parallel); h = hidden size; "
                  "n = micro-batches; r = directions received (activations unless first, gradients unless last)",
                  group="pipeline_buffers")]
    # Each chunk's output is held while its micro-batch is in flight, except the last chunk's (the logits). In fp32
    # and under full recompute a chunk's first layer saves its input tensor itself, a receive buffer already
    # counted, except on the first chunk: there the outputs held and those inputs cancel (chunk 0's count taken
    # as the stage's micro-batches in flight).
    if e == 4 or setup.workload.recompute == "full":
        held = stage.in_flight if stage.has_embedding else 0
    else:
        held = stage.in_flight * lay.interleave - stage.has_head
    if held > 0:
        pools.append(make("stage_output", "Stage output held for backward", hidden * sym("c", held), SAVED,
                          "torch.distributed.pipelining PipelineStage.fwd_cache: the output until its backward",
                          "T = tokens per micro-batch; h = hidden size; c = chunk outputs held (micro-batches in "
                          "flight × model chunks, less the last chunk's, the logits)", group="pipeline_buffers"))
    return pools


def _whole_model_activations(setup: Setup, stage: parallel.Stage, tokens: int) -> Pool:
    """Activations of a whole-model formula (korthikanti, multiplier, per-sample; a generic network's),
    shared out by the stage's layers and micro-batches in flight."""
    arch, work = setup.arch, setup.workload
    whole = act.whole_model(setup, tokens)
    moments: "tuple[str, ...]"
    if arch.kind == "generic":
        saved = sym("A", whole)
        moments = ("forward end", "backward")
    else:
        saved = rnd(sym("A", whole) * sym("Ls", stage.layers) / sym("L", arch.layers) * sym("m", stage.in_flight))
        moments = SAVED
    return make("activations", "Activations (saved for backward)", saved, moments,
                _model_source(work.activation_model),
                "A = activation bytes of the whole model (" + work.activation_model + " model); "
                "Ls = layers on this GPU; L = layers; m = micro-batches in flight")


def _detailed_activations(setup: Setup, stage: parallel.Stage, tokens: int, per_layer: float, final: float,
                          working: float) -> "list[Pool]":
    """The detailed model's saved activations (pycore.memory.activations.per_token) over the stage's layers
    and micro-batches in flight, and one layer's working tensors during its backward."""
    work = setup.workload
    T = sym("T", tokens)
    saved = sym("a", per_layer) * sym("Ls", stage.layers) * sym("m", stage.in_flight) * T
    if stage.has_head:
        saved = saved + sym("f", final) * T
    working_q = rnd(sym("w", working) * T)
    if setup.quant != "none" and setup.finetune.adapters:
        # bitsandbytes dequantizes one layer's weights at a time to compute in 16 bit
        working_q = working_q + sym("Pl", stage.largest_layer) * 2
    return [make("activations", "Activations (saved for backward)", saved, SAVED,
                 "tensors autograd saves in the transformers layer, term by term below; "
                 "checked in docs/validation.md",
                 "a = bytes saved per token per layer (the terms below); Ls = layers on this GPU; "
                 "m = micro-batches in flight (1F1B); T = tokens per micro-batch on this GPU; "
                 "f = final norm bytes per token"
                 + ("; full recompute keeps each layer's input only" if work.recompute == "full" else "")),
            make("backward_working", "Backward working tensors (one layer)", working_q, WORKING,
                 "one layer's gradient buffers and rebuilt activations during its backward"
                 + ("; with Mamba-1 layers, the reference scan's fp32 gradients, 4·D·N·4 bytes per token "
                    "(pycore.memory.scan_activations.backward_working)"
                    if "m" in setup.arch.layer_pattern and work.scan_kernels != "fused" else ""),
                 "w = working bytes per token of one layer; T = tokens; Pl = parameters of the largest layer")]


def _gradient_buffers(setup: Setup, stage: parallel.Stage, grad_bytes: float) -> "list[Pool]":
    """Gradients that exist for a moment of backward beside the gradients pool: the output head's, the
    buffers of the end of backward (tied embeddings, FSDP's root group), ZeRO-2/3's reduce-scatter bucket."""
    arch, lay = setup.arch, setup.layout
    pools = []
    tied = None
    if arch.kind != "generic" and stage.has_head and not setup.finetune.adapters and arch.output_width:
        # The head's weight gradient appears first in backward. With tied embeddings autograd holds it
        # until the embedding's own gradient arrives at the very end, then sums the two into a third
        # tensor: three vocab × hidden gradients exist for a moment.
        head_q = rnd(split(sym("V", arch.output_width), "t", lay.tp) * sym("h", arch.hidden) * grad_bytes)
        pools.append(make("head_gradient", "Output head's weight gradient", head_q, ("backward, first layer",),
                          "the first gradient backward produces", "V = vocabulary; t = tensor-parallel degree; "
                          "h = hidden size", group="gradient_buffers"))
        tied = head_q * 2 if arch.tied_embeddings and stage.has_embedding else None
    sharded3 = lay.zero == 3 and lay.shard_group > 1
    root = rnd(sym("R", stage.root_params) * grad_bytes) if sharded3 and stage.root_params else None
    ends = [q for q in (tied, root) if q is not None and q.value]
    if ends:
        pools.append(make("end_of_backward_buffers", "Gradient buffers at the end of backward", maximum(*ends),
                          ("backward end",), "tied embeddings: the head and embedding gradients and their sum; "
                          "FSDP2: the root group's full-size gradient before its reduce-scatter",
                          "R = root-group parameters", group="gradient_buffers"))
    pools += _ddp_buckets(setup, stage, grad_bytes)
    if lay.zero >= 2 and lay.shard_group > 1 and not setup.finetune.adapters:
        pools.append(make("gradient_buckets", "Unsharded gradient of the layer being reduced",
                          rnd(sym("Pl", stage.largest_layer) * grad_bytes), ("backward, last layer", "backward end"),
                          "ZeRO-2/3 and FSDP reduce-scatter one layer's full gradient at a time",
                          "Pl = parameters of the largest layer", group="gradient_buffers"))
    return pools


def _ddp_buckets(setup: Setup, stage: parallel.Stage, grad_bytes: float) -> "list[Pool]":
    """torch DDP's flat gradient buckets: a second copy of every trainable gradient, allocated when the model
    is wrapped and kept (pycore.inputs.frameworks.DDP_COPIES_GRADIENTS; validation/measured_ddp.json)."""
    lay = setup.layout
    if not setup.ddp_buckets or lay.zero or lay.dp * lay.cp == 1 or setup.workload.mode != "train":
        return []
    return [make("ddp_buckets", "DDP gradient buckets (a second copy of the gradients)",
                 rnd(sym("S", trainable(setup, stage).count) * grad_bytes), STATIC,
                 "torch DistributedDataParallel, gradient_as_bucket_view=False (its default): "
                 "Reducer::initialize_buckets allocates buckets as large as every gradient",
                 "S = trainable parameters on this GPU", group="gradient_buffers")]


def _dora_norm(setup: Setup, stage: parallel.Stage) -> "list[Pool]":
    """DoRA's column-norm working set of the largest adapted layer (pycore.memory.finetune.dora_norm_working),
    counted at the forward's end (its last adapted layer's forward has every earlier activation beside it) and,
    under full recompute, in backward's re-forward too."""
    ft = setup.finetune
    if not ft.dora or not ft.adapters or not stage.layers:
        return []
    size, layer = finetune.dora_norm_working(setup.arch, ft.targets, BITS[ft.dtype] / 8)
    moments = ("forward end",) + (WORKING if setup.workload.recompute == "full" else ())
    return [make("dora_norm_working", f"DoRA weight-norm working set ({layer} projection)", sym("D", size), moments,
                 "peft 0.21 tuners/lora/dora.py get_lora_weight, get_weight_norm: built in each adapted layer's forward",
                 "D = (in² + 4·in·out) × the adapters' bytes, the largest adapted layer's")]


def _weight_copies(setup: Setup, stage: parallel.Stage) -> "list[Pool]":
    """Weights held a second time while computing: ZeRO-3/FSDP's gathered layer and autocast's 16-bit copies."""
    lay, policy = setup.layout, setup.policy
    sharded3 = lay.zero == 3 and lay.shard_group > 1
    pools = []
    if sharded3:
        pools.append(make("gathered_layer", "Gathered layer (ZeRO-3/FSDP)",
                          rnd(sym("Pl", stage.largest_layer) * policy.bytes("gather")),
                          ("backward start",) + WORKING, "FSDP2 all-gathers one layer at a time",
                          "Pl = parameters of the largest layer", group="weights_gathered"))
    # Autocast's 16-bit weight copies live until backward. Under ZeRO-3/FSDP the gathered layer is cast
    # and freed layer by layer (FSDP2's mixed precision casts at all-gather), so only one layer's copy.
    # bitsandbytes' 4-bit matmul saves the quantized weight and dequantizes again in backward. Each forward
    # casts again (autocast's cache is emptied when its region exits), so a pipeline stage keeps one copy per
    # micro-batch in flight (validation/measured_pipeline.json, the amp-bf16 case).
    if policy.autocast and setup.arch.kind != "generic" and setup.quant == "none":
        cast = sym("Pl", stage.largest_layer) if sharded3 else sym("Pm", stage.matrix_params) * sym("m", stage.in_flight)
        pools.append(make("autocast_weight_copies", "Autocast 16-bit weight copies", cast * 2, SAVED,
                          "torch.autocast casts each weight once per forward and autograd keeps the copy",
                          "Pm = parameters in matrices on this GPU; Pl = parameters of the largest layer; "
                          "m = micro-batches in flight (1F1B)"))
    return pools


def _generic_moments(pool: Pool) -> Pool:
    """A generic network has no layer structure to follow: gradients and activations share one backward
    moment, the plain sum (validation/vision_measured.json: the peak at any batch is weights, gradients
    and optimizer state plus a per-sample figure)."""
    moments = set()
    for m in pool.moments:
        moments.add("backward" if m.startswith("backward") else m)
    return replace(pool, moments=tuple(m for m in GENERIC_MOMENTS if m in moments))


def _loss_pools(setup: Setup, tokens: int) -> "list[Pool]":
    """Logits and cross-entropy buffers (transformers' causal-LM loss; torchtune's chunked loss)."""
    arch, policy, work, lay = setup.arch, setup.policy, setup.workload, setup.layout
    e = policy.bytes("act")
    vocab_tokens = split(sym("V", arch.output_width), "t", lay.tp) * sym("T", tokens)
    logits_bytes = 2 if policy.autocast else e
    # transformers' causal-LM loss upcasts logits to fp32; autocast runs log_softmax in fp32; BERT's
    # masked-LM loss stays in the logits' dtype.
    loss_bytes = 4 if (arch.loss_fp32 or policy.autocast) else e
    chunks = work.loss_chunks
    symbols = "V = vocabulary; t = tensor-parallel degree; T = tokens per micro-batch on this GPU; " \
              "c = loss chunks"
    source = "transformers ForCausalLMLoss: logits.float() then cross_entropy (log_softmax saved for backward)"
    logits_moments: "tuple[str, ...]" = ("forward end",)
    logits_source = source
    if setup.torch_pipelining:
        # torch.distributed.pipelining keeps the last stage's output, the logits, until that micro-batch's
        # backward is done (pycore.inputs.frameworks.OWN_PIPELINE; validation/measured_pipeline.json)
        logits_moments = MOMENTS[:-1]
        logits_source = source + "; a pipeline's last stage keeps its output (the logits) through its backward " \
                                 "(torch.distributed.pipelining PipelineStage.fwd_cache)"
    pools = [make("logits", f"Logits ({dtype_name(logits_bytes)})", vocab_tokens * num(logits_bytes), logits_moments,
                  logits_source, symbols, group="logits_and_loss"),
             make("log_softmax", f"Log-softmax saved for backward ({dtype_name(loss_bytes)})",
                  vocab_tokens * num(loss_bytes), ("forward end", "backward start"), source, symbols,
                  group="logits_and_loss")]
    if arch.final_softcap:
        # Gemma 2: logits = cap · tanh(logits / cap); the tanh output is saved for backward
        # (validation/measured.json, gemma-2-2b cases).
        pools.append(make("logit_softcap", "Logit soft-capping tanh", vocab_tokens * num(logits_bytes),
                          ("forward end", "backward start"), "transformers Gemma2ForCausalLM final_logit_softcapping",
                          symbols, group="logits_and_loss"))
    # Chunked loss: every chunk's log-softmax is still saved, but the upcast copy and the two gradient
    # buffers exist for one chunk at a time.
    if logits_bytes != loss_bytes:
        pools.append(make("logits_upcast", "Logits upcast to fp32", split(vocab_tokens * num(loss_bytes), "c", chunks, floor),
                          ("forward end",), source, symbols, group="logits_and_loss"))
    pools.append(make("loss_gradients", "Loss gradients (nll and log-softmax)",
                      split(vocab_tokens * num(loss_bytes) * 2, "c", chunks, floor), ("backward start",),
                      source + "; torchtune CEWithChunkedOutputLoss when c > 1", symbols, group="logits_and_loss"))
    return pools


def _model_source(model: str) -> str:
    return {"korthikanti": "Korthikanti et al. 2022, eq. 1-2 and Table 2",
            "multiplier": "batch · seq · hidden · layers · multiplier · bytes, as simple calculators write it",
            "per-sample": "user-supplied bytes per sample",
            "detailed": "measured bytes per sample (validation/vision_measured.json)",
            "none": "not counted: a bare parameter count has no layers to size them by"}[model]
