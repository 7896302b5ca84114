"""Model architectures: the fields pycore reads, and exact parameter counts.

An Architecture describes a transformer the way its Hugging Face ``config.json`` does, plus the few
implementation facts that change memory (gated MLP, norm type, biases, tied embeddings). Counts follow
the module layout of the matching ``transformers`` class, so they agree to the parameter with
``sum(p.numel() for p in model.parameters())`` (checked in validation/measured.json).
"""

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any, Mapping

from pycore.model import vision
from pycore.model.mixers import check_patterns, layer_kinds, mixer_at, mixer_params, mlp_at


@dataclass(frozen=True)
class Architecture:
    name: str
    kind: str = "decoder"           # decoder (causal LM), encoder (masked LM), generic (no transformer shape)
    hf_class: str = ""              # transformers class the counts follow
    layers: int = 0
    hidden: int = 0
    heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0               # 0 means hidden // heads
    ffn: int = 0                    # MLP intermediate size (per expert for MoE)
    vocab: int = 0
    norm: str = "rmsnorm"           # rmsnorm (weight only) or layernorm (weight and bias, unless norm_bias is off)
    norm_bias: bool = True          # layernorm: False for Cohere's weight-only LayerNorm
    parallel_block: bool = False    # attention and MLP read the same normed input (GPT-NeoX, Falcon, Phi, Cohere);
                                    # the norm count per layer is norms_per_layer
    norm_weight_fp32: bool = False  # Gemma: RMSNorm multiplies by (1 + weight) in fp32 before casting back
    mlp: str = "gated"              # gated: act(gate(x)) * up(x); plain: act(fc(x))
    activation: str = "silu"        # silu, gelu, gelu_tanh (fused), gelu_new (GPT-2, written out)
    softmax_fp32: bool = True       # eager attention's softmax in fp32 (Llama family) or in the scores' dtype
    loss_fp32: bool = True          # the loss upcasts 16-bit logits to fp32 (transformers' causal-LM loss)
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    positions: str = "rotary"       # rotary, learned (a max_positions x hidden table) or none (NoPE)
    max_positions: int = 0
    type_vocab: int = 0             # BERT token-type embeddings
    tied_embeddings: bool = False
    head_bias: bool = False         # the output head has a bias (Phi-1/2's lm_head)
    embedding_norm: bool = False    # LayerNorm right after the embeddings (BERT)
    mlm_head: bool = False          # BERT's dense + LayerNorm transform before the tied decoder
    head: str = ""                  # task head: causal-lm, masked-lm, classification, none ("" = the preset's LM head)
    num_labels: int = 2             # classification: labels the score/classifier layer outputs
    experts: int = 0                # routed experts per MoE layer; 0 = dense
    experts_per_token: int = 0
    every_expert: bool = False      # transformers runs every routed expert on every token, weighted by the router
                                    # (Llama4TextMoe, transformers 5.24: hidden_states.repeat(num_experts, 1), bmm)
    expert_ffn: int = 0             # intermediate size of one routed expert; 0 means ffn (Mixtral)
    shared_experts: int = 0         # experts every token goes through (DeepSeek), each expert_ffn wide
    shared_expert_ffn: int = 0      # width of one shared expert given directly (Qwen2-MoE) when it is not a
                                    # multiple of expert_ffn; 0 means shared_experts x expert_ffn
    shared_expert_gate: bool = False  # a hidden -> 1 sigmoid gate on the shared expert (Qwen2-MoE)
    router_bias: bool = False       # the router's linear layer has a bias (gpt-oss)
    router_weights_16bit: bool = False  # the router's top-k weights cast to its logits' dtype, not kept in fp32
                                    # (transformers 5.24 Qwen2-MoE, Qwen3-MoE, Qwen3-Next: router_top_value.to(...))
    dense_layers: int = 0           # layers with a dense MLP of size ffn instead of experts: DeepSeek's leading
                                    # first_k_dense_replace, Qwen-MoE's mlp_only_layers (the count is what matters)
    norms_per_layer: int = 2        # Gemma 2/3 add post-attention and post-MLP norms: 4
    qk_norm: str = "none"           # none; head (RMSNorm over head_dim: Qwen3, Gemma 3); full (over q and k: OLMo 2)
    attention: str = "gqa"          # gqa (MHA/GQA/MQA by kv_heads) or mla (DeepSeek multi-head latent attention)
    attention_sinks: bool = False   # one learned sink logit per head and layer (gpt-oss)
    q_lora_rank: int = 0            # MLA: query down-projection rank (0 = no down-projection)
    kv_lora_rank: int = 0           # MLA: compressed key/value width (what an MLA-aware engine caches)
    qk_rope_dim: int = 0            # MLA: rotary part of each query/key head
    qk_nope_dim: int = 0            # MLA: non-rotary part of each query/key head
    v_head_dim: int = 0             # MLA: value head size
    dropout: float = 0.0            # hidden/residual dropout probability used in training
    attention_dropout: float = 0.0
    sliding_window: int = 0         # tokens a local-attention layer attends to (and caches); 0 = none
    global_every: int = 0           # with sliding_window: every Nth layer is global (0 = none is)
    decoder_layers: int = 0         # encoder-decoder (T5): decoder blocks; layers counts the encoder's
    relative_buckets: int = 0       # T5 relative-position buckets (a buckets x heads table per stack)
    params_override: int = 0        # generic networks: a bare parameter count
    act_per_sample_fp32: int = 0    # generic presets: measured peak bytes one more sample adds, fp32
    act_per_sample_16: int = 0      # the same in bf16 (validation/vision_measured.json)
    dtype: str = ""                 # checkpoint dtype (config.json torch_dtype): what serving loads by default
    final_softcap: bool = False     # Gemma 2: logits = cap · tanh(logits / cap), the tanh saved for backward
    attn_softcap: bool = False      # Gemma 2: attention scores soft-capped the same way (eager attention)
    sdpa_math: bool = False         # Falcon: K/V of fewer heads and a materialised mask send SDPA to its math kernel
    rope_fp32: bool = False         # DeepSeek-V2: rotary applied through fp32 complex numbers
    # Layers that are not all alike (hybrid and interleaved models), one letter per layer index, read from the
    # config's own keys (layer_types, layers_block_type, moe_layers, ...): see pycore/model/mixers.py.
    layer_pattern: str = ""         # the token mixer of each layer; "" = attention everywhere (sliding_window and
                                    # global_every as above)
    mlp_pattern: str = ""           # the MLP of each layer: D dense, E experts, - none; "" = dense_layers leading
                                    # dense layers, the rest experts (or all dense)
    dense_ffn: int = 0              # the dense layers' MLP width where it differs from ffn (Llama 4's intermediate_size_mlp)
    attn_output_gate: bool = False  # Qwen3-Next: q_proj also outputs a sigmoid gate on the attention output
    expert_bias: bool = True        # with mlp_bias, the routed experts are biased too (gpt-oss); Nemotron-H: only
                                    # its dense and shared-expert MLPs
    mlp_extra_params: int = 0       # learned activation parameters per MLP (Apertus' xIELU: alpha_p, alpha_n)
    ssm_inner: int = 0              # Mamba / Mamba-2 inner width (mamba_expand x hidden, or mamba_d_ssm)
    ssm_heads: int = 0              # Mamba-2 heads
    ssm_head_dim: int = 0           # Mamba-2 head size
    ssm_state: int = 0              # SSM state size per channel (d_state)
    ssm_groups: int = 1             # Mamba-2 B/C groups (n_groups)
    ssm_chunk: int = 256            # Mamba-2's scan chunk (chunk_size / mamba_chunk_size): its saved tensors grow with it
    ssm_dt_rank: int = 0            # Mamba-1 time-step rank (Jamba)
    ssm_dt_norms: bool = False      # Jamba: RMSNorms on dt, B and C inside its Mamba layers
    ssm_norm: bool = True           # Mamba-2's gated RMSNorm before out_proj (Falcon-H1: mamba_rms_norm)
    ssm_proj_bias: bool = False     # biases on the Mamba in/out projections
    conv_kernel: int = 0            # causal convolution width of Mamba, gated DeltaNet and LFM2's short convolution
    conv_bias: bool = False
    ssm_state_fp32: bool = False    # the recurrent state kept in fp32 whatever the model's dtype (mamba_ssm_dtype)
    linear_key_heads: int = 0       # gated DeltaNet (Qwen3-Next linear attention): key heads, value heads, sizes
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    mtp_layers: int = 0             # multi-token-prediction layers the checkpoint ships (num_nextn_predict_layers),
                                    # loaded by vLLM only for speculative decoding (pycore.memory.serving)
    vision_family: str = ""         # a vision tower (pycore/model/vision.py): qwen2_5_vl, qwen3_vl, llama4,
                                    # siglip (Gemma 3), siglip2 (LFM2-VL), clip (LLaVA-1.5), internvl
                                    # (InternVL's InternViT); "" = text only
    vision_layers: int = 0          # its blocks (vision_config.depth)
    vision_hidden: int = 0
    vision_heads: int = 16          # attention heads of a vision block (every preset's tower has 16)
    vision_ffn: int = 0
    vision_patch: int = 0           # patch_size in pixels
    vision_temporal_patch: int = 1  # frames per patch
    vision_merge: int = 1           # spatial_merge_size (Llama 4: 1 / pixel_shuffle_ratio)
    vision_positions: int = 0       # Qwen3-VL / Qwen3.5: learned position embeddings (num_position_embeddings)
    vision_deepstack: int = 0       # Qwen3-VL: deepstack mergers (len(deepstack_visual_indexes)), each adding a
                                    # block's merged features to the hidden states of one of the first decoder layers
    vision_tile: int = 0            # the tile's side in pixels: Llama 4's and Gemma 3's vision_config.image_size,
                                    # LFM2-VL's tile_size
    vision_projector: int = 0       # Llama 4: the adapter's and projector's width (vision_output_dim);
                                    # LFM2-VL: projector_hidden_size
    vision_projector_norm: bool = False     # LFM2-VL: a LayerNorm before its projector (projector_use_layernorm)
    vision_keep_cls: bool = False   # LLaVA: the class token's feature is an image token too
                                    # (vision_feature_select_strategy "full"; "default" drops it)
    vision_unused_layers: int = 0   # LLaVA: the tower's blocks past vision_feature_layer (1 for -2), which run
                                    # but whose output nothing uses
    vision_qkv_bias: bool = False   # InternVL: biased q/k/v projections in the tower (attention_bias)
    vision_rms_norm: bool = False   # InternViT-6B: RMSNorm blocks (norm_type rms_norm), weight-only
    vision_qk_norm: bool = False    # InternViT-6B: RMSNorms over the whole query and key (use_qk_norm)
    vision_pinpoints: str = ""      # LLaVA-NeXT: the image_grid_pinpoints an image's grid of crops is chosen from,
                                    # "336x672,672x336,..." (height x width in pixels); "" for a single crop
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind == "generic":
            return
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be a positive integer, got {getattr(self, name)}")
        if self.heads % self.kv_heads:
            raise ValueError(f"kv_heads: must divide heads ({self.heads}), got {self.kv_heads}")
        if not self.head_dim and self.hidden % self.heads:
            raise ValueError(f"heads: must divide hidden ({self.hidden}) unless head_dim is given, got {self.heads}")
        if self.experts and not 0 < self.experts_per_token <= self.experts:
            raise ValueError(f"experts_per_token: must be 1..experts ({self.experts}), got {self.experts_per_token}")
        if self.experts_per_token and not self.experts:
            raise ValueError("experts_per_token: needs experts > 0")
        check_patterns(self)

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def q_dim(self) -> int:
        return self.heads * self.dim_head

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.dim_head

    @property
    def task_head(self) -> str:
        """The head in force: the one given, else the language-model head of the preset's class."""
        return self.head or ("masked-lm" if self.kind == "encoder" else "causal-lm")

    @property
    def output_width(self) -> int:
        """Logits per token the head computes: the vocabulary, the labels, or none."""
        return {"classification": self.num_labels, "none": 0}.get(self.task_head, self.vocab)

    @property
    def norm_params(self) -> int:
        return self.hidden * self.norm_factor

    @property
    def norm_factor(self) -> int:
        """Parameters per normalised element: weight, plus bias for a biased LayerNorm."""
        return 2 if self.norm == "layernorm" and self.norm_bias else 1

    @property
    def routed_per_token(self) -> int:
        """Routed experts each token's activations pass through in transformers: every one for Llama 4's MoE, else
        experts_per_token (1 for a dense model); vLLM's fused MoE computes experts_per_token in both cases."""
        moe = self.experts and (not self.mlp_pattern or "E" in self.mlp_pattern)
        return self.experts if self.every_expert and moe else max(self.experts_per_token, 1)

    @property
    def shared_width(self) -> int:
        """Total intermediate width of the shared expert(s), 0 if none."""
        return self.shared_expert_ffn or self.shared_experts * self.expert_ffn


