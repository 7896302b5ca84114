"""A resolved, typed setup: the inputs parsed once into the objects every later module takes.

``resolve(values)`` turns the schema's parsed values into frozen dataclasses (architecture, parameter
counts, precision policy, parallel layout, workload, fine-tuning, quantization, optimizer) and checks the
combinations that cannot work, raising a FieldError that names the key to change.
"""

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pycore.base.errors import FieldError
from pycore.inputs import frameworks
from pycore.inputs.schema import DEFAULTS
from pycore.memory import parallel
from pycore.memory.parallel import Layout
from pycore.memory.precision import Policy
from pycore.memory.precision import policy as precision_policy
from pycore.model import vision
from pycore.model.architecture import ARCH_FIELDS, Architecture, ParameterCount, count_parameters, with_overrides
from pycore.model.catalog import architecture as preset_architecture
from pycore.model.catalog import gpus as gpu_catalog
from pycore.model.catalog import hub_id
from pycore.model.hf_config import architecture_from_file

if TYPE_CHECKING:
    from pycore.inputs.schema import Overhead, Values


@dataclass(frozen=True)
class Workload:
    mode: str                   # train | infer
    batch: int                  # micro-batch per GPU (sequences); concurrent sequences when serving
    seq: int                    # tokens per sequence (the prompt when serving)
    new_tokens: int
    recompute: str              # none | selective | full
    attention: str              # flash | eager
    activation_model: str       # detailed | korthikanti | multiplier | per-sample
    act_multiplier: float
    act_per_sample: int
    loss_chunks: int
    engine: str = "hf"          # serving engine: hf (transformers generate()) | vllm
    gpu_util: float = 0.9       # vLLM gpu_memory_utilization
    max_batched_tokens: int = 8192
    image_tokens: int = 0       # of seq: the tokens the images of one sequence become (pycore.model.vision)
    speculative: str = "none"   # vLLM speculative decoding: none | mtp (the checkpoint's MTP layers)
    scan_kernels: str = "reference"     # a hybrid's scan layers: reference torch kernels or fused ones
    max_num_seqs: int = 0       # vLLM max_num_seqs (0: vLLM's default for the GPU)
    max_model_len: int = 0      # vLLM max_model_len (0: seq + new_tokens)
    images: int = 0             # images a sequence holds, and their size: what the vision tower runs over
    image_size: "tuple[int, int]" = (0, 0)  # (width, height) in pixels (pycore.memory.vision_activations)
    mm_profiling: str = "auto"  # vLLM's encoder profiling: auto | image (no video) | off (pycore.memory.vllm_multimodal)
    hf_model: bool = True       # transformers' model code runs (not torchtune's, torchtitan's or Megatron's own)
    math_sm: int = 0            # the GPU's compute capability where SDPA's math kernel is decided per pass, else 0

    @property
    def training(self) -> bool:
        return self.mode == "train"


@dataclass(frozen=True)
class FineTune:
    method: str                 # full | lora | qlora
    rank: int
    targets: str
    dtype: str                  # adapters, their gradients and states
    recipe: str = "sft"         # sft (plain fine-tuning) | dpo | kto | grpo | reward (TRL's trainers: memory.posttraining)
    reference: str = "none"     # the reference: copy (a frozen model) | adapters-off (the base) | precomputed | none
    dropout: float = 0.0        # PEFT's lora_dropout
    prompt: int = 0             # GRPO: the prompt's tokens (seq); the workload's seq is prompt + completion
    completion: int = 0         # GRPO: max_completion_length, tokens generated per completion
    generations: int = 0        # GRPO: num_generations, completions per prompt
    rollout: str = "generate"   # GRPO: generate | vllm-colocate | vllm-server (pycore.memory.rollout)
    vllm_util: float = 0.3      # GRPO: vllm_gpu_memory_utilization of a colocated engine
    vllm_sleep: bool = False    # GRPO: vllm_enable_sleep_mode
    dora: bool = False          # PEFT's use_dora (pycore.memory.finetune)
    rollout_chunk: int = 64     # PPO: local_rollout_forward_batch_size, rows generated and scored at a time
    mini_batches: int = 1       # PPO: num_mini_batches an update's rows are split into
    value_arch: "Architecture | None" = None    # PPO: the value model's backbone (None: the policy's)
    reward_arch: "Architecture | None" = None   # PPO: the reward model's backbone (None: the policy's)
    vllm_tp: int = 1            # GRPO, distill: vllm_tensor_parallel_size of a colocated engine
    vllm_max_len: int = 0       # GRPO, distill: vllm_max_model_length (0: None, the model's positions)
    teacher: "Architecture | None" = None   # distill: the teacher model (pycore.memory.distillation)
    teacher_dtype: str = ""     # distill: the dtype the teacher is loaded in
    trl_head: str = "fused"     # DPO, GRPO: fused (TRL >= 1.15: add_fused_lm_head) | full (TRL <= 1.14.2: the model's logits)
    generate_policy: "Policy | None" = None     # distill under autocast: the policy generate() runs (the update's is
                                                # the setup's, autocast bypassed)

    @property
    def adapters(self) -> bool:
        return self.method != "full"


