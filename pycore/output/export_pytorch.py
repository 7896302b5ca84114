"""Launch settings for the PyTorch-native launchers, in their own words, and back.

- ``accelerate``: the config file ``accelerate config`` writes (accelerate 1.15, accelerate/commands/config/cluster.py:
  distributed_type, mixed_precision, num_processes, fsdp_config's fsdp_version, fsdp_reshard_after_forward (a
  FSDP_SHARDING_STRATEGY name under FSDP 1, a yes/no under FSDP 2), fsdp_offload_params, fsdp_auto_wrap_policy,
  fsdp_activation_checkpointing; deepspeed_config's zero_stage, offload_optimizer_device, offload_param_device,
  gradient_accumulation_steps). YAML, written and read as the flat two-level file it is.
- ``torchtitan``: a job TOML (torchtitan v0.2, torchtitan/config/job_config.py JobConfig: [training] local_batch_size,
  global_batch_size, seq_len, mixed_precision_param, enable_cpu_offload; [parallelism] data_parallel_shard_degree,
  data_parallel_replicate_degree, fsdp_reshard_after_forward, tensor_parallel_degree, pipeline_parallel_degree,
  context_parallel_degree, expert_parallel_degree; [activation_checkpoint] mode, selective_ac_option; [optimizer]
  name, implementation), global_batch_size giving the accumulation as torchtitan divides it.
- ``torchtune``: a ``tune run`` line with the recipe's config overrides (torchtune v0.6.1,
  recipes/full_finetune_distributed.py and lora_finetune_distributed.py: batch_size, gradient_accumulation_steps,
  enable_activation_checkpointing, dtype, fsdp_cpu_offload, fsdp_reshard_after_forward, tensor_parallel_dim;
  tokenizer.max_seq_len; model.lora_rank, model.lora_attn_modules / apply_lora_to_mlp and model.use_dora).

``read`` takes those back, and also a torchtune recipe config (the same keys, nested one level) and an axolotl
config (v0.18.0, src/axolotl/utils/schemas: micro_batch_size, gradient_accumulation_steps, sequence_len,
gradient_checkpointing, adapter, load_in_4bit, lora_r, lora_target_linear, bf16, fp16), the flags and keys no
input takes listed by ``unread``.
"""

import shlex
import tomllib
from typing import Any, TypeGuard

from pycore.base.errors import InputError
from pycore.inputs import frameworks
from pycore.memory.record import Estimate

FOLLOWS = {"accelerate": ("accelerate config (YAML)", "accelerate 1.15: accelerate/commands/config/cluster.py"),
           "torchtitan": ("torchtitan job config (TOML)", "torchtitan v0.2: torchtitan/config/job_config.py"),
           "torchtune": ("tune run with config overrides", "torchtune v0.6.1: recipes/full_finetune_distributed.py, "
                                                           "lora_finetune_distributed.py")}
NOT_A_BLOCK = "not a vllm serve line, TrainingArguments or DeepSpeed JSON, accelerate, torchtune or axolotl config, " \
    "torchtitan TOML or tune run line"
_LORA_MODULES = {"qv": "['q_proj','v_proj']", "attention": "['q_proj','k_proj','v_proj','output_proj']",
                 "all-linear": "['q_proj','k_proj','v_proj','output_proj']"}
# pycore's recompute -> torchtitan's [activation_checkpoint] mode and selective_ac_option. Megatron's selective
# (the attention core alone) has no torchtitan form: op, which also keeps the attention core's output, is nearest.
_AC = {"full": ("full", None), "op": ("selective", "op"), "layer": ("selective", "2"), "none": ("none", None),
       "selective": ("selective", "op")}


def _recompute(values: "dict[str, Any]") -> str:
    """The recomputation in force: an auto one as the framework does it."""
    return str(frameworks.apply(values)["recompute"])


def _mixed(precision: str) -> str:
    """accelerate's mixed_precision: autocast over fp32 weights (amp-*, FSDP2's bf16 compute), else no."""
    return "bf16" if precision in ("amp-bf16", "fsdp2-bf16") else "fp16" if precision == "amp-fp16" else "no"


