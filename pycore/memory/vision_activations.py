"""What a vision-language model's vision tower saves for backward in training, per image patch.

A tower's blocks are transformer blocks over the image's patches (not its merged tokens): the saved tensors of
one are pycore.memory.activations.layer_terms of the block's shape with flash attention (what SDPA's fused kernels
keep: q, k, v, the output and the log-sum-exp; attention runs per window or per image, so nothing grows with the
square of the patches), and what the family's code does differently, read off the tensors autograd saves
(validation/measure_vl.py, transformers 5.24):

- Qwen2.5-VL (``Qwen2_5_VLVisionBlock``): v is a view of the fused qkv projection's output, which it keeps whole
  (2·e·h more); each window's SDPA output is kept and so is their concatenation, o_proj's input (counted). Once a
  tower: rotary cos and sin in fp32 (2·4·h/heads), the window permutation (two int64 per merged token), and the
  merger's RMSNorm, its two linears' inputs and GELU's input (3·e·h a patch: merge² patches make one m²·h token).
- Qwen3-VL (Qwen3.5's tower, ``Qwen3_5VisionBlock``): the same, with LayerNorm and a GELU fc1/fc2 MLP, no window
  permutation, and learned positions interpolated per patch (four int64 indices and four fp32 weights).
- Gemma 3 (SigLIP, ``SiglipEncoderLayer``): o_proj reads SDPA's output itself (e·h less than layer_terms, which
  counts both); under autocast q, k and v_proj each keep their own 16-bit copy of the LayerNorm's fp32 output
  (2·e·h more). Once a tower: the position ids (int64), the post-LayerNorm, the average pool's input (e·h), per
  pooled token the projector's RMSNorm in fp32 and the projection's input, and under autocast the patch Conv2d's
  16-bit copy of the pixels (3·p²·e).

The tower is trained with the model in a full fine-tune (the Trainer's default: every parameter requires a
gradient); with adapters (LoRA, QLoRA) it is taken as frozen, which keeps nothing. Under full recompute (transformers'
gradient_checkpointing_enable checkpoints the vision blocks too) each block keeps its input. Llama 4's and LFM2-VL's
towers are not measured: their activations are said to be left out.
"""

from typing import TYPE_CHECKING

from pycore.base.expr import sym
from pycore.memory.activations import _norm_terms, layer_terms
from pycore.memory.pools import Pool, make
from pycore.model.architecture import Architecture

if TYPE_CHECKING:
    from pycore.memory.parallel import Stage
    from pycore.memory.setup import Setup

MEASURED = ("qwen2_5_vl", "qwen3_vl", "siglip")     # the towers validation/measure_vl.py measures
SOURCE = "vision tower blocks as pycore.memory.activations.layer_terms (flash) with the family's differences, " \
         "pycore/memory/vision_activations.py; checked in docs/validation.md (validation/measure_vl.py)"


def block_shape(arch: Architecture) -> Architecture:
    """The tower's block as a decoder layer's shape: Qwen2.5-VL's RMSNorm and gated SiLU MLP, SigLIP's LayerNorm
    and GELU (tanh) fc1/fc2, biased projections in both; heads from vision_heads."""
    qwen = arch.vision_family == "qwen2_5_vl"
    return Architecture(name=f"{arch.name} vision tower", layers=arch.vision_layers, hidden=arch.vision_hidden,
                        heads=arch.vision_heads, kv_heads=arch.vision_heads, ffn=arch.vision_ffn, vocab=1,
                        norm="rmsnorm" if qwen else "layernorm", mlp="gated" if qwen else "plain",
                        activation="silu" if qwen else "gelu_tanh", qkv_bias=True, out_bias=True, mlp_bias=True)


