"""Which inputs apply in which situation: one data table read by the page (to hide what does not
apply) and by Python (to name inputs that were given but are ignored).

A condition is a mapping of input key to the values under which the key applies; every condition of a
key must hold. ``kind`` is not an input: it is the model's kind, ``"generic"`` for a network known only
by its parameter count (``params=7B``, ResNet-50, ViT) and ``"transformer"`` otherwise. The page knows
it from the last estimate; Python callers pass it in ``values`` or let :func:`model_kind` guess it.

Values are compared as strings, so the same table works on the page's form values and on
``pycore.inputs.schema.parse``'s typed values. A condition ``{"pp": {"not": ["1"]}}`` holds for any other value.

Standard library only, and no other pycore module: the table is also written into the page by build.py.
"""

from typing import Iterable, Mapping

Allowed = list[str] | dict[str, list[str]]     # the values under which a key applies, or {"not": [...]}
Condition = dict[str, Allowed]                 # every other key -> what it must be; all must hold

TRAIN: Condition = {"mode": ["train"]}
INFER: Condition = {"mode": ["infer"]}
TRANSFORMER: Condition = {"kind": ["transformer"]}
ADAPTERS: Condition = {"method": ["lora", "qlora", "dpo-lora", "dpo-qlora", "kto-lora", "kto-qlora", "grpo-lora", "ppo-lora",
                                "reward-lora", "distill-lora"]}
PREFERENCE: Condition = {"method": ["dpo", "dpo-lora", "dpo-qlora", "kto", "kto-lora", "kto-qlora"]}  # DPO/KTOTrainer
GRPO: Condition = {"method": ["grpo", "grpo-lora"]}                     # TRL GRPOTrainer recipes
PPO: Condition = {"method": ["ppo", "ppo-lora"]}                        # TRL 0.25.1 PPOTrainer recipes
DISTILL: Condition = {"method": ["distill", "distill-lora"]}            # TRL DistillationTrainer recipes
# the recipes that generate their completions (pycore.memory.rollout)
ROLLOUTS: Condition = {"method": ["grpo", "grpo-lora", "distill", "distill-lora"]}

# Inputs that mean nothing for a generic network (params only).
TRANSFORMER_ONLY = ("heads", "kv_heads", "head_dim", "ffn", "vocab", "experts", "experts_per_token", "expert_ffn",
                    "tied", "new_tokens", "images", "mode", "kv_dtype", "attention", "method", "lora_rank",
                    "lora_targets", "lora_dtype", "lora_dropout", "lora_variant", "quant", "group_size", "tp", "pp", "cp", "ep", "sp",
                    "interleave", "loss_chunks")

