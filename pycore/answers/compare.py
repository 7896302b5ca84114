"""Compare an estimate with a baseline: by default the same setup in fp32 with no memory savers, or the
same model served instead of trained, with any input of the baseline changed by ``base.KEY``."""

from typing import Any

from pycore.answers.answer import answer_steps
from pycore.answers.fit import compute_dtype, matmul_rate
from pycore.base.errors import FieldError
from pycore.base.steps import Steps, finish
from pycore.base.units import format_bytes
from pycore.inputs.frameworks import CHECKPOINT_DTYPE, RECIPES, framework_name
from pycore.inputs.schema import DEFAULTS, EITHER, parse, to_query
from pycore.memory.estimate import Estimate, estimate_values
from pycore.memory.pools import Pool
from pycore.memory.precision import POLICIES
from pycore.model.catalog import gpus as gpu_catalog

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
        # no quantization in the baseline: QLoRA becomes LoRA on the 16-bit base (DPO's too)
        changed["method"] = {"qlora": "lora", "dpo-qlora": "dpo-lora", "kto-qlora": "kto-lora"}.get(values["method"], values["method"])
    try:
        overrides = parse(base_raw)             # strict: a bad base.* value raises, named base.KEY
    except FieldError as error:
        raise error.under("base.") from None
    changed.update({key: overrides[key] for key in base_raw})
    if ({"model", "params"} & set(base_raw)) and "config" not in base_raw:
        changed["config"] = None            # base.model names the baseline's model: the current config does not
    if ({"model", "params", "config"} & set(base_raw)) and "name" not in base_raw:
        changed["name"] = None              # nor its name
    # A base.KEY of a pair said either way (train_hours or train_tokens) replaces the other, inherited one.
    changed.update({other: DEFAULTS[other] for pair in EITHER for key, other in (pair, pair[::-1])
                    if key in base_raw and other not in base_raw})
    changed["compare"] = "off"
    return changed


def compare(values: dict[str, Any], result: Estimate, base_raw: dict[str, Any], answers: "dict[str, Any] | None" = None) -> dict[str, Any]:
    """Both estimates side by side, the difference of every component and the saving.

    ``answers`` are the current estimate's answers when the caller has them (they are not recomputed).
    """
    return finish(compare_steps(values, result, base_raw, answers))


def compare_steps(values: dict[str, Any], result: Estimate, base_raw: dict[str, Any],
                  answers: "dict[str, Any] | None" = None) -> "Steps[dict[str, Any]]":
    """``compare`` in steps (pycore/base/steps.py).

    Each column lists the pools live at its own peak plus its overhead (``Estimate.breakdown``), matched by
    key, so each column adds up to its own total exactly; time and cost use each column's matmul rate.
    """
    yield                                        # the baseline's estimate is a step of its own
    base = baseline_values(values, base_raw)
    try:
        base_result = estimate_values(base)
    except FieldError as error:
        raise error.under("base.") from None
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
    this_cost, base_cost = column_cost(values, result, answers), column_cost(base, base_result, base_answers)
    return {
        "mode": values["compare"],
        "baseline_query": to_query(base),
        "total_bytes": result.total_bytes, "baseline_total_bytes": base_total,
        "difference_bytes": result.total_bytes - base_total,
        "peak_phase": result.peak_phase, "baseline_peak_phase": base_result.peak_phase,
        "peak_moment": result.peak_moment, "baseline_peak_moment": base_result.peak_moment,
        "saving": saving, "message": message, "components": component_rows(result, base_result),
        "labels": {"this": "This setup", "baseline": "Baseline", "difference": "Δ"},
        "gpus_needed": answers.get("gpus_needed"), "baseline_gpus_needed": base_answers.get("gpus_needed"),
        "cost": this_cost, "baseline_cost": base_cost,
        "cost_usd": (this_cost or {}).get("cost_usd"), "baseline_cost_usd": (base_cost or {}).get("cost_usd"),
    }


def _by_key(pools: "tuple[Pool, ...]") -> "dict[str, tuple[str, str, int]]":
    """key -> (label, group, bytes) of a breakdown, in its order (a key given twice adds up)."""
    out: "dict[str, tuple[str, str, int]]" = {}
    for pool in pools:
        label, group, size = out.get(pool.key, (pool.label, pool.group or pool.key, 0))
        out[pool.key] = (label, group, size + pool.bytes)
    return out


