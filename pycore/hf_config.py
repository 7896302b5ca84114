"""Architectures from Hugging Face ``config.json`` files."""

import json

from .architecture import Architecture
from .schema import InputError

GEMMA = {"activation": "gelu_tanh", "norm_weight_fp32": True}

# model_type -> (transformers class, fields that differ from the Llama defaults)
FAMILIES = {
    "llama": ("LlamaForCausalLM", {}),
    "mistral": ("MistralForCausalLM", {}),
    "qwen2": ("Qwen2ForCausalLM", {"qkv_bias": True}),
    "qwen3": ("Qwen3ForCausalLM", {"qk_norm": "head"}),
    "qwen3_moe": ("Qwen3MoeForCausalLM", {"qk_norm": "head"}),
    "gemma": ("GemmaForCausalLM", GEMMA),
    "gemma2": ("Gemma2ForCausalLM", {**GEMMA, "norms_per_layer": 4}),
    "gemma3_text": ("Gemma3ForCausalLM", {**GEMMA, "norms_per_layer": 4, "qk_norm": "head"}),
    "phi3": ("Phi3ForCausalLM", {}),
    "olmo2": ("Olmo2ForCausalLM", {"qk_norm": "full"}),
    "deepseek_v3": ("DeepseekV3ForCausalLM", {"attention": "mla"}),
    "mixtral": ("MixtralForCausalLM", {}),
    "gpt2": ("GPT2LMHeadModel", {"norm": "layernorm", "softmax_fp32": False, "mlp": "plain", "activation": "gelu_new", "qkv_bias": True,
                                 "out_bias": True, "mlp_bias": True, "positions": "learned"}),
    "bert": ("BertForMaskedLM", {"kind": "encoder", "norm": "layernorm", "softmax_fp32": False, "loss_fp32": False, "mlp": "plain", "activation": "gelu",
                                 "qkv_bias": True, "out_bias": True, "mlp_bias": True, "positions": "learned",
                                 "embedding_norm": True, "mlm_head": True}),
}

# Our field -> the config.json keys that may hold it, first match wins.
KEYS = {
    "layers": ("num_hidden_layers", "n_layer"),
    "hidden": ("hidden_size", "n_embd"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads",),
    "head_dim": ("head_dim",),
    "ffn": ("intermediate_size", "n_inner"),
    "vocab": ("vocab_size",),
    "max_positions": ("max_position_embeddings", "n_positions"),
    "type_vocab": ("type_vocab_size",),
    "experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok",),
    "expert_ffn": ("moe_intermediate_size",),
    "shared_experts": ("n_shared_experts",),
    "dense_layers": ("first_k_dense_replace",),
    "q_lora_rank": ("q_lora_rank",),
    "kv_lora_rank": ("kv_lora_rank",),
    "qk_rope_dim": ("qk_rope_head_dim",),
    "qk_nope_dim": ("qk_nope_head_dim",),
    "v_head_dim": ("v_head_dim",),
}

# A preset of each family: what an imported config is expressed against in the URL.
FAMILY_PRESETS = {"llama": "llama-3.1-8b", "mistral": "mistral-7b-v0.1", "qwen2": "qwen2.5-7b", "qwen3": "qwen3-8b",
                  "qwen3_moe": "qwen3-30b-a3b", "gemma": "gemma-2b", "gemma2": "gemma-2-9b",
                  "gemma3_text": "gemma-3-1b-pt", "phi3": "phi-4", "olmo2": "olmo-2-1124-7b",
                  "deepseek_v3": "deepseek-v3", "mixtral": "mixtral-8x7b-v0.1", "gpt2": "gpt2",
                  "bert": "bert-base-uncased"}


def architecture_from_dict(config, name="config.json"):
    """An Architecture from a parsed config.json; InputError names what is missing or unsupported."""
    if isinstance(config.get("text_config"), dict):        # multimodal wrappers (Gemma 3): the text decoder
        config = {**config["text_config"], "tie_word_embeddings": config.get("tie_word_embeddings", True)}
        config.setdefault("model_type", "gemma3_text")
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise InputError("config", f"model_type {str(model_type)[:40]!r} is not supported yet; supported: "
                         + ", ".join(sorted(FAMILIES)))
    hf_class, family = FAMILIES[model_type]
    fields = {}
    for field, keys in KEYS.items():
        for key in keys:
            if config.get(key) is not None:
                fields[field] = config[key]
                break
    missing = [f for f in ("layers", "hidden", "heads", "vocab") if f not in fields]
    if missing:
        raise InputError("config", "missing " + ", ".join(KEYS[f][0] for f in missing))
    fields.setdefault("kv_heads", fields["heads"])
    if "ffn" not in fields:
        if model_type != "gpt2":
            raise InputError("config", "missing intermediate_size")
        fields["ffn"] = 4 * fields["hidden"]
    if model_type == "deepseek_v3":
        fields["head_dim"] = fields.get("qk_nope_dim", 0) + fields.get("qk_rope_dim", 0)
        fields["q_lora_rank"] = fields.get("q_lora_rank") or 0
    if fields.get("head_dim") == fields["hidden"] // fields["heads"]:
        fields.pop("head_dim")
    tied = config.get("tie_word_embeddings", model_type in ("gpt2", "bert") or model_type.startswith("gemma"))
    extra = dict(family)
    if model_type == "qwen2" and not config.get("attention_bias", True):
        extra["qkv_bias"] = False
    if model_type == "llama" and config.get("attention_bias"):
        extra.update(qkv_bias=True, out_bias=True)
    for key in ("resid_pdrop", "hidden_dropout_prob"):
        if key in config:
            extra["dropout"] = config[key]
    for key in ("attn_pdrop", "attention_probs_dropout_prob", "attention_dropout"):
        if key in config:
            extra["attention_dropout"] = config[key]
    try:
        return Architecture(name=name, hf_class=hf_class, tied_embeddings=bool(tied), source=name,
                            **extra, **{k: int(v) for k, v in fields.items()})
    except (TypeError, ValueError) as error:
        raise InputError("config", str(error)) from None


def architecture_from_file(path):
    try:
        with open(path, encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError) as error:
        raise InputError("config", f"cannot read {path[:80]!r}: {error}") from None
    if not isinstance(config, dict):
        raise InputError("config", "expected a JSON object")
    return architecture_from_dict(config, name=str(path).rsplit("/", 1)[-1])