@dataclass(frozen=True)
class ParameterCount:
    """Parameter counts, split the way memory is placed (embeddings, layers, head)."""

    embedding: int
    per_layer: int
    layers_total: int
    head: int                       # output head and final norm (0 for the head weight when tied)
    total: int
    active: int                     # parameters a token touches (differs from total for MoE)
    largest_tensor: int             # numel of the biggest single parameter (optimizer step temporaries)
    parts: "dict[str, int]" = field(default_factory=dict)   # the total by part: embedding, attention, mlp, ...


def _mla_params(arch: Architecture) -> int:
    """DeepSeek-V2/V3 multi-head latent attention (transformers DeepseekV3Attention)."""
    h, a = arch.hidden, arch.heads
    qk_head = arch.qk_nope_dim + arch.qk_rope_dim
    if arch.q_lora_rank:
        query = h * arch.q_lora_rank + arch.q_lora_rank + arch.q_lora_rank * a * qk_head
    else:
        query = h * a * qk_head
    kv = h * (arch.kv_lora_rank + arch.qk_rope_dim) + arch.kv_lora_rank + \
        arch.kv_lora_rank * a * (arch.qk_nope_dim + arch.v_head_dim)
    biases = ((arch.q_lora_rank if arch.q_lora_rank else 0) + arch.kv_lora_rank + arch.qk_rope_dim + h) \
        if arch.out_bias else 0                     # DeepSeek-V2's attention_bias: q_a, kv_a and o projections
    return query + kv + a * arch.v_head_dim * h + biases