APPLIES: "dict[str, Condition]" = {
    # Training only: the optimizer and everything a backward pass or a training run brings.
    "optimizer": TRAIN, "grad_dtype": TRAIN, "master_dtype": TRAIN, "opt_dtype": TRAIN,
    "train_tokens": TRAIN, "train_hours": TRAIN, "mfu": TRAIN, "microbatches": {**TRAIN, **TRANSFORMER}, "activations": TRAIN,
    "grad_sync": {**TRAIN, **TRANSFORMER},
    # A generic network counted by the korthikanti model (layers, hidden, heads) recomputes as transformers do.
    "recompute": {**TRAIN, "counted_by": ["transformer", "korthikanti"]},
    "loss_chunks": {**TRAIN, **TRANSFORMER},
    # Serving splits the model with tp, pp and ep (pycore.memory.serving); data parallelism and sharding are
    # training's.
    "dp": TRAIN, "zero": TRAIN, "fsdp": TRAIN, "offload": TRAIN, "optimizer_impl": TRAIN,
    "tp": TRANSFORMER, "pp": TRANSFORMER, "cp": {**TRAIN, **TRANSFORMER},
    "ep": TRANSFORMER, "sp": {**TRAIN, **TRANSFORMER},
    "shard_group": {**TRAIN, "fsdp": ["HYBRID_SHARD"]},
    "interleave": {**TRAIN, **TRANSFORMER, "pp": {"not": ["1"]}},
    # Serving only: the generated tokens and their KV cache.
    "new_tokens": {**INFER, **TRANSFORMER},
    "image_size": {**TRANSFORMER, "images": {"not": ["0"]}},
    "kv_dtype": {**INFER, **TRANSFORMER},
    "engine": {**INFER, **TRANSFORMER},
    "gpu_util": {**INFER, "engine": ["vllm"]},
    # PyTorch's cuBLAS workspaces are counted for PyTorch's own steps and generate(); vLLM charges its own
    "cublas_workspace": {"served_by": {"not": ["vllm"]}},
    "max_batched_tokens": {**INFER, "engine": ["vllm"]},
    "max_num_seqs": {**INFER, "engine": ["vllm"]},
    "speculative": {**INFER, "engine": ["vllm"]},
    "mm_profiling": {**INFER, "engine": ["vllm"]},
    "draft_model": {**INFER, "engine": ["vllm"], "speculative": ["draft"]},
    "scan_kernels": TRANSFORMER,
    # Fine-tuning adapters.
    "lora_rank": {**ADAPTERS, **TRANSFORMER},
    "lora_targets": {**ADAPTERS, **TRANSFORMER},
    "lora_dtype": {**ADAPTERS, **TRANSFORMER},
    "lora_dropout": {**ADAPTERS, **TRANSFORMER},
    "lora_variant": {**ADAPTERS, **TRANSFORMER},
    # DPO's reference model (pycore.memory.posttraining).
    "ref_model": {**TRAIN, **TRANSFORMER, **PREFERENCE},
    # DPO's and GRPO's log-prob head as the TRL release runs it (validation/measure_dpo_full.py, measure_grpo_full.py)
    "trl_head": {**TRAIN, **TRANSFORMER, "method": ["dpo", "dpo-lora", "dpo-qlora", "grpo", "grpo-lora"]},
    # GRPO's rollout and reference model (pycore.memory.rollout, pycore.memory.posttraining).
    "num_generations": {**TRAIN, **TRANSFORMER, **GRPO},
    "max_completion_length": {**TRAIN, **TRANSFORMER, **ROLLOUTS},
    "beta": {**TRAIN, **TRANSFORMER, **GRPO},
    "rollout": {**TRAIN, **TRANSFORMER, **ROLLOUTS},
    "vllm_gpu_memory_utilization": {**TRAIN, **TRANSFORMER, **ROLLOUTS, "rollout": ["vllm-colocate"]},
    "vllm_enable_sleep_mode": {**TRAIN, **TRANSFORMER, **ROLLOUTS, "rollout": ["vllm-colocate"]},
    "vllm_tensor_parallel_size": {**TRAIN, **TRANSFORMER, **ROLLOUTS, "rollout": ["vllm-colocate"]},
    "vllm_max_model_length": {**TRAIN, **TRANSFORMER, **ROLLOUTS, "rollout": ["vllm-colocate"]},
    # Distillation's teacher (pycore.memory.distillation).
    "teacher": {**TRAIN, **TRANSFORMER, **DISTILL},
    "teacher_dtype": {**TRAIN, **TRANSFORMER, **DISTILL},
    # PPO's rollout and update (pycore.memory.ppo).
    "response_length": {**TRAIN, **TRANSFORMER, **PPO},
    "local_rollout_forward_batch_size": {**TRAIN, **TRANSFORMER, **PPO},
    "num_mini_batches": {**TRAIN, **TRANSFORMER, **PPO},
    "reward_model": {**TRAIN, **TRANSFORMER, **PPO},
    "value_model": {**TRAIN, **TRANSFORMER, **PPO},
    "group_size": {**TRANSFORMER, "quant": {"not": ["none"]}},
    # The activation model's own parameter: the model in force (``act_model``), which for a generic network
    # left at "detailed" is the multiplier model when layers and hidden are given.
    "act_multiplier": {**TRAIN, "act_model": ["multiplier"]},
    "act_per_sample": {**TRAIN, "act_model": ["per-sample"]},
    # A sequence is counted by transformers and by a generic network's multiplier or korthikanti model, which
    # also reads heads.
    "seq": {"counted_by": ["transformer", "multiplier", "korthikanti"]},
    "heads": {"counted_by": ["transformer", "korthikanti"]},
}
for _key in TRANSFORMER_ONLY:
    APPLIES.setdefault(_key, TRANSFORMER)

DEFAULT_VALUES = {"mode": "train", "method": "full", "activations": "detailed", "fsdp": "none", "pp": "1",
                  "quant": "none", "kind": "transformer"}


def _text(value: object) -> str:
    return "" if value is None else str(value)