@dataclass(frozen=True)
class Setup:
    arch: Architecture
    counts: ParameterCount
    policy: Policy
    layout: Layout
    workload: Workload
    finetune: FineTune
    quant: str                  # storage format of the weights (pycore.memory.quantization.FORMATS)
    group_size: int
    optimizer: str
    optimizer_impl: str         # foreach | fused | for-loop
    gpu: str
    overhead: "Overhead | None"     # ("bytes", n) or ("percent", x); None: modelled (pycore.memory.device)
    expandable_segments: str = "no"
    cuda_modules: str = "lazy"          # CUDA_MODULE_LOADING (pycore.memory.device)
    ddp_buckets: bool = False           # data parallelism through torch DDP's gradient buckets (frameworks)
    sync_every_microbatch: bool = True  # grad_sync: reduce each micro-batch, or only the last (no_sync)
    torch_pipelining: bool = False      # pp > 1 through torch.distributed.pipelining (frameworks.OWN_PIPELINE)
    weight_bytes: int = 0               # the whole model's weights from its checkpoint's headers; 0: from parameters
    weight_files: str = ""              # the files they were read from (named in the weights' source)
    checkpoint_unused: str = ""         # why a weight_bytes given does not give the weights held ("": it does)
    draft: "Architecture | None" = None     # vLLM speculative=draft: the draft model (pycore.memory.serving)
    cublas_workspace: str = "auto"     # CUBLAS_WORKSPACE_CONFIG (pycore.memory.device)


# Quantizations made as the weights load, from a 16-bit checkpoint (bitsandbytes, vLLM's fp8): the bytes held are not
# the checkpoint's
ON_THE_FLY = ("int8", "fp8", "fp8-channel", "nf4", "nf4-dq")


def _vllm_engine(values: "Values", arch: Architecture, finetune: FineTune) -> FineTune:
    """A GRPO or distill step's colocated vLLM engine: its tensor-parallel degree must divide the heads, as vLLM
    checks (ModelConfig.verify_with_parallel_config), and TRL 1.16 runs neither recipe with context parallelism
    (grpo_config.py L1068-1076, distillation_config.py L411-416)."""
    degree = values.get("vllm_tensor_parallel_size") or 1
    if finetune.recipe in ("grpo", "distill") and values.get("cp", 1) > 1:
        raise FieldError("cp", f"TRL 1.16 runs no {finetune.recipe.upper()} step with context parallelism", fallback=1)
    heads, kv_heads = arch.heads or 1, arch.kv_heads or 1
    if finetune.rollout == "vllm-colocate" and (heads % degree or (kv_heads % degree and degree % kv_heads)):
        raise FieldError("vllm_tensor_parallel_size", f"{degree} GPUs cannot split {arch.name}'s {heads} heads and "
                         f"{kv_heads} KV heads: vLLM refuses it", fallback=1)
    return replace(finetune, vllm_tp=degree, vllm_max_len=values.get("vllm_max_model_length") or 0)