def accelerate(values: "dict[str, Any]", result: Estimate) -> str:
    """The accelerate config file for this layout: FSDP when an FSDP strategy is chosen, DeepSpeed for a ZeRO stage,
    else multi-GPU DDP."""
    lay, offload = result.layout, values.get("offload", "none")
    lines = ["compute_environment: LOCAL_MACHINE", f"mixed_precision: '{_mixed(result.setup.precision)}'",
             "num_machines: 1", f"num_processes: {lay.gpus}"]
    fsdp, zero = values.get("fsdp", "none"), str(values.get("zero") or 0)
    if fsdp != "none":
        two = fsdp in ("FULL_SHARD", "SHARD_GRAD_OP")
        reshard = ("true" if fsdp == "FULL_SHARD" else "false") if two else fsdp
        lines += ["distributed_type: FSDP", "fsdp_config:", f"  fsdp_version: {2 if two else 1}",
                  f"  fsdp_reshard_after_forward: {reshard}", f"  fsdp_offload_params: {str(offload != 'none').lower()}",
                  "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP", "  fsdp_state_dict_type: SHARDED_STATE_DICT",
                  f"  fsdp_activation_checkpointing: {str(_recompute(values) == 'full').lower()}"]
    elif zero != "0":
        lines += ["distributed_type: DEEPSPEED", "deepspeed_config:", f"  zero_stage: {zero}",
                  f"  gradient_accumulation_steps: {values['microbatches']}",
                  f"  offload_optimizer_device: {'cpu' if offload != 'none' else 'none'}",
                  f"  offload_param_device: {'cpu' if offload == 'params' else 'none'}"]
    else:
        lines.append(f"distributed_type: {'MULTI_GPU' if lay.gpus > 1 else 'NO'}")
    return "\n".join(lines)


def torchtitan(values: "dict[str, Any]", result: Estimate) -> str:
    """A torchtitan job TOML with the batch, sequence, precision, every parallel degree and recomputation."""
    lay = result.layout
    sharded = values.get("fsdp", "none") not in ("none", "NO_SHARD")
    mode, option = _AC.get(_recompute(values), ("none", None))
    param = "bfloat16" if "bf16" in result.setup.precision else "float32"
    # with pipeline stages the micro-batches are the schedule's: local_batch_size holds them all, split into
    # pipeline_parallel_microbatch_size rows each; without, they are accumulation steps of global_batch_size
    piped = lay.pp > 1
    local = values["batch"] * values["microbatches"] if piped else values["batch"]
    return "\n".join([
        "[training]", f"local_batch_size = {local}",
        f"global_batch_size = {values['batch'] * values['microbatches'] * lay.dp}", f"seq_len = {values['seq']}",
        f'mixed_precision_param = "{param}"', f"enable_cpu_offload = {str(values.get('offload') != 'none').lower()}",
        "", "[parallelism]", f"data_parallel_shard_degree = {lay.dp if sharded else 1}",
        f"data_parallel_replicate_degree = {1 if sharded else lay.dp}",
        f'fsdp_reshard_after_forward = "{"never" if values.get("fsdp") == "SHARD_GRAD_OP" else "default"}"',
        f"tensor_parallel_degree = {lay.tp}", f"pipeline_parallel_degree = {lay.pp}",
        *([f"pipeline_parallel_microbatch_size = {values['batch']}"] if piped else []),
        f"context_parallel_degree = {lay.cp}", f"expert_parallel_degree = {lay.ep}",
        "", "[activation_checkpoint]", f'mode = "{mode}"', *([f'selective_ac_option = "{option}"'] if option else []),
        "", "[optimizer]", 'name = "AdamW"', f'implementation = "{result.setup.optimizer_impl or "fused"}"'])


def torchtune(values: "dict[str, Any]", result: Estimate) -> str:
    """``tune run`` of the full or LoRA distributed recipe with the overrides this estimate assumes."""
    lora = str(values.get("method", "")).endswith("lora")          # lora, qlora and the recipes' -lora policies
    recipe = "lora_finetune_distributed" if lora else "full_finetune_distributed"
    args = ["tune", "run", "--nproc_per_node", str(result.layout.gpus), recipe, "--config", "CONFIG",
            f"batch_size={values['batch']}", f"gradient_accumulation_steps={values['microbatches']}",
            f"tokenizer.max_seq_len={values['seq']}",
            f"enable_activation_checkpointing={_recompute(values) == 'full'}",
            f"dtype={'bf16' if 'bf16' in result.setup.precision else 'fp32'}",
            f"fsdp_cpu_offload={values.get('offload') != 'none'}"]
    if values.get("fsdp") == "SHARD_GRAD_OP":
        args.append("fsdp_reshard_after_forward=False")
    if result.layout.tp > 1:
        args.append(f"tensor_parallel_dim={result.layout.tp}")
    if lora:
        args += [f"model.lora_rank={values['lora_rank']}",
                 f"model.lora_attn_modules={_LORA_MODULES[values.get('lora_targets', 'qv')]}",
                 f"model.apply_lora_to_mlp={values.get('lora_targets') == 'all-linear'}"]
        if values.get("lora_variant") == "dora":
            args.append("model.use_dora=True")
    return shlex.join(args)