def _attention_params(arch: Architecture) -> int:
    if arch.attention == "mla":
        return _mla_params(arch)
    gate = arch.hidden * arch.q_dim if arch.attn_output_gate else 0     # Qwen3-Next: q_proj is 2x wide
    weights = arch.hidden * arch.q_dim + gate + 2 * arch.hidden * arch.kv_dim + arch.q_dim * arch.hidden
    qk_norm = {"none": 0, "head": 2 * arch.dim_head, "full": arch.q_dim + arch.kv_dim}[arch.qk_norm]
    weights += qk_norm * arch.norm_factor            # Phi's qk_layernorm carries a bias too
    biases = (arch.q_dim + 2 * arch.kv_dim if arch.qkv_bias else 0) + (arch.hidden if arch.out_bias else 0)
    sinks = arch.heads if arch.attention_sinks else 0
    return weights + biases + sinks


def _mlp_params(arch: Architecture, width: int, biased: bool = True) -> int:
    matrices = 3 if arch.mlp == "gated" else 2
    biases = ((2 if arch.mlp == "gated" else 1) * width + arch.hidden) if arch.mlp_bias and biased else 0
    return matrices * arch.hidden * width + biases + arch.mlp_extra_params


def is_dense_layer(arch: Architecture, index: int) -> bool:
    """Whether layer ``index`` has no routed experts: every layer of a dense model; the leading ``dense_layers``
    of a mixture of experts (DeepSeek's first_k_dense_replace); the D and - layers of ``mlp_pattern``."""
    return mlp_at(arch, index) != "E"


