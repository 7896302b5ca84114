"""The one schema of named inputs: URL query, command-line KEY=VALUE, form fields and CSV rows.

Every key is declared once here with its meaning, accepted values, default and the source of that
default. ``docs/inputs.md`` is generated from this table (``python -m pycore schema``) and a test keeps
the two equal.
"""

from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, TypeVar, cast, overload

from pycore.base.errors import FieldError
from pycore.base.errors import InputError as InputError  # re-exported: the first version's name, still imported
from pycore.base.units import GIB, MIB, TIB, foreign_digits, parse_count, parse_number, parse_size, parse_whole

PRECISIONS = ("auto", "fp32", "amp-bf16", "amp-fp16", "bf16-master", "fp16-master", "bf16", "fp16", "fsdp2-bf16")
PRECISION_ALIASES = {"32-true": "fp32", "32": "fp32", "bf16-mixed": "amp-bf16", "16-mixed": "amp-fp16",
                     "bf16-true": "bf16", "16-true": "fp16"}
DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4", "nf4", "none")
OPTIMIZERS = ("adamw", "adam", "adam-8bit", "sgd", "sgd-momentum", "adafactor", "lion")

MOST_BYTES = 1024 * TIB     # 1 PiB: the largest size input accepted, far beyond any GPU's memory

Kind = Literal["choice", "int", "count", "size", "overhead", "float", "text", "dtype"]
Overhead = tuple[Literal["percent", "bytes"], float]    # ("percent", 10.0) or ("bytes", 2147483648)
Value = int | float | str | Overhead | None            # one parsed input; None: not given, no default
# The parsed inputs, key -> value, every key present. Any, not Value: each stage reads the keys it knows as the
# type that key parses to (``values["batch"]`` is an int), and the schema below is what says so.
Values = dict[str, Any]
Errors = dict[str, str]                                 # key -> message, from parse(..., strict=False)

_Parsed = TypeVar("_Parsed")


@dataclass(frozen=True)
class Field:
    key: str
    kind: Kind
    default: Value
    meaning: str
    accepts: str = ""
    choices: "tuple[str, ...]" = ()
    default_source: str = ""
    group: str = "model"
    unit: str = ""
    minimum: float = 0
    maximum: float = 10**15         # the plausible range's top; beyond it the value is refused by name
    longest: int = 200              # characters of a text value read (config=: a config.json's text, 20,000)

    def parse(self, raw: object) -> Value:
        """The typed value of ``raw`` (a string); raises InputError naming the key."""
        text = str(raw).strip()
        if text == "" and self.kind == "text":
            if self.default is not None:
                raise FieldError(self.key, f"empty; accepts {self.accepts}")
            return None
        number = _NUMBERS.get(self.kind)
        if number is None:
            return self._read(_WORDS[self.kind], text)
        value = self._read(number, text)
        if not self.minimum <= value <= self.maximum:
            raise FieldError(self.key, f"got {_shorten(text)!r}; accepts {self.range_text()}")
        return value

    def _read(self, reader: "Callable[[Field, str], _Parsed]", text: str) -> _Parsed:
        """``reader``'s value of ``text``; any ValueError it raises becomes one message naming the key."""
        try:
            return reader(self, text)
        except (ValueError, TypeError, OverflowError):
            digits = " (only the digits 0-9 are read)" if foreign_digits(text) else ""
            raise InputError(self.key, f"got {_shorten(text)!r}{digits}; accepts {self.accepts}") from None

    def range_text(self) -> str:
        """The accepted range in words: "1 to 10,000"."""
        def show(x: float) -> str:
            return f"{x:,}" if float(x).is_integer() else f"{x:g}"
        return f"{show(self.minimum)} to {show(self.maximum)}"


# Readers by kind: each returns the value or raises ValueError. Numbers are then held to the field's range;
# words (a choice, an overhead, free text) are whole as read.
def _read_choice(field: Field, text: str) -> str:
    value = text.lower()
    if field.key == "precision":
        value = PRECISION_ALIASES.get(value, value)
    canonical = {choice.lower(): choice for choice in field.choices}
    if value not in canonical:
        raise ValueError
    return canonical[value]


def _read_int(field: Field, text: str) -> int:
    return parse_whole(text)


def _read_float(field: Field, text: str) -> float:
    value = parse_number(text)
    if field.key == "mfu" and value > 1:
        raise ValueError
    return value


def _read_overhead(field: Field, text: str) -> Overhead:
    """A percent of the peak (0 to 1000%) or a size in bytes (up to 1 PiB)."""
    if text.endswith("%"):
        percent = parse_number(text[:-1])
        if not 0 <= percent <= 1000:
            raise ValueError
        return ("percent", percent)
    amount = parse_size(text)
    if not 0 <= amount <= MOST_BYTES:
        raise ValueError
    return ("bytes", amount)


def _read_text(field: Field, text: str) -> str:
    if len(text) > field.longest:
        raise ValueError
    return text


_NUMBERS: "dict[str, Callable[[Field, str], float]]" = {
    "int": _read_int, "float": _read_float,
    "count": lambda field, text: parse_count(text), "size": lambda field, text: parse_size(text),
}
_WORDS: "dict[str, Callable[[Field, str], Value]]" = {
    "choice": _read_choice, "dtype": _read_choice, "overhead": _read_overhead, "text": _read_text,
}


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _choice(key: str, default: "str | None", choices: "tuple[str, ...]", meaning: str, group: str,
            source: str = "", accepts: "str | None" = None) -> Field:
    return Field(key, "choice", default, meaning, accepts or " | ".join(choices), tuple(choices), source, group)