def read(text: str) -> "dict[str, str]":
    """The schema's inputs an accelerate config, a torchtitan TOML, a ``tune run`` line, a torchtune recipe config
    or an axolotl config sets."""
    text = text.strip()
    if text.startswith("tune"):
        return _read_torchtune(text)
    if text.startswith("[") or "\n[" in text:
        try:
            return _read_torchtitan(tomllib.loads(text))
        except tomllib.TOMLDecodeError as error:
            raise InputError("export", f"not a readable TOML file: {str(error)[:80]}") from None
    data = _two_levels(text)
    if "distributed_type" in data:
        return _read_accelerate(data)
    if any(key in data for key in _AXOLOTL_MARKS):
        return _read_axolotl(data)
    if "batch_size" in data:
        flat = _dotted(data)
        return _tune_pairs(flat, [flat.get("model._component_", "")])
    raise InputError("export", NOT_A_BLOCK)


def _two_levels(text: str) -> "dict[str, Any]":
    """``key: value`` lines, and one level of keys indented under ``section:`` (accelerate's config file)."""
    out: "dict[str, Any]" = {}
    section: "dict[str, Any] | None" = None
    for number, raw in enumerate(text.splitlines()[:1000], 1):
        line = raw.split(" #")[0].rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, colon, value = line.strip().partition(":")
        if not colon:
            raise InputError("export", f"line {number} is not 'key: value' ({line.strip()[:40]!r})")
        value = value.strip().strip("'\"")
        if raw.startswith((" ", "\t")) and section is not None:
            section[key] = value
        elif not value:
            section = out[key] = {}
        else:
            out[key], section = value, None
    return out


def _dotted(data: "dict[str, Any]") -> "dict[str, str]":
    """A two-level mapping's keys as torchtune's overrides write them: ``section.key``."""
    return {f"{key}.{name}" if name else key: str(inner) for key, value in data.items()
            for name, inner in (value.items() if isinstance(value, dict) else [("", value)])}


def _read_accelerate(data: "dict[str, Any]") -> "dict[str, str]":
    if "distributed_type" not in data:
        raise InputError("export", NOT_A_BLOCK)
    out = {"mode": "train", "framework": "accelerate"}
    mixed = data.get("mixed_precision")
    if mixed in ("bf16", "fp16"):
        out["precision"] = f"amp-{mixed}"
    if str(data.get("num_processes", "")).isdigit():
        out["dp"] = str(data["num_processes"])          # accelerate's config holds no tensor or pipeline degree
    fsdp, deepspeed = data.get("fsdp_config"), data.get("deepspeed_config")
    if isinstance(fsdp, dict):
        reshard = str(fsdp.get("fsdp_reshard_after_forward", "true"))
        out["fsdp"] = {"true": "FULL_SHARD", "false": "SHARD_GRAD_OP"}.get(reshard.lower(), reshard)
        out["offload"] = "params" if str(fsdp.get("fsdp_offload_params")).lower() == "true" else "none"
        if "fsdp_activation_checkpointing" in fsdp:
            out["recompute"] = "full" if str(fsdp["fsdp_activation_checkpointing"]).lower() == "true" else "none"
    if isinstance(deepspeed, dict):
        out["zero"] = str(deepspeed.get("zero_stage", 0))
        if "gradient_accumulation_steps" in deepspeed:
            out["microbatches"] = str(deepspeed["gradient_accumulation_steps"])
        out["offload"] = "params" if deepspeed.get("offload_param_device") == "cpu" else \
            "optimizer" if deepspeed.get("offload_optimizer_device") == "cpu" else "none"
    return out