def model_kind(values: "Mapping[str, object]") -> str:
    """``"generic"`` when the inputs describe a network by its parameter count only, else ``"transformer"``.

    Without the catalog this cannot see that a preset (ResNet-50) is generic: pass ``values["kind"]``
    from an estimate's ``result["model"]["kind"]`` when you have one.
    """
    if values.get("kind"):
        return "generic" if values["kind"] == "generic" else "transformer"
    if values.get("params") and values.get("model") in (None, "", "llama-3.1-8b") and not values.get("config"):
        return "generic"
    return "transformer"


def activation_model(values: "Mapping[str, object]") -> str:
    """The activation model in force: the one given, except that a generic network left at ``detailed`` is
    counted by the multiplier model when layers and hidden are given, and not at all otherwise
    (pycore.memory.setup.resolve; a generic preset with measured figures is known to the page as such)."""
    chosen = _text(values.get("activations")) or "detailed"
    if model_kind(values) == "generic" and chosen == "detailed":
        return "multiplier" if values.get("layers") and values.get("hidden") else "none"
    return chosen


def counted_by(values: "Mapping[str, object]") -> str:
    """What counts the activations: ``"transformer"``, or a generic network's activation model in force
    (multiplier and korthikanti read seq; korthikanti also heads and recompute)."""
    return "transformer" if model_kind(values) == "transformer" else activation_model(values)


def served_by(values: "Mapping[str, object]") -> str:
    """What runs the model's matrix products: the serving engine, or ``"pytorch"`` when training."""
    serving = _text(values.get("mode", DEFAULT_VALUES.get("mode"))) == "infer"
    return _text(values.get("engine") or DEFAULT_VALUES.get("engine")) if serving else "pytorch"


# Keys of APPLIES' conditions that are not inputs but read from them (site/app.js computes the same).
DERIVED = {"kind": model_kind, "act_model": activation_model, "counted_by": counted_by, "served_by": served_by}


def applies(key: str, values: "Mapping[str, object]") -> bool:
    """Whether input ``key`` changes the estimate, given the other inputs.

    Args:
        key: an input key (``lora_rank``); keys with no entry in ``APPLIES`` always apply.
        values: input key -> value (strings or parsed values); missing keys take their defaults.
    Returns:
        True if the key applies.
    """
    for other, allowed in APPLIES.get(key, {}).items():
        current = DERIVED[other](values) if other in DERIVED else _text(values.get(other, DEFAULT_VALUES.get(other)))
        if current == "":
            current = DEFAULT_VALUES.get(other, "")
        if isinstance(allowed, dict):
            if current in allowed["not"]:
                return False
        elif current not in allowed:
            return False
    return True


def ignored(values: "Mapping[str, object]", given_keys: "Iterable[str]") -> "list[str]":
    """The keys among ``given_keys`` that do not apply to ``values``, in the order given.

    Args:
        values: input key -> value, as for :func:`applies`.
        given_keys: the keys the user set (a URL's or command line's keys).
    Returns:
        A list of keys, e.g. ``["lora_rank"]`` for ``method=full lora_rank=64``.
    """
    return [key for key in given_keys if not applies(key, values)]


def describe(key: str, values: "Mapping[str, object]") -> str:
    """A plain-text note saying why ``key`` is ignored, e.g. ``"lora_rank is ignored: method=full"``."""
    for other, allowed in APPLIES.get(key, {}).items():
        if other == "kind":
            if model_kind(values) not in allowed:
                return f"{key} is ignored: a generic network (params only) has no transformer shape"
            continue
        if other == "counted_by" and counted_by(values) not in allowed:
            model = counted_by(values)
            return f"{key} is ignored: " + ("a generic network (params only) counts no activations without layers "
                                            "and hidden" if model == "none" else
                                            f"a generic network's {model} activation model does not read it")
        if other == "served_by":
            excluded = allowed["not"] if isinstance(allowed, dict) else []
            if (current := served_by(values)) in excluded:
                return f"{key} is ignored: engine={current} (vLLM charges its own)"
            continue
        if other in DERIVED:
            current = DERIVED[other](values)
            if current not in allowed:
                return f"{key} is ignored: the activation model in force is {current}"
            continue
        current = _text(values.get(other)) or DEFAULT_VALUES.get(other, "")
        if (current in allowed["not"]) if isinstance(allowed, dict) else (current not in allowed):
            return f"{key} is ignored: {other}={current}"
    return ""