def _label(this: "str | None", base: "str | None") -> str:
    """One row's label: the pool's own, or without its dtype where the columns keep it in different ones
    ("Weights (bf16)" beside "Weights (fp32)" is "Weights")."""
    if this is None or base is None or this == base:
        return this or base or ""
    plain = [text.rsplit(" (", 1)[0] if text.endswith(")") else text for text in (this, base)]
    return plain[0] if plain[0] == plain[1] else f"{this} / {base}"


OVERHEAD_GROUPS = ("reserved", "device")       # pycore.memory.device: listed last in each column


def component_rows(result: Estimate, base: Estimate) -> "list[dict[str, Any]]":
    """Rows {component, group, label, bytes, baseline_bytes, difference_bytes}: each column's pools live at
    its own peak plus its overhead (``Estimate.breakdown``), matched by pool key. Each column adds up to its
    ``total_bytes`` exactly; a pool live at only one column's peak is 0 in the other."""
    this, other = _by_key(result.breakdown), _by_key(base.breakdown)
    keys = [k for k in this if this[k][1] not in OVERHEAD_GROUPS] + \
        [k for k in other if k not in this and other[k][1] not in OVERHEAD_GROUPS]
    keys += [k for k in {**this, **other} if k not in keys]
    rows = []
    for key in keys:
        new, old = this.get(key), other.get(key)
        size, base_size = new[2] if new else 0, old[2] if old else 0
        if size or base_size:
            rows.append({"component": key, "group": (new or old or ("", key, 0))[1],
                         "label": _label(new[0] if new else None, old[0] if old else None),
                         "bytes": size, "baseline_bytes": base_size, "difference_bytes": size - base_size})
    return rows


# PyTorch computes fp32 matmuls in full fp32 unless told otherwise: torch.backends.cuda.matmul.allow_tf32 is
# False by default since PyTorch 1.12 (docs/source/notes/cuda.rst, "TensorFloat-32 (TF32) on Ampere (and
# later) devices"; torch.set_float32_matmul_precision defaults to "highest"), and the Trainer's tf32 argument
# defaults to None, which leaves it so. 16-bit policies (autocast included) run on the bf16 tensor cores.
def column_cost(values: dict[str, Any], result: Estimate, answers: dict[str, Any]) -> "dict[str, Any] | None":
    """One column's training time and cost at its own precision's matmul rate ({hours, cost_usd, rate,
    tflops, why_not}); None when serving (no cost is asked)."""
    cost = answers.get("cost")
    if not cost:
        return None
    gpu = gpu_catalog()[values["gpu"]]
    tflops, rate = matmul_rate(gpu, compute_dtype(values, result))
    out: "dict[str, Any]" = {"hours": None, "cost_usd": None, "rate": rate, "tflops": tflops,
                             "gpus": cost["gpus"], "why_not": cost.get("why_not", ""),
                             "given": cost.get("given"), "train_tokens": cost.get("train_tokens")}
    if not cost["train_flops"]:
        return out
    if not tflops:
        out["why_not"] = f"{gpu['name']} has no published dense {rate} figure ({gpu.get('fp32_source', '')})"
        return out
    out["hours"] = cost["train_flops"] / (cost["gpus"] * tflops * 1e12 * values["mfu"]) / 3600
    price = cost["price_usd_per_gpu_hour"]
    out["cost_usd"] = None if price is None else cost["gpus"] * price * out["hours"]
    out["why_not"] = "" if price is not None else "no price: set one"
    return out


# Adam keeps two states a parameter (exp_avg, exp_avg_sq): model states a parameter = weight + gradient +
# master + 2 states, in the policy's dtypes (pycore.memory.precision.POLICIES).
_STATES = {"adamw": 2, "adam": 2}
_MASTER_OF = {"bf16": "bf16-master", "fp16": "fp16-master"}
_FRAMEWORK_WORDS = {"hf-trainer": "the Hugging Face Trainer", "torchtune": "torchtune", "axolotl": "Axolotl"}


def _state_bytes(name: str, optimizer: str) -> "float | None":
    """Bytes of model states per parameter under a named policy with Adam(W); None for other optimizers."""
    if optimizer not in _STATES:
        return None
    p = POLICIES[name]
    master = p.bytes("master") if p.master != "none" else 0
    return p.bytes("weight") + p.bytes("grad") + master + _STATES[optimizer] * p.bytes("opt")