def _int(key: str, default: "int | None", meaning: str, group: str, source: str = "",
         span: "tuple[int, int]" = (1, 10**6), unit: str = "") -> Field:
    """A whole-number input accepting ``span`` (lowest, highest)."""
    minimum, maximum = span
    return Field(key, "int", default, meaning, f"a whole number from {minimum:,} to {maximum:,}", (), source,
                 group, unit, minimum, maximum)


def _dtype(key: str, meaning: str) -> Field:
    return Field(key, "dtype", None, meaning, " | ".join(DTYPES), DTYPES, "the precision policy", "precision",
                 "")


ARCH_HINT = "override the preset's value"
FIELDS = (
    Field("model", "text", "llama-3.1-8b", "architecture preset from presets/models.json, by id, alias or hub id (a "
          "hub id no preset has: its config.json instead)",
          "a preset id, an alias or a Hugging Face hub id (meta-llama/Llama-3.1-8B), in any case "
          "(python -m pycore models)", (), "a common 8B model", "model"),
    Field("config", "text", None, "a Hugging Face config.json: a path on the command line, or the file's own text "
          "(a link carries it for an imported model no preset with overrides expresses); replaces model",
          "a readable JSON file (command line), or a config.json's text of up to 20,000 characters", (), "", "model",
          longest=20_000),
    Field("name", "text", None, "what the model is called in the results (an imported config's own name); "
          "changes no byte", "up to 200 characters; shown as text, at most 80 of them", (), "", "model"),
    _int("layers", None, "transformer layers (num_hidden_layers); " + ARCH_HINT, "model", span=(1, 10_000)),
    _int("hidden", None, "hidden size (hidden_size); " + ARCH_HINT, "model"),
    _int("heads", None, "attention heads (num_attention_heads); " + ARCH_HINT, "model", span=(1, 100_000)),
    _int("kv_heads", None, "key/value heads (num_key_value_heads): heads for MHA, 1 for MQA; " + ARCH_HINT,
         "model", span=(1, 100_000)),
    _int("head_dim", None, "size of one attention head; default hidden / heads", "model"),
    _int("ffn", None, "MLP intermediate size (intermediate_size), per expert for MoE; " + ARCH_HINT, "model",
         span=(1, 10_000_000)),
    _int("vocab", None, "vocabulary size (vocab_size); " + ARCH_HINT, "model", span=(1, 10_000_000)),
    _int("experts", None, "routed experts per layer (0 = dense); " + ARCH_HINT, "model",
         span=(0, 100_000)),
    _int("experts_per_token", None, "experts each token is routed to; " + ARCH_HINT, "model",
         span=(0, 100_000)),
    _int("expert_ffn", None, "intermediate size of one routed expert (moe_intermediate_size); " + ARCH_HINT,
         "model", span=(1, 10_000_000)),
    _int("max_positions", None, "maximum positions (max_position_embeddings): caps every sequence answer; "
         "learned position tables (GPT-2, BERT) count toward the parameters; " + ARCH_HINT, "model",
         span=(1, 100_000_000)),
    _choice("head", None, ("causal-lm", "masked-lm", "classification", "none"),
            "task head: causal-lm (next-token logits over the vocabulary), masked-lm (BERT's MLM head), "
            "classification (num_labels logits: *ForSequenceClassification), none (the base model)", "model",
            "the preset's own class (config.json architectures)"),
    _int("num_labels", 2, "labels of a classification head", "model", "transformers PretrainedConfig default (2)",
         span=(1, 1_000_000)),
    _choice("tied", None, ("yes", "no"), "output head shares the embedding matrix (tie_word_embeddings); "
            + ARCH_HINT, "model"),
    Field("params", "count", None, "parameter count of a generic network (used when no transformer is given)",
          "a count such as 7B, 350M, 7e9 or 7000000000", (), "", "model", "parameters", 1, 10**14),
    Field("weight_bytes", "size", 0, "the weights' exact bytes, read from a checkpoint's headers (python -m pycore "
          "header=PATH, or the page's Read the checkpoint): replace the estimate from parameters and bits per weight, "
          "this GPU holding its tensor/pipeline share; 0 estimates them from the parameters",
          "a number of bytes (or a size such as 16GiB)", (), "estimated from the parameters", "model", "bytes", 0,
          MOST_BYTES),
    Field("weight_files", "text", None, "the checkpoint files weight_bytes was read from, named in its source; "
          "changes no byte", "up to 200 characters; shown as text", (), "", "model"),
    _choice("mode", "train", ("train", "infer"), "a training step, or serving with generate()", "workload"),
    _int("batch", 1, "micro-batch size per GPU (sequences)", "workload", unit="sequences"),
    _int("seq", 2048, "sequence length in tokens (the prompt when serving and under method=grpo and ppo)", "workload",
         "Llama 3 pre-training context", span=(1, 100_000_000), unit="tokens"),
    _choice("engine", "hf", ("hf", "vllm"), "serving engine: hf (transformers generate(), memory grows with "
            "the batch) or vllm (pre-allocates gpu_util of the GPU and gives the rest to the KV cache)", "workload"),
    _choice("scan_kernels", "reference", ("reference", "fused"), "a hybrid's Mamba / DeltaNet / short-convolution "
            "layers: reference (transformers' torch scans, what runs without mamba_ssm, causal_conv1d or "
            "flash-linear-attention installed; measured) or fused (those packages' kernels: gated DeltaNet's measured "
            "with flash-linear-attention on an H200, Mamba-2's and causal_conv1d's from their source)", "workload",
            "the path measured (validation/measure_hybrid.py)"),
    _choice("speculative", "none", ("none", "mtp", "draft"), "vLLM speculative decoding: mtp loads the checkpoint's "
            "multi-token-prediction layers (DeepSeek-V3, GLM-4.5) beside the model, with their own KV cache; draft "
            "loads draft_model, a smaller model of the same vocabulary, with its own weights and KV cache",
            "workload", "vLLM's default: no speculative_config"),
    Field("draft_model", "text", None, "speculative=draft: the draft model, a preset, alias or hub id (as model=), "
          "or on the command line a path to its config.json, split over the same tensor-parallel GPUs; its vocabulary "
          "must be the target's", "a preset, alias or hub id, or (command line) a path to a config.json", (),
          "vllm/v1/spec_decode/draft_model.py (vLLM main, 2026: DraftModelProposer)", "workload"),
    Field("gpu_util", "float", 0.9, "vLLM gpu_memory_utilization: the share of the GPU vLLM may use",
          "a number from 0.05 to 1", (), "vLLM's default (EngineArgs.gpu_memory_utilization)", "workload", "",
          0.05, 1),
    _int("max_batched_tokens", 8192, "vLLM max_num_batched_tokens: tokens in its profiling run", "workload",
         "vLLM V1's default for the LLM class (EngineArgs)", span=(1, 10_000_000),
         unit="tokens"),
    _int("max_num_seqs", None, "vLLM max_num_seqs: sequences in one step, whose fp32 logits its sampler warm-up "
         "holds; empty: vLLM's default", "workload", "vLLM 0.11 vllm/engine/arg_utils.py _set_default_args_v1: 1,024 "
         "on GPUs of 70 GiB or more other than the A100, else 256", span=(1, 100_000), unit="sequences"),
    _choice("compare", "off", ("off", "baseline", "serving"), "compare with fp32 and no memory savers, or with "
            "serving the same model; base.KEY=VALUE changes any baseline input", "workload"),
    _choice("mm_profiling", "auto", ("auto", "image", "off"), "vLLM's start-up profiling of a vision-language "
            "model's encoder, which the KV cache is sized after: auto profiles the input with the most tokens (for "
            "Qwen2.5-VL a video of up to 14 frames once max_model_len holds two images' tokens, 32,768; for InternVL "
            "a video of a 448² frame every 256 tokens of max_model_len from 6,656), "
            "image the largest image alone (--limit-mm-per-prompt with \"video\": 0; several of them, padded to the "
            "encoder budget, can weigh more than the video), off nothing "
            "(--skip-mm-profiling)", "workload", "vLLM 0.11's defaults: limit_mm_per_prompt 999 a modality, "
            "skip_mm_profiling off (vllm/config/multimodal.py)"),
    _int("new_tokens", 256, "tokens generated per sequence when serving", "workload", span=(0, 100_000_000), unit="tokens"),
    _int("images", 0, "images per sequence, for a vision-language model whose vision tower pycore counts "
         "(Qwen2.5-VL, Qwen3.5, Gemma 3, Llama 4, LFM2-VL, LLaVA-1.5, InternVL): each adds the tokens its size becomes "
         "to the sequence, with the markers around them",
         "workload", span=(0, 1_000), unit="images"),
    Field("image_size", "text", "1280x720", "width x height of each image in pixels, resized as the model's "
          "processor does (Qwen2.5-VL: smart_resize to 28-pixel tiles within 3,136 to 12,845,056 pixels, its "
          "checkpoint's preprocessor_config.json; Gemma 3: 896²; Llama 4: a canvas of up to 16 tiles of 336 pixels; "
          "LFM2-VL: 512-pixel tiles and a thumbnail; LLaVA-1.5: 336²; InternVL: 1 to 12 tiles of 448 pixels and a "
          "thumbnail)",
          "width x height in pixels, such as 1280x720", (), "a 720p frame", "workload"),
    _choice("precision", "auto", PRECISIONS,
            "precision policy: auto (training: as the framework does, the Trainer in the checkpoint's dtype; serving: "
            "the checkpoint's own dtype); fp32; amp-* autocast "
            "with fp32 weights; *-master 16-bit weights with fp32 master and optimizer; bf16/fp16 everything 16-bit; "
            "fsdp2-bf16 FSDP2's MixedPrecisionPolicy (fp32 shards, each layer gathered and computed in bf16)",
            "precision", "training: the framework's; the Hugging Face Trainer trains in the checkpoint's dtype: pure "
            "bf16 for a bf16 checkpoint (weights, gradients and AdamW states in bf16, about 8 bytes of model states "
            "per parameter; bf16-master keeps fp32 master weights and states, 16), fp32 for an fp32 one; method=dpo, grpo: "
            "TRL's, which loads a model named to it in fp32 and autocasts to bf16 (amp-bf16); serving: "
            "the checkpoint's torch_dtype, as transformers 5 and vLLM load it",
            " | ".join(PRECISIONS) + " (or Lightning's 32-true, bf16-mixed, 16-mixed, bf16-true, 16-true)"),
    _dtype("weight_dtype", "dtype of the weights the model computes with"),
    _dtype("grad_dtype", "dtype of the gradients"),
    _dtype("master_dtype", "dtype of master weights kept by the optimizer (none = no master copy)"),
    _dtype("opt_dtype", "dtype of the optimizer state"),
    _dtype("act_dtype", "dtype of the activations saved for backward"),
    _dtype("kv_dtype", "dtype of the KV cache when serving"),
    _choice("optimizer", "adamw", OPTIMIZERS, "optimizer, which sets the state kept per parameter", "precision",
            "the usual choice for transformers"),
    _choice("optimizer_impl", "auto", ("auto", "fused", "foreach", "for-loop"),
            "optimizer kernel: auto (as the framework does), fused (one kernel, no temporaries), foreach "
            "(PyTorch's default on CUDA: one state-sized temporary for all parameters at once), for-loop (one "
            "parameter at a time)", "precision", "the framework's (pycore/inputs/frameworks.py)"),
    _choice("framework", "hf-trainer", ("hf-trainer", "pytorch", "accelerate", "lightning", "torchtune",
                                        "torchtitan", "megatron", "deepspeed", "axolotl"),
            "training framework whose defaults fill every input left at auto: precision, optimizer kernel, "
            "attention, recomputation, loss chunks", "precision",
            "the Hugging Face Trainer, transformers 5.23 (pycore/inputs/frameworks.py cites each default)"),
    _choice("method", "full", ("full", "lora", "qlora", "dpo", "dpo-lora", "dpo-qlora", "kto", "kto-lora", "kto-qlora",
                               "grpo", "grpo-lora", "reward", "reward-lora", "ppo", "ppo-lora", "distill", "distill-lora"),
            "what is trained: every weight, LoRA adapters, or LoRA adapters on an NF4-quantized base (QLoRA); dpo*, "
            "kto*, grpo* and reward*: one step of TRL's DPOTrainer (batch counts pairs), KTOTrainer (batch counts unpaired "
            "examples, each scored beside a KL row), GRPOTrainer (a rollout, then the "
            "update; batch counts completions, seq is the prompt) or RewardTrainer (a one-label score head; batch "
            "counts pairs), the policy trained as full, lora or qlora; ppo*: TRL 0.25.1's PPOTrainer (a rollout, the "
            "reference, value and reward models' passes, then the PPO epochs over the policy and its value model; batch "
            "counts responses, seq is the prompt); distill*: TRL's DistillationTrainer (the "
            "student's rollout, then its update against a frozen teacher's distribution; batch counts prompts, seq is "
            "the prompt)", "finetune",
            "plain fine-tuning; dpo, kto, grpo and reward follow TRL 1.16's DPOTrainer, KTOTrainer, GRPOTrainer and "
            "RewardTrainer "
            "(pycore/memory/posttraining.py, pycore/memory/rollout.py)"),
    _choice("ref_model", "auto", ("auto", "none", "precomputed"),
            "DPO's and KTO's reference model: auto (a frozen copy of the model for a full policy, the base with its "
            "adapters disabled for a LoRA policy), none (DPO's reference-free losses: SimPO, ORPO), precomputed "
            "(precompute_ref_log_probs=True: log-probs computed before training, no reference held)", "finetune",
            "TRL 1.16 DPOTrainer.__init__ and KTOTrainer.__init__: ref_model None creates one unless the policy is a PEFT model or "
            "precompute_ref_log_probs (DPOConfig default False)"),
    _choice("trl_head", "fused", ("fused", "full"),
            "DPO, GRPO: how the TRL release computes the log-probs: fused (TRL 1.15.0 and later: add_fused_lm_head's "
            "chunked head, the logits never whole) or full (TRL 1.14.2 and earlier: the model's lm_head returns the "
            "logits of the policy and of the reference, DPO's [2 × pairs, seq, vocab], GRPO's [batch, "
            "max_completion_length + 1, vocab], the policy's held until backward; fp32 under autocast)",
            "finetune", "TRL 1.16.0 (fused): DPOTrainer.__init__ and GRPOTrainer.__init__ call "
            "trl.trainer.utils.add_fused_lm_head, added in 1.15.0; TRL 1.14.2 (full): dpo_trainer.py L1366-1370 "
            "(outputs.logits) and L1430-1434 (ref_outputs.logits); grpo_trainer.py L1562-1590 (_full_logits_logps: "
            "logits_to_keep = completion + 1)"),
    _int("num_generations", 8, "GRPO: completions sampled per prompt; the generation batch (batch × dp × "
         "micro-batches) holds whole groups of them. Per GPU the memory follows batch, which counts completions",
         "finetune", "TRL 1.16 GRPOConfig.num_generations default 8 (trl/trainer/grpo_config.py L480-481)",
         span=(2, 100_000), unit="completions"),
    _int("max_completion_length", 512, "GRPO and distill: tokens generated per completion; the rollout's KV cache and "
         "the policy's update run over seq (the prompt) + this", "finetune",
         "TRL 1.16 GRPOConfig.max_completion_length default 512 (trl/trainer/grpo_config.py L494-495); "
         "DistillationConfig.max_completion_length default 512 (trl/trainer/distillation_config.py L223-226)",
         span=(1, 100_000_000), unit="tokens"),
    Field("beta", "float", 0.0, "GRPO: the KL coefficient; beta > 0 brings a reference model (a frozen copy for a "
          "full policy, the base with its adapters disabled for a LoRA one) and its log-prob pass; 0 holds none",
          "a number from 0 to 1,000", (), "TRL 1.16 GRPOConfig.beta default 0.0 (trl/trainer/grpo_config.py "
          "L681-682; GRPOTrainer.__init__ creates no ref_model when beta == 0.0)", "finetune", "", 0, 1000),
    _choice("rollout", "generate", ("generate", "vllm-colocate", "vllm-server"),
            "GRPO and distill: what generates the completions: generate (transformers generate() on the policy), "
            "vllm-colocate (a "
            "vLLM engine in each training process, on the same GPU, taking vllm_gpu_memory_utilization of it), "
            "vllm-server (trl vllm-serve on GPUs of its own: nothing of it on the training GPUs); under vLLM the policy "
            "also scores the completions before its update (importance sampling; GRPO only)", "finetune",
            "TRL 1.16 GRPOConfig.use_vllm default False (trl/trainer/grpo_config.py L587-588); vllm_mode default "
            "colocate (L594-595); DistillationConfig the same (trl/trainer/distillation_config.py L301-308)"),
    Field("vllm_gpu_memory_utilization", "float", 0.3, "GRPO with rollout=vllm-colocate: the share of the GPU the "
          "colocated vLLM engine takes for its weights, KV cache and activations", "a number from 0.05 to 1", (),
          "TRL 1.16 GRPOConfig.vllm_gpu_memory_utilization default 0.3 (trl/trainer/grpo_config.py L656-657)",
          "finetune", "", 0.05, 1),
    _choice("vllm_enable_sleep_mode", "no", ("no", "yes"), "GRPO with rollout=vllm-colocate: yes puts the engine to "
            "sleep (level 2: its weights and KV cache freed) after each generation, so the update does not hold it",
            "finetune", "TRL 1.16 GRPOConfig.vllm_enable_sleep_mode default False (trl/trainer/grpo_config.py "
            "L612-613)"),
    _int("response_length", 53, "PPO: tokens generated per response (no stop token: every response runs to the "
         "limit); the rollout's scores, the scoring passes and the update run over seq (the prompt) + this", "finetune",
         "TRL 0.25.1 OnPolicyConfig.response_length default 53 (trl/trainer/utils.py L887-890)",
         span=(1, 100_000_000), unit="tokens"),
    _int("local_rollout_forward_batch_size", 64, "PPO: rows the rollout generates and scores at a time; generate()'s "
         "KV cache and the reference, value and reward passes hold this many rows", "finetune",
         "TRL 0.25.1 OnPolicyConfig.local_rollout_forward_batch_size default 64 (trl/trainer/utils.py L877-880)",
         span=(1, 1_000_000), unit="sequences"),
    Field("reward_model", "text", "auto", "PPO: the reward model: auto (the policy's architecture), or a preset id, "
          "alias or hub id; on the command line a path to its config.json. Its backbone with a one-output score head, "
          "frozen, scoring the policy's token ids", "auto, a preset id, an alias or a hub id (python -m pycore models), "
          "or a path to a config.json", (), "TRL 0.25.1 PPOTrainer's reward_model (trl/trainer/ppo_trainer.py L189); "
          "PPOConfig.reward_model_path (trl/trainer/ppo_config.py L75-78), loaded as AutoModelForSequenceClassification "
          "with num_labels=1 by trl/examples/scripts/ppo/ppo.py; pycore's default is the policy's architecture",
          "finetune"),
    Field("value_model", "text", "auto", "PPO: the value model, trained with the policy: auto (the reward model's "
          "architecture, as TRL's example loads both from reward_model_path), or a preset id, alias or hub id; on the "
          "command line a path to its config.json", "auto, a preset id, an alias or a hub id (python -m pycore models), "
          "or a path to a config.json", (), "TRL 0.25.1 PPOTrainer's value_model (trl/trainer/ppo_trainer.py L191); "
          "trl/examples/scripts/ppo/ppo.py loads it from reward_model_path, as the reward model", "finetune"),
    _int("num_mini_batches", 1, "PPO: mini-batches an update's rows (batch × micro-batches) are split into; with "
         "fewer mini-batches than micro-batches a later micro-batch runs beside the previous one's logits", "finetune",
         "TRL 0.25.1 OnPolicyConfig.num_mini_batches default 1 (trl/trainer/utils.py L869-872)", span=(1, 1_000_000)),
    _int("vllm_tensor_parallel_size", 1, "GRPO and distill with rollout=vllm-colocate: GPUs one colocated engine "
         "spans, its weights and KV cache split across them (it must divide the training processes)", "finetune",
         "TRL 1.16 GRPOConfig.vllm_tensor_parallel_size default 1 (trl/trainer/grpo_config.py L671-676); "
         "DistillationConfig the same (distillation_config.py L353-356)", span=(1, 64), unit="GPUs"),
    _int("vllm_max_model_length", None, "GRPO and distill with rollout=vllm-colocate: the engine's max_model_len; "
         "empty: the model's positions, which vLLM refuses to start with when one such request does not fit its KV "
         "cache (set it to seq + max_completion_length)", "finetune",
         "TRL 1.16 GRPOConfig.vllm_max_model_length default None (trl/trainer/grpo_config.py L664-670); "
         "DistillationConfig the same (distillation_config.py L349-352)", span=(1, 100_000_000), unit="tokens"),
    Field("teacher", "text", "auto", "distill: the teacher model: auto (the student's own architecture, as when a "
          "larger checkpoint of the same shape is not given), or a preset id, alias or hub id; on the command line a "
          "path to its config.json. It must share the student's vocabulary",
          "auto, a preset id, an alias or a hub id (python -m pycore models), or a path to a config.json", (),
          "TRL 1.16 DistillationTrainer's teacher_model (trl/trainer/distillation_trainer.py L253-257: a model id "
          "or a model; L694-702 refuses another vocab_size); pycore's default is the student's architecture",
          "finetune"),
    _choice("teacher_dtype", "auto", ("auto", "bf16", "fp16", "fp32"), "distill: the dtype the teacher is loaded "
            "in: auto (its checkpoint's own dtype: a preset's; bf16 for a config.json, whose dtype pycore does not "
            "read), or teacher_model_init_kwargs' dtype", "finetune",
            "TRL 1.16 DistillationConfig.teacher_model_init_kwargs default None (trl/trainer/distillation_config.py "
            "L202-207), so DistillationTrainer.__init__ passes dtype=None (distillation_trainer.py L611-612), which "
            "transformers 5 reads as 'auto' (modeling_utils.py from_pretrained: the checkpoint's dtype), whatever the "
            "student's"),
    _int("lora_rank", 16, "LoRA rank r: each adapted layer gains r·(in + out) parameters", "finetune",
         "PEFT LoraConfig default (r=8) doubled, as common recipes use"),
    _choice("lora_targets", "qv", ("qv", "attention", "all-linear"), "which linear layers carry adapters: q and v "
            "projections, all attention projections, or every linear layer", "finetune",
            "PEFT's default target modules for Llama (q_proj, v_proj)"),
    _choice("lora_dtype", "fp32", ("fp32", "bf16", "fp16"), "dtype of the adapters, their gradients and states",
            "finetune", "PEFT upcasts 16-bit adapters to fp32 (autocast_adapter_dtype=True)"),
    _choice("lora_variant", "lora", ("lora", "dora"), "PEFT's adapter: lora, or dora (use_dora=True): a trained "
            "magnitude per output of each adapted layer, which keeps the base layer's and lora_B's outputs for "
            "backward and builds each adapted weight's column norm in its forward", "finetune",
            "PEFT LoraConfig's default (use_dora=False)"),
    Field("lora_dropout", "float", 0.0, "dropout on each adapter's input: a 1-byte mask per adapted layer, and lora_A "
          "keeps the dropped copy", "a number from 0 to 1", (), "PEFT LoraConfig's default (lora_dropout=0.0)",
          "finetune", "", 0, 1),
    _choice("quant", "none", ("none", "int8", "fp8", "fp8-channel", "gptq-int4", "awq-int4", "nf4", "nf4-dq",
                              "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0", "q3_k_m", "q2_k"),
            "quantized weight storage (qlora defaults to nf4-dq); bits per weight in the formulas", "finetune"),
    _int("group_size", 128, "weights per scale for GPTQ/AWQ", "finetune", "GPTQ and AWQ default"),
    _choice("recompute", "auto", ("auto", "none", "selective", "full", "op", "layer"),
            "activation recomputation: auto (as the framework does), none, selective (Megatron's: the attention "
            "core only), full (every layer), op (torchtitan's selective by op: every other matmul's output and "
            "the attention output kept), layer (torchtitan's selective by layer: every 2nd layer checkpointed)",
            "savers", "the framework's: off except torchtune (full) and torchtitan (op)"),
    _choice("attention", "auto", ("auto", "flash", "flash-repeat", "eager"),
            "auto (as the framework does; under transformers SDPA, whose math kernel keeps the scores for "
            "grouped-query heads in fp32 on CUDA, and eager for Gemma 2 and gpt-oss); flash: fused kernel (SDPA / "
            "FlashAttention) that never stores the s×s scores and keeps grouped-query K/V per kv head; "
            "flash-repeat: the same with K/V expanded to every head first (a padding mask, CPU, torchtune); "
            "eager: stores the scores", "savers",
            "every framework's default is SDPA or FlashAttention; transformers 5.24 has none for Gemma 2 or gpt-oss"),
    _int("loss_chunks", None, "compute the output head and cross-entropy in this many sequence chunks, as "
         "torchtune's CEWithChunkedOutputLoss (8) does; 1 = transformers' loss; default: the framework's",
         "savers", span=(1, 100_000)),
    _choice("activations", "detailed", ("detailed", "korthikanti", "multiplier", "per-sample"),
            "activation model: detailed (ours), korthikanti (2022 paper), multiplier, per-sample", "savers"),
    Field("act_multiplier", "float", 17.0, "multiplier model: bytes = batch·seq·hidden·layers·this·act bytes",
          "a number from 0 to 10,000", (), "Korthikanti et al. 2022: 34 bytes per s·b·h at 16 bit = 17 × 2 bytes", "savers", "", 0, 10_000),
    Field("act_per_sample", "size", 0, "per-sample model: activation bytes of one sample",
          "a size such as 0.215GiB, 512MiB or a number of bytes", (), "", "savers", "bytes", 0, MOST_BYTES),
    Field("overhead", "overhead", None, "runtime overhead on top of the peak of live tensors; default: modelled as "
          "the allocator's cache, the CUDA context and NCCL buffers (pycore/memory/device.py)",
          "a size (2GiB, 800MiB) or a percent of the peak (10%)", (), "pycore/memory/device.py", "hardware", ""),
    _choice("expandable_segments", "no", ("no", "yes"), "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: "
            "the caching allocator grows segments in place and strands far less memory", "hardware",
            "PyTorch's default (off); torchtitan's run_train.sh turns it on"),
    _choice("cuda_modules", "lazy", ("lazy", "eager"), "CUDA_MODULE_LOADING: lazy loads each kernel when first "
            "used (PyTorch 2.0 on, with CUDA 11.7 or later); eager loads every kernel at start-up (PyTorch 1.x, "
            "or CUDA before 11.7), a larger CUDA context", "hardware",
            "PyTorch sets LAZY unless the variable is set (aten/src/ATen/cuda/detail/CUDAHooks.cpp)"),
    _choice("cublas_workspace", "auto", ("auto", ":4096:8", ":16:8", ":0:0"), "CUBLAS_WORKSPACE_CONFIG: the workspace "
            "PyTorch gives each thread's cuBLAS (hipBLAS) handle from its allocator, counted in the peak; auto is "
            "PyTorch's default for the GPU (32 MiB on Hopper, 8 MiB + 128 KiB on other NVIDIA GPUs, 32 or 128 MiB on "
            "AMD); :4096:8 and :16:8 are what deterministic algorithms ask for; :0:0 none (as a CPU measurement)",
            "hardware", "PyTorch's default when the variable is unset (aten/src/ATen/cuda/CublasHandlePool.cpp)"),
    _int("dp", 1, "data-parallel degree (replicas, or ZeRO/FSDP shards)", "parallel"),
    _choice("grad_sync", "auto", ("auto", "every", "last"), "gradient sync with several micro-batches: auto (as the "
            "framework does), every micro-batch (sharded gradients stay sharded), or only the last (no_sync before "
            "it: under FSDP every gradient stays unsharded until then)", "parallel",
            "the Trainer and Accelerate: last (sync_each_batch=False); others: every"),
    _int("tp", 1, "tensor-parallel degree (Megatron-style, within a node)", "parallel", span=(1, 1024)),
    _int("pp", 1, "pipeline-parallel stages", "parallel", span=(1, 1024)),
    _int("cp", 1, "context-parallel degree (the sequence split across GPUs)", "parallel", span=(1, 1024)),
    _int("ep", 1, "expert-parallel degree (routed experts split across GPUs)", "parallel", span=(1, 100_000)),
    _choice("zero", "0", ("0", "1", "2", "3"), "ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also "
            "weights, over dp × cp", "parallel", "DeepSpeed's default"),
    _choice("fsdp", "none", ("none", "NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD", "HYBRID_SHARD"),
            "PyTorch FSDP sharding strategy; sets the ZeRO stage (0, 2, 3, 3 within shard_group)", "parallel"),
    _int("shard_group", None, "HYBRID_SHARD: GPUs one shard spans (default min(dp × cp, 8), a node)",
         "parallel"),
    _choice("sp", "no", ("no", "yes"), "sequence parallelism with tensor parallelism (Korthikanti et al. 2022)",
            "parallel"),
    _int("microbatches", 1, "micro-batches per optimizer step (gradient accumulation; pipeline micro-batches)",
         "parallel"),
    _int("interleave", 1, "virtual pipeline stages per GPU (interleaved 1F1B)", "parallel", span=(1, 128)),
    _choice("offload", "none", ("none", "optimizer", "params"), "keep optimizer state (and with params, the "
            "weights) in CPU memory, as ZeRO-Offload and FSDP CPU offload do", "parallel"),
    _int("gpus", None, "GPUs you have (for time and cost); default: the layout's dp × tp × pp × cp", "hardware",
         span=(1, 10_000_000)),
    Field("train_tokens", "count", 0, "tokens to train on, for time and cost (such as 1T or 15e12); gives the "
          "hours from the throughput (give it or train_hours, not both)",
          "a count such as 2B, 1T or 15e12", (), "", "hardware", "tokens", 0, 10**17),
    Field("train_hours", "float", 0, "hours of training you have, for the tokens they train and the cost; gives "
          "the tokens from the throughput (give it or train_tokens, not both)", "a number of hours from 0 to "
          "1,000,000", (), "", "hardware", "hours", 0, 1_000_000),
    Field("mfu", "float", 0.4, "model FLOPs utilisation you expect (0-1)", "a number from 0.001 to 1", (),
          "typical large-model training reaches 0.35-0.45 (Chowdhery et al. 2022, PaLM: 0.46)", "hardware", "",
          0.001, 1),
    Field("price", "float", None, "$ per GPU-hour; default: the catalog's on-demand price",
          "a number of dollars", (), "presets/gpus.json", "hardware", "$/GPU-h", 0, 10_000),
    Field("gpu", "text", "h100-sxm-80gb", "GPU for fit, count and cost", "a GPU id (python -m pycore gpus)",
          (), "the most rented training GPU", "hardware"),
)
BY_KEY = {f.key: f for f in FIELDS}

