"""Architectures from Hugging Face ``config.json`` files.

Every number read from a config is checked for type and a plausible range before it is used, and every
problem is reported as one message naming the config field (``InputError("config", ...)``). A config whose
``model_type`` is not known but has the standard keys is read as a Llama-style decoder, with a warning.
"""

import json
import math
import re
from dataclasses import replace
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from pycore.base.errors import InputError
from pycore.model.architecture import Architecture
from pycore.model.hf_layers import READERS, TOWERS, TowerNotCounted, prepare

Config = dict[str, Any]     # a parsed config.json: JSON, its values of every type
Fields = dict[str, int]     # Architecture field -> a whole number read from the config (layers, hidden, ...)
Traits = dict[str, Any]     # Architecture field -> what a family fixes or a config flag sets (biases, norms, ...)

MAX_BYTES = 2_000_000       # a real config.json is a few KB (DeepSeek-V3's: 1.7 KB); 2 MB leaves room for comments
MAX_DEPTH = 64              # real configs nest 3 levels (quantization_config.config_groups...); json.loads recurses
MAX_DIGITS = 40             # no architecture number needs more; Python refuses ints over 4,300 digits anyway

GEMMA: Traits = {"activation": "gelu_tanh", "norm_weight_fp32": True}
BIASED: Traits = {"qkv_bias": True, "out_bias": True, "mlp_bias": True}
LAYERNORM_PLAIN: Traits = {"norm": "layernorm", "mlp": "plain"}
SOFTMAX_16: Traits = {"softmax_fp32": False}   # eager attention's softmax stays in the scores' dtype (GPT-2, Falcon, gpt-oss)

# model_type -> (transformers class, fields that differ from the Llama defaults)
FAMILIES: "dict[str, tuple[str, Traits]]" = {
    "llama": ("LlamaForCausalLM", {}),
    "mistral": ("MistralForCausalLM", {}),
    "qwen2": ("Qwen2ForCausalLM", {"qkv_bias": True}),
    "qwen2_5_vl": ("Qwen2_5_VLForConditionalGeneration", {"qkv_bias": True}),   # its text decoder: Qwen2's
    "qwen3": ("Qwen3ForCausalLM", {"qk_norm": "head"}),
    "qwen3_moe": ("Qwen3MoeForCausalLM", {"qk_norm": "head", "router_weights_16bit": True}),
    # Qwen3-VL's text decoders: Qwen3's and Qwen3-MoE's layers (M-RoPE, deepstack inputs), read with the tower
    # by pycore/model/hf_layers.py
    "qwen3_vl_text": ("Qwen3VLForConditionalGeneration", {"qk_norm": "head"}),
    "qwen3_vl_moe_text": ("Qwen3VLMoeForConditionalGeneration", {"qk_norm": "head", "router_weights_16bit": True}),
    "qwen2_moe": ("Qwen2MoeForCausalLM", {"qkv_bias": True, "shared_expert_gate": True, "router_weights_16bit": True}),
    "gemma": ("GemmaForCausalLM", GEMMA),
    "gemma2": ("Gemma2ForCausalLM", {**GEMMA, "norms_per_layer": 4, "final_softcap": True, "attn_softcap": True}),
    "gemma3_text": ("Gemma3ForCausalLM", {**GEMMA, "norms_per_layer": 4, "qk_norm": "head"}),
    "phi3": ("Phi3ForCausalLM", {}),
    "olmo2": ("Olmo2ForCausalLM", {"qk_norm": "full"}),
    "deepseek_v2": ("DeepseekV2ForCausalLM", {"attention": "mla", "rope_fp32": True}),
    "deepseek_v3": ("DeepseekV3ForCausalLM", {"attention": "mla"}),
    "mixtral": ("MixtralForCausalLM", {}),
    "granite": ("GraniteForCausalLM", {}),
    "gpt_oss": ("GptOssForCausalLM", {**BIASED, **SOFTMAX_16, "router_bias": True, "attention_sinks": True}),
    "cohere": ("CohereForCausalLM", {"norm": "layernorm", "norm_bias": False, "norms_per_layer": 1,
                                     "parallel_block": True}),
    "gpt2": ("GPT2LMHeadModel", {**LAYERNORM_PLAIN, **BIASED, **SOFTMAX_16, "activation": "gelu_new", "positions": "learned"}),
    "gpt_neox": ("GPTNeoXForCausalLM", {**LAYERNORM_PLAIN, **BIASED, "activation": "gelu"}),
    "gpt_bigcode": ("GPTBigCodeForCausalLM", {**LAYERNORM_PLAIN, **BIASED, "activation": "gelu_tanh",
                                              "positions": "learned"}),
    "falcon": ("FalconForCausalLM", {**LAYERNORM_PLAIN, **SOFTMAX_16, "activation": "gelu", "sdpa_math": True}),
    "phi": ("PhiForCausalLM", {**LAYERNORM_PLAIN, **BIASED, "activation": "gelu_new", "head_bias": True,
                               "norms_per_layer": 1, "parallel_block": True}),
    "starcoder2": ("Starcoder2ForCausalLM", {**LAYERNORM_PLAIN, **BIASED, "activation": "gelu_tanh"}),
    # layers that differ by index: read by pycore/model/hf_layers.py
    # Qwen3NextRMSNorm / Qwen3_5RMSNorm multiply by (1 + weight) in fp32, as Gemma's do
    "qwen3_next": ("Qwen3NextForCausalLM", {"qk_norm": "head", "attn_output_gate": True, "shared_expert_gate": True,
                                            "norm_weight_fp32": True, "router_weights_16bit": True}),
    "qwen3_5_text": ("Qwen3_5ForCausalLM", {"qk_norm": "head", "shared_expert_gate": True, "norm_weight_fp32": True,
                                            "router_weights_16bit": True}),
    "qwen3_5_moe_text": ("Qwen3_5MoeForCausalLM", {"qk_norm": "head", "shared_expert_gate": True,
                                                    "norm_weight_fp32": True, "router_weights_16bit": True}),
    "granitemoehybrid": ("GraniteMoeHybridForCausalLM", {}),
    "nemotron_h": ("NemotronHForCausalLM", {}),
    "falcon_h1": ("FalconH1ForCausalLM", {}),
    "mamba2": ("Mamba2ForCausalLM", {}),
    "jamba": ("JambaForCausalLM", {}),
    "lfm2": ("Lfm2ForCausalLM", {}),
    "olmo3": ("Olmo3ForCausalLM", {"qk_norm": "full"}),
    "exaone4": ("Exaone4ForCausalLM", {"qk_norm": "head"}),
    "llama4_text": ("Llama4ForCausalLM", {}),
    "apertus": ("ApertusForCausalLM", {}),
    "glm4_moe": ("Glm4MoeForCausalLM", {}),
    "bert": ("BertForMaskedLM", {"kind": "encoder", "norm": "layernorm", "softmax_fp32": False, "loss_fp32": False,
                                 "mlp": "plain", "activation": "gelu", "qkv_bias": True, "out_bias": True,
                                 "mlp_bias": True, "positions": "learned", "embedding_norm": True, "mlm_head": True}),
}