def _draft(values: "Values", target: Architecture, layout: Layout) -> "Architecture | None":
    """vLLM's draft model (speculative=draft): a preset, alias or hub id, checked as vLLM checks it (the same
    vocabulary; vllm/config/speculative.py) and as pycore models it: plain attention layers on both sides, one
    pipeline stage (the drafter's layers join the target's KV cache groups: vllm/v1/spec_decode/draft_model.py
    load_model registers them in the same forward context)."""
    if values.get("mode") != "infer" or values.get("engine") != "vllm" or values.get("speculative") != "draft":
        return None
    name = str(values.get("draft_model") or "").strip()
    if not name:
        raise FieldError("draft_model", "speculative=draft needs the draft model: a preset, alias or hub id")
    try:
        draft = architecture_from_file(name) if name.lower().endswith(".json") else preset_architecture(name)
    except KeyError:
        raise FieldError("draft_model", unknown_model(name, "draft_model")) from None
    except FieldError as error:
        raise FieldError("draft_model", error.message) from None
    if draft.kind != "decoder" or not draft.output_width:
        raise FieldError("draft_model", f"{draft.name} is not a causal LM: a draft model is one")
    if draft.vocab != target.vocab:
        raise FieldError("draft_model", f"the draft's vocabulary ({draft.vocab:,}) is not the target's "
                         f"({target.vocab:,}): vLLM refuses it")
    if draft.layer_pattern or draft.sliding_window or target.layer_pattern or target.sliding_window:
        raise FieldError("speculative", "a draft model beside sliding-window, chunked or state-space layers is not "
                         "modelled (their KV cache groups differ); use speculative=none or mtp", fallback="none")
    if layout.pp > 1:
        raise FieldError("speculative", "a draft model with pipeline stages is not modelled", fallback="none")
    return draft


def _checkpoint_bytes(values: "Values", policy: Policy, quant: str) -> "tuple[int, str, str]":
    """(weight_bytes, weight_files, why they are not used): a checkpoint's bytes are the weights held when they are
    held as stored, not when the precision policy keeps fp32 weights (autocast and fp32 training load a 16-bit
    checkpoint in fp32) or the weights are quantized as they load."""
    given, files = values.get("weight_bytes") or 0, values.get("weight_files") or ""
    why = ""
    if given and policy.bytes("weight") == 4:
        why = "the precision policy holds fp32 weights (autocast or fp32 training), converted from the checkpoint's " \
            "as they load"
    elif given and quant in ON_THE_FLY:
        why = f"quant={quant} quantizes the checkpoint's weights as they load"
    return (0 if why else given), files, why


def resolve_architecture(values: "Values") -> Architecture:
    """The Architecture named by parsed inputs: config file, else preset, else a bare parameter count. A
    preset with overrides is not the preset: it is called by ``name`` (an imported config's own), else
    "<preset> with overrides (keys)"."""
    given = "".join(c if c.isprintable() else "?" for c in (values.get("name") or "").strip()[:80])
    if values.get("config"):
        arch = _with_overrides(architecture_from_file(values["config"]), values)
        return replace(arch, name=given) if given else arch
    overrides = tuple((k, values[k]) for k in ARCH_FIELDS if values.get(k) is not None)
    arch = _named_architecture(values["model"], values.get("params") or 0, values.get("layers") or 0,
                               values.get("hidden") or 0, values.get("heads") or 0, overrides)
    if given:
        return replace(arch, name=given)
    changed = [k for k, v in overrides if v != DEFAULTS.get(k)]
    if changed and arch.kind != "generic":
        return replace(arch, name=f"{values['model']} with overrides ({', '.join(changed)})")
    return arch


# The answers and charts re-estimate one setup dozens of times with another batch or sequence length:
# its architecture is looked up once (presets never change while running; count_parameters keeps its own).
@lru_cache(maxsize=256)
def _named_architecture(model: str, params: int, layers: int, hidden: int, heads: int,
                        overrides: "tuple[tuple[str, Any], ...]") -> Architecture:
    if params and model == DEFAULTS["model"]:
        return Architecture(name="generic", kind="generic", params_override=params, layers=layers, hidden=hidden,
                            heads=heads)
    try:
        arch = preset_architecture(model)
    except KeyError:
        raise FieldError("model", unknown_model(model)) from None
    return _with_overrides(arch, dict(overrides))


