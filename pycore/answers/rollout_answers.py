"""The questions a GRPO run asks (issue 31), each answered by re-running the estimate: the longest completion that
fits, the most completions per prompt at each completion length, and whether a vLLM engine colocated on the training
GPUs or a vLLM server on GPUs of its own needs fewer GPUs in all. TRL's rules are huggingface/trl 1.16.0's:

- GRPOConfig.__post_init__ (trl/trainer/grpo_config.py L1131-1140): the generation batch, per_device_train_batch_size
  × processes × steps_per_generation (pycore: batch × dp × microbatches), must be a multiple of num_generations, and
  num_generations at least 2;
- ``trl vllm-serve`` (trl/scripts/vllm_serve.py ScriptArguments, L92-133) starts ``vllm serve`` with
  tensor_parallel_size 1, data_parallel_size 1 and gpu_memory_utilization 0.9 unless told otherwise; the answer raises
  its tensor-parallel degree until vLLM would start, with --max_model_len at the prompt plus the completion.
"""

import math
from typing import Any, Callable

from pycore.base.steps import Steps
from pycore.base.units import plural
from pycore.inputs import frameworks
from pycore.memory.setup import prompt_tokens

GRPO_METHODS = ("grpo", "grpo-lora")
ROLLOUT_RECIPES = ("grpo", "distill")     # the recipes that generate with vLLM (pycore.memory.rollout)
SERVER_UTIL = 0.9           # trl/scripts/vllm_serve.py@v1.16.0 ScriptArguments.gpu_memory_utilization default
LADDER = (0.25, 0.5, 1, 2, 4, 8)    # completion lengths tried, as multiples of the one given
SHORTEST = 64
SERVER_CHANGE = "rollout=vllm-server (vLLM on GPUs of its own)"   # a change that needs GPUs beyond these

Largest = Callable[..., "Steps[int | None]"]
Plan = Callable[..., "Steps[list[dict[str, Any]]]"]


def is_grpo(values: dict[str, Any]) -> bool:
    """Whether the setup is a GRPO step (TRL's GRPOTrainer)."""
    return values["mode"] == "train" and values.get("method") in GRPO_METHODS


def _colocated(values: dict[str, Any]) -> bool:
    """A GRPO or distill step whose vLLM engine shares the training GPUs."""
    return values["mode"] == "train" and values.get("rollout") == "vllm-colocate" and \
        frameworks.recipe_of(values) in ROLLOUT_RECIPES