# transformers' default for tie_word_embeddings where the config leaves it out (each family's config class).
TIED_BY_DEFAULT = {"gpt2", "bert", "gpt_bigcode", "falcon", "starcoder2", "cohere", "gemma", "gemma2", "gemma3_text",
                   "lfm2"}

# Our field -> the config.json keys that may hold it, first match wins.
KEYS = {
    "layers": ("num_hidden_layers", "n_layer"),
    "hidden": ("hidden_size", "n_embd"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "ffn": ("intermediate_size", "n_inner", "ffn_hidden_size"),
    "vocab": ("vocab_size",),
    "max_positions": ("max_position_embeddings", "n_positions"),
    "type_vocab": ("type_vocab_size",),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok",),
    "expert_ffn": ("moe_intermediate_size",),
    "shared_experts": ("n_shared_experts",),
    "shared_expert_ffn": ("shared_expert_intermediate_size",),
    "dense_layers": ("first_k_dense_replace",),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_rope_dim": ("qk_rope_head_dim",),
    "qk_nope_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
    "sliding_window": ("sliding_window",),
}

# Plausible ranges: far beyond any published model, small enough that the arithmetic stays instant.
RANGES = {
    "layers": (1, 10_000), "hidden": (1, 1_000_000), "heads": (1, 100_000), "kv_heads": (1, 100_000),
    "head_dim": (1, 100_000), "ffn": (1, 10_000_000), "vocab": (1, 10_000_000),
    "max_positions": (0, 1_000_000_000), "type_vocab": (0, 100_000), "experts": (0, 100_000),
    "experts_per_token": (0, 100_000), "expert_ffn": (0, 10_000_000), "shared_experts": (0, 100_000),
    "shared_expert_ffn": (0, 10_000_000), "dense_layers": (0, 10_000), "q_lora_rank": (0, 1_000_000),
    "kv_lora_rank": (0, 1_000_000), "qk_rope_dim": (0, 100_000), "qk_nope_dim": (0, 100_000),
    "v_head_dim": (0, 100_000), "sliding_window": (0, 1_000_000_000),
    "dense_ffn": (0, 10_000_000), "ssm_chunk": (1, 1_000_000), "ssm_inner": (1, 10_000_000), "ssm_heads": (1, 100_000),
    "ssm_head_dim": (1, 100_000), "ssm_state": (1, 100_000), "ssm_groups": (1, 100_000), "ssm_dt_rank": (1, 100_000),
    "conv_kernel": (1, 1_000), "linear_key_heads": (1, 100_000), "linear_value_heads": (1, 100_000),
    "linear_key_dim": (1, 100_000), "linear_value_dim": (1, 100_000), "vision_layers": (1, 1_000),
    "vision_tile": (1, 100_000), "vision_projector": (1, 1_000_000), "vision_positions": (1, 10_000_000),
    "vision_hidden": (1, 100_000), "vision_heads": (1, 10_000), "vision_ffn": (1, 1_000_000), "vision_patch": (1, 1_000),
    "vision_temporal_patch": (1, 100), "vision_merge": (1, 100),
}
STANDARD = ("layers", "hidden", "heads", "ffn", "vocab")   # what an unknown model_type needs

# A preset of each family: what an imported config is expressed against in the URL.
FAMILY_PRESETS = {"llama": "llama-3.1-8b", "mistral": "mistral-7b-v0.1", "qwen2": "qwen2.5-7b", "qwen3": "qwen3-8b",
                  "qwen3_moe": "qwen3-30b-a3b", "gemma": "gemma-2b", "gemma2": "gemma-2-9b",
                  "gemma3_text": "gemma-3-1b-pt", "phi3": "phi-4", "olmo2": "olmo-2-1124-7b",
                  "deepseek_v3": "deepseek-v3", "mixtral": "mixtral-8x7b-v0.1", "gpt2": "gpt2",
                  "bert": "bert-base-uncased", "gpt_neox": "pythia-160m", "gpt_bigcode": "starcoder",
                  "falcon": "falcon-7b", "phi": "phi-2", "starcoder2": "starcoder2-3b",
                  "qwen2_moe": "qwen1.5-moe-a2.7b", "deepseek_v2": "deepseek-v2-lite", "gpt_oss": "gpt-oss-20b",
                  "granite": "granite-3.1-2b-base", "cohere": "c4ai-command-r-v01", "exaone4": "exaone-4.0-32b",
                  "glm4_moe": "glm-4.5", "llama4_text": "llama-4-scout-17b-16e-instruct",
                  "nemotron_h": "nvidia-nemotron-nano-12b-v2-base", "olmo3": "olmo-3.1-32b-instruct",
                  "qwen2_5_vl": "qwen2.5-vl-7b-instruct", "qwen3_next": "qwen3-next-80b-a3b-instruct",
                  "qwen3_5_text": "qwen3.5-9b", "lfm2": "lfm2.5-vl-1.6b", "qwen3_vl_text": "qwen3-vl-4b-instruct",
                  "qwen3_vl_moe_text": "qwen3-vl-30b-a3b-instruct"}
LLAMA_STYLE = "llama"       # the family an unknown model_type is read as
# Families whose MTP layers vLLM 0.11 loads as DeepSeek's (deepseek_mtp.py, glm4_moe_mtp.py): pycore.memory.serving
MTP_FAMILIES = ("deepseek_v3", "glm4_moe", "qwen3_next")
# Families whose checkpoints ship MTP layers their config.json does not count: vLLM 0.11 takes
# getattr(config, "num_nextn_predict_layers", 1) (model_executor/models/qwen3_next_mtp.py)
MTP_DEFAULT = {"qwen3_next": 1}

_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_new", "gelu_pytorch_tanh": "gelu_tanh", "silu": "silu",
                "swish": "silu"}
