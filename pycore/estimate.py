"""The estimator: inputs in, bytes per GPU out.

A training step is modelled as three moments and the peak is the largest of them, as
``torch.cuda.max_memory_allocated()`` sees it after a warm-up step with ``zero_grad(set_to_none=True)``:

- forward end: weights, optimizer state and every saved activation, at the moment the loss is computed
  (logits, their fp32 copy and log-softmax all alive); gradients do not exist yet;
- backward: activations are freed layer by layer as gradients appear, so the live set is the larger of
  "all activations plus the loss gradients" (its start) and "all gradients" (its end), plus the working
  tensors of the layer being differentiated;
- optimizer step: weights, gradients, state and the step's own temporaries.

Serving is the weights plus the KV cache at its final length plus the larger of the prefill working set
and the decode step.
"""

from . import activations as act
from . import optimizer as opt
from .architecture import ARCH_FIELDS, Architecture, count_parameters, with_overrides
from .catalog import architecture as preset_architecture
from .catalog import gpus as gpu_catalog
from .hf_config import architecture_from_file
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


def _linear_params(arch, counts):
    """Parameters in matrices that autocast casts to 16 bit (all but embeddings and norms)."""
    linear = counts.total - counts.embedding - arch.layers * 2 * arch.norm_params
    if arch.tied_embeddings:
        linear += arch.vocab * arch.hidden           # the tied head is cast for the output matmul
    return linear


def _activation_bytes(arch, values, policy, tokens):
    """(saved activation bytes, per-layer terms, working bytes of one layer's backward)."""
    e = policy.bytes("act")
    # T5 adds a learned position bias to the scores, so transformers runs it with eager attention.
    attention = "eager" if arch.kind == "encoder-decoder" else values["attention"]
    terms = act.layer_terms(arch, policy, attention, values["recompute"], values["seq"])
    per_layer = sum(t.bytes_per_token for t in terms)
    if arch.kind == "encoder-decoder":
        # Approximation, not yet measured: decoder blocks as encoder blocks plus one more attention
        # block (cross-attention), target as long as the source.
        cross = sum(t.bytes_per_token for t in act._attention_terms(arch, e, policy.autocast, attention,
                                                                       values["recompute"], values["seq"]))
        per_layer = (per_layer * (arch.layers + arch.decoder_layers) + cross * arch.decoder_layers) / arch.layers
    final = act._norm_terms(arch, e, policy.autocast, 1, "final norm")
    extra = sum(t.bytes_per_token for t in final)
    if values["recompute"] == "full":
        saved = arch.layers * act.layer_input_bytes(arch, policy) + extra
        recomputed = per_layer          # one layer's activations rebuilt during its backward
    else:
        saved = arch.layers * per_layer + extra
        recomputed = 0
    width = max(arch.ffn * max(arch.experts_per_token, 1), arch.q_dim)
    working = 3 * e * width
    if values["attention"] == "eager":
        working += (4 + e) * arch.heads * values["seq"]
    return round(saved * tokens), terms, round((recomputed + working) * tokens)


def _model_activation_bytes(arch, values, policy, tokens):
    """Activation bytes under the korthikanti, multiplier or per-sample models."""
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
        return act.korthikanti(arch, values["batch"], values["seq"], values["recompute"], e)
    if model == "multiplier":
        return round(tokens * arch.hidden * arch.layers * values["act_multiplier"] * e / 2)
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
    weights = round(params * policy.bytes("weight"))
    if values["mode"] == "infer":
        result = _serving(arch, values, policy, counts, weights)
    else:
        result = _training(arch, values, policy, counts, weights)
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