def unknown_model(model: str, key: str = "model") -> str:
    """Why a model name is refused, and for a hub id no preset has, how to estimate it all the same: from its
    config.json, a file on the command line (config= reads files; links never do), fetched on the page. ``key``: the
    input that named it (teacher, reward_model, value_model and draft_model take a config.json path on the command
    line only)."""
    hub = hub_id(model)
    if hub is None:
        return f"unknown preset {model[:40]!r}; see python -m pycore models"
    where = f"https://huggingface.co/{hub}/resolve/main/config.json"
    if key != "model":
        return (f"no preset has the hub id {hub!r} (python -m pycore models lists the presets): on the command line, "
                f"download {where} and give {key}=PATH to it")
    return (f"no preset has the hub id {hub!r} (python -m pycore models lists the presets): estimate it from its "
            f"config.json instead: on the command line, download {where} and give config=PATH; on the page, fetch it "
            "from the hub")


def _with_overrides(arch: Architecture, values: "Values") -> Architecture:
    overrides = {k: values.get(k) for k in ARCH_FIELDS if values.get(k) is not None}
    try:
        return with_overrides(arch, overrides)
    except ValueError as error:
        key, _, message = str(error).partition(": ")
        # Blame an override the user gave, not a preset field they never touched.
        if key not in overrides:
            key = next((k for k in ("heads", "hidden", "kv_heads", "experts", "experts_per_token")
                        if k in overrides), key)
        raise FieldError(key, message) from None


def quantization_of(values: "Values") -> str:
    """The weight storage format: quant, or NF4 with double quantization for QLoRA (Dettmers et al. 2023)."""
    quant: str = values["quant"]
    if quant == "none" and values["method"] in ("qlora", "dpo-qlora", "kto-qlora"):
        return "nf4-dq"
    return quant


def image_size(values: "Values") -> "tuple[int, int]":
    """(width, height) of image_size ("1280x720"); FieldError naming the key otherwise."""
    text = str(values.get("image_size") or "1280x720").strip().lower().replace("×", "x")
    width, _, height = text.partition("x")
    if not (width.isascii() and width.isdigit() and height.isascii() and height.isdigit()) or \
            not (1 <= int(width) <= 100_000 and 1 <= int(height) <= 100_000):
        raise FieldError("image_size", f"width x height in pixels from 1 to 100,000, such as 1280x720; got "
                                       f"{str(values.get('image_size'))[:40]!r}", fallback="1280x720")
    return int(width), int(height)


def _image_tokens(arch: Architecture, values: "Values") -> int:
    """Tokens the images of one sequence add to it: images × the tokens one image becomes (0 for a model
    without a vision tower pycore counts, or no images)."""
    seeing = vision.tower(arch)
    images = values.get("images") or 0
    if not seeing or not images:
        return 0
    width, height = image_size(values)
    try:
        return int(images) * seeing.tokens(width, height)
    except ValueError as error:
        raise FieldError("image_size", str(error).partition(": ")[2], fallback="1280x720") from None


def image_tokens(values: "Values") -> int:
    """The tokens the images of one sequence become (0 without images or a counted tower)."""
    return _image_tokens(resolve_architecture(values), values)


def prompt_tokens(values: "Values") -> int:
    """A sequence's prompt as the model sees it: seq, and the tokens its images become."""
    return int(values["seq"]) + image_tokens(values)


def _check_positions(arch: Architecture, values: "Values") -> None:
    """A learned position table (GPT-2, BERT) has no row past max_position_embeddings: a longer sequence
    cannot be embedded (transformers raises an index error), so it is refused; RoPE models only warn."""
    limit = arch.max_positions
    if arch.positions != "learned" or not limit or arch.kind == "generic":
        return
    serving = values["mode"] == "infer"
    length = values["seq"] + (values["new_tokens"] if serving else 0)
    if length > limit:
        room = limit - values["new_tokens"] if serving else limit
        what = f"prompt + new tokens ({values['seq']:,} + {values['new_tokens']:,})" if serving else "a sequence"
        raise FieldError("seq", f"{arch.name} has {limit:,} learned positions (max_position_embeddings): {what} of "
                         f"{length:,} tokens cannot be embedded; seq can be at most {max(room, 0):,}",
                         fallback=room if room > 0 else None)


