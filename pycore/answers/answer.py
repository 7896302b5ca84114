"""The questions people ask after the breakdown: how many GPUs and in which layout, what batch, how long,
how much, and what to change when it does not fit. Each answer re-runs the estimate (totals only, no
formulas) with some inputs changed; every search is bounded, and runs in steps of one estimate each
(pycore/base/steps.py)."""

import math
from itertools import combinations
from typing import Any

from pycore.answers import rollout_answers
from pycore.answers.fit import compute_dtype, matmul_rate
from pycore.base.errors import FieldError
from pycore.base.steps import Steps, finish
from pycore.base.units import GIB, duration_text, format_bytes, plural
from pycore.inputs import frameworks
from pycore.memory.estimate import Estimate, totals_only
from pycore.memory.serving import longest_context
from pycore.memory.setup import image_tokens, resolve_architecture
from pycore.model.catalog import gpus as gpu_catalog

SEARCH_LIMIT = 1 << 20
NODE = 8                         # GPUs per node: tensor parallelism stays inside one
MAX_DP = 1 << 16
# Compute each plan costs, relative to the plain step (the rule plans are ranked by after the GPU count):
# full recomputation runs every layer's forward twice, 4/3 of a step's FLOPs (Korthikanti et al. 2022,
# section 5: "full recomputation ... 30-40% overhead"); selective recomputation ~2.7% (their Table 4).
# torchtitan's layer mode rebuilds every 2nd layer (7/6); its op mode rebuilds the 2nd, 4th and 6th matmul of
# a block (k, o, up: 37% of a Llama 3 8B block's forward matmul FLOPs) and the cheap ops, about 1 + 0.37 / 3.
RECOMPUTE_COST = {"none": 1.0, "selective": 1.03, "full": 4 / 3, "layer": 7 / 6, "op": 1.12}


def _total(values: dict[str, Any], **changes: object) -> "Steps[int | None]":
    """The total per GPU of a changed setup; None when it cannot work: an input refused, or an engine that
    would not start (vLLM's KV cache below one request of max_model_len)."""
    yield                                        # a step: each estimate is one (pycore/base/steps.py)
    try:
        result = totals_only({**values, **changes})
    except FieldError:
        return None
    return None if result.refused else result.total_bytes


def _fits(values: dict[str, Any], usable: int, **changes: object) -> "Steps[bool]":
    total = yield from _total(values, **changes)
    return total is not None and total <= usable


def _largest(values: dict[str, Any], key: str, usable: int, low: int = 1, high: int = SEARCH_LIMIT) -> "Steps[int | None]":
    """The largest value of an integer input that still fits, or None if even ``low`` does not.

    Memory is piecewise linear in the batch and the sequence, and close to convex (a maximum over
    moments, each about linear), so the search brackets the answer by doubling from the value given,
    then narrows the bracket in turn by interpolating between its ends (on a convex curve a guess at or
    below the answer), by extending the line through the two highest values that fit (at or above it; on
    a straight piece the two guesses meet at the answer), and by bisecting (a bound on the number of
    steps whatever the shape of the curve): a handful of estimates.
    """
    t_low = yield from _total(values, **{key: low})
    if t_low is None or t_low > usable:
        return None
    x: int = max(low, min(values[key], high))
    t_x = (yield from _total(values, **{key: x})) if x != low else t_low
    t_hi: "int | None"
    if t_x is not None and t_x <= usable:
        lo, t_lo = x, t_x
        while True:                                  # double until it does not fit (or the top fits)
            if lo == high:
                return high
            hi = min(high, 2 * lo)
            t_hi = yield from _total(values, **{key: hi})
            if t_hi is None or t_hi > usable:
                break
            lo, t_lo = hi, t_hi
    else:
        lo, t_lo, hi, t_hi = low, t_low, x, t_x
    below: "tuple[int, int] | None" = None      # the value that fitted before lo, and its total
    step = 0
    while hi - lo > 1:
        middle = (lo + hi) // 2
        if step % 3 == 0 and t_hi is not None and t_hi > t_lo:
            middle = lo + (usable - t_lo) * (hi - lo) // (t_hi - t_lo)
        elif step % 3 == 1 and below is not None and t_lo > below[1]:
            middle = lo + (usable - t_lo) * (lo - below[0]) // (t_lo - below[1])
        middle = min(hi - 1, max(lo + 1, middle))
        step += 1
        t_mid = yield from _total(values, **{key: middle})
        if t_mid is not None and t_mid <= usable:
            below, lo, t_lo = (lo, t_lo), middle, t_mid
        else:
            hi, t_hi = middle, t_mid
    return lo


