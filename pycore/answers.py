"""The questions people ask after the breakdown: how many GPUs, what batch, how long, how much, and
what to change when it does not fit. Each answer re-runs the estimate with one input changed."""

from .catalog import gpus as gpu_catalog
from .estimate import estimate_values
from .schema import InputError

SEARCH_LIMIT = 1 << 20


def _total(values, **changes):
    try:
        return estimate_values({**values, **changes})["total_bytes"]
    except InputError:
        return None


def _fits(values, usable, **changes):
    total = _total(values, **changes)
    return total is not None and total <= usable


def _linear_guess(values, key, usable):
    """Where the total would reach ``usable`` if it grew linearly in ``key`` (it does for the batch)."""
    one, two = _total(values, **{key: 1}), _total(values, **{key: 2})
    if one is None or two is None or two <= one:
        return None
    return max(1, min(SEARCH_LIMIT, (usable - one) // (two - one) + 1))


def _largest(values, key, usable, low=1, high=SEARCH_LIMIT):
    """The largest value of an integer input that still fits, or None if even ``low`` does not."""
    if not _fits(values, usable, **{key: low}):
        return None
    guess = _linear_guess(values, key, usable)
    if guess is not None and _fits(values, usable, **{key: guess}) and not _fits(values, usable, **{key: guess + 1}):
        return guess                                    # the linear guess is exact: two checks, not twenty
    while low < high:
        middle = (low + high + 1) // 2
        if _fits(values, usable, **{key: middle}):
            low = middle
        else:
            high = middle - 1
    return low


def _gpus_needed(values, usable):
    """Fewest GPUs of the chosen kind that fit: the world size dp·tp·pp·cp with the smallest dp."""
    model_parallel = values["tp"] * values["pp"] * values["cp"]
    sharded = values["zero"] != "0" or values["fsdp"] not in ("none", "NO_SHARD")
    if not sharded or values["fsdp"] == "HYBRID_SHARD":
        return model_parallel * values["dp"] if _fits(values, usable) else None
    if not _fits(values, usable, dp=4096):
        return None
    low, high = 1, 4096
    while low < high:
        middle = (low + high) // 2
        if _fits(values, usable, dp=middle):
            high = middle
        else:
            low = middle + 1
    return low * model_parallel


def _cost(values, result, gpu):
    world = values["dp"] * values["tp"] * values["pp"] * values["cp"]
    count = values["gpus"] or world
    price = values["price"] if values["price"] is not None else gpu["price_usd_per_gpu_hour"]
    flops = 6 * result["params"]["active"] * values["train_tokens"]
    answer = {"gpus": count, "price_usd_per_gpu_hour": price, "train_flops": flops, "hours": None,
              "cost_usd": None, "formula": "hours = 6 · active params · tokens / (GPUs · peak bf16 FLOP/s · MFU)"}
    if not values["train_tokens"]:
        answer["why_not"] = "set train_tokens to get the training time and cost"
    elif not gpu["bf16_dense_TFLOPS"]:
        answer["why_not"] = f"{gpu['name']} has no published dense bf16 figure"
    elif not values["mfu"]:
        answer["why_not"] = "mfu must be above 0"
    else:
        seconds = flops / (count * gpu["bf16_dense_TFLOPS"] * 1e12 * values["mfu"])
        answer["hours"] = seconds / 3600
        if price is not None:
            answer["cost_usd"] = count * price * answer["hours"]
        else:
            answer["why_not"] = "no price: set one"
    return answer


def _how_to_fit(values, usable, current):
    """Single changes that lower the total, ranked: those that fit first, then by the total they give."""
    if values["mode"] == "infer":
        candidates = [
            ("kv_dtype=fp8", {"kv_dtype": "fp8"}),
            ("quant=awq-int4", {"quant": "awq-int4"}),
            ("quant=fp8", {"quant": "fp8"}),
            (f"batch={max(values['batch'] // 2, 1)}", {"batch": max(values["batch"] // 2, 1)}),
            (f"seq={max(values['seq'] // 2, 1)}", {"seq": max(values["seq"] // 2, 1)}),
        ]
    else:
        candidates = _training_changes(values)
    rows = []
    for label, change in candidates:
        if all(values.get(k) == v for k, v in change.items()):
            continue
        total = _total(values, **change)
        if total is not None and total < current:
            rows.append({"change": label, "total_bytes": total, "fits": total <= usable,
                         "query": {k: str(v) for k, v in change.items()}})
    rows.sort(key=lambda r: (not r["fits"], r["total_bytes"]))
    return rows


def _training_changes(values):
    return [
        ("recompute=full", {"recompute": "full"}),
        ("recompute=selective", {"recompute": "selective"}),
        ("attention=flash", {"attention": "flash"}),
        ("precision=bf16 (no fp32 master or states)", {"precision": "bf16"}),
        ("optimizer=adam-8bit", {"optimizer": "adam-8bit"}),
        (f"batch={max(values['batch'] // 2, 1)}", {"batch": max(values["batch"] // 2, 1)}),
        ("zero=3 over 8 GPUs", {"zero": "3", "fsdp": "none", "dp": max(values["dp"], 8)}),
        (f"tp={values['tp'] * 2}", {"tp": values["tp"] * 2}),
        ("offload=optimizer with zero=3" if values["zero"] != "3" else "offload=optimizer",
         {"offload": "optimizer", "zero": "3", "fsdp": "none"}),
    ]


def answer(values, result):
    """gpus_needed, max_batch, max_seq, cost and how_to_fit for the chosen GPU."""
    gpu = gpu_catalog()[values["gpu"]]
    usable = gpu["usable_bytes"]
    fits = result["total_bytes"] <= usable
    out = {"gpu": values["gpu"], "fits": fits}
    if values["mode"] == "train":
        out["gpus_needed"] = _gpus_needed(values, usable)
        out["cost"] = _cost(values, result, gpu)
    out["max_batch"] = _largest(values, "batch", usable)
    out["max_seq"] = _largest(values, "seq", usable) if result["model"]["kind"] != "generic" else None
    if values["mode"] == "infer":
        # Sequences of prompt + new tokens served at once, and the longest context at this batch.
        out["max_concurrency"] = out["max_batch"]
        out["max_context"] = None if out["max_seq"] is None else out["max_seq"] + values["new_tokens"]
    out["how_to_fit"] = [] if fits else _how_to_fit(values, usable, result["total_bytes"])
    return out