def _syncs_every_microbatch(values: "Values") -> bool:
    """grad_sync as given, else as the framework does (pycore.inputs.frameworks.NO_SYNC_UNTIL_LAST)."""
    if values.get("grad_sync", "auto") != "auto":
        return bool(values["grad_sync"] == "every")
    return frameworks.framework_name(values) not in frameworks.NO_SYNC_UNTIL_LAST


def _recipe(values: "Values") -> "tuple[Values, str, str]":
    """(values with method the policy's own: full, lora or qlora; the recipe; its reference model). TRL 1.16
    DPOTrainer.__init__ (trl/trainer/dpo_trainer.py L908-929): with no ref_model given it loads a frozen copy of the
    model, none when the policy is a PEFT model (its adapters are disabled for the reference forward) or with
    precompute_ref_log_probs. GRPOTrainer.__init__ (trl/trainer/grpo_trainer.py L984-1003): none when beta == 0.0,
    the base with its adapters disabled for a PEFT policy, else a frozen copy."""
    recipe = frameworks.recipe_of(values)
    if recipe == "sft" or values["mode"] != "train":
        return values, "sft", "none"
    policy = values["method"].partition("-")[2] or "full"
    reference = values.get("ref_model", "auto")
    if recipe == "grpo":
        reference = "auto" if values.get("beta") else "none"
    if recipe == "ppo":
        # PPOTrainer.__init__ (trl/trainer/ppo_trainer.py@v0.25.1 L260-265): a frozen copy, or a PEFT policy's base
        reference = "auto"
    if recipe == "distill":
        # DistillationTrainer holds a teacher and no reference model (distillation_config.py L134-138)
        return {**values, "method": policy}, recipe, "none"
    if recipe == "reward":
        # RewardTrainer: AutoModelForSequenceClassification with num_labels=1 (reward_trainer.py L396), no reference
        head = {"head": "classification", "num_labels": 1} if values.get("head") is None else {}
        return {**values, **head, "method": policy}, recipe, "none"
    if recipe == "kto" and reference == "none":
        # KTOTrainer's losses (kto, apo_zero_unpaired) both read reference log-probs (kto_trainer.py L1418-1439)
        raise FieldError("ref_model", "KTO's loss needs reference log-probs: auto or precomputed", fallback="auto")
    if reference == "auto":
        reference = "copy" if policy == "full" else "adapters-off"
    return {**values, "method": policy}, recipe, reference


def _teacher(values: "Values", student: Architecture) -> Architecture:
    """DistillationTrainer's teacher_model: the student's architecture (auto), a preset, or a config.json on disk. TRL
    1.16 (trl/trainer/distillation_trainer.py L694-702) refuses a teacher whose vocab_size is not the student's."""
    name = str(values.get("teacher") or "auto").strip()
    if name == "auto":
        return student
    try:
        teacher = architecture_from_file(name) if name.lower().endswith(".json") else preset_architecture(name)
    except KeyError:
        raise FieldError("teacher", unknown_model(name, "teacher"), fallback="auto") from None
    except FieldError as error:
        raise FieldError("teacher", error.message, fallback="auto") from None
    if teacher.kind != "decoder" or not teacher.output_width:
        raise FieldError("teacher", f"{teacher.name} is not a causal LM: DistillationTrainer's teacher is one",
                         fallback="auto")
    if teacher.vocab != student.vocab:
        raise FieldError("teacher", f"the teacher's vocabulary ({teacher.vocab:,}) is not the student's "
                         f"({student.vocab:,}): TRL 1.16 DistillationTrainer refuses it (distillation_trainer.py "
                         "L694-702: 'requires a shared vocabulary')", fallback="auto")
    return teacher