def _read_torchtitan(data: "dict[str, Any]") -> "dict[str, str]":
    training, parallel = data.get("training", {}), data.get("parallelism", {})
    checkpointing = data.get("activation_checkpoint", {})
    if not isinstance(training, dict) or not isinstance(parallel, dict) or not isinstance(checkpointing, dict):
        raise InputError("export", "torchtitan's [training], [parallelism] and [activation_checkpoint] are tables")
    out = {"mode": "train", "framework": "torchtitan"}
    degrees = {"tp": "tensor_parallel_degree", "pp": "pipeline_parallel_degree", "cp": "context_parallel_degree",
               "ep": "expert_parallel_degree"}
    out.update({key: str(parallel[name]) for key, name in degrees.items() if name in parallel})
    shard, replicate = parallel.get("data_parallel_shard_degree", -1), parallel.get("data_parallel_replicate_degree", 1)
    if isinstance(shard, int) and isinstance(replicate, int) and shard > 0:
        out["dp"] = str(shard * replicate)
        out["fsdp"] = "FULL_SHARD" if shard > 1 else "NO_SHARD"
    local, micro = training.get("local_batch_size"), parallel.get("pipeline_parallel_microbatch_size")
    if _count(local) and _count(micro) and str(out.get("pp", "1")) != "1":
        out["batch"], out["microbatches"] = str(micro), str(max(1, local // micro))   # pipeline micro-batches
    elif _count(local):
        out["batch"] = str(local)
        global_batch = training.get("global_batch_size", -1)
        if _count(global_batch) and "dp" in out:
            out["microbatches"] = str(max(1, global_batch // (local * int(out["dp"]))))
    elif local is not None:
        out["batch"] = str(local)[:40]          # named by the schema as refused: a count is expected
    if "seq_len" in training:
        out["seq"] = str(training["seq_len"])
    out.update(_titan_settings(data, out.get("fsdp")))
    mode, option = checkpointing.get("mode"), str(checkpointing.get("selective_ac_option", "2"))
    if mode in ("full", "none"):
        out["recompute"] = str(mode)
    elif mode == "selective":
        out["recompute"] = "op" if option == "op" else "layer"
    return out


def _count(value: object) -> "TypeGuard[int]":
    """A TOML value that is a whole number above zero (booleans are ints in Python, and are not)."""
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _titan_settings(data: "dict[str, Any]", fsdp: "str | None") -> "dict[str, str]":
    """torchtitan's precision, CPU offload, resharding and optimizer kernel, as inputs."""
    training, parallel = data.get("training", {}), data.get("parallelism", {})
    optimizer: "dict[str, Any]" = data["optimizer"] if isinstance(data.get("optimizer"), dict) else {}
    out = {"precision": "fp32"} if training.get("mixed_precision_param") == "float32" else {}
    if training.get("enable_cpu_offload") is True:
        out["offload"] = "params"
    if parallel.get("fsdp_reshard_after_forward") == "never" and fsdp == "FULL_SHARD":
        out["fsdp"] = "SHARD_GRAD_OP"
    if optimizer.get("implementation") in ("fused", "foreach", "for-loop"):
        out["optimizer_impl"] = str(optimizer["implementation"])
    return out


def _read_torchtune(text: str) -> "dict[str, str]":
    try:
        words = shlex.split(text)
    except ValueError:
        raise InputError("export", "the tune run line has an unclosed quote") from None
    pairs = dict(word.split("=", 1) for word in words if "=" in word and not word.startswith("-"))
    out = _tune_pairs(pairs, words)
    if "--nproc_per_node" in words[:-1]:
        gpus = words[words.index("--nproc_per_node") + 1]
        tp = pairs.get("tensor_parallel_dim", "1")
        if gpus.isdigit() and tp.isdigit() and int(tp) > 0:
            out["dp"] = str(max(1, int(gpus) // int(tp)))
        out["fsdp"] = "SHARD_GRAD_OP" if pairs.get("fsdp_reshard_after_forward", "").lower() == "false" \
            else "FULL_SHARD"
    return out


def _tune_pairs(pairs: "dict[str, str]", words: "list[str]") -> "dict[str, str]":
    """torchtune's config keys (dotted, as its overrides write them) as inputs; ``words`` name the recipe or the
    model's component (LoRA when either says lora)."""
    out = {"mode": "train", "framework": "torchtune"}
    for name, key in (("batch_size", "batch"), ("gradient_accumulation_steps", "microbatches"),
                      ("tokenizer.max_seq_len", "seq"), ("tensor_parallel_dim", "tp"), ("model.lora_rank", "lora_rank")):
        if name in pairs:
            out[key] = pairs[name]
    if "enable_activation_checkpointing" in pairs:
        out["recompute"] = "full" if pairs["enable_activation_checkpointing"].lower() == "true" else "none"
    if pairs.get("fsdp_cpu_offload", "").lower() == "true":
        out["offload"] = "params"
    if pairs.get("dtype") in ("bf16", "fp32"):
        out["precision"] = pairs["dtype"]
    if any("lora" in word for word in words):
        out["method"] = "lora"
    if pairs.get("model.use_dora", "").lower() == "true":
        out["lora_variant"] = "dora"
    return out


# axolotl v0.18.0's config keys (src/axolotl/utils/schemas/config.py, training.py, peft.py) this reads
_AXOLOTL = {"micro_batch_size": "batch", "gradient_accumulation_steps": "microbatches", "sequence_len": "seq",
            "lora_r": "lora_rank"}
_AXOLOTL_MARKS = ("micro_batch_size", "sequence_len", "base_model", "adapter")     # keys only axolotl's config has
_AXOLOTL_READ = {*_AXOLOTL, "gradient_checkpointing", "adapter", "load_in_4bit", "lora_target_linear", "bf16", "fp16"}


def _read_axolotl(data: "dict[str, Any]") -> "dict[str, str]":
    out = {"mode": "train", "framework": "axolotl"}
    out.update({key: str(data[name]) for name, key in _AXOLOTL.items() if name in data})
    if "gradient_checkpointing" in data:
        out["recompute"] = "full" if str(data["gradient_checkpointing"]).lower() == "true" else "none"
    adapter = str(data.get("adapter", "")).lower()
    if adapter in ("lora", "qlora"):
        out["method"] = "qlora" if adapter == "qlora" or str(data.get("load_in_4bit")).lower() == "true" else "lora"
        if str(data.get("lora_target_linear")).lower() == "true":
            out["lora_targets"] = "all-linear"
    if str(data.get("bf16")).lower() == "true":
        out["precision"] = "amp-bf16"
    elif str(data.get("fp16")).lower() == "true":
        out["precision"] = "amp-fp16"
    return out


_ACCELERATE_READ = {"distributed_type", "mixed_precision", "fsdp_config", "deepspeed_config",
                    "fsdp_reshard_after_forward", "fsdp_offload_params", "fsdp_activation_checkpointing", "zero_stage",
                    "gradient_accumulation_steps", "offload_optimizer_device", "offload_param_device"}
_TITAN_READ = {"local_batch_size", "global_batch_size", "seq_len", "data_parallel_shard_degree",
               "data_parallel_replicate_degree", "tensor_parallel_degree", "pipeline_parallel_degree",
               "context_parallel_degree", "expert_parallel_degree", "mode", "selective_ac_option",
               "mixed_precision_param", "enable_cpu_offload", "fsdp_reshard_after_forward", "implementation",
               "pipeline_parallel_microbatch_size"}
_TUNE_READ = {"batch_size", "gradient_accumulation_steps", "tokenizer.max_seq_len", "tensor_parallel_dim",
              "model.lora_rank", "enable_activation_checkpointing", "fsdp_cpu_offload", "dtype",
              "fsdp_reshard_after_forward", "model.use_dora"}


def unread(text: str) -> "list[str]":
    """The keys (section.key) or overrides of a pasted block that ``read`` takes into no input, in order."""
    text = text.strip()
    if text.startswith("tune"):
        words = [w.split("=", 1)[0] for w in shlex.split(text) if "=" in w and not w.startswith("-")]
        return [w for w in words if w not in _TUNE_READ]
    if text.startswith("[") or "\n[" in text:
        data, known = tomllib.loads(text), _TITAN_READ
    else:
        data = _two_levels(text)
        if "distributed_type" in data:
            known = _ACCELERATE_READ
        elif any(key in data for key in _AXOLOTL_MARKS):
            known = _AXOLOTL_READ
        else:                                   # a torchtune recipe config: its keys as dotted overrides
            return [key for key in _dotted(data) if key not in _TUNE_READ | {"model._component_"}]
    out = []
    for key, value in data.items():
        inner = value.items() if isinstance(value, dict) else [(None, value)]
        out += [f"{key}.{name}" if name else key for name, _ in inner
                if (name or key) not in known and not (name is None and key in ("compute_environment", "num_machines",
                                                                                 "num_processes"))]
    return out
