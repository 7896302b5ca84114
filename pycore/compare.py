"""Compare an estimate with a baseline: by default the same setup in fp32 with no memory savers, or the
same model served instead of trained, with any input of the baseline changed by ``base.KEY``."""

from .answers import answer
from .estimate import estimate_values
from .schema import InputError, parse, to_query

# What "no memory savers" undoes; everything else stays as the user set it.
PLAIN = {"precision": "fp32", "recompute": "none", "attention": "eager", "zero": "0", "fsdp": "none",
         "offload": "none", "sp": "no", "quant": "none"}
for _key in ("weight_dtype", "grad_dtype", "master_dtype", "opt_dtype", "act_dtype", "kv_dtype"):
    PLAIN[_key] = None


def baseline_values(values, base_raw):
    """The baseline's inputs: the current ones, then the compare mode's changes, then base.* overrides."""
    changed = dict(values)
    if values["compare"] == "serving":
        changed["mode"] = "infer" if values["mode"] == "train" else "train"
        for key in ("dp", "tp", "pp", "cp", "ep"):
            changed[key] = 1
    else:
        changed.update(PLAIN)
        if values["method"] == "qlora":
            changed["method"] = "lora"
    overrides = parse(base_raw)                 # strict: a bad base.* value raises, naming base.KEY
    changed.update({key: overrides[key] for key in base_raw})
    changed["compare"] = "off"
    return changed


def compare(values, result, base_raw):
    """Both estimates side by side, the difference of every component and the saving."""
    try:
        base = baseline_values(values, base_raw)
    except InputError as error:
        raise InputError(f"base.{error.key}", str(error).split(": ", 1)[1]) from None
    base_result = estimate_values(base)
    rows = []
    for key in sorted(set(result["components"]) | set(base_result["components"])):
        new, old = result["components"].get(key, 0), base_result["components"].get(key, 0)
        if new or old:
            rows.append({"component": key, "bytes": new, "baseline_bytes": old, "difference_bytes": new - old})
    saving = (base_result["total_bytes"] - result["total_bytes"]) / base_result["total_bytes"]
    if saving < 0:
        message = (f"This setup uses {-100 * saving:.1f}% more memory per GPU than the baseline: a negative "
                   "saving (fp32 master weights and optimizer state can outweigh 16-bit activations).")
    else:
        message = f"This setup saves {100 * saving:.1f}% of the baseline's memory per GPU."
    answers, base_answers = answer(values, result), answer(base, base_result)
    return {
        "mode": values["compare"],
        "baseline_query": to_query(base),
        "total_bytes": result["total_bytes"], "baseline_total_bytes": base_result["total_bytes"],
        "peak_phase": result["peak_phase"], "baseline_peak_phase": base_result["peak_phase"],
        "saving": saving, "message": message, "components": rows,
        "gpus_needed": answers.get("gpus_needed"), "baseline_gpus_needed": base_answers.get("gpus_needed"),
        "cost_usd": (answers.get("cost") or {}).get("cost_usd"),
        "baseline_cost_usd": (base_answers.get("cost") or {}).get("cost_usd"),
    }