def _with_teacher(values: "Values", student: Architecture, policy: Policy, finetune: FineTune) -> \
        "tuple[FineTune, Policy]":
    """The distillation step's teacher and policies. DistillationTrainer.compute_loss reaches _compute_loss through
    _forward_redirection (trl/trainer/distillation_trainer.py L1803; trl/models/utils.py L345-387), which puts the
    method in place of the forward accelerate wrapped in autocast: the student's update and the teacher's forward run
    in their weights' dtype, not autocast's, and only generate() (which calls the wrapped forward) autocasts."""
    if values.get("cp", 1) > 1:
        raise FieldError("cp", "TRL 1.16's DistillationConfig refuses sequence-dim parallelism (cp_size > 1; "
                         "distillation_config.py L411-420)", fallback=1)
    if values.get("pp", 1) > 1:
        raise FieldError("pp", "TRL's DistillationTrainer holds the student and the teacher whole or ZeRO/FSDP-sharded "
                         "on every GPU; it has no pipeline parallelism", fallback=1)
    teacher = _teacher(values, student)
    dtype = values.get("teacher_dtype") or "auto"
    finetune = replace(finetune, teacher=None if teacher is student else teacher,
                       teacher_dtype=teacher.dtype or "bf16" if dtype == "auto" else dtype)
    if policy.autocast:
        finetune = replace(finetune, generate_policy=policy)
        policy = replace(policy, act=policy.weight, autocast=False)
    return finetune, policy


def _check_method(values: "Values", arch: Architecture, recipe: str, quant: str) -> None:
    """FieldError for a method the weights' storage or the architecture cannot train with."""
    train = values["mode"] == "train"
    if train and values["method"] == "full" and quant != "none":
        raise FieldError("quant", "quantized weights are trained through adapters: set method=lora or qlora")
    if train and values["method"] == "qlora" and quant not in ("nf4", "nf4-dq"):
        raise FieldError("quant", "QLoRA stores the base in NF4: quant=nf4 or nf4-dq")
    if train and values["method"] != "full" and arch.kind != "decoder":
        raise FieldError("method", "LoRA is modelled for decoder transformers (the presets' causal LMs)")
    if recipe != "sft" and (arch.kind != "decoder" or not arch.output_width):
        trainer = {"dpo": "DPO", "kto": "KTO", "grpo": "GRPO", "reward": "Reward", "ppo": "PPO", "distill": "Distillation"}[recipe]
        raise FieldError("method", f"{recipe} is modelled for decoder transformers (TRL's {trainer}Trainer trains a "
                         "causal LM or, for reward, its one-label sequence-classification form)")


def _response(values: "Values", recipe: str, completion: int) -> int:
    """Tokens generated after the prompt: PPO's response_length (PPOTrainer.train, trl/trainer/ppo_trainer.py@v0.25.1
    L513: batch_generation appends them to the query), else ``completion``."""
    return int(values.get("response_length") or 0) if recipe == "ppo" else completion


def _scorer(values: "Values", key: str, policy: Architecture) -> "Architecture | None":
    """PPO's value_model or reward_model: None for auto, else a preset (id, alias or hub id) or a config.json on disk,
    whose backbone takes a one-output score head (AutoModelForSequenceClassification, num_labels=1). TRL's get_reward
    (trl/trainer/utils.py L986-1033) feeds it the policy's token ids: a smaller vocabulary cannot embed them."""
    name = str(values.get(key) or "auto").strip()
    if name == "auto":
        return None
    try:
        arch = architecture_from_file(name) if name.lower().endswith(".json") else preset_architecture(name)
    except KeyError:
        raise FieldError(key, unknown_model(name, key), fallback="auto") from None
    except FieldError as error:
        raise FieldError(key, error.message, fallback="auto") from None
    if arch.kind != "decoder":
        raise FieldError(key, f"{arch.name} is not a decoder: pycore scores PPO's responses with a decoder's backbone",
                         fallback="auto")
    if arch.vocab < policy.vocab:
        raise FieldError(key, f"{arch.name}'s vocabulary ({arch.vocab:,}) is smaller than the policy's "
                         f"({policy.vocab:,}): PPOTrainer scores the policy's token ids with it", fallback="auto")
    return arch


