"""transformers configs for pycore Architectures (dev-only: needs transformers)."""

import transformers


def config_for(arch):
    """The transformers config of the model that a pycore Architecture describes."""
    config = _config_for(arch)
    config.tie_word_embeddings = arch.tied_embeddings   # T5Config overrides the keyword argument
    return config


def _config_for(arch):
    common = dict(vocab_size=arch.vocab, tie_word_embeddings=arch.tied_embeddings)
    if arch.hf_class == "GPT2LMHeadModel":
        return transformers.GPT2Config(n_layer=arch.layers, n_embd=arch.hidden, n_head=arch.heads, n_inner=arch.ffn,
                                       n_positions=arch.max_positions, **common)
    if arch.hf_class == "T5ForConditionalGeneration":
        return transformers.T5Config(num_layers=arch.layers, num_decoder_layers=arch.decoder_layers, d_model=arch.hidden,
                                     num_heads=arch.heads, d_kv=arch.dim_head, d_ff=arch.ffn,
                                     feed_forward_proj="gated-gelu" if arch.mlp == "gated" else "relu",
                                     relative_attention_num_buckets=arch.relative_buckets, **common)
    if arch.hf_class == "BertForMaskedLM":
        return transformers.BertConfig(num_hidden_layers=arch.layers, hidden_size=arch.hidden,
                                       num_attention_heads=arch.heads, intermediate_size=arch.ffn,
                                       max_position_embeddings=arch.max_positions, type_vocab_size=arch.type_vocab,
                                       **common)
    if arch.vision_family == "siglip":      # Gemma 3 with its SigLIP tower: Gemma3Config around the text decoder's
        text = _text_fields(arch, common)
        vision = dict(model_type="siglip_vision_model", hidden_size=arch.vision_hidden, intermediate_size=arch.vision_ffn,
                      num_hidden_layers=arch.vision_layers, num_attention_heads=16, image_size=arch.vision_tile,
                      patch_size=arch.vision_patch, vision_use_head=False)
        return transformers.Gemma3Config(text_config=dict(text, hidden_activation="gelu_pytorch_tanh"),
                                         vision_config=vision,
                                         mm_tokens_per_image=(arch.vision_tile // arch.vision_patch // arch.vision_merge) ** 2)
    fields = _text_fields(arch, common)
    family = arch.hf_class.removesuffix("ForCausalLM")
    if family == "Mixtral":
        fields.update(num_local_experts=arch.experts, num_experts_per_tok=arch.experts_per_token)
    elif family == "Qwen3Moe":
        fields.update(num_experts=arch.experts, num_experts_per_tok=arch.experts_per_token,
                      moe_intermediate_size=arch.expert_ffn, decoder_sparse_step=1, mlp_only_layers=[])
    elif family in ("Gemma", "Gemma2"):
        fields["hidden_activation"] = "gelu_pytorch_tanh"
    elif family == "Gemma3":
        fields["hidden_activation"] = "gelu_pytorch_tanh"
        family = "Gemma3Text"
    elif family == "DeepseekV3":
        fields.pop("head_dim")
        fields.update(q_lora_rank=arch.q_lora_rank, kv_lora_rank=arch.kv_lora_rank,
                      qk_rope_head_dim=arch.qk_rope_dim, qk_nope_head_dim=arch.qk_nope_dim,
                      v_head_dim=arch.v_head_dim, n_routed_experts=arch.experts, n_shared_experts=arch.shared_experts,
                      num_experts_per_tok=arch.experts_per_token, moe_intermediate_size=arch.expert_ffn,
                      first_k_dense_replace=arch.dense_layers)
    return getattr(transformers, family + "Config")(**fields)


def _text_fields(arch, common):
    return dict(num_hidden_layers=arch.layers, hidden_size=arch.hidden, num_attention_heads=arch.heads,
                num_key_value_heads=arch.kv_heads, head_dim=arch.dim_head, intermediate_size=arch.ffn, **common)


# Families built from their published config.json (tests/configs/<id>.json) with the case's overrides, rather
# than from pycore's fields alone: their configs carry flags pycore does not model (Falcon's multi_query and
# new_decoder_architecture, gpt-oss's rope scaling, DeepSeek's routing groups), which the published file sets.
PUBLISHED_FAMILIES = ("GPTNeoX", "GPTBigCode", "Falcon", "Phi", "Starcoder2", "Qwen2Moe", "DeepseekV2", "GptOss",
                      "Granite", "Cohere")

# pycore field -> the config.json keys that hold it, first match wins (attribute_map names included).
_OVERRIDES = (
    ("layers", ("num_hidden_layers", "n_layer")),
    ("hidden", ("hidden_size", "n_embd")),
    ("heads", ("num_attention_heads", "n_head")),
    ("kv_heads", ("num_key_value_heads", "num_kv_heads")),
    ("ffn", ("intermediate_size", "n_inner", "ffn_hidden_size")),
    ("vocab", ("vocab_size",)),
    ("experts", ("num_experts", "n_routed_experts", "num_local_experts")),
    ("experts_per_token", ("num_experts_per_tok", "experts_per_token")),
    ("expert_ffn", ("moe_intermediate_size",)),
    ("shared_experts", ("n_shared_experts",)),
    ("dense_layers", ("first_k_dense_replace",)),
    ("kv_lora_rank", ("kv_lora_rank",)),
    ("qk_rope_dim", ("qk_rope_head_dim",)),
    ("qk_nope_dim", ("qk_nope_head_dim",)),
    ("v_head_dim", ("v_head_dim",)),
)


def published_config(model_id, arch, configs_dir):
    """The transformers config of a published config.json, with the Architecture's (overridden) sizes.

    Returns None when no published file exists for model_id. layer_types is dropped so the config derives
    it again for the new layer count (Gemma 3, gpt-oss); MQA flags (Falcon, GPTBigCode) are kept."""
    import json
    path = configs_dir / f"{model_id}.json"
    if not path.is_file():
        return None
    published = json.loads(path.read_text())
    model_type = published.pop("model_type")
    reference = transformers.AutoConfig.for_model(model_type)
    aliases = getattr(reference, "attribute_map", {})
    fields = dict(published)
    for attr, keys in _OVERRIDES:
        value = getattr(arch, attr)
        if not value:
            continue
        for key in keys:
            key = aliases.get(key, key)
            if key in fields or hasattr(reference, key):
                if key in fields or attr in ("layers", "hidden", "heads", "vocab", "ffn"):
                    fields[key] = value
                break
    if arch.head_dim and "head_dim" in fields and arch.attention != "mla":
        fields["head_dim"] = arch.head_dim
    if arch.experts and "shared_expert_intermediate_size" in fields:
        fields["shared_expert_intermediate_size"] = arch.shared_expert_ffn or arch.shared_experts * arch.expert_ffn
    if arch.q_lora_rank == 0 and "q_lora_rank" in fields:
        fields["q_lora_rank"] = None
    if "n_group" in fields and arch.experts and fields.get("n_group") and arch.experts % fields["n_group"]:
        fields["n_group"], fields["topk_group"] = 1, 1
    for key in ("pad_token_id", "bos_token_id", "eos_token_id"):
        if isinstance(fields.get(key), int) and fields[key] >= arch.vocab:     # a cut vocabulary
            fields[key] = None
    fields.pop("layer_types", None)
    fields.pop("max_window_layers", None)
    fields["tie_word_embeddings"] = arch.tied_embeddings
    fields["vocab_size"] = arch.vocab
    config = transformers.AutoConfig.for_model(model_type, **fields)
    config.tie_word_embeddings = arch.tied_embeddings
    return config
