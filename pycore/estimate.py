"""The estimator: inputs in, bytes per GPU out.

A training step is modelled as three moments and the peak is the largest of them, as
``torch.cuda.max_memory_allocated()`` sees it after a warm-up step with ``zero_grad(set_to_none=True)``:

- forward end: weights, optimizer state and every saved activation, at the moment the loss is computed
  (logits, their fp32 copy and log-softmax all alive); gradients do not exist yet;
- backward: activations are freed layer by layer as gradients appear, so the live set is the larger of
  "all activations plus the loss gradients" (its start) and "all gradients" (its end), plus the working
  tensors of the layer being differentiated;
- optimizer step: weights, gradients, state and the step's own temporaries.

Every number is per GPU: with parallelism (pycore.parallel) each pipeline stage is estimated and the worst
one reported. Serving is the weights plus the KV cache at its final length plus the larger of the prefill
working set and the decode step.
"""

import math

from . import activations as act
from . import finetune, parallel, quantization
from . import optimizer as opt
from .architecture import ARCH_FIELDS, Architecture, count_parameters, with_overrides
from .catalog import architecture as preset_architecture
from .catalog import gpus as gpu_catalog
from .hf_config import architecture_from_file
from .precision import BITS
from .precision import policy as precision_policy
from .schema import DEFAULTS, InputError, parse


def resolve_architecture(values):
    """The Architecture named by parsed inputs: config file, else preset, else a bare parameter count."""
    if values.get("config"):
        arch = architecture_from_file(values["config"])
    elif values.get("params") and values["model"] == DEFAULTS["model"]:
        return Architecture(name="generic", kind="generic", params_override=values["params"],
                            layers=values.get("layers") or 0, hidden=values.get("hidden") or 0,
                            heads=values.get("heads") or 0)
    else:
        try:
            arch = preset_architecture(values["model"])
        except KeyError:
            raise InputError("model", f"unknown preset {values['model'][:40]!r}; see python -m pycore models") \
                from None
    try:
        return with_overrides(arch, _arch_overrides(values))
    except ValueError as error:
        key = str(error).split(":")[0]
        raise InputError(key, str(error).split(": ", 1)[1]) from None


def _arch_overrides(values):
    return {k: values.get(k) for k in ARCH_FIELDS if values.get(k) is not None}


def _activation_bytes(arch, values, policy, lay):
    """(saved bytes per token per layer, terms, final-norm bytes per token, working bytes per token).

    With tensor parallelism the terms inside the parallel region split t ways, and the norm and residual
    terms too with sequence parallelism (Korthikanti et al. 2022, section 4.2).
    """
    e = policy.bytes("act")
    # T5 adds a learned position bias to the scores, so transformers runs it with eager attention.
    attention = "eager" if arch.kind == "encoder-decoder" else values["attention"]
    terms = act.layer_terms(arch, policy, attention, values["recompute"], values["seq"])
    if values["method"] != "full":
        # Frozen linear layers need no input to compute their (absent) weight gradient.
        kept = finetune.adapted_inputs(values["lora_targets"])
        terms = [t for t in terms if not t.feeds or t.feeds in kept]
        adapters = finetune.adapter_activation_bytes_per_token(arch, values["lora_rank"], values["lora_targets"],
                                                               e) / arch.layers
        terms.append(act.Term("LoRA A outputs", adapters, "r·e per adapted layer"))
    split = lambda t: t.bytes_per_token / (lay.tp if (not t.replicated or lay.sp) else 1)  # noqa: E731
    per_layer = sum(split(t) for t in terms)
    if arch.kind == "encoder-decoder":
        # Approximation, not yet measured: decoder blocks as encoder blocks plus one more attention
        # block (cross-attention), target as long as the source.
        cross = sum(split(t) for t in act._attention_terms(arch, e, policy.autocast, attention,
                                                            values["recompute"], values["seq"]))
        per_layer = (per_layer * (arch.layers + arch.decoder_layers) + cross * arch.decoder_layers) / arch.layers
    final = sum(split(t) for t in act._norm_terms(arch, e, policy.autocast, 1, "final norm"))
    width = max(arch.ffn * max(arch.experts_per_token, 1), arch.q_dim) / lay.tp
    working = 3 * e * width
    if attention == "eager":
        working += (4 + e) * arch.heads / lay.tp * values["seq"]
    if values["recompute"] == "full":
        working += per_layer           # one layer's activations rebuilt during its backward
        per_layer = act.layer_input_bytes(arch, policy) / (lay.tp if lay.sp else 1)
    return per_layer, terms, final, working