def _qwen_rest(arch: Architecture, block: Architecture, e: float, amp: bool) -> float:
    """Once a Qwen tower: rotary cos and sin (fp32), the merger's norm, its two linears' inputs and GELU's input;
    Qwen2.5-VL's window permutation (two int64 per merged token), Qwen3-VL's interpolated learned positions (four
    int64 indices and four fp32 weights a patch)."""
    h, merge = arch.vision_hidden, arch.vision_merge * arch.vision_merge
    norm = sum(t.bytes_per_token for t in _norm_terms(block, e, amp, 1, "merger norm"))
    placed = 16 / merge if arch.vision_family == "qwen2_5_vl" else 4 * 8 + 4 * 4
    return 2 * 4 * h / block.heads + placed + norm + 3 * e * h


def per_patch(setup: "Setup") -> "tuple[float, float]":
    """(bytes one block saves per patch, bytes the rest of the tower saves per patch)."""
    arch, policy = setup.arch, setup.policy
    block, e, amp = block_shape(arch), policy.bytes("act"), policy.autocast
    h, merge = arch.vision_hidden, arch.vision_merge * arch.vision_merge
    full = setup.workload.recompute == "full"
    saved = e * h if full else sum(t.bytes_per_token for t in layer_terms(block, policy, "flash", "none", 1))
    if arch.vision_family in ("qwen2_5_vl", "qwen3_vl"):
        if not full:
            saved += 2 * e * h                                      # the fused qkv output v keeps alive
        rest = _qwen_rest(arch, block, e, amp)
    else:
        if not full:
            saved -= e * h                                          # o_proj reads SDPA's output itself
            saved += 2 * e * h if amp else 0                        # q, k and v_proj cast the fp32 norm each
        norm = sum(t.bytes_per_token for t in _norm_terms(block, e, amp, 0, "post-LayerNorm"))
        pixels = 3 * arch.vision_patch ** 2 * e if amp else 0       # the patch Conv2d's cast of the pixels
        rest = 8 + norm + e * h + (4 * h + 4 + 4 * h + e * h) / merge + pixels
    return saved, rest


def pools(setup: "Setup", stage: "Stage", moments: "tuple[str, ...]") -> "list[Pool]":
    """The tower's saved activations for one micro-batch, on the stage that holds the embedding; none when the
    model has no measured tower, no images are given, or the tower is frozen."""
    arch, work = setup.arch, setup.workload
    if not (work.training and work.image_tokens and stage.has_embedding and arch.vision_family in MEASURED) or \
            setup.finetune.adapters:
        return []
    block, rest = per_patch(setup)
    patches = work.batch * work.image_tokens * arch.vision_merge * arch.vision_merge
    q = (sym("v", block) * sym("Lv", arch.vision_layers) + sym("r", rest)) * sym("P", patches) * \
        sym("m", stage.in_flight)
    return [make("vision_activations", "Vision tower activations (saved for backward)", q, moments, SOURCE,
                 "v = bytes one vision block saves per patch; Lv = vision blocks; r = the tower's other saved bytes "
                 "per patch (embeddings, merger or projector); P = image patches of the micro-batch "
                 "(image tokens × merge²); m = micro-batches in flight (1F1B)" +
                 ("; full recompute keeps each block's input" if work.recompute == "full" else ""))]


def note(setup: "Setup") -> str:
    """What the estimate says of the vision tower's own memory beside the image tokens."""
    arch, work = setup.arch, setup.workload
    if not work.training:
        return "vLLM's encoder cache and the encoder's share of its profiling run are not modelled yet" \
            if work.engine == "vllm" else "the vision encoder's transient activations are not modelled yet"
    if setup.finetune.adapters:
        return "the vision tower is taken as frozen, without adapters, so it keeps nothing for backward"
    if arch.vision_family not in MEASURED:
        return "the vision tower's saved activations are not modelled for this tower yet (Qwen2.5-VL's, Qwen3.5's " \
            "and Gemma 3's are, measured by validation/measure_vl.py)"
    return "the vision tower's saved activations are counted per image patch (Vision tower activations)"