def dp_unit(values: dict[str, Any]) -> int:
    """The data-parallel degrees TRL accepts come in steps of this: batch × dp × microbatches a multiple of
    num_generations (GRPOConfig.__post_init__), and with a colocated engine the training processes a multiple of
    vllm_tensor_parallel_size (trl/generation/vllm_generation.py L312-318); 1 for any other method."""
    unit = 1
    if is_grpo(values):
        generations = max(values.get("num_generations") or 1, 1)
        unit = generations // math.gcd(generations, values["batch"] * values["microbatches"])
    if _colocated(values):
        engine, others = values.get("vllm_tensor_parallel_size") or 1, values["tp"] * values["pp"] * values["cp"]
        unit = math.lcm(unit, engine // math.gcd(engine, others))
    return unit


def trl_refuses(values: dict[str, Any]) -> bool:
    """Whether TRL 1.16 would refuse the setup before it runs (GRPOConfig.__post_init__ L1131-1140: the generation
    batch in whole groups; vllm_generation.py L312-318: the engine's GPUs dividing the processes), or vLLM reject its
    requests (a vllm_max_model_length under prompt + completion): the layouts and changes offered leave them out."""
    if values["dp"] % dp_unit(values):
        return True
    longest = values.get("vllm_max_model_length")
    return _colocated(values) and bool(longest) and longest < prompt_tokens(values) + values["max_completion_length"]


def _prompts(values: dict[str, Any]) -> int:
    """Prompts in one generation batch: its completions over num_generations (at least one)."""
    completions: int = values["batch"] * values["dp"] * values["microbatches"]
    return max(completions // max(values.get("num_generations") or 1, 1), 1)


def most_generations(values: dict[str, Any], batch: "int | None") -> "int | None":
    """The most completions per prompt at this many prompts a generation batch, when a micro-batch holds ``batch``
    completions at most: P × G completions spread over dp × microbatches micro-batches of whole completions, so G a
    multiple of D / gcd(P, D) with D = dp × microbatches; None under TRL's least, 2."""
    if not batch:
        return None
    prompts, spread = _prompts(values), values["dp"] * values["microbatches"]
    step = spread // math.gcd(prompts, spread)
    most = batch * spread // prompts // step * step
    return most if most >= 2 else None


def _ladder(values: dict[str, Any], longest: int) -> "list[int]":
    """Completion lengths to try: the one given, and multiples of it up to the model's positions."""
    given = values["max_completion_length"]
    lengths = {max(int(given * f), SHORTEST) for f in LADDER}
    return sorted(n for n in lengths if n <= longest)


def generation_answers(values: dict[str, Any], usable: int, largest: Largest, positions: int,
                       best: "dict[str, Any] | None" = None) -> "Steps[dict[str, Any]]":
    """The longest completion at this batch, and for each completion length the largest micro-batch of completions
    and the most completions per prompt it allows (``largest`` is pycore.answers.answer._largest), at the layout
    given, or at ``best`` (the plan's first layout) where the layout given does not fit."""
    layout = "the layout as given"
    if best:
        values = {**values, **{k: int(v) if isinstance(values.get(k), int) else v for k, v in best["query"].items()}}
        layout = best["label"]
    longest = positions - prompt_tokens(values)         # positions the prompt leaves for the completion
    out: dict[str, Any] = {"max_completion": (yield from largest(values, "max_completion_length", usable,
                                                                     high=longest)) if longest > 0 else None}
    rows = []
    for length in _ladder(values, longest):
        batch = yield from largest({**values, "max_completion_length": length}, "batch", usable)
        rows.append({"completion": length, "max_batch": batch, "max_generations": most_generations(values, batch)})
    out["generations"] = {"prompts": _prompts(values), "rows": rows, "longest": longest, "layout": layout}
    return out


def rollout_changes(values: dict[str, Any]) -> "list[tuple[str, dict[str, Any]]]":
    """What a step with a colocated vLLM engine (GRPO, distill) can change: a max_model_len its KV cache holds one
    request of (prompt + completion, where None takes the model's positions), a larger share of the GPU for the
    engine, sleep mode (the update does not hold the engine), or a vLLM server on GPUs of its own."""
    if not _colocated(values):
        return []
    context, util = prompt_tokens(values) + values["max_completion_length"], values["vllm_gpu_memory_utilization"]
    out = []
    if values.get("vllm_max_model_length") != context:
        out.append((f"vllm_max_model_length={context}", {"vllm_max_model_length": context}))
    if util < 0.9:
        higher = round(min(util + 0.1, 0.9), 2)
        out.append((f"vllm_gpu_memory_utilization={higher:g}", {"vllm_gpu_memory_utilization": higher}))
    wider = 2 * (values.get("vllm_tensor_parallel_size") or 1)
    if wider <= 8:
        out.append((f"vllm_tensor_parallel_size={wider}", {"vllm_tensor_parallel_size": wider}))
    if values.get("vllm_enable_sleep_mode") != "yes":
        out.append(("vllm_enable_sleep_mode=yes", {"vllm_enable_sleep_mode": "yes"}))
    return out + [(SERVER_CHANGE, {"rollout": "vllm-server"})]


def server_values(values: dict[str, Any]) -> dict[str, Any]:
    """The vLLM server ``trl vllm-serve`` starts for the policy: the checkpoint in its own dtype on one GPU, at
    gpu_memory_utilization 0.9, serving the generation batch's prompts and completions."""
    rows = values["batch"] * values["dp"] * values["microbatches"]
    return {**values, "mode": "infer", "engine": "vllm", "method": "full", "quant": "none", "gpu_util": SERVER_UTIL,
            "batch": rows, "new_tokens": values["max_completion_length"], "dp": 1, "pp": 1, "cp": 1, "ep": 1,
            "zero": "0", "fsdp": "none", "offload": "none"}


def placements(values: dict[str, Any], usable: int, plan: Plan, serving_plan: Plan,
               degrees: "list[int]") -> "Steps[dict[str, Any]]":
    """GPUs in all for a colocated vLLM engine (over each of ``degrees`` GPUs: the tensor-parallel degrees the heads
    allow) and for a vLLM server on GPUs of its own, fewest first, each with the inputs that set it (``plan`` and
    ``serving_plan`` are pycore.answers.answer's)."""
    options = [(yield from _colocated_option(values, usable, plan, degrees))]
    context = prompt_tokens(values) + values["max_completion_length"]
    training = yield from plan({**values, "rollout": "vllm-server"}, usable, limit=1)
    server = yield from serving_plan(server_values(values), usable)
    if training and server:
        best, engine = training[0], server[0]
        options.append({"label": "vLLM server on GPUs of its own", "gpus": best["gpus"] + engine["gpus"],
                        "text": f"{plural(best['gpus'] + engine['gpus'], 'GPU')}: {best['gpus']:,} training "
                                f"({best['label']}) + {engine['gpus']:,} for trl vllm-serve ({engine['label']}, "
                                f"gpu_memory_utilization {SERVER_UTIL:g}, --max_model_len {context:,})",
                        "query": {**best["query"], "rollout": "vllm-server"}})
    else:
        options.append({"label": "vLLM server on GPUs of its own", "gpus": None, "query": None,
                        "text": "the training GPUs fit no layout tried" if server else
                                "trl vllm-serve fits no tensor-parallel degree up to 8 on this GPU"})
    options.sort(key=lambda o: (o["gpus"] is None, o["gpus"] or 0))
    return {"options": options, "lead": "Where the rollout runs, fewest GPUs in all first:"}


def _colocated_option(values: dict[str, Any], usable: int, plan: Plan, degrees: "list[int]") -> \
        "Steps[dict[str, Any]]":
    """The fewest GPUs with a colocated engine over each of ``degrees`` GPUs (vllm_tensor_parallel_size),
    vllm_max_model_length at prompt + completion (left at None it is the model's positions)."""
    util, context = values["vllm_gpu_memory_utilization"], prompt_tokens(values) + values["max_completion_length"]
    label = f"vLLM colocated at vllm_gpu_memory_utilization={util:g}"
    best: "dict[str, Any] | None" = None
    for degree in degrees:
        engine = {"vllm_max_model_length": context, "vllm_tensor_parallel_size": degree, "rollout": "vllm-colocate"}
        found = yield from plan({**values, **engine}, usable, limit=1)
        if found and (best is None or found[0]["gpus"] < best["gpus"]):
            best = {**found[0], "engine": engine}
    if best is None:
        return {"label": label, "gpus": None, "query": None, "text": "fits no layout tried, with the engine over "
                + " or ".join(str(d) for d in degrees) + " of the training GPUs (vllm_tensor_parallel_size)"}
    engine = best["engine"]
    return {"label": label, "gpus": best["gpus"],
            "text": f"{plural(best['gpus'], 'GPU')} ({best['label']}; vllm_tensor_parallel_size "
                    f"{engine['vllm_tensor_parallel_size']}, vllm_max_model_length {context:,})",
            "query": {**best["query"], **{k: str(v) for k, v in engine.items()}}}


def generations_text(found: dict[str, Any]) -> str:
    """"at 1 prompt a generation batch, completion length → most completions per prompt (largest micro-batch): 256 →
    136 (17); 512 → 112 (14); ...", "none" where no micro-batch fits or fewer than 2 completions would."""
    if not found["rows"]:
        return f"no completion length is left: the prompt leaves {plural(max(found['longest'], 0), 'position')} of " \
            "the model's"
    parts = []
    for number, row in enumerate(found["rows"]):
        most = row["max_generations"]
        length = f"{row['completion']:,} tokens" if number == 0 else f"{row['completion']:,}"
        shown = "none" if most is None else \
            f"{most:,} generations ({row['max_batch']:,} a micro-batch)" if number == 0 else \
            f"{most:,} ({row['max_batch']:,})"
        parts.append(f"{length} → {shown}")
    return (f"with {plural(found['prompts'], 'prompt')} a generation batch on {found['layout']}, the most "
            "num_generations for each max_completion_length: " + "; ".join(parts))