def _model_activation_bytes(arch, values, policy, tokens, lay):
    """Activation bytes of the whole model under the korthikanti, multiplier or per-sample models."""
    e = policy.bytes("act")
    model = values["activations"]
    if model == "detailed":         # a generic preset with measured bytes per sample
        per_sample = arch.act_per_sample_fp32 if e == 4 else arch.act_per_sample_16
        return per_sample * values["batch"]
    needs = {"korthikanti": ("layers", "hidden", "heads"), "multiplier": ("layers", "hidden")}.get(model, ())
    for key in needs:
        if not getattr(arch, key):
            raise InputError(key, f"the {model} activation model needs {', '.join(needs)}; give {key}")
    if model == "korthikanti":
        return act.korthikanti(arch, values["batch"], values["seq"] // lay.cp, values["recompute"], e, lay.tp,
                               lay.sp)
    if model == "multiplier":
        return round(tokens * arch.hidden * arch.layers * values["act_multiplier"] * e / 2 / lay.tp)
    return values["act_per_sample"] * values["batch"]


def estimate(inputs):
    """Estimate memory per GPU.

    Args:
        inputs: key -> string mapping in the schema (pycore/schema.py), or already-parsed values.
    Returns:
        A plain dict (JSON-ready): params, components, phases, peak_bytes, overhead_bytes, total_bytes, gpus.
    Raises:
        InputError naming the key when an input is not acceptable.
    """
    return estimate_values(parse(inputs))


def quantization_of(values):
    """The weight storage format: quant, or NF4 with double quantization for QLoRA (Dettmers et al. 2023)."""
    if values["quant"] == "none" and values["method"] == "qlora":
        return "nf4-dq"
    return values["quant"]


def estimate_values(values):
    """``estimate`` for values already parsed by ``schema.parse``."""
    if values["gpu"] not in gpu_catalog():
        raise InputError("gpu", f"unknown GPU {values['gpu'][:40]!r}; see python -m pycore gpus")
    arch = resolve_architecture(values)
    policy = precision_policy(values)
    counts = count_parameters(arch)
    if arch.kind == "generic" and values["activations"] == "detailed" and values["mode"] == "train" \
            and not arch.act_per_sample_fp32:
        raise InputError("activations", "a generic network (params only) needs multiplier or per-sample")
    if arch.kind == "generic" and values["mode"] == "infer":
        raise InputError("mode", "serving needs a transformer architecture (model or config), not params")
    params = counts.total
    lay = parallel.layout(values, arch)
    if values["mode"] == "train" and values["method"] == "full" and values["quant"] != "none":
        raise InputError("quant", "quantized weights are trained through adapters: set method=lora or qlora")
    if values["method"] == "qlora" and quantization_of(values) not in ("nf4", "nf4-dq"):
        raise InputError("quant", "QLoRA stores the base in NF4: quant=nf4 or nf4-dq")
    if values["method"] != "full" and arch.kind != "decoder":
        raise InputError("method", "LoRA is modelled for decoder transformers (the presets' causal LMs)")
    if values["mode"] == "infer":
        if not lay.single:
            raise InputError("mode", "serving is sized for one GPU; set dp, tp, pp, cp and ep to 1")
        result = _serving(arch, values, policy, counts, quantization.weight_bytes(
            quantization_of(values), values["group_size"], arch, counts, policy.bytes("weight")))
    else:
        result = _training(arch, values, policy, counts, lay)
    peak_phase = max(result["phases"], key=result["phases"].get)
    peak = result["phases"][peak_phase]
    kind, amount = values["overhead"]
    overhead = round(peak * amount / 100) if kind == "percent" else amount
    total = peak + overhead
    return {
        "model": {"name": arch.name, "kind": arch.kind, "source": arch.source},
        "params": {"total": params, "active": counts.active},
        **result,
        "peak_phase": peak_phase,
        "peak_bytes": peak,
        "overhead_bytes": overhead,
        "total_bytes": total,
        "gpus": _fits(total, values["gpu"]),
    }


