"""Launch settings for the setup estimated, in each framework's own words, and back.

``vllm`` gives a ``vllm serve`` command line (the flags of vLLM 0.11's EngineArgs, vllm/engine/arg_utils.py);
``trainer`` a Hugging Face ``TrainingArguments`` JSON (transformers 5.24 training_args.py, its OptimizerNames and
FSDPOption values); ``deepspeed`` a DeepSpeed config JSON (deepspeed/runtime/config.py: train_micro_batch_size_per_gpu,
gradient_accumulation_steps, bf16 / fp16 "enabled", zero_optimization.stage and offload_optimizer.device).
``read`` takes any of them back to the schema's inputs, so a block copied out and pasted in gives the same estimate.
"""

import json
import shlex
from typing import Any

from pycore.base.errors import InputError
from pycore.inputs import frameworks
from pycore.memory.precision import checkpoint_dtype
from pycore.memory.record import Estimate
from pycore.memory.setup import resolve
from pycore.memory.vllm_multimodal import VIDEO
from pycore.model.catalog import hub_id, models, preset_id
from pycore.output import export_pytorch

KINDS = ("vllm", "trainer", "deepspeed", "accelerate", "torchtitan", "torchtune")
# What each block is and the version of the framework whose names it uses (the page shows it beside the block).
FOLLOWS = {"vllm": ("vllm serve flags", "vLLM 0.11: EngineArgs, vllm/engine/arg_utils.py"),
           "trainer": ("Hugging Face TrainingArguments (JSON)", "transformers 5.24: training_args.py"),
           "deepspeed": ("DeepSpeed config (JSON)", "DeepSpeed 0.19: deepspeed/runtime/config.py, "
                                                   "deepspeed/runtime/zero/config.py"),
           **export_pytorch.FOLLOWS}
_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_QUANT = {"fp8": "fp8", "gptq-int4": "gptq", "awq-int4": "awq"}          # vLLM --quantization methods
_OPTIM = {("adamw", "fused"): "adamw_torch_fused", ("adamw", "foreach"): "adamw_torch",
          ("adamw", "for-loop"): "adamw_torch", ("adam-8bit", ""): "adamw_bnb_8bit", ("adafactor", ""): "adafactor",
          ("sgd", ""): "sgd", ("lion", ""): "lion_32bit"}
_FSDP = {"FULL_SHARD": "full_shard", "SHARD_GRAD_OP": "shard_grad_op", "NO_SHARD": "no_shard",
         "HYBRID_SHARD": "hybrid_shard"}


def _hub(values: "dict[str, Any]", key: str = "model") -> str:
    if key == "model" and values.get("config"):     # a config.json's model: its hub id when it was fetched by one
        return hub_id(str(values.get("name") or "")) or "<model path or hub id>"
    named = str(values[key])
    entry = models().get(preset_id(named) or "")
    if not entry or not entry.get("hub"):
        return named
    # an alias that names another hub repository of the family (gemma-3-27b-it beside the gemma-3-27b-pt preset)
    hubs = [str(hub) for hub in entry["hub"]]
    return next((hub for hub in hubs if named.lower() in (hub.lower(), hub.split("/")[-1].lower())), hubs[0])


