"""The formulas behind an estimate, in words and symbols, with their sources (the page's
"How this is computed" section)."""

from . import optimizer as opt
from . import quantization
from .estimate import quantization_of
from .precision import BITS
from .precision import policy as precision_policy
from .quantization import bits_per_weight


def _setup_rows(values, result):
    """Rows for quantization, LoRA and the parallel layout, when they are in use."""
    rows = []
    quant = quantization_of(values)
    if quant != "none":
        bits = bits_per_weight(quant, values["group_size"], 4096)
        rows.append({"name": "Quantized weights", "formula": f"{quant}: {bits:.3f} bits per weight of the linear "
                     "layers (GGUF: of every tensor)", "bytes": result["components"]["weights"],
                     "source": quantization.__doc__.split("\n\n")[1].replace("\n", " ")[:300]})
    if values["method"] != "full":
        rows.append({"name": "LoRA adapters", "formula": f"r = {values['lora_rank']} on {values['lora_targets']}: "
                     "r·(in + out) per adapted layer; gradients and optimizer state for adapters only",
                     "bytes": result["components"]["gradients"], "source": "Hu et al. 2021; PEFT"})
    layout = [f"{k}={values[k]}" for k in ("dp", "tp", "pp", "cp", "ep") if values[k] > 1]
    if layout or values["zero"] != "0" or values["fsdp"] != "none":
        rows.append({"name": "Parallel layout", "formula": ", ".join(layout + [f"zero={values['zero']}",
                     f"fsdp={values['fsdp']}"]) + "; ZeRO shards over dp × cp; tensor parallel splits matrices "
                     "and (with sp) norms; 1F1B keeps up to pp micro-batches on the first stage",
                     "bytes": result["peak_bytes"], "source": "Rajbhandari et al. 2020; Korthikanti et al. 2022 "
                                                              "Table 2; validation/measured_fsdp.json"})
    return rows


def formulas(values, result):
    """A list of {name, formula, bytes, source} for the estimate ``result`` of ``values``."""
    policy = precision_policy(values)
    params = result["params"]["total"]
    c = result["components"]
    rows = [{"name": "Weights", "formula": f"P × {policy.bytes('weight'):g} B ({policy.weight})",
             "bytes": c["weights"], "source": f"P = {params:,} parameters, counted layer by layer "
                                               "(exact against transformers, docs/validation.md)"}]
    rows += _setup_rows(values, result)
    if values["mode"] == "infer":
        rows.append({"name": "KV cache", "formula": "2 · layers · kv_heads · head_dim · bytes · batch · "
                     "(prompt + new_tokens − 1)", "bytes": c["kv_cache"],
                     "source": f"{result['kv_bytes_per_token']:,g} B per token; keys and values of every layer "
                               "(transformers DynamicCache)"})
        rows.append({"name": "Prefill working set", "formula": "one layer's MLP or attention intermediates "
                     "+ last-token logits", "bytes": c["prefill_working"], "source": "validation/measured.json"})
        return rows
    if c["master_weights"]:
        rows.append({"name": "Master weights", "formula": f"P × {policy.bytes('master'):g} B",
                     "bytes": c["master_weights"], "source": "Micikevicius et al. 2018, mixed precision training"})
    trainable = "P" if values["method"] == "full" else "adapters"
    grad_bytes = policy.bytes("grad") if values["method"] == "full" else BITS[values["lora_dtype"]] / 8
    shard = " / (dp × cp)" if values["zero"] in ("2", "3") else ""
    rows.append({"name": "Gradients", "formula": f"{trainable} × {grad_bytes:g} B{shard}",
                 "bytes": c["gradients"], "source": "one gradient per trainable parameter"})
    state_bytes = policy.bytes("opt") if values["method"] == "full" else grad_bytes
    rows.append({"name": "Optimizer state", "formula": f"{trainable} × {opt.STATES[values['optimizer']]:g} states × "
                 f"{state_bytes:g} B{' / (dp × cp)' if values['zero'] != '0' else ''}", "bytes": c["optimizer"], "source": opt.__doc__.split("\n\n")[1]
                 .replace("\n", " ")})
    if values["activations"] == "detailed" and result["activation_terms"]:
        per_token = sum(t["bytes_per_token"] for t in result["activation_terms"])
        rows.append({"name": "Activations", "formula": f"tokens × (layers × {per_token:,.0f} B + final norm)"
                     + (" — full recompute keeps only each layer's input" if values["recompute"] == "full" else ""),
                     "bytes": c["activations"], "source": "tensors autograd saves in the transformers layer; "
                                                           "terms below, checked in docs/validation.md"})
        for term in result["activation_terms"]:
            layers = result["layers"] if values["recompute"] != "full" else 1
            rows.append({"name": "  · " + term["name"], "formula": term["formula"] + " per token and layer",
                         "bytes": round(term["bytes_per_token"] * result["tokens"] * layers), "source":
                         "all layers" if layers > 1 else "one layer, rebuilt during its backward"})
    else:
        rows.append({"name": "Activations", "formula": {
            "korthikanti": "s·b·h·L·(34 + 5·a·s/h) × act bytes/2",
            "multiplier": "b·s·h·L·act_multiplier × act bytes/2",
            "per-sample": "act_per_sample × batch",
            "detailed": "act_per_sample × batch"}[values["activations"]],
            "bytes": c["activations"], "source": "Korthikanti et al. 2022, eq. 1-2"
            if values["activations"] == "korthikanti" else "user-supplied model"})
    rows.append({"name": "Logits and loss", "formula": "tokens × vocab × (4 B log-softmax + 8 B its gradients)",
                 "bytes": c["logits_and_loss"], "source": "cross-entropy upcasts logits to fp32"})
    if c["autocast_weight_copies"]:
        rows.append({"name": "Autocast weight copies", "formula": "2 B × matrix parameters",
                     "bytes": c["autocast_weight_copies"], "source": "torch.autocast casts each weight once per "
                                                                    "forward and autograd keeps the copy"})
    rows.append({"name": "Optimizer step temporaries", "formula": "foreach temporaries (+ fp32 gradients for "
                 "master weights)", "bytes": c["optimizer_step_temporaries"],
                 "source": "torch.optim _multi_tensor_adam: _foreach_sqrt(exp_avg_sq)"})
    rows.append({"name": "Peak", "formula": "max(forward end, backward, optimizer step)", "bytes":
                 result["peak_bytes"], "source": f"peak during {result['peak_phase']}"})
    return rows