def _valid_tp(values: dict[str, Any], heads: int, kv_heads: int) -> "list[int]":
    out = []
    for tp in (1, 2, 4, NODE):
        if heads and heads % tp == 0 and (kv_heads % tp == 0 or tp % kv_heads == 0):
            out.append(tp)
    return out or [1]


def _smallest_dp(values: dict[str, Any], usable: int, changes: dict[str, Any], most: "int | None" = None) -> "Steps[int | None]":
    """Fewest data-parallel ZeRO-3 shards that fit; None when the unsharded part alone does not fit, or
    when more than ``most`` shards would be needed.

    Memory is about ``fixed + sharded / dp``: the line through two estimates in 1/dp, extended to more
    shards, guesses where it reaches the usable bytes. The search starts from two shard counts and moves
    the line to the two most-sharded estimates until its guess fits. The allocator's cache follows the
    peak moment, which can move as dp grows, so a guess that fits may overshoot: one shard fewer is
    checked, and bisected below if it fits too (taking memory not to grow with more shards). With expert
    parallelism in training, dp · cp must be a multiple of ep: only such counts are tried.
    """
    unit = 1
    if values["mode"] == "train" and values["ep"] > 1:
        unit = values["ep"] // math.gcd(values["ep"], values["cp"])
    unit = math.lcm(unit, rollout_answers.dp_unit({**values, **changes}))    # TRL's GRPO generation batch
    first = max(2, unit)
    if most is not None:
        most = most // unit * unit
        if most < first or not (yield from _fits(values, usable, **changes, dp=most)):
            return None
    found = yield from _follow_line(values, usable, changes, first, unit, most)
    if found is None:
        return None
    failed, fitted = found
    return (yield from _narrow(values, usable, changes, failed, fitted, unit))


def _follow_line(values: dict[str, Any], usable: int, changes: dict[str, Any], first: int, unit: int,
                 most: "int | None") -> "Steps[tuple[int, int] | None]":
    """(the most shards known not to fit, or not tried; the fewest found that fit), or None: two estimates
    from ``first`` shards, then the line through the two most-sharded ones, up to eight times."""
    failed = first - unit
    line: "list[tuple[int, int]]" = []
    for dp in (first, 2 * first if most is None else min(2 * first, most)):
        t = yield from _total(values, **changes, dp=dp)
        if t is None:
            return None
        if t <= usable:
            return failed, dp
        failed, line = dp, line + [(dp, t)]
    for _ in range(8):
        guess = _line_guess(line, usable, failed, unit)
        if guess is None:
            return None
        dp = guess if most is None else min(guess, most)     # ``most`` is known to fit (and remembered)
        t = yield from _total(values, **changes, dp=dp)
        if t is None:
            return None
        if t <= usable:
            return failed, dp
        failed, line = dp, [line[1], (dp, t)]
    return None


def _line_guess(line: "list[tuple[int, int]]", usable: int, failed: int, unit: int) -> "int | None":
    """Where ``fixed + sharded / dp`` through the two points reaches ``usable``; None when it never does."""
    (d1, t1), (d2, t2) = line
    sharded = (t1 - t2) / (1 / d1 - 1 / d2)
    fixed = t2 - sharded / d2
    if fixed >= usable or sharded <= 0:
        return None
    dp = max(failed + unit, math.ceil(sharded / (usable - fixed) / unit) * unit)
    return None if dp > MAX_DP else dp


def _narrow(values: dict[str, Any], usable: int, changes: dict[str, Any], failed: int, fitted: int, unit: int) -> "Steps[int]":
    """The fewest shards between ``failed`` (does not fit) and ``fitted`` (fits), in steps of ``unit``."""
    if fitted - failed > unit:                  # one shard fewer first: usually it does not fit
        if (yield from _fits(values, usable, **changes, dp=fitted - unit)):
            fitted -= unit
        else:
            failed = fitted - unit
    while fitted - failed > unit:               # bisect
        middle = failed + (fitted - failed) // (2 * unit) * unit
        if (yield from _fits(values, usable, **changes, dp=middle)):
            fitted = middle
        else:
            failed = middle
    return fitted