def vllm(values: "dict[str, Any]", result: Estimate) -> str:
    """``vllm serve`` with the layout, context, memory share, batch budget and dtypes of this estimate."""
    resolved = resolve(values)
    workload = resolved.workload            # the images' tokens, and a seq that holds them
    # precision=auto is vLLM's --dtype auto: the checkpoint's dtype, float16 where a GPU has no bf16
    dtype = "auto" if checkpoint_dtype(values) else _DTYPES.get(result.setup.weight_dtype, "auto")
    args = ["vllm", "serve", _hub(values), "--dtype", dtype,
            "--tensor-parallel-size", str(result.layout.tp), "--pipeline-parallel-size", str(result.layout.pp),
            # the context the estimate sized each request by: prompt, new tokens and the images' tokens (the
            # workload's seq holds the images' tokens)
            "--max-model-len", str((result.vllm or {}).get("context")
                                   or workload.seq + values["new_tokens"]),
            "--gpu-memory-utilization", f"{values['gpu_util']:g}",
            "--max-num-batched-tokens", str(values["max_batched_tokens"])]
    if values.get("max_num_seqs"):
        args += ["--max-num-seqs", str(values["max_num_seqs"])]
    # vLLM 0.11 config/multimodal.py: limit_mm_per_prompt, items a prompt (999 a modality unless given); a video
    # limit of 0 keeps the encoder's profiling to the largest image (pycore.memory.vllm_multimodal)
    limits = {"image": values["images"]} if workload.image_tokens else {}
    if workload.mm_profiling == "image" and resolved.arch.vision_layers:
        limits["video"] = 0
    if limits:
        args += ["--limit-mm-per-prompt", json.dumps(limits)]
    if workload.mm_profiling == "off" and resolved.arch.vision_layers:
        args.append("--skip-mm-profiling")
    if result.setup.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    if values.get("quant") in _QUANT:
        args += ["--quantization", _QUANT[values["quant"]]]
    if result.layout.ep > 1:
        args.append("--enable-expert-parallel")
    if values.get("speculative") == "mtp":
        args += ["--speculative-config", json.dumps({"method": "mtp", "num_speculative_tokens": 1})]
    if values.get("speculative") == "draft":
        # num_speculative_tokens changes no memory counted here; 5 is vLLM's docs' example for a draft model
        args += ["--speculative-config", json.dumps({"method": "draft_model", "model": _hub(values, "draft_model"),
                                                     "num_speculative_tokens": 5})]
    return shlex.join(args)


def trainer(values: "dict[str, Any]", result: Estimate) -> str:
    """TrainingArguments as JSON: per-device batch, accumulation, checkpointing, mixed precision, optimizer,
    FSDP; a ZeRO stage is pointed at the deepspeed block."""
    setup = result.setup
    impl = setup.optimizer_impl or ""
    optim = _OPTIM.get((values["optimizer"], impl), _OPTIM.get((values["optimizer"], ""), values["optimizer"]))
    args: "dict[str, Any]" = {
        "per_device_train_batch_size": values["batch"], "gradient_accumulation_steps": values["microbatches"],
        # recompute as in force: auto is the framework's (or TRL's for DPO: gradient_checkpointing=True)
        "gradient_checkpointing": frameworks.apply(values)["recompute"] == "full",
        "bf16": "bf16" in setup.precision, "fp16": "fp16" in setup.precision, "optim": optim}
    if values.get("fsdp") in _FSDP:
        args["fsdp"] = _FSDP[values["fsdp"]] + (" offload" if values.get("offload") != "none" else "")
    if str(values.get("zero")) != "0":
        args["deepspeed"] = "ds_config.json"
    return json.dumps(args, indent=2)


def deepspeed(values: "dict[str, Any]", result: Estimate) -> str:
    """A DeepSpeed config with the micro-batch, accumulation, precision and ZeRO stage (and optimizer offload)."""
    precision = result.setup.precision
    config: "dict[str, Any]" = {
        "train_micro_batch_size_per_gpu": values["batch"], "gradient_accumulation_steps": values["microbatches"],
        "bf16": {"enabled": "bf16" in precision}, "fp16": {"enabled": "fp16" in precision},
        "zero_optimization": {"stage": int(values.get("zero") or 0)}}
    if values.get("offload") in ("optimizer", "params"):
        config["zero_optimization"]["offload_optimizer"] = {"device": "cpu"}
        if values["offload"] == "params":
            config["zero_optimization"]["offload_param"] = {"device": "cpu"}
    return json.dumps(config, indent=2)


def export(kind: str, values: "dict[str, Any]", result: Estimate) -> str:
    """The block of ``kind`` (one of KINDS) for this estimate."""
    if kind not in KINDS:
        raise InputError("export", f"one of {', '.join(KINDS)}, got {kind[:40]!r}")
    if (kind == "vllm") != (values["mode"] == "infer"):
        raise InputError("export", "vllm serves a model (mode=infer); trainer, deepspeed, accelerate, torchtitan and "
                                   f"torchtune launch training (mode=train): {kind} does not fit mode={values['mode']}")
    return {"vllm": vllm, "trainer": trainer, "deepspeed": deepspeed, "accelerate": export_pytorch.accelerate,
            "torchtitan": export_pytorch.torchtitan, "torchtune": export_pytorch.torchtune}[kind](values, result)