def _ppo(values: "Values", finetune: FineTune, policy: Architecture) -> FineTune:
    """PPOConfig's rollout chunk and mini-batches (TRL 0.25.1); PPOTrainer trains data parallel only (no pipeline).
    The value model is, unless given, the reward model's architecture: trl/examples/scripts/ppo/ppo.py loads both from
    reward_model_path; the reward model is, unless given, the policy's."""
    if finetune.recipe != "ppo":
        return finetune
    if values.get("pp", 1) > 1:
        raise FieldError("pp", "TRL's PPOTrainer places its four models whole or ZeRO-sharded on every GPU; it has no "
                         "pipeline parallelism", fallback=1)
    reward = _scorer(values, "reward_model", policy)
    return replace(finetune, rollout_chunk=values.get("local_rollout_forward_batch_size") or 64,
                   mini_batches=values.get("num_mini_batches") or 1, reward_arch=reward,
                   value_arch=_scorer(values, "value_model", policy) or reward)


def _attention(values: "Values", arch: Architecture, policy: Policy, asked: "str | None") -> "tuple[str, int]":
    """The attention kernel that runs, and the compute capability SDPA's math kernel is decided on for passes in other
    dtypes (0 where it is not: pycore.memory.activations.pass_kernel): eager for an encoder-decoder; where the
    framework's default is left to transformers, eager for a model it runs no SDPA for and SDPA's math kernel
    (flash-math) for grouped-query heads in fp32 (pycore.memory.activations.gqa_math_kernel), flash-repeat where every
    such layer is masked; else the attention asked for or the framework's (vLLM runs its own backends)."""
    from pycore.memory.activations import gqa_math_kernel, math_share
    from pycore.memory.device import compute_capability
    if arch.kind == "encoder-decoder":
        return "eager", 0
    gpu = gpu_catalog()[values["gpu"]]
    vllm = values["mode"] == "infer" and values.get("engine") == "vllm"
    if asked == "auto" and values["attention"] == "flash" and arch.heads and _hf_model(values) and not vllm:
        if arch.attn_softcap or arch.attention_sinks:
            # transformers 5.24 Gemma2PreTrainedModel and GptOssPreTrainedModel: _supports_sdpa = False (soft-capped
            # scores, attention sinks), so an unset attn_implementation is eager (measure_cuda.py's gemma-2-2b (gpu)
            # case: "Gemma2ForCausalLM does not support an attention implementation through ...sdpa")
            return "eager", 0
        sm = compute_capability(gpu)      # CUDA's SDPA only
        if sm and gqa_math_kernel(arch, policy.bytes("act"), policy.autocast, sm):
            return ("flash-math" if math_share(arch, values["seq"]) else "flash-repeat"), sm
        return str(values["attention"]), sm
    return str(values["attention"]), 0


def _with_kernel(workload: Workload, kernel: "tuple[str, int]", hf_model: bool) -> Workload:
    """The workload with the attention kernel that runs (the final policy's), replaced only where it differs: the
    answers' searches resolve hundreds of setups."""
    same = (*kernel, hf_model) == (workload.attention, workload.math_sm, workload.hf_model)
    return workload if same else replace(workload, attention=kernel[0], math_sm=kernel[1], hf_model=hf_model)


def _hf_model(values: "Values") -> bool:
    """Whether transformers' model code runs (pycore.inputs.frameworks.OWN_MODEL_CODE: not torchtune's, torchtitan's
    or Megatron's own)."""
    return frameworks.framework_name(values) not in frameworks.OWN_MODEL_CODE


def _check_gpu_and_image_size(values: "Values") -> None:
    """FieldError for a GPU not in the catalogue, or an image_size that is not width x height: checked as every other
    field is, whether or not images are given."""
    if values["gpu"] not in gpu_catalog():
        raise FieldError("gpu", f"unknown GPU {values['gpu'][:40]!r}; see python -m pycore gpus")
    image_size(values)