def _training(arch, values, policy, counts, lay):
    """Phases and components of a training step on the worst GPU; every pipeline stage when pp > 1."""
    per_stage = [_training_stage(arch, values, policy, counts, lay, stage)
                 for stage in parallel.stages(arch, counts, lay)]
    worst = max(per_stage, key=lambda r: max(r["phases"].values()))
    if len(per_stage) > 1:
        worst["stages"] = [{"stage": r["stage"], "layers": r["layers"], "peak_bytes": max(r["phases"].values()),
                            "peak_phase": max(r["phases"], key=r["phases"].get), "components": r["components"]}
                           for r in per_stage]
    return worst


def _shard(size, group, stage_needed, zero):
    return math.ceil(size / group) if zero >= stage_needed else size


def _training_stage(arch, values, policy, counts, lay, stage):
    params = stage.params
    share = params / counts.total                   # this GPU's part of the model, before ZeRO
    tokens = values["batch"] * values["seq"] // lay.cp
    group = lay.shard_group
    quant = quantization_of(values)
    stored = round(quantization.weight_bytes(quant, values["group_size"], arch, counts, policy.bytes("weight"))
                   * share)
    if values["method"] == "full":
        trainable = params
        # Megatron and DeepSpeed accumulate 16-bit gradients in an fp32 buffer across micro-batches.
        grad_bytes = 4 if (policy.master != "none" and lay.microbatches > 1) else policy.bytes("grad")
        state_bytes, master_bytes = policy.bytes("opt"), policy.bytes("master")
    else:
        trainable = round(finetune.adapter_params(arch, values["lora_rank"], values["lora_targets"]) * share)
        grad_bytes = state_bytes = BITS[values["lora_dtype"]] / 8
        master_bytes = 0
        stored += round(trainable * grad_bytes)
    weights = _shard(stored, group, 3, lay.zero)
    # FSDP2 (and ZeRO-3) gather one layer at a time, but keep the root group (embeddings and head)
    # gathered through forward and backward, and reduce-scatter its gradients from a full-size buffer
    # at the end (validation/measured_fsdp.json). SHARD_GRAD_OP keeps its shards beside the full copy.
    sharded3 = lay.zero == 3 and group > 1
    gathered = round(stage.root_params * policy.bytes("weight")) if sharded3 else 0
    layer_gather = round(stage.largest_layer * policy.bytes("weight")) if sharded3 else 0
    root_grad_buffer = round(stage.root_params * grad_bytes) if sharded3 else 0
    if values["fsdp"] == "SHARD_GRAD_OP" and group > 1:
        gathered = math.ceil(stored / group)
    gradients = _shard(round(trainable * grad_bytes), group, 2, lay.zero)
    buckets = round(stage.largest_layer * grad_bytes) if lay.zero >= 2 and group > 1 and trainable == params else 0
    master = _shard(round(trainable * master_bytes), group, 1, lay.zero)
    optimizer = _shard(opt.state_bytes(values["optimizer"], trainable, state_bytes), group, 1, lay.zero)
    step_temporaries = _shard(opt.step_temporary_bytes(values["optimizer"], trainable, state_bytes), group, 1,
                              lay.zero)
    if master:      # the fp32 master weights receive fp32 copies of the gradients before the step
        step_temporaries += master
        step_gradients = 0
    else:
        step_gradients = gradients
    host = 0
    if lay.offload != "none":               # the step runs on the CPU, on CPU copies of the state
        host = master + optimizer + step_temporaries + gradients
        master = optimizer = step_temporaries = step_gradients = 0
        if lay.offload == "params":
            host += weights
            weights = 0
    weights += gathered
    e = policy.bytes("act")
    terms = []
    final = working = 0
    loss_saved = loss_forward = loss_backward = 0
    if arch.kind == "generic":
        saved = _model_activation_bytes(arch, values, policy, tokens, lay)
    else:
        if values["activations"] == "detailed":
            per_layer, terms, final, working = _activation_bytes(arch, values, policy, lay)
            saved = round(per_layer * stage.layers * stage.in_flight * tokens +
                          (final * tokens if stage.has_head else 0))
            working = round(working * tokens)
            if quant != "none" and values["method"] != "full":
                # bitsandbytes dequantizes one layer's weights at a time to compute in 16 bit
                working += 2 * stage.largest_layer
        else:
            whole = _model_activation_bytes(arch, values, policy, tokens, lay)
            saved = round(whole * stage.layers / arch.layers * stage.in_flight)
        if stage.has_head:
            vocab_tokens = math.ceil(arch.vocab / lay.tp) * tokens
            logits_bytes = (2 if policy.autocast else e) * vocab_tokens
            # transformers' causal-LM loss upcasts logits to fp32; autocast runs log_softmax in fp32;
            # BERT's masked-LM loss stays in the logits' dtype.
            loss_bytes = 4 if (arch.loss_fp32 or policy.autocast) else e
            loss_saved = loss_bytes * vocab_tokens                     # log_softmax output
            upcast = 0 if logits_bytes == loss_saved else loss_saved
            # Chunked loss: every chunk's log-softmax is still saved, but the upcast copy and the two
            # gradient buffers exist for one chunk at a time.
            chunks = values["loss_chunks"]
            loss_forward = logits_bytes + upcast // chunks             # alive while the loss is computed
            loss_backward = 2 * loss_saved // chunks                   # nll and log_softmax gradients
    # The output head's weight gradient appears first in backward. With tied embeddings autograd holds
    # it in a buffer until the embedding's own gradient arrives at the very end, then sums the two into
    # a third tensor: three vocab × hidden gradients exist for a moment.
    head_gradient = 0 if arch.kind == "generic" or not stage.has_head or values["method"] != "full" else \
        round(math.ceil(arch.vocab / lay.tp) * arch.hidden * grad_bytes)
    tied_sum = 2 * head_gradient if arch.tied_embeddings and stage.has_embedding else 0
    # Autocast's 16-bit weight copies live until backward. Under ZeRO-3/FSDP the gathered layer is cast
    # and freed layer by layer (FSDP2's mixed precision casts at all-gather), so only one layer's copy.
    cast_params = stage.largest_layer if sharded3 else stage.matrix_params
    # bitsandbytes' 4-bit matmul saves the quantized weight and dequantizes again in backward.
    autocast_cache = 2 * cast_params if policy.autocast and arch.kind != "generic" and quant == "none" else 0
    static = weights + master + optimizer
    activations = saved + loss_saved
    gradients_live = gradients + buckets
    phases = {
        "forward": static + autocast_cache + activations + loss_forward,
        # Its start (loss gradients next to every activation), or any later layer: what is still saved
        # plus the gradients made so far plus that layer's working tensors. Saved activations shrink
        # and gradients grow monotonically, so the later moments peak at one end or the other.
        "backward": static + max(autocast_cache + activations + loss_backward + layer_gather,
                                 max(autocast_cache + saved + head_gradient, gradients_live) + working
                                 + layer_gather,
                                 gradients_live + max(tied_sum, root_grad_buffer)),
        "optimizer": static + step_gradients + step_temporaries,
    }
    if arch.kind == "generic":
        # No layer structure to follow: the plain sum, which is also what a measured per-sample
        # figure adds to (validation/vision_measured.json: the peak at any batch is weights,
        # gradients and optimizer state plus that figure per sample).
        phases["backward"] = static + gradients_live + activations
    components = {
        "weights": weights, "master_weights": master, "gradients": gradients, "optimizer": optimizer,
        "activations": saved, "logits_and_loss": loss_saved + max(loss_forward, loss_backward),
        "autocast_weight_copies": autocast_cache, "backward_working": working,
        "optimizer_step_temporaries": step_temporaries, "kv_cache": 0,
    }
    return {"components": components, "phases": phases, "activation_terms": [t.__dict__ for t in terms],
            "tokens": tokens, "layers": stage.layers, "stage": stage.index,
            "params_per_gpu": params, "host_bytes": host}