def _training(arch, values, policy, counts, weights):
    params = counts.total
    tokens = values["batch"] * values["seq"]
    gradients = round(params * policy.bytes("grad"))
    master = round(params * policy.bytes("master"))
    state_bytes = policy.bytes("opt")
    optimizer = opt.state_bytes(values["optimizer"], params, state_bytes)
    step_temporaries = opt.step_temporary_bytes(values["optimizer"], params, state_bytes)
    if master:      # the fp32 master weights receive fp32 copies of the gradients before the step
        step_temporaries += round(params * policy.bytes("master"))
        step_gradients = 0
    else:
        step_gradients = gradients
    e = policy.bytes("act")
    if arch.kind == "generic":
        saved, terms, working = _model_activation_bytes(arch, values, policy, tokens), [], 0
        loss_saved = loss_forward = loss_backward = 0
    else:
        if values["activations"] == "detailed":
            saved, terms, working = _activation_bytes(arch, values, policy, tokens)
        else:
            saved, terms, working = _model_activation_bytes(arch, values, policy, tokens), [], 0
        vocab_tokens = arch.vocab * tokens
        logits_bytes = (2 if policy.autocast else e) * vocab_tokens
        # transformers' causal-LM loss upcasts logits to fp32; autocast runs log_softmax in fp32;
        # BERT's masked-LM loss stays in the logits' dtype.
        loss_bytes = 4 if (arch.loss_fp32 or policy.autocast) else e
        loss_saved = loss_bytes * vocab_tokens                         # log_softmax output
        upcast = 0 if logits_bytes == loss_saved else loss_saved
        loss_forward = logits_bytes + upcast                           # alive while the loss is computed
        loss_backward = 2 * loss_saved                                 # nll and log_softmax gradients
    # The output head's weight gradient appears first in backward. With tied embeddings autograd holds
    # it in a buffer until the embedding's own gradient arrives at the very end, then sums the two into
    # a third tensor: three vocab × hidden gradients exist for a moment.
    head_gradient = 0 if arch.kind == "generic" else round(arch.vocab * arch.hidden * policy.bytes("grad"))
    tied_sum = 2 * head_gradient if arch.tied_embeddings else 0
    autocast_cache = 2 * _linear_params(arch, counts) if policy.autocast and arch.kind != "generic" else 0
    static = weights + master + optimizer
    activations = saved + loss_saved
    phases = {
        "forward": static + autocast_cache + activations + loss_forward,
        # Its start (loss gradients next to every activation), or any later layer: what is still saved
        # plus the gradients made so far plus that layer's working tensors. Saved activations shrink
        # and gradients grow monotonically, so the later moments peak at one end or the other.
        "backward": static + max(autocast_cache + activations + loss_backward,
                                 max(autocast_cache + saved + head_gradient, gradients) + working,
                                 gradients + tied_sum),
        "optimizer": static + step_gradients + step_temporaries,
    }
    if arch.kind == "generic":
        # No layer structure to follow: the plain sum, which is also what a measured per-sample
        # figure adds to (validation/vision_measured.json: the peak at any batch is weights,
        # gradients and optimizer state plus that figure per sample).
        phases["backward"] = static + gradients + activations
    components = {
        "weights": weights, "master_weights": master, "gradients": gradients, "optimizer": optimizer,
        "activations": saved, "logits_and_loss": loss_saved + max(loss_forward, loss_backward),
        "autocast_weight_copies": autocast_cache, "backward_working": working,
        "optimizer_step_temporaries": step_temporaries, "kv_cache": 0,
    }
    return {"components": components, "phases": phases,
            "activation_terms": [t.__dict__ for t in terms], "tokens": tokens, "layers": arch.layers}


def _serving(arch, values, policy, counts, weights):
    batch, prompt, new = values["batch"], values["seq"], values["new_tokens"]
    kv_bytes = policy.bytes("kv")
    e = policy.bytes("act")
    per_token_kv = 2 * arch.layers * arch.kv_dim * kv_bytes
    final_tokens = prompt + max(new - 1, 0)         # the last generated token is never cached
    kv_cache = round(per_token_kv * batch * final_tokens)
    tokens = batch * prompt
    width = max(3 * arch.ffn * max(arch.experts_per_token, 1), 4 * arch.q_dim + 2 * arch.kv_dim)
    prefill_working = round((width + 3 * arch.hidden) * e * tokens + 8 * arch.vocab * batch)
    if values["attention"] == "eager":
        prefill_working += round((4 + e) * arch.heads * prompt * tokens)
    # DynamicCache appends with torch.cat: one layer's keys or values exist twice for a moment.
    decode_working = round(2 * arch.kv_dim * kv_bytes * batch * final_tokens)
    phases = {
        "prefill": weights + round(per_token_kv * tokens) + prefill_working,
        "decode": weights + kv_cache + decode_working,
    }
    components = {"weights": weights, "kv_cache": kv_cache, "prefill_working": prefill_working,
                  "master_weights": 0, "gradients": 0, "optimizer": 0, "activations": 0}
    return {"components": components, "phases": phases, "activation_terms": [], "tokens": tokens,
            "kv_bytes_per_token": per_token_kv}


def _fits(total, chosen):
    rows = []
    for gpu_id, gpu in gpu_catalog().items():
        usable = gpu["usable_bytes"]
        status = "fits" if total <= 0.9 * usable else "tight" if total <= usable else "no"
        rows.append({"id": gpu_id, "name": gpu["name"], "memory_bytes": usable, "fits": total <= usable,
                     "status": status, "headroom_bytes": usable - total, "chosen": gpu_id == chosen})
    return rows