def read(text: str) -> "dict[str, str]":
    """The schema's inputs a pasted block sets (a ``vllm serve`` line, TrainingArguments or DeepSpeed JSON, an
    accelerate config, a torchtitan TOML or a ``tune run`` line: pycore.output.export_pytorch)."""
    text = text.strip()
    if text.startswith("vllm"):
        return _read_vllm(text)
    if not text.startswith("{"):
        return export_pytorch.read(text)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):        # RecursionError: JSON nested thousands deep
        raise InputError("export", export_pytorch.NOT_A_BLOCK) from None
    if not isinstance(data, dict):
        raise InputError("export", "a JSON object ({...}) was expected")
    return _read_deepspeed(data) if "train_micro_batch_size_per_gpu" in data else _read_trainer(data)


# vllm/config/model.py ModelDType, --dtype's choices -> precision; auto leaves the checkpoint's (precision auto)
_VLLM_DTYPES = {"auto": "", "half": "fp16", "float16": "fp16", "bfloat16": "bf16", "float": "fp32", "float32": "fp32"}
_VLLM_FLAGS = {"--tensor-parallel-size": "tp", "--pipeline-parallel-size": "pp", "--max-model-len": "seq",
               "--gpu-memory-utilization": "gpu_util", "--max-num-batched-tokens": "max_batched_tokens",
               "--max-num-seqs": "max_num_seqs"}


def _vllm_words(text: str) -> "list[str]":
    """The words of a ``vllm serve`` line, ``--flag=value`` split in two as argparse reads it."""
    try:
        words = shlex.split(text)
    except ValueError:
        raise InputError("export", "the vllm serve line has an unclosed quote") from None
    out: "list[str]" = []
    for word in words:
        out += word.split("=", 1) if word.startswith("--") and "=" in word else [word]
    return out


def _vllm_pairs(words: "list[str]") -> "dict[str, str]":
    """Each word of a ``vllm serve`` line after the model, with the word after it (a flag's value)."""
    return dict(zip(words[3::1], words[4::1]))


def _read_vllm(text: str) -> "dict[str, str]":
    words = _vllm_words(text)
    out = {"mode": "infer", "engine": "vllm", "new_tokens": "0"}     # max_model_len is the whole context
    if len(words) > 2 and words[1] == "serve":
        out["model"] = words[2]
    pairs = _vllm_pairs(words)
    for flag, key in _VLLM_FLAGS.items():
        if flag in pairs:
            out[key] = pairs[flag]
    dtype = _VLLM_DTYPES.get(pairs.get("--dtype", ""))
    if dtype:
        out["precision"] = dtype
    if pairs.get("--kv-cache-dtype") == "fp8":
        out["kv_dtype"] = "fp8"
    quant = {v: k for k, v in _QUANT.items()}.get(pairs.get("--quantization", ""))
    if quant:
        out["quant"] = quant
    if "--speculative-config" in pairs and '"mtp"' in pairs["--speculative-config"]:
        out["speculative"] = "mtp"
    out.update(_read_draft(pairs.get("--speculative-config", "")))
    out.update(_read_multimodal(pairs, words, out.get("model", "")))
    return out


def _takes_video(model: str) -> bool:
    """Whether vLLM gives this model a video modality (Qwen-VL's processors); True for a model not known here."""
    preset = preset_id(model)
    return preset is None or models()[preset].get("vision_family") in VIDEO


def _read_multimodal(pairs: "dict[str, str]", words: "list[str]", model: str) -> "dict[str, str]":
    """images=0 when --limit-mm-per-prompt is given (max_model_len already holds the images' tokens: not counted
    twice); mm_profiling=image when it sets video to 0, off when it sets image and video to 0 (no encoder budget: vLLM
    profiles nothing, vllm/v1/core/encoder_cache_manager.py compute_mm_encoder_budget) or with --skip-mm-profiling."""
    out = {}
    if "--limit-mm-per-prompt" in pairs:
        out["images"] = "0"
        try:
            limits = json.loads(pairs["--limit-mm-per-prompt"])
        except (ValueError, RecursionError):
            limits = None
        if isinstance(limits, dict) and limits.get("image") == 0 and \
                limits.get("video", 999 if _takes_video(model) else 0) == 0:
            # every modality the models take at 0 (Gemma 3's, Llama 4's and LFM2-VL's only one is image): no budget
            out["mm_profiling"] = "off"
        elif isinstance(limits, dict) and limits.get("video") == 0:
            # a modality the line leaves out keeps vLLM's limit of 999: the largest image is still profiled
            out["mm_profiling"] = "image"
    if "--skip-mm-profiling" in words:
        out["mm_profiling"] = "off"
    return out