def layer_params(arch: Architecture, index: int, tp: int = 1, ep: int = 1, active: bool = False) -> int:
    """Parameters of decoder/encoder layer ``index`` on one GPU of a tensor- and expert-parallel layout.

    The one place layers are counted: ``count_parameters`` (tp = ep = 1, exact against transformers) and
    the pipeline split (``pycore.memory.parallel.stages``) both call it. Tensor parallelism splits the attention,
    state-space and MLP matrices (Megatron's column/row parallel linears); norms, routers and Qwen2-MoE's
    shared-expert gate are replicated; routed experts split ep ways and tp ways inside each. ``active``: only
    the experts one token passes through (for FLOPs).
    """
    mixer = mixer_params(arch, mixer_at(arch, index), _attention_params(arch))
    norms = arch.norms_per_layer * arch.norm_params
    mlp = mlp_at(arch, index)
    if mlp != "E":
        dense = _mlp_params(arch, arch.dense_ffn or arch.ffn) if mlp == "D" else 0
        return -(-(mixer + dense) // tp) + norms
    expert = _mlp_params(arch, arch.expert_ffn or arch.ffn, arch.expert_bias)
    shared = _mlp_params(arch, arch.shared_width) if arch.shared_width else 0
    router = arch.hidden * arch.experts + (arch.experts if arch.router_bias else 0) + \
        (arch.hidden if arch.shared_expert_gate else 0)
    experts = arch.experts_per_token if active else arch.experts
    return -(-mixer // tp) + norms + router + -(-(experts * expert) // (ep * tp)) + -(-shared // tp)


def _head_params(arch: Architecture) -> int:
    """The final norm and the task head (0 for the head weight when it is tied to the embedding)."""
    h, vocab = arch.hidden, arch.vocab
    head = arch.norm_params if arch.kind == "decoder" else 0        # final norm
    task = arch.task_head
    if task in ("causal-lm", "masked-lm"):
        if arch.mlm_head:
            head += h * h + h + arch.norm_params + vocab             # transform dense, its norm, decoder bias
        head_weight = 0 if arch.tied_embeddings else vocab * h
        return head + head_weight + (vocab if arch.head_bias else 0)
    if arch.kind == "encoder":
        head += h * h + h                                            # BertModel's pooler (dense + tanh)
    if task == "classification":
        # BertForSequenceClassification's classifier has a bias; the decoders' score layer has none
        head += h * arch.num_labels + (arch.num_labels if arch.kind == "encoder" else 0)
    return head


@lru_cache(maxsize=512)
def count_parameters(arch: Architecture) -> ParameterCount:
    """Exact parameter count of the transformers model that ``arch`` describes."""
    if arch.kind == "generic":
        n = arch.params_override
        return ParameterCount(0, 0, n, 0, n, n, n, {"model": n})
    if arch.kind == "encoder-decoder":
        return _count_encoder_decoder(arch)
    h, vocab = arch.hidden, arch.vocab
    embedding = vocab * h
    if arch.positions == "learned":
        embedding += arch.max_positions * h
    embedding += arch.type_vocab * h
    if arch.embedding_norm:
        embedding += arch.norm_params

    attention = _attention_params(arch)
    norms = arch.layers * arch.norms_per_layer * arch.norm_params
    layers_total = active_layers = mixers = 0
    for (mixer, _), (number, first) in layer_kinds(arch).items():
        layers_total += number * layer_params(arch, first)
        active_layers += number * layer_params(arch, first, active=True)
        mixers += number * mixer_params(arch, mixer, attention)
    head = _head_params(arch)
    seeing = vision.tower(arch)
    eyes = seeing.params() if seeing else 0
    total = embedding + layers_total + head + eyes
    active = embedding + active_layers + head + eyes
    largest = max(vocab * h, h * max(arch.ffn, arch.dense_ffn), h * arch.q_dim)
    parts = {"embedding": embedding, "attention": mixers, "mlp": layers_total - mixers - norms, "norms": norms,
             "head": head, **({"vision": eyes} if eyes else {})}
    return ParameterCount(embedding, layer_params(arch, arch.layers - 1), layers_total, head, total, active,
                          largest, parts)


def _count_encoder_decoder(arch: Architecture) -> ParameterCount:
    """T5ForConditionalGeneration: shared embedding, encoder and decoder stacks, optional untied head."""
    h = arch.hidden
    attention = 4 * h * arch.q_dim
    mlp = _mlp_params(arch, arch.ffn)
    bias_table = arch.relative_buckets * arch.heads
    encoder = arch.layers * (attention + mlp + 2 * arch.norm_params) + bias_table + arch.norm_params
    decoder = arch.decoder_layers * (2 * attention + mlp + 3 * arch.norm_params) + bias_table + arch.norm_params
    embedding = arch.vocab * h
    head = 0 if arch.tied_embeddings else arch.vocab * h
    total = embedding + encoder + decoder + head
    layers_total = encoder + decoder
    return ParameterCount(embedding, layers_total // (arch.layers + arch.decoder_layers), layers_total, head,
                          total, total, max(arch.vocab * h, h * arch.ffn),
                          {"embedding": embedding, "encoder": encoder, "decoder": decoder, "head": head})


ARCH_FIELDS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts",
               "experts_per_token", "expert_ffn", "tied", "max_positions", "head", "num_labels")


def with_overrides(arch: Architecture, overrides: "Mapping[str, Any]") -> Architecture:
    """A copy of ``arch`` with fields replaced by the schema's architecture keys."""
    changes = {k: v for k, v in overrides.items() if k in ARCH_FIELDS and v is not None}
    if "tied" in changes:
        changes["tied_embeddings"] = changes.pop("tied") == "yes"
    if "heads" in changes and "kv_heads" not in changes and arch.kv_heads == arch.heads:
        changes["kv_heads"] = changes["heads"]      # multi-head attention stays multi-head
    return replace(arch, **changes) if changes else arch
