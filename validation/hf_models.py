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
    fields = dict(num_hidden_layers=arch.layers, hidden_size=arch.hidden, num_attention_heads=arch.heads,
                  num_key_value_heads=arch.kv_heads, head_dim=arch.dim_head, intermediate_size=arch.ffn, **common)
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