def _trl_precision(values: dict[str, Any], result: Estimate, trainer: str) -> "Steps[dict[str, Any] | None]":
    """Under TRL's trainers precision=auto is amp-bf16 (pycore.inputs.frameworks.RECIPES: create_model_from_path
    loads in float32 unless model_init_kwargs names a dtype, and bf16=True autocasts): say why, and what loading the
    model in bf16 would save, re-estimated."""
    yield
    change = {**values, "precision": "bf16"}
    try:
        other = estimate_values(change, explain=False)
    except FieldError:
        return None
    difference = result.total_bytes - other.total_bytes
    text = (f"Precision: {trainer} loads a model given by name in float32 unless model_init_kwargs names a dtype, "
            "and autocasts to bf16 (precision=auto → amp-bf16: fp32 weights and optimizer states, bf16 compute); "
            'loaded in bf16 (model_init_kwargs={"dtype": "bfloat16"}, '
            f"precision=bf16) it would need {format_bytes(abs(difference))['text']} "
            f"{'less' if difference >= 0 else 'more'} per GPU: {format_bytes(other.total_bytes)['text']}.")
    return {"text": text, "change": "precision=bf16", "query": {"precision": "bf16"},
            "total_bytes": other.total_bytes, "difference_bytes": other.total_bytes - result.total_bytes}


def precision_default(values: dict[str, Any], result: Estimate) -> "Steps[dict[str, Any] | None]":
    """When training at precision=auto lands on pure 16-bit (weights, gradients and optimizer state all 16-bit,
    as the Trainer loads a bf16 checkpoint), one sentence saying so and what fp32 master weights and states
    would cost instead, re-estimated: {text, change, query, total_bytes, difference_bytes}; None otherwise."""
    name = result.setup.precision
    method = str(values.get("method") or "")
    # the TRL trainers that load a model given by name with create_model_from_path and autocast the whole step
    # (pycore.inputs.frameworks.RECIPES' sources; PPO's script and distillation's fp32 update are worded otherwise);
    # not with an NF4 base (QLoRA) or a dtype given per pool
    recipe = RECIPES.get(method.split("-")[0]) if method.split("-")[0] in ("dpo", "kto", "grpo", "reward") else None
    overridden = any(values.get(key) for key in ("weight_dtype", "grad_dtype", "master_dtype", "opt_dtype", "act_dtype"))
    if values["mode"] == "train" and values["precision"] == "auto" and recipe and name == "amp-bf16" \
            and not method.endswith("qlora") and not overridden:
        return (yield from _trl_precision(values, result, recipe.name))
    # with adapters (LoRA, QLoRA) PEFT keeps the trained weights, their gradients and states in the adapters' own dtype
    # and the base is frozen: no master copy changes anything to say
    if values["mode"] != "train" or values["precision"] != "auto" or name not in _MASTER_OF or "lora" in method:
        return None
    yield
    change = {**values, "precision": _MASTER_OF[name]}
    try:
        other = estimate_values(change, explain=False)
    except FieldError:
        return None
    framework = framework_name(values)
    who = _FRAMEWORK_WORDS.get(framework, f"framework={framework}")
    now, then = _state_bytes(name, values["optimizer"]), _state_bytes(_MASTER_OF[name], values["optimizer"])
    def per(size: "float | None") -> str:
        return f", {size:g} bytes of model states per parameter" if now and then and size else ""
    difference = other.total_bytes - result.total_bytes
    what = f"this {name} checkpoint" if framework in CHECKPOINT_DTYPE else "the model"
    text = (f"Precision: {who} trains {what} in pure {name} (precision=auto → {name}: weights, "
            f"gradients and {values['optimizer']} states in {name}{per(now)}), not with fp32 master weights; "
            f"precision={_MASTER_OF[name]} (fp32 master weights and optimizer states{per(then)}) would need "
            f"{format_bytes(difference)['text']} more per GPU: {format_bytes(other.total_bytes)['text']}.")
    return {"text": text, "change": f"precision={_MASTER_OF[name]}", "query": {"precision": _MASTER_OF[name]},
            "total_bytes": other.total_bytes, "difference_bytes": difference}