def kv_cache_bytes(arch, tokens, kv_bytes):
    """KV-cache bytes of one sequence holding ``tokens`` tokens.

    Grouped-query and multi-query attention cache keys and values of kv_heads heads per layer; multi-head
    latent attention caches the compressed latent and the shared rotary key (kv_lora_rank + qk_rope_dim
    per token and layer, as vLLM and SGLang do; transformers itself caches decompressed heads). Layers
    with a sliding window (Mistral 7B v0.1; Gemma 2 every other layer; Gemma 3 five layers in six) keep
    at most the window.
    """
    per_layer = arch.kv_lora_rank + arch.qk_rope_dim if arch.attention == "mla" else 2 * arch.kv_dim
    if arch.sliding_window:
        global_layers = arch.layers // arch.global_every if arch.global_every else 0
        local = (arch.layers - global_layers) * min(tokens, arch.sliding_window)
        cached = global_layers * tokens + local
    else:
        cached = arch.layers * tokens
    return round(per_layer * cached * kv_bytes)


def _serving(arch, values, policy, counts, weights):
    batch, prompt, new = values["batch"], values["seq"], values["new_tokens"]
    kv_bytes = policy.bytes("kv")
    e = policy.bytes("act")
    final_tokens = prompt + max(new - 1, 0)         # the last generated token is never cached
    kv_cache = batch * kv_cache_bytes(arch, final_tokens, kv_bytes)
    tokens = batch * prompt
    width = max(3 * arch.ffn * max(arch.experts_per_token, 1), 4 * arch.q_dim + 2 * arch.kv_dim)
    prefill_working = round((width + 3 * arch.hidden) * e * tokens + 8 * arch.vocab * batch)
    if values["attention"] == "eager":
        prefill_working += round((4 + e) * arch.heads * prompt * tokens)
    # DynamicCache appends with torch.cat: one layer's keys and values exist twice for a moment.
    decode_working = math.ceil(kv_cache / arch.layers)
    phases = {
        "prefill": weights + batch * kv_cache_bytes(arch, prompt, kv_bytes) + prefill_working,
        "decode": weights + kv_cache + decode_working,
    }
    components = {"weights": weights, "kv_cache": kv_cache, "prefill_working": prefill_working,
                  "master_weights": 0, "gradients": 0, "optimizer": 0, "activations": 0}
    return {"components": components, "phases": phases, "activation_terms": [], "tokens": tokens,
            "kv_bytes_per_token": kv_cache_bytes(arch, 1, kv_bytes)}


def _fits(total, chosen):
    rows = []
    for gpu_id, gpu in gpu_catalog().items():
        usable = gpu["usable_bytes"]
        status = "fits" if total <= 0.9 * usable else "tight" if total <= usable else "no"
        rows.append({"id": gpu_id, "name": gpu["name"], "memory_bytes": usable, "fits": total <= usable,
                     "status": status, "headroom_bytes": usable - total, "chosen": gpu_id == chosen})
    return rows
