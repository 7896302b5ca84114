"""Readers of the config.json keys that say which layer is which: hybrid (state-space, linear-attention,
convolution) families and those whose attention or MLP changes from layer to layer.

Each reader follows its family's configuration class in transformers 5.24 (named beside it) and writes
``layer_pattern`` / ``mlp_pattern`` (pycore/model/mixers.py) and the mixers' sizes into ``extra``. A
``layer_types`` entry that is not understood is refused by name, never read as attention silently.
"""

import math
from typing import TYPE_CHECKING, Any, Callable, Sequence

from pycore.base.errors import InputError

if TYPE_CHECKING:
    from pycore.model.hf_config import Fields, Traits, _Reader

# layer_types / layers_block_type names -> mixer letters, as transformers reads them (its
# _LEGACY_LAYER_TYPE_REMAP maps "mamba" to linear_attention and "attention" to full_attention).
_ATTENTION_TYPES = {"full_attention": "A", "attention": "A", "sliding_attention": "S", "chunked_attention": "C"}


def _layer_types(reader: "_Reader", key: str, layers: int, linear: str, extra: "dict[str, str]") -> str:
    """The mixer letters of ``layer_types``-style key ``key``; ``linear`` is the family's linear_attention."""
    names = reader.text_list(key, 10_000)
    if names is None:
        return ""
    table = {**_ATTENTION_TYPES, "linear_attention": linear, "mamba": linear, **extra}
    unknown = sorted({name for name in names if name not in table})
    if unknown:
        raise InputError("config", f"{key}: layer type {unknown[0][:40]!r} is not one pycore knows "
                                   f"({', '.join(sorted(table))})")
    if len(names) != layers:
        raise InputError("config", f"{key}: one entry per layer ({layers}), got {len(names)}")
    return "".join(table[name] for name in names)


def _every(layers: int, period: int, offset: int) -> "list[bool]":
    return [i % period == offset for i in range(layers)]


def _mamba2_sizes(reader: "_Reader", extra: "Traits", keys: "dict[str, Sequence[str]]", inner: int) -> None:
    """Mamba-2 sizes from a family's key names (``keys``: field -> config keys, first given wins), and its scan
    chunk (chunk_size or mamba_chunk_size, 256 by default in every family's config class but Nemotron-H's 128)."""
    extra["ssm_chunk"] = reader.integer("ssm_chunk", ("chunk_size", "mamba_chunk_size")) or \
        (128 if "ssm_state_size" in reader.config else 256)
    for field, names in keys.items():
        value = reader.integer(field, names)
        if value is None:
            raise InputError("config", f"missing {names[0]}")
        extra[field] = value
    extra["ssm_inner"] = inner