_ESCAPE = re.compile(r"\\.", re.DOTALL)            # removed first, so a string is then '"[^"]*"' (no backtracking)
_STRING = re.compile(r'"[^"]*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_PLAIN_JSON_ERRORS = (
    ("Expecting value", "expected a value (a number, string, true, false, null, [ or {)"),
    ("Expecting property name", "expected a key in double quotes"),
    ("Expecting ',' delimiter", "expected a comma"),
    ("Expecting ':' delimiter", "expected a colon after a key"),
    ("Unterminated string", "a string is not closed"),
    ("Invalid control character", "a raw line break or control character inside a string"),
    ("Invalid \\escape", "an invalid backslash escape"),
    ("Invalid \\uXXXX escape", "an invalid \\u escape"),
    ("Extra data", "unexpected text after the end of the JSON object"),
)


def describe(value: object) -> str:
    """A short, safe description of a JSON value for a message (config strings are shown as text only)."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, str):
        return f"the text {value[:30]!r}" + ("..." if len(value) > 30 else "")
    if isinstance(value, float) and not math.isfinite(value):
        return "a number too large to represent" if not math.isnan(value) else "NaN"
    if isinstance(value, (int, float)):
        text = f"{value:,}" if isinstance(value, int) else f"{value:g}"
        return text if len(text) <= 40 else text[:40] + "..."
    return "a list" if isinstance(value, list) else "an object"


def _too_deep(text: str) -> bool:
    """Whether json.loads would nest more than MAX_DEPTH levels, found without recursing (json.loads recurses
    once per level, and Pyodide's stack is shallow: a 10,000-level array must be refused before it is parsed).

    Counts brackets outside strings, 64 at a time with str.count; only a stretch that could cross the limit
    is walked bracket by bracket, so 2 MB of brackets takes a fraction of a second.
    """
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", _ESCAPE.sub("", text)))
    depth = 0
    for start in range(0, len(brackets), 64):
        chunk = brackets[start:start + 64]
        opened = chunk.count("[") + chunk.count("{")
        if depth + opened <= MAX_DEPTH:
            depth += 2 * opened - len(chunk)
        else:
            for bracket in chunk:
                depth += 1 if bracket in "[{" else -1
                if depth > MAX_DEPTH:
                    return True
        if depth < 0:
            return False                    # json.loads stops at the first closer that matches nothing
    return False


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_DIGITS:
        raise InputError("config", f"config.json has a number with more than {MAX_DIGITS} digits")
    return int(digits)


def _constant(name: str) -> float:
    """Infinity, -Infinity and NaN as transformers reads them (Python's json.load): configs it writes carry
    them, e.g. Mamba-2's ``"time_step_limit": [0.0, Infinity]``. A field that needs a number refuses them."""
    return float(name)


def parse_config_text(text: str) -> Config:
    """A config.json's text as a dict; InputError with one plain message for anything else.

    Args:
        text: the file's contents.
    Returns:
        the parsed JSON object.
    """
    if not isinstance(text, str):
        raise InputError("config", "config.json must be text")
    if len(text) > MAX_BYTES:
        raise InputError("config", f"config.json is {len(text):,} characters; the limit is {MAX_BYTES:,} "
                                   "(2 MB). A model's config.json is a few kilobytes: is this the weights file?")
    if not text.strip():
        raise InputError("config", "config.json is empty")
    if _too_deep(text):
        raise InputError("config", f"config.json nests brackets more than {MAX_DEPTH} levels deep; a config.json "
                                   "needs 3 or 4")
    try:
        config = json.loads(text, parse_int=_bounded_int, parse_constant=_constant)
    except json.JSONDecodeError as error:
        reason = next((plain for prefix, plain in _PLAIN_JSON_ERRORS if error.msg.startswith(prefix)), "")
        where = f"line {error.lineno} column {error.colno}"
        raise InputError("config", f"config.json is not valid JSON: {where}" + (f" ({reason})" if reason else "")) \
            from None
    except RecursionError:
        raise InputError("config", "config.json nests brackets too deeply") from None
    except InputError:
        raise
    except ValueError as error:                 # a number Python cannot convert
        raise InputError("config", f"config.json has a number that cannot be read ({str(error)[:80]})") from None
    if not isinstance(config, dict):
        kind = {list: "an array", str: "a string", bool: "true/false", type(None): "null"}.get(type(config), "a number")
        raise InputError("config", f"config.json must be a JSON object ({{...}}), got {kind}")
    return config


class _Reader:
    """Typed, range-checked reads of config.json keys; remembers which key each field came from."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.source: "dict[str, str]" = {}       # our field -> the config.json key it was read from

    def integer(self, field: str, keys: "Sequence[str] | None" = None, low: "int | None" = None,
                high: "int | None" = None) -> "int | None":
        """The first non-null key of ``keys`` as an int within range, or None when none is present."""
        low_default, high_default = RANGES[field]
        low = low_default if low is None else low
        high = high_default if high is None else high
        for key in keys or KEYS[field]:
            value = self.config.get(key)
            if value is None:
                continue
            whole = isinstance(value, float) and math.isfinite(value) and value.is_integer()
            if isinstance(value, bool) or not (isinstance(value, int) or whole) or not low <= value <= high:
                raise InputError("config", f"{key}: must be a whole number from {low:,} to {high:,}, "
                                           f"got {describe(value)}")
            self.source[field] = key
            return int(value)
        return None

    def flag(self, key: str, default: bool) -> bool:
        value = self.config.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise InputError("config", f"{key}: must be true or false, got {describe(value)}")
        return value

    def fraction(self, key: str) -> "float | None":
        value = self.config.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
            raise InputError("config", f"{key}: must be a number from 0 to 1, got {describe(value)}")
        return float(value)

    def integer_list(self, key: str, high: int) -> "list[int]":
        value = self.config.get(key)
        if value is None:
            return []
        if not isinstance(value, list) or len(value) > high or \
                not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < high for v in value):
            raise InputError("config", f"{key}: must be a list of layer numbers from 0 to {high - 1:,}, "
                                       f"got {describe(value)}")
        numbers: "list[int]" = value
        return numbers

    def text_list(self, key: str, high: int) -> "list[str] | None":
        value = self.config.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or len(value) > high or not all(isinstance(v, str) for v in value):
            raise InputError("config", f"{key}: must be a list of at most {high:,} strings, got {describe(value)}")
        texts: "list[str]" = value
        return texts


def _sparse_layers(reader: _Reader, model_type: str, layers: int, experts: int) -> int:
    """How many layers route to experts (the rest have a dense MLP of width ffn)."""
    if not experts:
        return 0
    if model_type in ("qwen2_moe", "qwen3_moe", "qwen3_vl_moe_text"):
        # transformers: layer i is sparse if i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
        step = reader.integer("layers", ("decoder_sparse_step",), low=1) or 1
        only_dense = set(reader.integer_list("mlp_only_layers", layers))
        return sum(1 for i in range(layers) if i not in only_dense and (i + 1) % step == 0)
    if model_type in ("deepseek_v2", "deepseek_v3", "glm4_moe"):
        return layers - min(reader.integer("dense_layers") or 0, layers)
    return layers


def architecture_from_dict(config: Config, name: str = "config.json", warnings: "list[str] | None" = None) \
        -> Architecture:
    """An Architecture from a parsed config.json.

    Args:
        config: the parsed JSON object.
        name: what the architecture is called in the output.
        warnings: a list that notes worth showing are appended to (an unknown model_type read as Llama-style).
    Returns:
        the Architecture; InputError("config", ...) names the config field that is missing, mistyped or out of
        range, or the model_type that is neither supported nor Llama-shaped.
    """
    if not isinstance(config, dict):
        raise InputError("config", "config.json must be a JSON object")
    original = config
    config = _text_decoder(config, warnings)
    family_type = _family_type(config, warnings)
    config = prepare(family_type, config)
    hf_class, family = FAMILIES[family_type]
    reader = _Reader(config)
    fields = _read_fields(reader)
    extra = dict(family)
    left_out = _family_specifics(family_type, reader, fields, extra)
    _settle_shape(family_type, reader, fields)
    _scaled_positions(family_type, reader, fields)
    activation = config.get("hidden_act", config.get("activation_function"))
    if isinstance(activation, str) and activation in _ACTIVATIONS and family.get("mlp") == "plain":
        extra["activation"] = _ACTIVATIONS[activation]
    tied = reader.flag("tie_word_embeddings", family_type in TIED_BY_DEFAULT)
    mtp = reader.integer("layers", ("num_nextn_predict_layers", "mtp_num_hidden_layers"), low=0)
    mtp = MTP_DEFAULT.get(family_type, 0) if mtp is None else mtp
    if mtp and family_type in MTP_FAMILIES:
        extra["mtp_layers"] = mtp
    if mtp and warnings is not None:
        loaded = "counted with speculative=mtp (engine=vllm), as vLLM loads them" if family_type in MTP_FAMILIES \
            else "their memory under vLLM's speculative decoding is not modelled for this family yet"
        warnings.append(f"{mtp} multi-token-prediction layer{'s' if mtp > 1 else ''} not in the parameter count: "
                        f"transformers does not build them; {loaded}")
    _read_dropouts(reader, extra)
    extra["dtype"] = _checkpoint_dtype(original)
    numbers: Traits = fields        # the same dict, typed as keywords of any field so that ** type-checks
    try:
        arch = Architecture(name=name, hf_class=hf_class, tied_embeddings=tied, source=name, **extra, **numbers)
    except (TypeError, ValueError) as error:
        raise InputError("config", _config_words(str(error), reader.source)) from None
    _vision_note(original, arch, warnings, left_out)
    return arch


# LlamaConfig's and MistralConfig's defaults (transformers 5.24), which a LLaVA wrapper's text_config leaves to them
# (LlavaConfig builds CONFIG_MAPPING[model_type](**text_config)): llava-hf/llava-1.5-7b-hf's names only Vicuna's
# vocabulary and positions
_TEXT_DEFAULTS = {
    "llama": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32, "num_attention_heads": 32,
              "vocab_size": 32000, "max_position_embeddings": 2048},
    "mistral": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 8, "vocab_size": 32000, "max_position_embeddings": 131072}}
# The tower a wrapper builds when its vision_config names no model_type (LlavaConfig, InternVLConfig), and LlavaConfig's
# own default tower when it has no vision_config at all (CLIP ViT-L/14-336)
_TOWER_TYPES = {"llava": "clip_vision_model", "internvl": "internvl_vision", "llava_next": "clip_vision_model"}
_LLAVA_WRAPPERS = ("llava", "llava_next")     # LlavaConfig and LlavaNextConfig: the same default tower and text
_LLAVA_TOWER = {"model_type": "clip_vision_model", "intermediate_size": 4096, "hidden_size": 1024, "patch_size": 14,
                "image_size": 336, "num_hidden_layers": 24, "num_attention_heads": 16}
WRAPPER = "wrapper model_type"       # the key a wrapper's text decoder carries its wrapper's model_type under
_TEXT_TYPES = {"llama4": "llama4_text", "gemma3": "gemma3_text",   # a multimodal wrapper -> its text decoder
               "qwen3_5": "qwen3_5_text", "llava": "llama", "llava_next": "llama", "internvl": "qwen2",
               "qwen3_vl": "qwen3_vl_text",
               "qwen3_vl_moe": "qwen3_vl_moe_text", "qwen3_5_moe": "qwen3_5_moe_text"}
# A wrapper's own keys about its images that the text family's reader counts the tower with (Gemma3Config,
# Lfm2VlConfig and the processor settings LFM2-VL's config.json repeats)
_IMAGE_KEYS = ("mm_tokens_per_image", "downsample_factor", "projector_hidden_size", "projector_bias",
               "projector_use_layernorm", "encoder_patch_size", "tile_size", "min_image_tokens", "max_image_tokens",
               "min_tiles", "max_tiles", "max_pixels_tolerance", "use_thumbnail", "use_image_special_tokens",
               "do_image_splitting", "vision_feature_layer", "vision_feature_select_strategy", "projector_hidden_act",
               "multimodal_projector_bias", "downsample_ratio", "image_grid_pinpoints")


def _vision_note(config: Config, arch: Architecture, warnings: "list[str] | None", why: str = "") -> None:
    if isinstance(config.get("vision_config"), dict) and not arch.vision_layers and warnings is not None:
        warnings.append("This config has a vision encoder (vision_config): its weights, image tokens and "
                        "activations are not counted" + (f" for its {why}" if why else " yet") +
                        "; the estimate is the text decoder's alone.")


def _text_decoder(config: Config, warnings: "list[str] | None") -> Config:
    """A copy of the config, or of the text decoder a multimodal wrapper (Gemma 3, Llama 4) holds in
    text_config; a vision encoder the wrapper also holds is said to be left out."""
    text = config.get("text_config")
    if not isinstance(text, dict):
        return dict(config)
    inner = dict(text)
    wrapper = config.get("model_type")
    if wrapper in _TOWER_TYPES and config.get("vision_config") is None:
        config = {**config, "vision_config": _LLAVA_TOWER if wrapper in _LLAVA_WRAPPERS else {}}
    if isinstance(config.get("vision_config"), dict):
        inner["vision_config"] = config["vision_config"]     # the family's reader counts the tower it knows
        inner.update({key: config[key] for key in _IMAGE_KEYS if key in config})
        inner[WRAPPER] = wrapper
    if config.get("tie_word_embeddings") is not None:    # the wrapper's word wins; else the text family's default
        inner["tie_word_embeddings"] = config["tie_word_embeddings"]
    inner.setdefault("model_type", _TEXT_TYPES.get(wrapper, "gemma3_text") if isinstance(wrapper, str) else
                     "gemma3_text")
    if wrapper in _LLAVA_WRAPPERS:
        for key, value in _TEXT_DEFAULTS.get(str(inner["model_type"]), {}).items():
            inner.setdefault(key, value)
    if inner["model_type"] == "qwen2_5_vl_text":    # as transformers 5 saves Qwen2.5-VL: read as the flat file is
        inner["model_type"] = "qwen2_5_vl"
    return inner


# config.json's torch_dtype (transformers 5 writes "dtype") -> pycore's dtype names
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def _checkpoint_dtype(config: Config) -> str:
    """The checkpoint's dtype as config.json names it (dtype or torch_dtype, the wrapper's before its text_config's, as
    transformers reads a wrapper's), which serving loads by default (transformers 5's dtype="auto", vLLM's --dtype
    auto); "" when it names none pycore knows (serving then takes bf16, and says so)."""
    text = config.get("text_config")
    for source in (config, text if isinstance(text, dict) else {}):
        for key in ("dtype", "torch_dtype"):
            value = source.get(key)
            if isinstance(value, str) and value in _DTYPES:
                return _DTYPES[value]
    return ""


def _family_type(config: Config, warnings: "list[str] | None") -> str:
    """The key of FAMILIES the config is read as: its model_type, or Llama-style for an unknown one that has
    the standard keys (with a warning)."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str):
        if model_type is not None:
            raise InputError("config", f"model_type: must be a string such as \"llama\", got {describe(model_type)}")
        model_type = ""
    if model_type in FAMILIES:
        return model_type
    missing = [KEYS[f][0] for f in STANDARD if all(config.get(k) is None for k in KEYS[f])]
    if missing:
        shown = f"model_type {model_type[:40]!r}" if model_type else "a config without model_type"
        raise InputError("config", f"{shown} is not supported yet and lacks {', '.join(missing)} to be read as a "
                                   "Llama-style decoder; supported: " + ", ".join(sorted(FAMILIES)))
    if warnings is not None:
        shown = f"model_type {model_type[:40]!r} is not a supported family" if model_type else \
            "This config has no model_type"
        warnings.append(f"{shown}: estimated as a Llama-style decoder (RMSNorm, gated SiLU MLP, no biases), "
                        "so the parameter count may differ from the real model's.")
    return LLAMA_STYLE


def _read_fields(reader: _Reader) -> Fields:
    """Every KEYS field the config gives, range-checked; the four no transformer lacks must be there."""
    fields: Fields = {}
    for field in KEYS:
        value = reader.integer(field)
        if value is not None:
            fields[field] = value
    missing = [KEYS[f][0] for f in ("layers", "hidden", "heads", "vocab") if f not in fields]
    if missing:
        raise InputError("config", "missing " + ", ".join(missing))
    return fields


def _scaled_positions(family_type: str, reader: _Reader, fields: Fields) -> None:
    """max_positions as vLLM derives the longest context from a rope scaling (vllm/config/model.py
    _get_and_verify_max_len, v0.11): max_position_embeddings × factor, yarn's original_max_position_embeddings ×
    factor; not for su, longrope or llama3 scaling, whose max_position_embeddings is already the scaled length, nor
    Gemma 3's. transformers scales the positions as far."""
    scaling = reader.config.get("rope_scaling") or reader.config.get("rope_parameters")
    if not isinstance(scaling, dict) or not fields.get("max_positions") or family_type.startswith("gemma3"):
        return
    kind, factor = scaling.get("rope_type", scaling.get("type")), scaling.get("factor")
    if kind in ("su", "longrope", "llama3") or isinstance(factor, bool) or not isinstance(factor, (int, float)) or \
            not 1 < factor <= 1_000:
        return
    base = scaling.get("original_max_position_embeddings") if kind == "yarn" else fields["max_positions"]
    if isinstance(base, int) and not isinstance(base, bool) and base > 0:
        fields["max_positions"] = int(base * factor)


def _settle_shape(family_type: str, reader: _Reader, fields: Fields) -> None:
    """The defaults a config may leave out (kv_heads, GPT-2's ffn), and the MoE fields only an MoE keeps."""
    fields.setdefault("kv_heads", fields["heads"])
    if "head_dim" not in fields and fields["hidden"] % fields["heads"]:
        fields["head_dim"] = fields["hidden"] // fields["heads"]  # transformers' default: hidden_size // heads
    if "ffn" not in fields:
        if family_type not in ("gpt2", "gpt_bigcode", "falcon"):
            raise InputError("config", "missing intermediate_size")
        fields["ffn"] = 4 * fields["hidden"]           # their config classes' default (n_inner=None)
    if fields.get("head_dim") == fields["hidden"] // fields["heads"] and fields["hidden"] % fields["heads"] == 0:
        fields.pop("head_dim")
    if not fields.get("experts"):
        for moe_only in ("experts_per_token", "expert_ffn", "shared_experts", "shared_expert_ffn", "dense_layers"):
            fields.pop(moe_only, None)
        return
    sparse = _sparse_layers(reader, family_type, fields["layers"], fields["experts"])
    fields["dense_layers"] = fields["layers"] - sparse
    fields.setdefault("experts_per_token", min(2, fields["experts"]))


# Architecture field -> the config keys that may hold it, first one given wins (GPT-2, BERT, Falcon, Llama).
_DROPOUT_KEYS = {
    "dropout": ("resid_pdrop", "hidden_dropout_prob", "hidden_dropout", "residual_dropout"),
    "attention_dropout": ("attn_pdrop", "attention_probs_dropout_prob", "attention_dropout"),
}


def _read_dropouts(reader: _Reader, extra: Traits) -> None:
    for field, keys in _DROPOUT_KEYS.items():
        for key in keys:
            value = reader.fraction(key)
            if value is not None:
                extra[field] = value
                break


# Fields a family reads from keys of its own (biases, norms, MQA, shared experts, sliding layers), one reader
# per family; each follows that family's transformers config class.
def _family_specifics(family_type: str, reader: _Reader, fields: Fields, extra: Traits) -> str:
    """Apply ``family_type``'s own keys to ``fields`` and ``extra``; sliding_window is a family's to keep. Returns
    the setting a wrapper's tower that pycore does not model was left out for ("" if none)."""
    read = _SPECIFICS.get(family_type)
    if read is not None:
        read(reader, fields, extra)
    fields.pop("sliding_window", None)
    vision, wrapper = reader.config.get("vision_config"), str(reader.config.get(WRAPPER))
    if not isinstance(vision, dict) or extra.get("vision_family"):
        return ""
    # LlavaConfig and InternVLConfig build their own tower type when vision_config names none
    tower = TOWERS.get((wrapper, str(vision.get("model_type", _TOWER_TYPES.get(wrapper)))))
    if tower is None:
        return ""
    before = dict(extra)
    try:
        tower(reader, fields, extra)
    except TowerNotCounted as why:
        extra.clear()
        extra.update(before)
        return str(why)
    return ""


def _attention_bias(reader: _Reader, extra: Traits) -> None:
    """attention_bias: q/k/v and o projections together (LlamaConfig and those built like it)."""
    biased = reader.flag("attention_bias", extra.get("qkv_bias", False))
    extra.update(qkv_bias=biased, out_bias=biased)


def _llama(reader: _Reader, fields: Fields, extra: Traits) -> None:
    _attention_bias(reader, extra)
    extra["mlp_bias"] = reader.flag("mlp_bias", False)


def _qwen3(reader: _Reader, fields: Fields, extra: Traits) -> None:
    _attention_bias(reader, extra)


def _qwen2(reader: _Reader, fields: Fields, extra: Traits) -> None:
    extra["qkv_bias"] = reader.flag("attention_bias", True)


def _qwen2_moe(reader: _Reader, fields: Fields, extra: Traits) -> None:
    extra["qkv_bias"] = reader.flag("qkv_bias", True)
    shared = fields.pop("shared_expert_ffn", 0)
    expert = fields.get("expert_ffn") or fields.get("ffn") or 0
    if shared and expert and shared % expert == 0:
        fields["shared_experts"] = shared // expert        # Qwen1.5-MoE: 5632 = 4 experts of 1408
    elif shared:
        fields["shared_expert_ffn"] = shared
    else:
        extra["shared_expert_gate"] = False


# vision_config key -> Architecture field (Qwen2_5_VLVisionConfig), each required
_VISION_KEYS = {"depth": "vision_layers", "hidden_size": "vision_hidden", "intermediate_size": "vision_ffn",
                "patch_size": "vision_patch", "temporal_patch_size": "vision_temporal_patch",
                "spatial_merge_size": "vision_merge"}


def _qwen2_5_vl(reader: _Reader, fields: Fields, extra: Traits) -> None:
    """Qwen2.5-VL: Qwen2's text decoder and a vision tower read from vision_config (pycore/model/vision.py)."""
    _qwen2(reader, fields, extra)
    vision = reader.config.get("vision_config")
    if not isinstance(vision, dict):
        return
    inner = _Reader(vision)
    for key, field in _VISION_KEYS.items():
        value = inner.integer(field, (key,))
        if value is None:
            raise InputError("config", f"vision_config.{key}: missing")
        extra[field] = value
    out = inner.integer("hidden", ("out_hidden_size",))
    if out is not None and out != fields["hidden"]:
        raise InputError("config", f"vision_config.out_hidden_size: must equal hidden_size ({fields['hidden']:,}), "
                                   f"got {out:,}")
    extra.update(vision_family="qwen2_5_vl", vision_heads=inner.integer("vision_heads", ("num_heads",)) or 16)


def _deepseek(reader: _Reader, fields: Fields, extra: Traits) -> None:
    fields["head_dim"] = fields.get("qk_nope_dim", 0) + fields.get("qk_rope_dim", 0)
    fields["q_lora_rank"] = fields.get("q_lora_rank") or 0
    if reader.flag("attention_bias", False):
        extra["out_bias"] = True                  # MLA: q_a, kv_a and o projections carry a bias


def _gpt_neox(reader: _Reader, fields: Fields, extra: Traits) -> None:
    biased = reader.flag("attention_bias", True)
    extra.update(qkv_bias=biased, out_bias=biased, parallel_block=reader.flag("use_parallel_residual", True))


def _gpt_bigcode(reader: _Reader, fields: Fields, extra: Traits) -> None:
    if reader.flag("multi_query", True):
        fields["kv_heads"] = 1
    else:
        fields.pop("kv_heads", None)


def _falcon(reader: _Reader, fields: Fields, extra: Traits) -> None:
    biased = reader.flag("bias", False)
    extra.update(qkv_bias=biased, out_bias=biased, mlp_bias=biased)
    new_decoder = reader.flag("new_decoder_architecture", False)
    parallel = reader.flag("parallel_attn", True)
    if new_decoder:
        fields["kv_heads"] = reader.integer("kv_heads", ("num_kv_heads",)) or fields["heads"]
    elif reader.flag("multi_query", True):
        fields["kv_heads"] = 1
    else:
        fields["kv_heads"] = fields["heads"]
    norms_in_parallel = reader.integer("layers", ("num_ln_in_parallel_attn",), low=1, high=2) or \
        (2 if new_decoder else 1)
    extra.update(parallel_block=parallel, norms_per_layer=norms_in_parallel if parallel else 2)


def _phi(reader: _Reader, fields: Fields, extra: Traits) -> None:
    if reader.flag("qk_layernorm", False):
        extra["qk_norm"] = "head"


def _starcoder2(reader: _Reader, fields: Fields, extra: Traits) -> None:
    biased = reader.flag("use_bias", True)
    extra.update(qkv_bias=biased, out_bias=biased, mlp_bias=biased)
    if fields.get("sliding_window"):
        extra["sliding_window"] = fields["sliding_window"]


def _cohere(reader: _Reader, fields: Fields, extra: Traits) -> None:
    _attention_bias(reader, extra)
    if reader.flag("use_qk_norm", False):
        extra["qk_norm"] = "full"


def _gpt_oss(reader: _Reader, fields: Fields, extra: Traits) -> None:
    _attention_bias(reader, extra)
    fields.setdefault("head_dim", 64)             # GptOssConfig's default
    layer_types = reader.text_list("layer_types", RANGES["layers"][1])
    if fields.get("sliding_window") and layer_types:
        full = sum(1 for kind in layer_types if kind == "full_attention")
        extra["sliding_window"] = fields["sliding_window"]
        extra["global_every"] = round(len(layer_types) / full) if full else 0


# The families not named here read nothing of their own; an unknown model_type is read as LLAMA_STYLE.
_SPECIFICS: "dict[str, Callable[[_Reader, Fields, Traits], None]]" = {
    "llama": _llama, "granite": _llama, "qwen3": _qwen3, "qwen3_moe": _qwen3, "qwen2": _qwen2, "qwen2_5_vl": _qwen2_5_vl,
    "qwen2_moe": _qwen2_moe, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek, "gpt_neox": _gpt_neox,
    "gpt_bigcode": _gpt_bigcode, "falcon": _falcon, "phi": _phi, "starcoder2": _starcoder2, "cohere": _cohere,
    "gpt_oss": _gpt_oss, **READERS,
}


def _config_words(message: str, source: "Mapping[str, str]") -> str:
    """An Architecture message in config.json's words: 'kv_heads: must divide heads' -> num_key_value_heads."""
    field, _, rest = message.partition(": ")
    key = source.get(field, KEYS.get(field, (field,))[0])
    for ours, theirs in source.items():
        rest = re.sub(rf"\b{ours}\b", theirs, rest)
    return f"{key}: {rest}"


def config_name(config: object) -> str:
    """What a config calls its model: ``_name_or_path``, else ``architectures[0]``, else "imported config"
    (printable, at most 80 characters)."""
    if not isinstance(config, dict):
        return "imported config"
    architectures = config.get("architectures")
    names = [config.get("_name_or_path"), *(architectures[:1] if isinstance(architectures, list) else [])]
    for name in names:
        if isinstance(name, str) and name.strip():
            return "".join(c if c.isprintable() else "?" for c in name.strip()[:80])
    return "imported config"


def is_config_text(value: str) -> bool:
    """Whether a config= value is a config.json's own text (what the page's link carries for a model no preset with
    overrides expresses), not a path to one."""
    return value.lstrip().startswith("{")


def read_config_file(path: str) -> str:
    """The text of a config.json on disk, or ``path`` itself when it is that text (``is_config_text``);
    InputError("config", ...) when it cannot be read."""
    if is_config_text(path):
        return path
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(MAX_BYTES + 1)
    except (OSError, ValueError) as error:
        raise InputError("config", f"cannot read {str(path)[:80]!r}: {error}") from None


def architecture_from_file(path: str, warnings: "list[str] | None" = None) -> Architecture:
    """An Architecture from a config.json on disk (the CLI's config= key) or from its text (a link's config=), named
    by the config's own name (``config_name``), its source the file; ``warnings`` as for ``architecture_from_dict``.
    A text is read once: the answers re-estimate it dozens of times a keystroke (``_architecture_of_text``)."""
    if warnings is None and is_config_text(path):
        return _architecture_of_text(path)
    return _read_architecture(path, warnings)


@lru_cache(maxsize=16)
def _architecture_of_text(text: str) -> Architecture:
    return _read_architecture(text, None)


def _read_architecture(path: str, warnings: "list[str] | None") -> Architecture:
    config = parse_config_text(read_config_file(path))
    arch = architecture_from_dict(config, name=config_name(config), warnings=warnings)
    source = "a config.json's text (config=)" if is_config_text(path) else str(path).rsplit("/", 1)[-1]
    return replace(arch, source=source)