# Short labels for the form; the meaning above is the hint under each field.
LABELS = {
    "model": "Model preset", "config": "config.json path", "name": "Model name",
    "weight_bytes": "Weight bytes (checkpoint)", "weight_files": "Checkpoint files", "layers": "Layers", "hidden": "Hidden size",
    "heads": "Attention heads", "kv_heads": "KV heads", "head_dim": "Head dim", "ffn": "FFN size",
    "vocab": "Vocabulary", "experts": "Experts", "experts_per_token": "Experts per token",
    "expert_ffn": "Expert FFN size", "max_positions": "Max positions", "head": "Task head", "num_labels": "Labels",
    "tied": "Tied embeddings",
    "params": "Parameters (generic network)", "mode": "Workload", "batch": "Micro-batch per GPU",
    "seq": "Sequence length", "new_tokens": "New tokens", "images": "Images per sequence", "image_size": "Image size",
    "precision": "Precision policy",
    "weight_dtype": "Weights dtype", "grad_dtype": "Gradients dtype", "master_dtype": "Master weights dtype",
    "opt_dtype": "Optimizer state dtype", "act_dtype": "Activations dtype", "kv_dtype": "KV cache dtype",
    "optimizer": "Optimizer", "recompute": "Activation recomputation", "attention": "Attention kernel",
    "activations": "Activation model", "act_multiplier": "Activation multiplier",
    "compare": "Compare with", "engine": "Serving engine", "speculative": "Speculative decoding (vLLM)",
    "draft_model": "Draft model (vLLM)",
    "scan_kernels": "Scan kernels (hybrids)", "mm_profiling": "Encoder profiling (vLLM)",
    "gpu_util": "GPU memory utilisation (vLLM)",
    "max_batched_tokens": "Max batched tokens (vLLM)", "max_num_seqs": "Max sequences a step (vLLM)",
    "optimizer_impl": "Optimizer kernel", "framework": "Framework",
    "loss_chunks": "Loss chunks", "method": "Training method", "lora_rank": "LoRA rank", "lora_targets": "LoRA targets",
    "ref_model": "Reference model", "trl_head": "Log-prob head (TRL release)", "num_generations": "Generations per prompt (GRPO)",
    "max_completion_length": "Completion length (GRPO)", "beta": "KL coefficient beta (GRPO)",
    "response_length": "Response length (PPO)", "local_rollout_forward_batch_size": "Rollout rows at a time (PPO)",
    "num_mini_batches": "Mini-batches (PPO)", "reward_model": "Reward model (PPO)", "value_model": "Value model (PPO)",
    "rollout": "Rollout engine (GRPO)", "vllm_gpu_memory_utilization": "vLLM GPU memory share (GRPO)",
    "vllm_enable_sleep_mode": "vLLM sleep mode (GRPO)",
    "vllm_tensor_parallel_size": "vLLM tensor-parallel GPUs (GRPO, distill)",
    "vllm_max_model_length": "vLLM max model length (GRPO, distill)",
    "teacher": "Teacher model (distill)",
    "teacher_dtype": "Teacher dtype (distill)",
    "lora_dtype": "Adapter dtype", "lora_dropout": "LoRA dropout", "lora_variant": "LoRA variant (DoRA)",
    "quant": "Weight quantization", "group_size": "Quantization group size",
    "dp": "Data parallel (dp)", "tp": "Tensor parallel (tp)", "pp": "Pipeline stages (pp)",
    "cp": "Context parallel (cp)", "ep": "Expert parallel (ep)", "zero": "ZeRO stage", "fsdp": "FSDP strategy",
    "shard_group": "Shard group", "sp": "Sequence parallel", "microbatches": "Micro-batches per step",
    "interleave": "Interleaved stages", "offload": "CPU offload", "gpus": "GPUs available",
    "train_tokens": "Tokens to train", "train_hours": "Hours to train", "mfu": "MFU", "price": "Price",
    "act_per_sample": "Activation bytes per sample", "overhead": "Runtime overhead", "gpu": "GPU",
    "expandable_segments": "Expandable segments", "grad_sync": "Gradient sync", "cuda_modules": "CUDA module loading",
    "cublas_workspace": "cuBLAS workspace",
}
GROUPS = (("model", "Model"), ("workload", "Workload"), ("precision", "Precision and optimizer"),
          ("savers", "Memory savers"), ("finetune", "Fine-tuning and quantization"), ("parallel", "Parallelism"),
          ("hardware", "Hardware and cost"))