def resolve(values: "Values") -> Setup:
    """The typed Setup of parsed values; FieldError names the key when a combination cannot work."""
    asked_attention = values.get("attention")
    values = frameworks.apply(values)
    values, recipe, reference = _recipe(values)
    _check_gpu_and_image_size(values)
    arch = resolve_architecture(values)
    if arch.every_expert and values["mode"] == "train" and frameworks.framework_name(values) in frameworks.OWN_MOE:
        arch = replace(arch, every_expert=False)
    counts, mode, activation_model = count_parameters(arch), values["mode"], values["activations"]
    if arch.kind == "generic" and activation_model == "detailed" and not arch.act_per_sample_fp32:
        # A bare parameter count: the multiplier model when layers and hidden size are given, else the
        # model states alone (estimate's warnings say that activations are not counted).
        activation_model = "multiplier" if arch.layers and arch.hidden else "none"
    if arch.kind == "generic" and mode == "infer":
        raise FieldError("mode", "serving needs a transformer architecture (model or config), not params")
    quant = quantization_of(values)
    _check_method(values, arch, recipe, quant)
    if mode == "infer" or arch.kind == "generic":
        # What pycore.inputs.applies reports as ignored changes nothing: serving replicas (dp, cp) hold nothing
        # more per GPU, and a generic network has no sequence to split (cp).
        values = {**values, "cp": 1, **({"dp": 1} if mode == "infer" else {})}
    _check_positions(arch, values)
    layout = parallel.layout(values, arch)
    policy = precision_policy(values, arch)
    image_tokens = _image_tokens(arch, values)
    # DPO's batch counts preference pairs: chosen and rejected rows go through one forward (DataCollatorForPreference)
    sequences = values["batch"] * (2 if recipe in ("dpo", "reward") else 1)     # RewardTrainer's collator too
    # GRPO's update runs over prompt + completion (GRPOTrainer._compute_loss: torch.cat([prompt_ids, completion_ids]))
    completion = values.get("max_completion_length") or 0 if recipe in ("grpo", "distill") else 0
    completion = _response(values, recipe, completion)
    workload = Workload(mode, sequences, values["seq"] + image_tokens + completion, values["new_tokens"],
                        values["recompute"], values["attention"],
                        activation_model, values["act_multiplier"], values["act_per_sample"],
                        values["loss_chunks"], values.get("engine", "hf"), values.get("gpu_util", 0.9),
                        values.get("max_batched_tokens", 8192), image_tokens, values.get("speculative") or "none",
                        values.get("scan_kernels") or "reference", values.get("max_num_seqs") or 0,
                        mm_profiling=values.get("mm_profiling") or "auto")
    if image_tokens:
        workload = replace(workload, images=int(values["images"]), image_size=image_size(values))
    finetune = FineTune(values["method"] if mode == "train" else "full", values["lora_rank"],
                        values["lora_targets"], values["lora_dtype"], recipe, reference,
                        values.get("lora_dropout") or 0.0, values["seq"] + image_tokens if completion else 0, completion,
                        values.get("num_generations") or 0 if recipe == "grpo" else 0, values.get("rollout") or "generate",
                        values.get("vllm_gpu_memory_utilization") or 0.3, values.get("vllm_enable_sleep_mode") == "yes",
                        values.get("lora_variant") == "dora",
                        trl_head=values.get("trl_head") or "fused" if recipe in ("dpo", "grpo") else "fused")
    finetune = _vllm_engine(values, arch, finetune)
    finetune, policy = _with_teacher(values, arch, policy, finetune) if recipe == "distill" else (finetune, policy)
    workload = _with_kernel(workload, _attention(values, arch, policy, asked_attention), _hf_model(values))
    finetune = _ppo(values, finetune, arch)
    return Setup(arch, counts, policy, layout, workload, finetune, quant, values["group_size"],
                 values["optimizer"], values["optimizer_impl"], values["gpu"],
                 values["overhead"], values.get("expandable_segments", "no"), values.get("cuda_modules", "lazy"),
                 frameworks.framework_name(values) in frameworks.DDP_COPIES_GRADIENTS,
                 _syncs_every_microbatch(values),
                 layout.pp > 1 and frameworks.framework_name(values) not in frameworks.OWN_PIPELINE,
                 *_checkpoint_bytes(values, policy, quant), _draft(values, arch, layout),
                 values.get("cublas_workspace") or "auto")