def _read_draft(config: str) -> "dict[str, str]":
    """speculative=draft and draft_model from a --speculative-config naming a draft model (method draft_model)."""
    try:
        spec = json.loads(config) if config.startswith("{") else {}
    except (ValueError, RecursionError):
        return {}
    if not isinstance(spec, dict) or spec.get("method") != "draft_model" or not isinstance(spec.get("model"), str):
        return {}
    return {"speculative": "draft", "draft_model": spec["model"][:200]}


def _read_trainer(data: "dict[str, Any]") -> "dict[str, str]":
    out = {"mode": "train"}
    for name, key in (("per_device_train_batch_size", "batch"), ("gradient_accumulation_steps", "microbatches")):
        if name in data:
            out[key] = str(data[name])
    if "gradient_checkpointing" in data:
        out["recompute"] = "full" if data["gradient_checkpointing"] else "none"
    optimizers = {v: k for k, v in _OPTIM.items()}
    if isinstance(data.get("optim"), str) and data["optim"] in optimizers:
        out["optimizer"], impl = optimizers[data["optim"]]
        if impl:
            out["optimizer_impl"] = impl
    fsdp = str(data.get("fsdp") or "").split()
    shards = {v: k for k, v in _FSDP.items()}
    if fsdp and fsdp[0] in shards:
        out["fsdp"] = shards[fsdp[0]]
        out["offload"] = "optimizer" if "offload" in fsdp else "none"
    return out


def _read_deepspeed(data: "dict[str, Any]") -> "dict[str, str]":
    out = {"mode": "train", "batch": str(data["train_micro_batch_size_per_gpu"])}
    if "gradient_accumulation_steps" in data:
        out["microbatches"] = str(data["gradient_accumulation_steps"])
    zero = data.get("zero_optimization")
    if isinstance(zero, dict):
        out["zero"] = str(zero.get("stage", 0))
        out["offload"] = "params" if "offload_param" in zero else "optimizer" if "offload_optimizer" in zero \
            else "none"
    return out


_TRAINER_READ = {"per_device_train_batch_size", "gradient_accumulation_steps", "gradient_checkpointing", "optim",
                 "fsdp"}
_DEEPSPEED_READ = {"train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization"}
_ZERO_READ = {"stage", "offload_optimizer", "offload_param"}


def unread(text: str) -> "list[str]":
    """The flags or keys of a pasted block that ``read`` takes into no input (as written, in order)."""
    text = text.strip()
    if not text.startswith(("vllm", "{")):
        return export_pytorch.unread(text)
    if text.startswith("vllm"):
        known = set(_VLLM_FLAGS) | {"--kv-cache-dtype", "--quantization", "--speculative-config",
                                    "--limit-mm-per-prompt", "--skip-mm-profiling"}
        words = _vllm_words(text)
        if _vllm_pairs(words).get("--dtype") in _VLLM_DTYPES:        # a value vLLM refuses is left unread, and named
            known.add("--dtype")
        return list(dict.fromkeys(w for w in words[3:] if w.startswith("--") and w not in known))
    data = json.loads(text)
    if "train_micro_batch_size_per_gpu" not in data:
        optimizers = {v: k for k, v in _OPTIM.items()}
        return [key for key in data if key not in _TRAINER_READ or key == "optim" and
                (not isinstance(data[key], str) or data[key] not in optimizers)]
    zero = data.get("zero_optimization")
    inner = [f"zero_optimization.{key}" for key in zero if key not in _ZERO_READ] if isinstance(zero, dict) else []
    return [key for key in data if key not in _DEEPSPEED_READ] + inner