def plan(values: dict[str, Any], usable: int, limit: int = 5) -> "Steps[list[dict[str, Any]]]":
    """Training layouts that fit the chosen GPU, fewest GPUs first, then by the compute they cost.

    Tried: the layout as given; ZeRO-3 / FSDP FULL_SHARD over the fewest data-parallel GPUs, with tensor
    parallelism inside a node (dividing heads and kv heads; a larger degree while it could use fewer GPUs
    in all) and pipeline stages when a node is not enough; each with the recomputation given and with
    full recomputation. Once ``limit`` layouts are found, a layout is searched only up to the GPUs of the
    ``limit``-th fewest: one that needs more could not be shown.
    """
    arch = resolve_architecture(values)             # the model the estimate used: preset, config or overrides
    heads, kv_heads, layers = arch.heads or 1, arch.kv_heads or 1, arch.layers or 1
    generic = arch.kind == "generic"
    options = []
    given = yield from _total(values)
    world = values["dp"] * values["tp"] * values["pp"] * values["cp"]
    if given is not None and given <= usable and not rollout_answers.trl_refuses(values):
        options.append(_option("as given", {}, world, given, values["recompute"], values))
    recomputes = [values["recompute"]] + (["full"] if values["recompute"] != "full" else [])
    tps = [1] if generic else _valid_tp(values, heads, kv_heads)
    # TRL's trainers (the post-training recipes) run on transformers' Trainer, which has no pipeline schedule (data
    # parallelism, DeepSpeed or FSDP through accelerate): no pipeline stages are tried for them
    pps = (1, 2, 4, 8) if frameworks.recipe_of(values) == "sft" else (1,)
    for recompute in recomputes:
        for pp in pps:
            if pp > 1 and (generic or pp > layers or any(o["gpus"] <= NODE for o in options)):
                break
            fewest = None                    # GPUs of this pp's best layout so far
            for tp in tps:
                if fewest is not None and fewest <= tp * pp * values["cp"]:
                    break                    # a larger tp cannot use fewer GPUs than that layout
                shown = sorted({o["label"]: o["gpus"] for o in options}.values())
                most = shown[limit - 1] // (tp * pp * values["cp"]) if len(shown) >= limit else None
                found = yield from _sharded_layout(values, usable, recompute, tp, pp, most)
                if found is None:
                    continue
                changes, gpus, total = found
                label = " ".join(f"{k}={changes[k]}" for k in ("zero", "dp", "tp", "pp", "recompute")
                                 if changes[k] != values[k]) or "as given"
                options.append(_option(label, changes, gpus, total, recompute, values))
                fewest = gpus if fewest is None else min(fewest, gpus)
    options += yield from _group_layouts(values, usable, recomputes)
    options = [o for o in options if not _no_gain(o, options)]
    options.sort(key=lambda o: (o["gpus"], o["compute_cost"], o["total_bytes"]))
    unique = {option["label"]: option for option in reversed(options)}      # the first of each label
    return [_with_kept(option, values) for option in sorted(unique.values(), key=options.index)[:limit]]


