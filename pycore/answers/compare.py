"""Compare an estimate with a baseline: by default the same setup in fp32 with no memory savers, or the
same model served instead of trained, with any input of the baseline changed by ``base.KEY``."""

from typing import Any

from pycore.answers.answer import answer_steps
from pycore.base.errors import FieldError
from pycore.base.steps import Steps, finish
from pycore.inputs.schema import parse, to_query
from pycore.memory.estimate import Estimate, estimate_values

# What "no memory savers" undoes; everything else stays as the user set it.
PLAIN: "dict[str, object]" = {"precision": "fp32", "recompute": "none", "attention": "eager", "zero": "0", "fsdp": "none",
         "offload": "none", "sp": "no", "quant": "none"}
for _key in ("weight_dtype", "grad_dtype", "master_dtype", "opt_dtype", "act_dtype", "kv_dtype"):
    PLAIN[_key] = None


def baseline_values(values: dict[str, Any], base_raw: dict[str, Any]) -> dict[str, Any]:
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
    try:
        overrides = parse(base_raw)             # strict: a bad base.* value raises, named base.KEY
    except FieldError as error:
        raise error.under("base.") from None
    changed.update({key: overrides[key] for key in base_raw})
    changed["compare"] = "off"
    return changed


def compare(values: dict[str, Any], result: Estimate, base_raw: dict[str, Any], answers: "dict[str, Any] | None" = None) -> dict[str, Any]:
    """Both estimates side by side, the difference of every component and the saving.

    ``answers`` are the current estimate's answers when the caller has them (they are not recomputed).
    """
    return finish(compare_steps(values, result, base_raw, answers))


def compare_steps(values: dict[str, Any], result: Estimate, base_raw: dict[str, Any],
                  answers: "dict[str, Any] | None" = None) -> "Steps[dict[str, Any]]":
    """``compare`` in steps (pycore/base/steps.py)."""
    yield                                        # the baseline's estimate is a step of its own
    base = baseline_values(values, base_raw)
    try:
        base_result = estimate_values(base)
    except FieldError as error:
        raise error.under("base.") from None
    rows = []
    for key in sorted(set(result.components) | set(base_result.components)):
        new, old = result.components.get(key, 0), base_result.components.get(key, 0)
        if new or old:
            rows.append({"component": key, "bytes": new, "baseline_bytes": old, "difference_bytes": new - old})
    base_total = base_result.total_bytes
    saving = (base_total - result.total_bytes) / base_total if base_total else 0.0
    if saving < 0:
        message = (f"This setup uses {-100 * saving:.1f}% more memory per GPU than the baseline: a negative "
                   "saving (fp32 master weights and optimizer state can outweigh 16-bit activations).")
    else:
        message = f"This setup saves {100 * saving:.1f}% of the baseline's memory per GPU."
    if answers is None:
        answers = yield from answer_steps(values, result)
    base_answers = yield from answer_steps(base, base_result)
    return {
        "mode": values["compare"],
        "baseline_query": to_query(base),
        "total_bytes": result.total_bytes, "baseline_total_bytes": base_total,
        "difference_bytes": result.total_bytes - base_total,
        "peak_phase": result.peak_phase, "baseline_peak_phase": base_result.peak_phase,
        "saving": saving, "message": message, "components": rows,
        "labels": {"this": "This setup", "baseline": "Baseline", "difference": "Δ"},
        "gpus_needed": answers.get("gpus_needed"), "baseline_gpus_needed": base_answers.get("gpus_needed"),
        "cost_usd": (answers.get("cost") or {}).get("cost_usd"),
        "baseline_cost_usd": (base_answers.get("cost") or {}).get("cost_usd"),
    }