DEFAULTS = {f.key: f.default for f in FIELDS}


@overload
def parse(raw: "Mapping[str, object]", strict: Literal[True] = True) -> Values: ...
@overload
def parse(raw: "Mapping[str, object]", strict: Literal[False]) -> "tuple[Values, Errors]": ...
@overload
def parse(raw: "Mapping[str, object]", strict: bool) -> "Values | tuple[Values, Errors]": ...


def parse(raw: "Mapping[str, object]", strict: bool = True) -> "Values | tuple[Values, Errors]":
    """Typed values for a mapping of key -> string, with defaults filled in.

    Args:
        raw: key -> value strings (URL query, command line, CSV row).
        strict: raise InputError on the first bad key or value; otherwise skip it.
    Returns:
        (values, errors) when not strict, else values. ``errors`` maps key -> message.
    """
    values: Values = dict(DEFAULTS)
    errors: Errors = {}
    for key, text in raw.items():
        field = BY_KEY.get(key)
        try:
            if field is None:
                raise InputError(key, f"unknown key; accepted keys are {', '.join(BY_KEY)}")
            values[key] = field.parse(text)
            _check_either(values, key, list(raw))
        except InputError as error:
            if strict:
                raise
            errors[key] = str(error)
            if key in BY_KEY:
                values[key] = DEFAULTS[key]
    return values if strict else (values, errors)