def _group_layouts(values: dict[str, Any], usable: int, recomputes: "list[str]") -> "Steps[list[dict[str, Any]]]":
    """GRPO's other way to whole groups: more micro-batches on fewer GPUs (steps_per_generation follows
    gradient_accumulation_steps, GRPOConfig.__post_init__ L1097-1100). At dp 1, 2, 4 and 8 (ZeRO-3 beyond one), the
    fewest micro-batches at or above those given that make batch × dp × micro-batches a multiple of num_generations;
    the first dp that fits, for each recomputation."""
    if not rollout_answers.is_grpo(values):
        return []
    generations, others = max(values.get("num_generations") or 1, 1), values["tp"] * values["pp"] * values["cp"]
    out = []
    for recompute in recomputes:
        for dp in (1, 2, 4, 8):
            step = generations // math.gcd(generations, values["batch"] * dp)
            changes = {"recompute": recompute, "dp": dp, "microbatches": -(-values["microbatches"] // step) * step}
            if dp > 1:
                changes.update(zero="3", fsdp="none", offload="none")
            if rollout_answers.trl_refuses({**values, **changes}):
                continue
            total = yield from _total(values, **changes)
            if total is not None and total <= usable:
                label = " ".join(f"{k}={changes[k]}" for k in ("zero", "dp", "microbatches", "recompute")
                                 if k in changes and changes[k] != values[k])
                out.append(_option(label or "as given", changes, dp * others, total, recompute, values))
                break
    return out


def _with_kept(option: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """The option with the degrees it keeps from the inputs in its label, so the label names every factor of its
    GPUs: "zero=3 dp=2, tp=8 kept" for 16 GPUs, not "zero=3 dp=2"."""
    kept = [f"{key}={values[key]}" for key in ("dp", "tp", "pp", "cp")
            if key not in option["query"] and values[key] > 1]
    if not kept or option["label"] == "as given":
        return option
    return {**option, "label": f"{option['label']}, {' '.join(kept)} kept"}


def _no_gain(option: dict[str, Any], options: "list[dict[str, Any]]") -> bool:
    """A layout with full recomputation that saves nothing over the same layout without it (a network whose
    activations are not counted, or already recomputed): it costs compute and changes no byte."""
    if "recompute=full" not in option["label"]:
        return False
    twin = option["label"].replace("recompute=full", "").replace("  ", " ").strip() or "as given"
    return any(o["label"] == twin and o["gpus"] <= option["gpus"] and o["total_bytes"] <= option["total_bytes"]
               for o in options)


def _sharded_layout(values: dict[str, Any], usable: int, recompute: str, tp: int, pp: int,
                    most: "int | None") -> "Steps[tuple[dict[str, Any], int, int] | None]":
    """(changes, GPUs, total) of ZeRO-3 over the fewest data-parallel GPUs at this tp and pp, or None."""
    changes = {"recompute": recompute, "tp": tp, "pp": pp, "zero": "3", "fsdp": "none",
               "offload": "none", "microbatches": max(values["microbatches"], pp)}
    dp: "int | None" = 1
    alone = tp == 1 and pp == 1 and rollout_answers.dp_unit({**values, **changes}) == 1
    if not (alone and (yield from _fits(values, usable, **changes, dp=1))):
        dp = yield from _smallest_dp(values, usable, changes, most)
    if dp is None:
        return None
    changes = {**changes, "dp": dp}
    if dp * values["cp"] == 1:      # nothing to shard over: ZeRO would change nothing
        changes.update(zero=values["zero"], fsdp=values["fsdp"])
    total = yield from _total(values, **changes)
    return None if total is None else (changes, dp * tp * pp * values["cp"], total)


def _option(label: str, changes: dict[str, Any], gpus: int, total: int, recompute: str, values: dict[str, Any]) -> dict[str, Any]:
    query = {k: str(v) for k, v in changes.items() if values.get(k) != v}
    shown = format_bytes(total)["text"]
    return {"label": label, "gpus": gpus, "total_bytes": total, "total_text": shown,
            "text": f"{plural(gpus, 'GPU')}, {shown} each", "compute_cost": RECOMPUTE_COST[recompute], "query": query}


def serving_plan(values: dict[str, Any], usable: int) -> "Steps[list[dict[str, Any]]]":
    """Serving layouts that fit: the smallest tensor-parallel degree inside a node, then pipeline stages."""
    arch = resolve_architecture(values)
    options = []
    for pp in (1, 2, 4, 8):
        if pp > arch.layers:
            break
        for tp in _valid_tp(values, arch.heads, arch.kv_heads):
            total = yield from _total(values, tp=tp, pp=pp, dp=1, cp=1)
            if total is not None and total <= usable:
                options.append(_option(f"tp={tp}" + (f" pp={pp}" if pp > 1 else ""), {"tp": tp, "pp": pp},
                                       tp * pp, total, "none", values))
                break
        if options:
            break
    return options


def _cost(values: dict[str, Any], result: Estimate, gpu: dict[str, Any], gpus: "int | None") -> dict[str, Any]:
    """Training time and cost: the hours from train_tokens, or the tokens from train_hours (either gives the
    other at the throughput GPUs · peak FLOP/s · MFU, 6 FLOPs a token and active parameter); ``given`` and
    ``derived`` say which was which."""
    world = values["dp"] * values["tp"] * values["pp"] * values["cp"]
    count = values["gpus"] or world
    price = values["price"] if values["price"] is not None else gpu["price_usd_per_gpu_hour"]
    tflops, rate = matmul_rate(gpu, compute_dtype(values, result))    # fp32 steps run at the fp32 rate
    by_hours = bool(values.get("train_hours"))
    answer = {"gpus": count, "price_usd_per_gpu_hour": price, "train_flops": 0, "hours": None,
              "train_tokens": None, "cost_usd": None, "duration_text": "",
              "given": "train_hours" if by_hours else "train_tokens",
              "derived": "train_tokens" if by_hours else "train_hours",
              "formula": f"tokens = hours · 3600 · GPUs · peak {rate} FLOP/s · MFU / (6 · active params)" if by_hours
              else f"hours = 6 · active params · tokens / (GPUs · peak {rate} FLOP/s · MFU)"}
    throughput = count * (tflops or 0) * 1e12 * values["mfu"]         # FLOP/s of all the GPUs together
    if by_hours:
        answer["hours"] = float(values["train_hours"])
        answer["train_flops"] = answer["hours"] * 3600 * throughput
        answer["train_tokens"] = round(answer["train_flops"] / (6 * result.params_active)) \
            if throughput and result.params_active else None
    elif values["train_tokens"]:
        answer["train_tokens"] = values["train_tokens"]
        answer["train_flops"] = 6 * result.params_active * values["train_tokens"]
        answer["hours"] = answer["train_flops"] / throughput / 3600 if throughput else None
    if not values["train_tokens"] and not by_hours:
        answer["why_not"] = "set train_tokens or train_hours to get the training time, the tokens and the cost"
    elif not tflops:
        answer["why_not"] = f"{gpu['name']} has no published dense {rate} figure"
    if answer["hours"] is not None:
        answer["duration_text"] = duration_text(answer["hours"])
        if price is not None:
            answer["cost_usd"] = count * price * answer["hours"]
        else:
            answer.setdefault("why_not", "no price: set one")
    return answer


def _how_to_fit(values: dict[str, Any], usable: int, current: int,
                capacity: "dict[str, Any] | None" = None) -> "Steps[list[dict[str, Any]]]":
    """Changes that lower the total, alone, in pairs or threes, ranked: those that fit first (by the compute
    they cost, then the fewest changes), then by the total they give. ``capacity``: vLLM's (Estimate.vllm), whose
    refusals name changes of their own (_vllm_changes)."""
    if values["mode"] == "infer":
        candidates = [
            ("kv_dtype=fp8", {"kv_dtype": "fp8"}),
            ("quant=awq-int4", {"quant": "awq-int4"}),
            ("quant=fp8", {"quant": "fp8"}),
            (f"batch={max(values['batch'] // 2, 1)}", {"batch": max(values["batch"] // 2, 1)}),
            (f"seq={max(values['seq'] // 2, 1)}", {"seq": max(values["seq"] // 2, 1)}),
        ]
        candidates += _vllm_changes(values, capacity or {})
    else:
        candidates = _training_changes(values)
    # a change TRL would refuse (pycore.answers.rollout_answers.trl_refuses) is no way to fit
    candidates = [(label, change) for label, change in candidates
                  if not all(values.get(k) == v for k, v in change.items())
                  and not rollout_answers.trl_refuses({**values, **change})]
    rows = []
    singles = []
    for label, change in candidates:
        total = yield from _total(values, **change)
        if total is not None and total < current:
            singles.append((label, change, total))
            rows.append((1, _fix(label, change, total, usable)))
    # Combinations of two of the four best single changes when none fits alone, of three when no pair
    # fits either (ten more estimates at most), skipping those that set the same input twice.
    best = sorted(singles, key=lambda s: s[2])[:4]
    for size in (2, 3):
        if any(r["fits"] for _, r in rows):
            break
        for combo in combinations(best, size):
            keys = [k for _, change, _ in combo for k in change]
            if len(keys) != len(set(keys)):
                continue
            change = {k: v for _, part, _ in combo for k, v in part.items()}
            if rollout_answers.trl_refuses({**values, **change}):
                continue
            total = yield from _total(values, **change)
            if total is not None and total < current:
                rows.append((size, _fix(" + ".join(label for label, _, _ in combo), change, total, usable)))
    # Those that fit first, those on these GPUs before a vLLM server on GPUs of its own, by the compute they cost,
    # then by how few changes they make.
    rows.sort(key=lambda row: (not row[1]["fits"], row[1]["query"].get("rollout") == "vllm-server",
                               row[1]["compute_cost"] if row[1]["fits"] else 0,
                               row[0] if row[1]["fits"] else 0, row[1]["total_bytes"]))
    return [row for _, row in rows[:12]]


def _vllm_changes(values: dict[str, Any], capacity: "dict[str, Any]") -> "list[tuple[str, dict[str, Any]]]":
    """What makes vLLM start: the longest max_model_len it would accept (the sequence shortened to it), for a
    vision-language model the encoder profiling kept to an image or left out (pycore.memory.vllm_multimodal), and
    float16 where the estimate found the GPU has no bf16."""
    if values.get("engine") != "vllm":
        return []
    out = []
    accepted = capacity.get("longest_max_model_len")
    seq = (accepted or 0) - values["new_tokens"] - image_tokens(values)
    if 0 < seq < values["seq"]:
        out.append((f"seq={seq} (max_model_len {accepted:,}, the longest vLLM would accept)", {"seq": seq}))
    if resolve_architecture(values).vision_layers and values.get("mm_profiling", "auto") != "off":
        out += [(f"mm_profiling={choice}", {"mm_profiling": choice})
                for choice in ("image", "off") if values.get("mm_profiling", "auto") != choice]
    if "no_bf16" in capacity:
        out.append(("precision=fp16 (--dtype half: this GPU has no bf16)", {"precision": "fp16"}))
    return out


def _fix(label: str, change: dict[str, Any], total: int, usable: int) -> dict[str, Any]:
    """A change with its total, and in words whether it fits or how far it still is."""
    cost = RECOMPUTE_COST.get(str(change.get("recompute", "none")), 1.0)
    shown = format_bytes(total)["text"]
    text = f"{shown} (fits)" if total <= usable else f"{shown}, still {format_bytes(total - usable)['text']} over"
    return {"change": label, "total_bytes": total, "total_text": shown, "text": text,
            "fits": total <= usable, "compute_cost": cost, "query": {k: str(v) for k, v in change.items()}}


def _training_changes(values: dict[str, Any]) -> "list[tuple[str, dict[str, Any]]]":
    unit = rollout_answers.dp_unit(values)          # GRPO: dp keeps the generation batch whole groups
    sharded = -(-max(values["dp"], 8) // unit) * unit
    return [
        ("recompute=full", {"recompute": "full"}),
        ("recompute=selective", {"recompute": "selective"}),
        ("attention=flash", {"attention": "flash"}),
        ("precision=bf16 (no fp32 master or states)", {"precision": "bf16"}),
        ("optimizer=adam-8bit", {"optimizer": "adam-8bit"}),
        *_smaller_micro_batches(values),
        (f"zero=3 over {sharded} GPUs", {"zero": "3", "fsdp": "none", "dp": sharded}),
        (f"tp={values['tp'] * 2}", {"tp": values["tp"] * 2}),
        ("offload=optimizer with zero=3" if values["zero"] != "3" else "offload=optimizer",
         {"offload": "optimizer", "zero": "3", "fsdp": "none"}),
        *rollout_answers.rollout_changes(values),
    ]


def _smaller_micro_batches(values: dict[str, Any]) -> "list[tuple[str, dict[str, Any]]]":
    """What people do first: a smaller micro-batch with more accumulation, the global batch kept (half the
    micro-batch, and one sequence), each at its true peak with the accumulated gradients."""
    batch, steps = values["batch"], values["microbatches"]
    out = []
    for smaller in dict.fromkeys((batch // 2, 1)):
        if 1 <= smaller < batch and batch % smaller == 0:
            more = steps * batch // smaller
            out.append((f"batch={smaller} microbatches={more} (same global batch)",
                        {"batch": smaller, "microbatches": more}))
    return out


def answer(values: dict[str, Any], result: Estimate) -> dict[str, Any]:
    """fits, plan, gpus_needed, max_batch, max_seq, cost, how_to_fit and charts for the chosen GPU."""
    return finish(answer_steps(values, result))


def _vllm_log(result: Estimate, capacity: "dict[str, Any]", attention: bool) -> "list[str]":
    """The lines vLLM 0.11 would log at start-up, up to the error where it stops, in the order it checks: a config it
    refuses as it is made (max_model_len over the positions, config/model.py _get_and_verify_max_len, before
    max_num_seqs over max_num_batched_tokens, config/scheduler.py: engine/arg_utils.py builds the model's config
    first), bf16 on a GPU without it as the worker starts, else the weights loaded and what is left for the KV cache
    (gpu_worker.py, below zero too), then kv_cache_utils.py's checks (no memory left; one request of max_model_len
    not held) or the cache's size and concurrency it reports once laid out."""
    if "over_positions" in capacity:
        length, positions = capacity["over_positions"]
        return [f"ValueError: User-specified max_model_len ({length}) is greater than the derived max_model_len "
                f"(max_position_embeddings={positions} or model_max_length=None in model's config.json). To allow "
                "overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."]
    if "seqs_over_tokens" in capacity:
        seqs, tokens = capacity["seqs_over_tokens"]
        return [f"ValueError: max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs "
                f"({seqs})."]
    if "no_bf16" in capacity:         # platforms/cuda.py check_if_supports_dtype, as the worker starts
        name, sm = capacity["no_bf16"]
        return [f"ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your {name} "
                f"GPU has compute capability {sm // 10}.{sm % 10}. You can use float16 instead by explicitly setting "
                "the `dtype` flag in CLI, for example: --dtype=half."]
    # gpu_model_runner.py load_model: the model's and a drafter's weights (MTP layers or a draft model), one profiler
    loaded = sum(result.components.get(key, 0) for key in ("weights", "mtp_weights", "draft_weights"))
    # what gpu_worker.py logs as available: what is left after the profiling run, before whole blocks, below zero too
    left = capacity.get("kv_bytes_left", result.components.get("kv_cache", 0))
    encoder = capacity.get("encoder_profile")      # gpu_model_runner.py profile_run, after the weights load
    log = [f"Model loading took {loaded / GIB:.4f} GiB",
           *(["Skipping memory profiling for multimodal encoder and encoder cache."] if encoder and "skipped" in encoder
             else [f"Encoder cache will be initialized with a budget of {encoder['budget']} tokens, and profiled "
                   f"with {encoder['items']} {encoder['modality']} items of the maximum feature size."] if encoder
             else []),
           f"Available KV cache memory: {left / GIB:.2f} GiB"]
    if left <= 0:
        return log + ["ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                      "when initializing the engine."]
    if not capacity.get("starts", True):  # a cache, or none, that holds no request of max_model_len
        return log + [
            f"ValueError: To serve at least one request with the models's max seq len ({capacity['context']}), "
            f"({capacity['kv_bytes_needed'] / GIB:.2f} GiB KV cache is needed, which is larger than the available "
            f"KV cache memory ({left / GIB:.2f} GiB). Based on the available memory, the "
            f"estimated maximum model length is {capacity['longest_max_model_len']}. Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine."]
    return log + [*([f"GPU KV cache size: {capacity.get('kv_cache_tokens', 0):,} tokens"] if attention else []),
                  f"Maximum concurrency for {capacity.get('context', 0):,} tokens per request: "
                  f"{capacity.get('max_concurrency', 0.0):.2f}x"]


def _vllm_answers(values: dict[str, Any], result: Estimate, limit: int) -> dict[str, Any]:
    """vLLM's capacity as its start-up log says it, and its refusal when one request does not fit."""
    out: dict[str, Any] = {}
    capacity = result.vllm or {}
    attention = bool(result.kv_bytes_per_token)     # a model without attention layers has state slots only
    out["kv_cache_tokens"] = capacity.get("kv_cache_tokens") if attention else None
    out["max_concurrency"] = round(capacity.get("max_concurrency", 0.0), 2)
    out["vllm_context"] = capacity.get("context")
    if capacity.get("state_blocks"):                # a hybrid: a request's cache by layer kind
        out["vllm_request"] = {key: capacity[key] for key in ("context", "block_tokens", "block_bytes", "page_bytes",
                                                              "group_size", "groups", "attention_blocks",
                                                              "state_blocks", "attention_layers", "state_layers",
                                                              "state_bytes_per_request")}
        out["vllm_request"]["kv_bytes_per_token"] = result.kv_bytes_per_token
    out["vllm_log"] = _vllm_log(result, capacity, attention)
    longest = longest_context(capacity, values["batch"]) if result.kv_bytes_per_token else None
    if longest is not None and capacity.get("longest_max_model_len") is not None:
        # one request: the longest max_model_len vLLM would accept, which for a vision-language model whose encoder
        # profiling grows with it is searched over the profiles (pycore.memory.estimate._longest_over_profiles);
        # more: each one's share of this cache, within that
        accepted = int(capacity["longest_max_model_len"])
        # at batch 1, a search over the profiles found it (a shorter one profiles a smaller video and leaves more
        # cache); else within this cache's share, which vLLM's padded groups may hold less of than it accepts
        longest = accepted if values["batch"] == 1 and capacity.get("profiled_longest") else min(longest, accepted)
    out["max_context"] = min(longest, limit) if longest is not None else None
    return out


# What the batch counts under each post-training method (the schema's method): TRL's DPOTrainer takes pairs of a
# chosen and a rejected sequence, GRPOTrainer completions
BATCH_UNITS = {"dpo": "preference pair", "dpo-lora": "preference pair", "dpo-qlora": "preference pair",
               "grpo": "completion", "grpo-lora": "completion", "reward": "preference pair",
               "reward-lora": "preference pair", "ppo": "response", "ppo-lora": "response"}
# KTOTrainer: unpaired examples, each with a KL row beside it (DataCollatorForUnpairedPreference, kto_trainer.py L161-203)
BATCH_UNITS["kto"] = BATCH_UNITS["kto-lora"] = BATCH_UNITS["kto-qlora"] = "example"
# DistillationTrainer: prompts, one completion each (RepeatSampler mini_repeat_count=1, distillation_trainer.py L868-888)
BATCH_UNITS["distill"] = BATCH_UNITS["distill-lora"] = "prompt"


def _searched_answers(values: dict[str, Any], result: Estimate, usable: int, limit: int,
                      best: "dict[str, Any] | None" = None) -> "Steps[dict[str, Any]]":
    """The largest batch and sequence that fit (for serving: concurrency and context), by search."""
    out: dict[str, Any] = {"notes": [], "batch_unit": BATCH_UNITS.get(str(values.get("method")), "sequence")
                           if values["mode"] == "train" else "sequence"}
    out["max_batch"] = yield from _largest(values, "batch", usable)
    if out["max_batch"] == SEARCH_LIMIT and (yield from _total(values, batch=1)) == (yield from _total(values, batch=2)):
        # The memory counted does not grow with the batch: no largest batch follows from it. (A batch-free moment,
        # the optimizer step's or a GRPO rollout engine's, can be the peak at batch 1 and 2 and the search still find
        # a largest batch.)
        out["max_batch"] = None
        out["max_batch_unbounded"] = "not bounded by the memory counted: activations are not counted"
    kind = result.model.kind
    grpo = rollout_answers.is_grpo(values)
    # GRPO's and distillation's seq is the prompt, max_completion_length tokens generated after it
    prompted = grpo or (values["mode"] == "train" and values.get("method") in ("distill", "distill-lora"))
    # the positions a sequence's images take are not the text's to have
    images = image_tokens(values) if limit != SEARCH_LIMIT and kind != "generic" else 0
    top = max(limit - images - (values["max_completion_length"] if prompted else 0), 1)
    out["max_seq"] = (yield from _largest(values, "seq", usable, high=top)) if kind != "generic" else None
    if grpo and kind != "generic":
        out.update((yield from rollout_answers.generation_answers(values, usable, _largest, limit, best)))
        arch = resolve_architecture(values)
        out["placements"] = yield from rollout_answers.placements(values, usable, plan, serving_plan,
                                                                  _valid_tp(values, arch.heads, arch.kv_heads))
    if values["mode"] == "infer":
        # Sequences of prompt + new tokens served at once, and the longest context at this batch.
        out["max_concurrency"] = out["max_batch"]
        context = yield from _largest(values, "seq", usable, high=max(limit - images - values["new_tokens"], 1))
        out["max_context"] = None if context is None else context + values["new_tokens"]
    if out["max_seq"] is not None and out["max_seq"] == top and limit != SEARCH_LIMIT:
        out["notes"].append(f"sequence answers are capped at the model's {limit:,} positions" +
                            (f", less max_completion_length {values['max_completion_length']:,}" if prompted else "") +
                            (f", less the images' {images:,} tokens" if images else ""))
    return out


def answer_steps(values: dict[str, Any], result: Estimate) -> "Steps[dict[str, Any]]":
    """``answer`` in steps (pycore/base/steps.py)."""
    values = frameworks.apply(values)            # read concrete values, not "auto"
    gpu = gpu_catalog()[values["gpu"]]
    usable = gpu["usable_bytes"]
    fits = result.total_bytes <= usable and not result.refused
    out: dict[str, Any] = {"gpu": values["gpu"], "fits": fits, "notes": []}
    limit = result.model.max_positions or SEARCH_LIMIT
    if values["mode"] == "train":
        out["plan"] = yield from plan(values, usable)
        out["gpus_needed"] = out["plan"][0]["gpus"] if out["plan"] else None
        out["cost"] = _cost(values, result, gpu, out["gpus_needed"])
    else:
        out["plan"] = yield from serving_plan(values, usable)
        out["min_tp"] = int(out["plan"][0]["query"].get("tp", values["tp"])) if out["plan"] else None
        out["gpus_needed"] = out["plan"][0]["gpus"] if out["plan"] else None
    engine_vllm = values["mode"] == "infer" and values.get("engine") == "vllm"
    if engine_vllm:
        out.update(_vllm_answers(values, result, limit))
    else:
        found = yield from _searched_answers(values, result, usable, limit,
                                             None if fits or not out["plan"] else out["plan"][0])
        out["notes"] += found.pop("notes")
        out.update(found)
    # an engine that would not start: any change with which it starts is a step, whatever its total
    current = (1 << 62) if result.refused else result.total_bytes
    out["how_to_fit"] = [] if fits else (yield from _how_to_fit(values, usable, current,
                                                                 (result.vllm or {}) if engine_vllm else None))
    if not fits and out["plan"] and not any(f["fits"] for f in out["how_to_fit"]):
        # Nothing on this many GPUs fits: the best layout is itself the change to make.
        best = out["plan"][0]
        out["how_to_fit"].insert(0, {**_fix(f"{best['label']} ({plural(best['gpus'], 'GPU')})", best["query"],
                                            best["total_bytes"], usable), "gpus": best["gpus"]})
    from pycore.answers.charts import charts
    out["charts"] = (yield from charts(values, result, out, usable)) or None
    return out


def _gib(result: Estimate, key: str) -> str:
    return f"{result.components.get(key, 0) / GIB:.2f}"