def _qwen3_next(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Qwen3NextConfig: layer_types of linear_attention (gated DeltaNet) and full_attention (gated, with
    q/k norms); every layer's MLP sparse unless in mlp_only_layers or off the decoder_sparse_step."""
    layers = fields["layers"]
    interval = reader.integer("layers", ("full_attention_interval",), low=1) or 4
    extra["layer_pattern"] = _layer_types(reader, "layer_types", layers, "L", {}) or \
        "".join("L" if (i + 1) % interval else "A" for i in range(layers))   # Qwen3NextConfig.__post_init__
    for field, key, default in (("linear_key_heads", "linear_num_key_heads", 16),
                                ("linear_value_heads", "linear_num_value_heads", 32),
                                ("linear_key_dim", "linear_key_head_dim", 128),
                                ("linear_value_dim", "linear_value_head_dim", 128),
                                ("conv_kernel", "linear_conv_kernel_dim", 4)):
        extra[field] = reader.integer(field, (key,)) or default
    if fields.get("experts"):
        step = reader.integer("layers", ("decoder_sparse_step",), low=1) or 1
        dense = set(reader.integer_list("mlp_only_layers", layers))
        extra["mlp_pattern"] = "".join("D" if i in dense or (i + 1) % step else "E" for i in range(layers))
    extra["attn_output_gate"] = reader.flag("attn_output_gate", True)
    dtype = reader.config.get("mamba_ssm_dtype")
    extra["ssm_state_fp32"] = dtype == "float32"      # Qwen3.5: its DeltaNet state kept in fp32 (vLLM reads this)
    _qwen_vision(reader, fields, extra)


def _granite_hybrid(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """GraniteMoeHybridConfig: layer_types of mamba (Mamba-2) and attention; every layer has the shared MLP
    (shared_intermediate_size) and, when num_local_experts > 0, routed experts of intermediate_size."""
    layers, hidden = fields["layers"], fields["hidden"]
    extra["layer_pattern"] = _layer_types(reader, "layer_types", layers, "M", {}) or "M" * layers
    expand = reader.integer("layers", ("mamba_expand",), low=1, high=64) or 2
    _mamba2_sizes(reader, extra, {"ssm_heads": ("mamba_n_heads",), "ssm_head_dim": ("mamba_d_head",),
                                  "ssm_state": ("mamba_d_state",), "ssm_groups": ("mamba_n_groups",),
                                  "conv_kernel": ("mamba_d_conv",)}, expand * hidden)
    extra.update(conv_bias=reader.flag("mamba_conv_bias", True), ssm_proj_bias=reader.flag("mamba_proj_bias", False))
    if reader.config.get("position_embedding_type") != "rope":
        extra["positions"] = "none"     # NoPE: the attention layers rotate nothing unless position_embedding_type is rope
    _attention_bias(reader, extra)
    shared = reader.integer("shared_expert_ffn", ("shared_intermediate_size",)) or 1024
    if fields.get("experts"):
        fields["expert_ffn"], fields["shared_expert_ffn"] = fields["ffn"], shared
        extra["mlp_pattern"] = "E" * layers
    else:
        fields["ffn"] = shared


def _nemotron_h(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """NemotronHConfig: one mixer or one MLP per block (layers_block_type, or the older
    hybrid_override_pattern: M Mamba-2, * attention, - MLP, E experts), non-gated relu² MLPs, one norm."""
    pattern = reader.config.get("hybrid_override_pattern")
    names = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
    if isinstance(pattern, str) and reader.config.get("layers_block_type") is None:
        if not pattern or set(pattern) - set(names):
            raise InputError("config", "hybrid_override_pattern: letters M, *, - and E only")
        reader.config["layers_block_type"] = [names[c] for c in pattern]
    fields["layers"] = len(reader.text_list("layers_block_type", 10_000) or ()) or fields["layers"]
    blocks = _layer_types(reader, "layers_block_type", fields["layers"], "M", {"mlp": "-", "moe": "-"})
    types = reader.config.get("layers_block_type") or []
    extra["layer_pattern"] = blocks
    extra["mlp_pattern"] = "".join({"mlp": "D", "moe": "E"}.get(t, "-") for t in types)
    heads = reader.integer("ssm_heads", ("mamba_num_heads",)) or 128
    head_dim = reader.integer("ssm_head_dim", ("mamba_head_dim",)) or 64
    _mamba2_sizes(reader, extra, {"ssm_state": ("ssm_state_size",), "ssm_groups": ("n_groups",),
                                  "conv_kernel": ("conv_kernel",)}, heads * head_dim)
    extra.update(ssm_heads=heads, ssm_head_dim=head_dim, conv_bias=reader.flag("use_conv_bias", True),
                 ssm_proj_bias=reader.flag("mamba_proj_bias", False), mlp="plain", activation="relu2",
                 norms_per_layer=1, mlp_bias=reader.flag("mlp_bias", False), expert_bias=False)
    _attention_bias(reader, extra)
    if fields.get("experts"):
        shared = reader.integer("shared_expert_ffn", ("moe_shared_expert_intermediate_size",)) or 0
        fields["shared_expert_ffn"] = shared * (reader.integer("shared_experts", ("n_shared_experts",)) or 1)
        fields.pop("shared_experts", None)


def _falcon_h1(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """FalconH1Config: attention and Mamba-2 side by side in every layer, then a gated MLP."""
    layers, hidden = fields["layers"], fields["hidden"]
    expand = reader.integer("layers", ("mamba_expand",), low=1, high=64) or 2
    inner = reader.integer("ssm_inner", ("mamba_d_ssm",)) or expand * hidden
    _mamba2_sizes(reader, extra, {"ssm_heads": ("mamba_n_heads",), "ssm_head_dim": ("mamba_d_head",),
                                  "ssm_state": ("mamba_d_state",), "ssm_groups": ("mamba_n_groups",),
                                  "conv_kernel": ("mamba_d_conv",)}, inner)
    if reader.flag("mamba_proj_bias", False) != reader.flag("projectors_bias", False):
        raise InputError("config", "mamba_proj_bias and projectors_bias: pycore counts Mamba projections "
                                   "with both biased or neither")
    extra.update(layer_pattern="P" * layers, conv_bias=reader.flag("mamba_conv_bias", True),
                 ssm_proj_bias=reader.flag("mamba_proj_bias", False), ssm_norm=reader.flag("mamba_rms_norm", False),
                 mlp_bias=reader.flag("mlp_bias", False))
    _attention_bias(reader, extra)


def _mamba2(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Mamba2Config: every block a norm and a Mamba-2 mixer; no attention, no MLP."""
    layers, hidden = fields["layers"], fields["hidden"]
    expand = reader.integer("layers", ("expand",), low=1, high=64) or 2
    _mamba2_sizes(reader, extra, {"ssm_heads": ("num_heads",), "ssm_head_dim": ("head_dim",),
                                  "ssm_state": ("state_size",), "ssm_groups": ("n_groups",),
                                  "conv_kernel": ("conv_kernel",)}, expand * hidden)
    extra.update(layer_pattern="M" * layers, mlp_pattern="-" * layers, norms_per_layer=1,
                 conv_bias=reader.flag("use_conv_bias", True), ssm_proj_bias=reader.flag("use_bias", False))


def _jamba(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """JambaConfig: attention where layer % attn_layer_period == attn_layer_offset, Mamba elsewhere; experts
    where layer % expert_layer_period == expert_layer_offset."""
    layers, hidden = fields["layers"], fields["hidden"]
    numbers = {key: reader.integer("layers", (key,), low=low) for key, low in
               (("attn_layer_period", 1), ("attn_layer_offset", 0), ("expert_layer_period", 1),
                ("expert_layer_offset", 0))}
    defaults = {"attn_layer_period": 8, "attn_layer_offset": 4, "expert_layer_period": 2, "expert_layer_offset": 1}
    period = {key: defaults[key] if value is None else value for key, value in numbers.items()}   # JambaConfig's
    attention = _every(layers, period["attn_layer_period"], period["attn_layer_offset"])
    experts = _every(layers, period["expert_layer_period"], period["expert_layer_offset"])
    rank = reader.config.get("mamba_dt_rank", "auto")
    expand = reader.integer("layers", ("mamba_expand",), low=1, high=64) or 2
    extra.update(layer_pattern="".join("A" if a else "m" for a in attention),
                 mlp_pattern="".join("E" if e and fields.get("experts") else "D" for e in experts),
                 ssm_inner=expand * hidden, ssm_state=reader.integer("ssm_state", ("mamba_d_state",)) or 16,
                 conv_kernel=reader.integer("conv_kernel", ("mamba_d_conv",)) or 4, ssm_dt_norms=True,
                 ssm_dt_rank=math.ceil(hidden / 16) if rank in ("auto", None) else
                 reader.integer("ssm_dt_rank", ("mamba_dt_rank",)),
                 conv_bias=reader.flag("mamba_conv_bias", True), ssm_proj_bias=reader.flag("mamba_proj_bias", False),
                 positions="none")      # JambaAttention applies no positional encoding (the Mamba layers order tokens)


def _lfm2(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Lfm2Config: layer_types of conv (short convolution) and full_attention (or full_attn_idxs); its MLP
    width block_auto_adjust_ff_dim'ed as Lfm2MLP does (2/3, times block_ffn_dim_multiplier, rounded up to
    block_multiple_of)."""
    layers = fields["layers"]
    pattern = _layer_types(reader, "layer_types", layers, "V", {"conv": "V"})
    if not pattern:
        full = set(reader.integer_list("full_attn_idxs", layers)) if "full_attn_idxs" in reader.config \
            else set(range(layers))
        pattern = "".join("A" if i in full else "V" for i in range(layers))
    width = reader.integer("ffn", ("block_ff_dim", "intermediate_size")) or fields.get("ffn")
    if not width:
        raise InputError("config", "missing block_ff_dim (or intermediate_size)")
    fields["ffn"] = width
    if reader.flag("block_auto_adjust_ff_dim", True):
        width = int(2 * fields["ffn"] / 3)
        multiplier = reader.config.get("block_ffn_dim_multiplier", 1.0)
        if multiplier is not None:
            if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or not 0 < multiplier < 100:
                raise InputError("config", "block_ffn_dim_multiplier: must be a number from 0 to 100")
            step = reader.integer("ffn", ("block_multiple_of",), low=1) or 256
            width = step * -(-int(multiplier * width) // step)
        fields["ffn"] = width
    extra.update(layer_pattern=pattern, conv_kernel=reader.integer("conv_kernel", ("conv_L_cache",)) or 3,
                 conv_bias=reader.flag("conv_bias", False), qk_norm="head")
    _lfm2_vision(reader, extra)


def _attention_bias(reader: "_Reader", extra: "Traits") -> None:
    biased = reader.flag("attention_bias", False)
    extra.update(qkv_bias=biased, out_bias=biased)


def _sliding_layers(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """OLMo 3, EXAONE 4: layer_types of sliding_attention and full_attention, sliding_window tokens."""
    pattern = _layer_types(reader, "layer_types", fields["layers"], "A", {})
    if pattern and "S" in pattern and fields.get("sliding_window"):
        extra.update(layer_pattern=pattern, sliding_window=fields["sliding_window"])
    _attention_bias(reader, extra)


def _llama4(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Llama4TextConfig: chunked attention on the layers with RoPE (attention_chunk_size), full attention on
    the NoPE ones; experts on moe_layers (else every interleave_moe_layer_step-th), a shared expert of
    intermediate_size, dense layers of intermediate_size_mlp."""
    layers = fields["layers"]
    chunk = reader.integer("sliding_window", ("attention_chunk_size",))
    interval = reader.integer("layers", ("no_rope_layer_interval",), low=1) or 4
    pattern = _layer_types(reader, "layer_types", layers, "A", {}) or \
        "".join("A" if (i + 1) % interval == 0 or not chunk else "C" for i in range(layers))
    step = reader.integer("layers", ("interleave_moe_layer_step",), low=1) or 1
    moe = set(reader.integer_list("moe_layers", layers)) if reader.config.get("moe_layers") is not None \
        else set(range(step - 1, layers, step))
    extra.update(layer_pattern=pattern, mlp_pattern="".join("E" if i in moe else "D" for i in range(layers)))
    if chunk and "C" in pattern:
        extra["sliding_window"] = chunk
    fields["dense_ffn"] = reader.integer("ffn", ("intermediate_size_mlp",)) or 16384
    if "ffn" not in fields:
        raise InputError("config", "missing intermediate_size")
    fields["shared_expert_ffn"] = fields["ffn"]
    extra["every_expert"] = True
    _attention_bias(reader, extra)
    _llama4_vision(reader, fields, extra)


# Llama4VisionConfig key -> Architecture field, each required
_LLAMA4_VISION = {"num_hidden_layers": "vision_layers", "hidden_size": "vision_hidden", "intermediate_size": "vision_ffn",
                  "patch_size": "vision_patch", "image_size": "vision_tile", "vision_output_dim": "vision_projector"}


def _llama4_vision(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Llama 4's vision tower from the wrapper's vision_config (pycore/model/vision.py), when it has one."""
    vision = reader.config.get("vision_config")
    if not isinstance(vision, dict):
        return
    inner = type(reader)(vision)
    for key, field in _LLAMA4_VISION.items():
        value = inner.integer(field, (key,))
        if value is None:
            raise InputError("config", f"vision_config.{key}: missing")
        extra[field] = value
    ratio = vision.get("pixel_shuffle_ratio", 0.5)
    same = [vision.get(key, extra["vision_projector"]) for key in ("projector_input_dim", "projector_output_dim")]
    if ratio not in (0.5, 0.25) or any(dim != extra["vision_projector"] for dim in same) or \
            vision.get("multi_modal_projector_bias"):
        raise InputError("config", "vision_config: pycore counts Llama 4's tower with pixel_shuffle_ratio 0.5 or 0.25, "
                                   "projector dims equal to vision_output_dim and no projector bias")
    extra.update(vision_family="llama4", vision_merge=round(1 / ratio) if ratio else 1,
                 vision_heads=inner.integer("vision_heads", ("num_attention_heads",)) or 16)


def _apertus(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """ApertusConfig: a plain up/down MLP with xIELU (two learned scalars per MLP), q/k norms per head."""
    xielu = reader.config.get("hidden_act", "xielu") == "xielu"
    extra.update(mlp="plain", mlp_extra_params=2 if xielu else 0, qk_norm="head", **({"activation": "xielu"} if xielu
                                                                                      else {}))
    _attention_bias(reader, extra)


def _glm4_moe(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Glm4MoeConfig: first_k_dense_replace dense layers, then routed and shared experts; use_qk_norm;
    attention_bias biases q, k and v only (o_proj has none)."""
    if reader.flag("use_qk_norm", False):
        extra["qk_norm"] = "head"
    extra["qkv_bias"] = reader.flag("attention_bias", False)


def _qwen_vision(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Qwen3.5's and Qwen3-VL's vision tower (LayerNorm blocks, learned positions, a plain GELU MLP), from the
    wrapper's vision_config; Qwen3-VL's deepstack mergers are read by ``_qwen3_vl`` (Qwen3.5 builds none)."""
    vision = reader.config.get("vision_config")
    if not isinstance(vision, dict):
        return
    inner = type(reader)(vision)
    keys = {"depth": "vision_layers", "hidden_size": "vision_hidden", "intermediate_size": "vision_ffn",
            "patch_size": "vision_patch", "temporal_patch_size": "vision_temporal_patch",
            "spatial_merge_size": "vision_merge", "num_position_embeddings": "vision_positions"}
    for key, field in keys.items():
        value = inner.integer(field, (key,))
        if value is None:
            raise InputError("config", f"vision_config.{key}: missing")
        extra[field] = value
    extra.update(vision_family="qwen3_vl", vision_heads=inner.integer("vision_heads", ("num_heads",)) or 16)


# Qwen3VLVisionConfig's deepstack_visual_indexes when a config leaves it out (transformers 5.24)
_DEEPSTACK = [8, 16, 24]


def _qwen3_vl(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Qwen3VLTextConfig / Qwen3VLMoeTextConfig: Qwen3's (or Qwen3-MoE's) decoder layers, attention_bias on q, k, v
    and o; the wrapper's vision_config is Qwen3-VL's tower with its deepstack mergers."""
    _attention_bias(reader, extra)
    _qwen_vision(reader, fields, extra)
    vision = reader.config.get("vision_config")
    if isinstance(vision, dict):
        # Qwen3VLVisionModel builds a merger per index, whether or not the tower has that block (none runs then)
        indexes = vision.get("deepstack_visual_indexes", _DEEPSTACK)
        if not isinstance(indexes, list) or len(indexes) > extra["vision_layers"] or \
                not all(type(i) is int and i >= 0 for i in indexes):
            raise InputError("config", f"vision_config.deepstack_visual_indexes: a list of block numbers, got "
                                       f"{str(indexes)[:40]}")
        extra["vision_deepstack"] = len(indexes)


# SiglipVisionConfig / Siglip2VisionConfig key -> (Architecture field, the class's default), transformers 5.24
_SIGLIP = {"num_hidden_layers": ("vision_layers", 12), "hidden_size": ("vision_hidden", 768),
           "num_attention_heads": ("vision_heads", 12),
           "intermediate_size": ("vision_ffn", 3072), "patch_size": ("vision_patch", 16)}
# LFM2-VL's processor settings pycore's image tokens follow (pycore/model/vision.py: Lfm2VlImageProcessor's defaults)
_LFM2_PROCESSOR = {"min_image_tokens": 64, "max_image_tokens": 256, "min_tiles": 2, "max_tiles": 10,
                   "max_pixels_tolerance": 2.0, "use_thumbnail": True, "use_image_special_tokens": True,
                   "do_image_splitting": True, "projector_bias": True}


def _siglip_tower(reader: "_Reader", extra: "Traits", kind: str) -> "_Reader | None":
    """The SigLIP (``kind`` siglip_vision_model) or SigLIP2 tower of a wrapper's vision_config, whose class is the
    wrapper's default when the config names none; None for a text-only config."""
    vision = reader.config.get("vision_config")
    if not isinstance(vision, dict):
        return None
    if vision.get("model_type", kind) != kind:
        raise InputError("config", f"vision_config.model_type: pycore counts a {kind} tower here, got "
                                   f"{str(vision.get('model_type'))[:40]!r}")
    inner = type(reader)(vision)
    for key, (field, default) in _SIGLIP.items():
        extra[field] = inner.integer(field, (key,)) or default
    if vision.get("vision_use_head", True) or vision.get("num_channels", 3) != 3:
        raise InputError("config", "vision_config: pycore counts a SigLIP tower without its pooling head "
                                   "(vision_use_head false) over 3 channels")
    return inner


def _gemma3_vision(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """Gemma 3's SigLIP tower (Gemma3Config's vision_config) and Gemma3MultiModalProjector, which pools the image's
    (image_size / patch_size)² patches to mm_tokens_per_image; pycore/model/vision.py counts them."""
    inner = _siglip_tower(reader, extra, "siglip_vision_model")
    if inner is None:
        return
    tile = inner.integer("vision_tile", ("image_size",)) or 224
    side = tile // extra["vision_patch"]
    tokens = reader.integer("vision_positions", ("mm_tokens_per_image",)) or 256
    per_side = math.isqrt(tokens)
    if per_side * per_side != tokens or side % per_side:
        raise InputError("config", f"mm_tokens_per_image: must be a square that divides the {side}x{side} patches "
                                   f"of an image, got {tokens:,}")
    extra.update(vision_family="siglip", vision_tile=tile, vision_merge=side // per_side)


def _lfm2_vision(reader: "_Reader", extra: "Traits") -> None:
    """LFM2-VL's SigLIP2 tower (Lfm2VlConfig's vision_config) and the wrapper's projector and tiling keys (Lfm2VlConfig,
    Lfm2VlImageProcessor), carried by _text_decoder; pycore/model/vision.py counts them."""
    inner = _siglip_tower(reader, extra, "siglip2_vision_model")
    if inner is None:
        return
    for key, default in _LFM2_PROCESSOR.items():
        if reader.config.get(key, default) != default:
            raise InputError("config", f"{key}: pycore counts LFM2-VL's image tokens with the processor's default "
                                       f"{default}, got {str(reader.config.get(key))[:40]}")
    patch = extra["vision_patch"]
    if reader.config.get("encoder_patch_size", patch) != patch:
        raise InputError("config", f"encoder_patch_size: must equal vision_config.patch_size ({patch})")
    extra.update(vision_family="siglip2", vision_positions=inner.integer("vision_positions", ("num_patches",)) or 256,
                 vision_merge=reader.integer("vision_merge", ("downsample_factor",)) or 2,
                 vision_projector=reader.integer("vision_projector", ("projector_hidden_size",)) or 2560,
                 vision_projector_norm=reader.flag("projector_use_layernorm", True),
                 vision_tile=reader.integer("vision_tile", ("tile_size",)) or 512)


class TowerNotCounted(Exception):
    """A wrapper's vision tower in a shape transformers builds but pycore does not model: the config is read as its
    text decoder alone, and the estimate says which setting left the tower out."""


def _must_be(key: str, value: Any, expected: Any, tower: str) -> None:
    """``value`` of ``key`` must be ``expected`` (compared with its type: 1 is not true) for pycore to count the tower."""
    if type(value) is not type(expected) or value != expected:
        raise TowerNotCounted(f"{key} {str(value)[:40]} (pycore counts {tower} with {expected!r})")


def _tower_sizes(reader: "_Reader", table: "dict[str, tuple[str, int]]", extra: "Traits") -> "_Reader":
    """A wrapper's vision_config read into ``extra`` by ``table`` (key -> (Architecture field, its config class's
    default)); the vision_config's reader."""
    inner = type(reader)(reader.config["vision_config"])
    for key, (field, default) in table.items():
        extra[field] = inner.integer(field, (key,)) or default
    return inner


# CLIPVisionConfig key -> (Architecture field, the class's default), transformers 5.24
_CLIP = {"num_hidden_layers": ("vision_layers", 12), "hidden_size": ("vision_hidden", 768),
         "num_attention_heads": ("vision_heads", 12), "intermediate_size": ("vision_ffn", 3072),
         "patch_size": ("vision_patch", 32), "image_size": ("vision_tile", 224)}


def _llava_vision(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """LLaVA-1.5's CLIP tower (LlavaConfig's vision_config, a clip_vision_model: its keys left out take
    CLIPVisionConfig's defaults) and LlavaMultiModalProjector, two biased linears around a GELU from the tower's width to
    the decoder's; pycore/model/vision.py counts them. A setting transformers builds but pycore does not model (another
    activation, a list of feature layers) leaves the tower out, named (TowerNotCounted)."""
    inner = _tower_sizes(reader, _CLIP, extra)
    _must_be("vision_config.num_channels", inner.config.get("num_channels", 3), 3, "LLaVA's tower")
    _must_be("vision_config.hidden_act", inner.config.get("hidden_act", "quick_gelu"), "quick_gelu", "LLaVA's tower")
    _must_be("projector_hidden_act", reader.config.get("projector_hidden_act", "gelu"), "gelu", "LLaVA's projector")
    _must_be("multimodal_projector_bias", reader.config.get("multimodal_projector_bias", True), True,
             "LLaVA's projector")
    layers, layer = extra["vision_layers"], reader.config.get("vision_feature_layer", -2)
    if not isinstance(layer, int) or isinstance(layer, bool) or not -layers <= layer <= layers:
        # a list of layers (their features concatenated) widens the projector
        raise TowerNotCounted(f"vision_feature_layer {str(layer)[:40]} (pycore counts one feature layer, an index "
                              f"from -{layers} to {layers})")
    strategy = reader.config.get("vision_feature_select_strategy", "default")
    if strategy not in ("default", "full"):
        raise InputError("config", f"vision_feature_select_strategy: \"default\" or \"full\", got {str(strategy)[:40]!r}")
    if extra["vision_tile"] % extra["vision_patch"]:
        raise InputError("config", f"vision_config.image_size: must be a multiple of patch_size "
                                   f"({extra['vision_patch']}), got {extra['vision_tile']:,}")
    # hidden_states[k]: the embeddings for k = 0, block k's output after; a negative k counts from the last block's
    unused = -layer - 1 if layer < 0 else layers - layer
    extra.update(vision_family="clip", vision_keep_cls=strategy == "full", vision_unused_layers=unused)


# LlavaNextConfig's image_grid_pinpoints when a config leaves them out (transformers 5.24), [height, width] each
_PINPOINTS = [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]]


def _llava_next_vision(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """LLaVA-NeXT (LlavaNextConfig): LLaVA-1.5's CLIP tower and projector, an image_newline parameter of the decoder's
    width, and image_grid_pinpoints, the crop grids an image is fitted to (pycore/model/vision.py). The "full"
    strategy, whose class tokens pack_image_features cannot lay out in a grid, leaves the tower out (TowerNotCounted)."""
    _llava_vision(reader, fields, extra)
    if extra["vision_keep_cls"]:
        raise TowerNotCounted("vision_feature_select_strategy \"full\" (LLaVA-NeXT's grid of crops needs \"default\")")
    pinpoints = reader.config.get("image_grid_pinpoints", _PINPOINTS)
    tile = extra["vision_tile"]
    if not isinstance(pinpoints, list) or not 1 <= len(pinpoints) <= 100 or not all(
            isinstance(p, list) and len(p) == 2 and all(type(v) is int and 0 < v <= 100_000 and v % tile == 0
                                                        for v in p) for p in pinpoints):
        raise InputError("config", f"image_grid_pinpoints: a list of [height, width] pairs, multiples of the tower's "
                                   f"image_size ({tile:,}), got {str(pinpoints)[:60]}")
    extra["vision_pinpoints"] = ",".join(f"{h}x{w}" for h, w in pinpoints)


# InternVLVisionConfig key -> (Architecture field, the class's default), transformers 5.24; image_size and patch_size
# may be [height, width] pairs, which pycore takes square
_INTERNVL = {"num_hidden_layers": ("vision_layers", 24), "hidden_size": ("vision_hidden", 1024),
             "num_attention_heads": ("vision_heads", 16), "intermediate_size": ("vision_ffn", 4096)}
# the InternViT settings pycore counts (InternViT-300M's, the tower of InternVL3-1B to -14B, and InternViT-6B's, whose
# norm_type and use_qk_norm are read): key -> the value it must have
_INTERNVL_FIXED = {"use_mask_token": False,
                   "use_absolute_position_embeddings": True, "use_mean_pooling": True, "hidden_act": "gelu",
                   "num_channels": 3}


def _square(inner: "_Reader", key: str, default: int) -> int:
    """An InternVLVisionConfig size that may be an int or a [height, width] pair; a non-square pair leaves the tower
    out (TowerNotCounted)."""
    value = inner.config.get(key, default)
    if isinstance(value, list) and len(value) == 2 and all(type(v) is int for v in value):
        if value[0] != value[1]:
            raise TowerNotCounted(f"vision_config.{key} {value} (pycore counts square tiles)")
        value = value[0]
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 100_000:
        raise InputError("config", f"vision_config.{key}: pycore counts a square size in pixels (an integer or "
                                   f"[n, n]), got {str(value)[:40]!r}")
    return value


def _internvl_vision(reader: "_Reader", fields: "Fields", extra: "Traits") -> None:
    """InternVL's InternViT tower (InternVLConfig's vision_config, an internvl_vision) and InternVLMultiModalProjector
    (a LayerNorm and two biased linears around a GELU over the pixel-shuffled features); pycore/model/vision.py counts
    them, with InternViT-6B's RMSNorm blocks and query/key norms where norm_type and use_qk_norm say so. A tower with
    a mask token or without mean pooling, or a feature layer or strategy other than the last layer without its class
    token, leaves the tower out, named (TowerNotCounted)."""
    inner = _tower_sizes(reader, _INTERNVL, extra)
    for key, expected in _INTERNVL_FIXED.items():
        _must_be(f"vision_config.{key}", inner.config.get(key, expected), expected, "InternViT's shape")
    norm = inner.config.get("norm_type", "layer_norm")
    if norm not in ("layer_norm", "rms_norm"):
        raise TowerNotCounted(f"vision_config.norm_type {str(norm)[:40]} (pycore counts layer_norm and rms_norm)")
    wrapper = {"vision_feature_layer": -1, "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu",
               "downsample_ratio": 0.5}
    for key, expected in wrapper.items():
        _must_be(key, reader.config.get(key, expected), expected, "InternVL's")
    tile, patch = _square(inner, "image_size", 448), _square(inner, "patch_size", 14)
    if tile % (2 * patch):
        raise InputError("config", f"vision_config.image_size: must be a multiple of twice patch_size ({2 * patch}), "
                                   f"got {tile:,}")
    extra.update(vision_family="internvl", vision_tile=tile, vision_patch=patch, vision_merge=2,
                 vision_qkv_bias=inner.flag("attention_bias", False), vision_rms_norm=norm == "rms_norm",
                 vision_qk_norm=inner.flag("use_qk_norm", False))


# A wrapper's vision tower that any text decoder may sit under, by (the wrapper's model_type, vision_config's): LLaVA-1.5's
# CLIP, InternVL's InternViT, LLaVA-NeXT's CLIP with its grid of crops and image_newline
TOWERS: "dict[tuple[str, str], Callable[[_Reader, Fields, Traits], None]]" = {
    ("llava", "clip_vision_model"): _llava_vision, ("internvl", "internvl_vision"): _internvl_vision,
    ("llava_next", "clip_vision_model"): _llava_next_vision}

READERS: "dict[str, Callable[[_Reader, Fields, Traits], None]]" = {
    "qwen3_next": _qwen3_next, "qwen3_5_text": _qwen3_next, "qwen3_5_moe_text": _qwen3_next,
    "granitemoehybrid": _granite_hybrid, "nemotron_h": _nemotron_h,
    "falcon_h1": _falcon_h1, "mamba2": _mamba2, "jamba": _jamba, "lfm2": _lfm2, "olmo3": _sliding_layers,
    "exaone4": _sliding_layers, "llama4_text": _llama4, "apertus": _apertus, "glm4_moe": _glm4_moe,
    "gemma3_text": _gemma3_vision, "qwen3_vl_text": _qwen3_vl, "qwen3_vl_moe_text": _qwen3_vl,
}


def prepare(family_type: str, config: "dict[str, Any]") -> "dict[str, Any]":
    """The keys every family's reader expects, where a family leaves them to its config class: Gemma 3's vocabulary
    and positions; Nemotron-H's
    layer count is its layers_block_type's length; Mamba-2 has no attention heads and no MLP (the attention
    fields then describe nothing that is counted)."""
    if family_type == "nemotron_h" and config.get("num_hidden_layers") is None:
        blocks = config.get("layers_block_type", config.get("hybrid_override_pattern"))
        if isinstance(blocks, (list, str)) and blocks:
            config["num_hidden_layers"] = len(blocks)
    if family_type == "qwen3_5_moe_text":     # every layer routes to experts: Qwen3_5MoeTextConfig has no dense width
        config.setdefault("intermediate_size", config.get("moe_intermediate_size", 512))
    if family_type == "gemma3_text":      # Gemma3TextConfig's defaults, which Gemma 3's published configs leave to it
        config.setdefault("vocab_size", 262_208)
        config.setdefault("max_position_embeddings", 131_072)
    if family_type == "mamba2":
        config.setdefault("num_attention_heads", 1)
        expand = config.get("expand", 2)
        hidden = config.get("hidden_size")
        if isinstance(expand, int) and isinstance(hidden, int) and "intermediate_size" not in config:
            config["intermediate_size"] = expand * hidden
    return config