# Inputs that say one thing two ways: either gives the other (the training time and the tokens it trains, from
# the throughput: pycore.answers.answer), so giving both would say it twice, perhaps differently.
EITHER = (("train_tokens", "train_hours"),)


def _check_either(values: Values, key: str, given: "list[str]") -> None:
    """InputError under the later of a pair of EITHER inputs when both are given (not at their defaults)."""
    for pair in EITHER:
        if key in pair:
            other = pair[1 - pair.index(key)]
            if other in given and values[other] != DEFAULTS[other] and values[key] != DEFAULTS[key]:
                raise InputError(key, f"give {pair[0]} or {pair[1]}, not both: either gives the other from the "
                                      "throughput")


def to_query(values: "Mapping[str, object]") -> "list[tuple[str, str]]":
    """The non-default inputs as ordered (key, text) pairs, the form used by URL, CLI and CSV."""
    pairs = []
    for field in FIELDS:
        value = values.get(field.key, field.default)
        if value is None or value == field.default:
            continue
        pairs.append((field.key, format_value(field, value)))
    return pairs


def format_value(field: Field, value: object) -> str:
    """The text that parses back to ``value`` (the form used by URL, CLI, CSV and docs/inputs.md)."""
    if field.kind == "overhead":
        return _overhead_text(cast(Overhead, value))     # the only kind that parses to a pair
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _overhead_text(value: Overhead) -> str:
    """A percent as typed; bytes in whole GiB or MiB where they are one."""
    kind, amount = value
    if kind == "percent":
        return f"{amount:g}%"
    for unit, scale in (("GiB", GIB), ("MiB", MIB)):
        if amount and amount % scale == 0:
            return f"{amount // scale}{unit}"
    return str(amount)


def markdown_table() -> str:
    """The documentation table of every key (docs/inputs.md)."""
    lines = ["# Inputs", "",
             "Generated by `python -m pycore schema` from `pycore/inputs/schema.py`; do not edit by hand.",
             "The same keys are the page's URL query, the command line's `KEY=VALUE` arguments and the CSV's",
             "input rows.", "",
             "| key | meaning | accepts | default | why that default |", "|---|---|---|---|---|"]
    for f in FIELDS:
        default = "—" if f.default is None else format_value(f, f.default)
        if f.kind == "dtype":
            default = "from precision"
        lines.append(f"| `{f.key}` | {f.meaning} | {f.accepts} | {default} | {f.default_source} |")
    return "\n".join(lines) + "\n"
