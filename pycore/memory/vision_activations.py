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

- Llama 4 (``Llama4VisionEncoderLayer``): SigLIP's block (o_proj reads SDPA's output; autocast's three casts); the
  2D rotary multiplies fp32 complex copies of q and k by the complex64 table, which is all that product keeps (a
  buffer, once). The blocks run over each tile's patches and its class token. Once a tower: the unfolded pixels the
  patch linear keeps (3·p²·e), layernorm_pre and layernorm_post, and per merged token the pixel-shuffle MLP's fc1
  input (merge²·h), two GELUs' inputs, fc2's input and the projector's input (4·projector, GELU exact, dropout 0).
- LFM2-VL (``Siglip2EncoderLayer``): SigLIP's block over every picture padded to max_num_patches (1,024 at the
  processor's defaults), with the padding mask SDPA turns from bool into an additive mask of the query's dtype at
  each call and keeps (e·s² a picture a block, when any picture of the batch is padded: aten's
  convert_boolean_attn_mask runs before the backend is chosen, CUDA's efficient attention keeps it as its bias).
  Once a tower: the position table's interpolation weights (fp32 unless autocast casts them, num_patches a patch),
  the post-LayerNorm, the int64 gather of the unshuffled grid, and per merged token the projector's LayerNorm,
  linear_1's and linear_2's inputs and GELU's, and under autocast the patch linear's 16-bit copy of the pixels.

The tower is trained with the model in a full fine-tune (the Trainer's default: every parameter requires a
gradient); with adapters (LoRA, QLoRA) it is taken as frozen, which keeps nothing (measured for Llama 4 and LFM2-VL
with adapters on the decoder's q and v only: PEFT's name-based target_modules would also match the towers'
q_proj and v_proj). Under full recompute (transformers' gradient_checkpointing_enable checkpoints the vision blocks
too) each block keeps its input. The pixel values themselves (pixel_values, in the weights' dtype) are held through
the step, the tower frozen or not.
"""

from typing import TYPE_CHECKING

from pycore.base.expr import maximum, sym
from pycore.memory import model_states
from pycore.memory.activations import _norm_terms, layer_terms
from pycore.memory.pools import Pool, make
from pycore.model import vision
from pycore.model.architecture import Architecture

if TYPE_CHECKING:
    from pycore.memory.parallel import Stage
    from pycore.memory.setup import Setup

# the towers validation/measure_vl.py measures
MEASURED = ("qwen2_5_vl", "qwen3_vl", "siglip", "llama4", "siglip2", "clip", "internvl")
SOURCE = "vision tower blocks as pycore.memory.activations.layer_terms (flash) with the family's differences, " \
         "pycore/memory/vision_activations.py; checked in docs/validation.md (validation/measure_vl.py)"


def block_shape(arch: Architecture) -> Architecture:
    """The tower's block as a decoder layer's shape: Qwen2.5-VL's RMSNorm and gated SiLU MLP, SigLIP's LayerNorm
    and GELU (tanh) fc1/fc2, biased projections in both; heads from vision_heads."""
    qwen = arch.vision_family == "qwen2_5_vl"
    # InternViT-6B's RMSNorms, and its query/key norms, whose normalised output is cast back before the weight
    # multiplies it, as a head-wise norm's is (its rows are the whole query and key: 4 bytes a row apart)
    return Architecture(name=f"{arch.name} vision tower", layers=arch.vision_layers, hidden=arch.vision_hidden,
                        heads=arch.vision_heads, kv_heads=arch.vision_heads, ffn=arch.vision_ffn, vocab=1,
                        norm="rmsnorm" if qwen or arch.vision_rms_norm else "layernorm",
                        mlp="gated" if qwen else "plain", activation="silu" if qwen else "gelu_tanh",
                        qk_norm="head" if arch.vision_qk_norm else "none", qkv_bias=True, out_bias=True, mlp_bias=True)


def _qwen_rest(arch: Architecture, block: Architecture, e: float, amp: bool) -> float:
    """Once a Qwen tower: rotary cos and sin (fp32), the merger's norm, its two linears' inputs and GELU's input;
    Qwen2.5-VL's window permutation (two int64 per merged token), Qwen3-VL's interpolated learned positions (four
    int64 indices and four fp32 weights a patch); each of Qwen3-VL's deepstack mergers the same but for its norm's
    input, a block's output the next block keeps (its norm's output, 16-bit under autocast, fc1's and GELU's outputs,
    and fp32 mean and rstd per merged token)."""
    h, merge = arch.vision_hidden, arch.vision_merge * arch.vision_merge
    norm = sum(t.bytes_per_token for t in _norm_terms(block, e, amp, 1, "merger norm"))
    placed = 16 / merge if arch.vision_family == "qwen2_5_vl" else 4 * 8 + 4 * 4
    deepstack = arch.vision_deepstack * ((2 if amp else e) * h + 2 * e * h + 8 / merge)
    return 2 * 4 * h / block.heads + placed + norm + 3 * e * h + deepstack


def _llama4_rest(arch: Architecture, norm: float, e: float) -> float:
    """Once a Llama 4 tower, per patch: the unfolded pixels, layernorm_pre and layernorm_post, and per merged token
    the pixel-shuffle MLP's fc1 input (merge² patches of h), GELU, fc2, GELU and the projector's inputs."""
    h, merge, p = arch.vision_hidden, arch.vision_merge * arch.vision_merge, arch.vision_projector
    return 3 * arch.vision_patch ** 2 * e + 2 * norm + e * h + 4 * e * p / merge


def _clip_rest(arch: Architecture, norm: float, e: float, amp: bool) -> float:
    """Once a CLIP tower (LLaVA), per patch: the pre-LayerNorm, and per image token the projector's GELU input and
    linear_2's input (the decoder's width each; linear_1 reads a view of the feature layer's output, a block's
    input); under autocast the patch Conv2d's 16-bit copy of the pixels, and without it LLaVA-NeXT's, which feeds
    the Conv2d its crops' pixels concatenated (a copy in the weights' dtype: get_image_features)."""
    tokens = (arch.vision_tile // arch.vision_patch) ** 2
    per_token = 1 if arch.vision_keep_cls else tokens / (tokens + 1)
    pixels = 3 * arch.vision_patch ** 2 * (2 if amp else e if arch.vision_pinpoints else 0)
    return norm + 2 * e * arch.hidden * per_token + pixels


def _internvl_rest(arch: Architecture, e: float, amp: bool) -> float:
    """Once an InternViT tower, per patch (the class token's included): per patch feature the projector's LayerNorm
    input and output (pixel-shuffled, 4·h a token), and per image token the LayerNorm's mean and rstd, GELU's input and
    linear_2's input (the decoder's width each); under autocast the LayerNorm's fp32 input and the pixels' cast."""
    side = arch.vision_tile // arch.vision_patch
    features, tokens = side * side / (side * side + 1), side * side / 4 / (side * side + 1)
    norm = (4 + 2 if amp else 2 * e) * arch.vision_hidden * features
    pixels = 3 * arch.vision_patch ** 2 * 2 if amp else 0
    return norm + (8 + 2 * e * arch.hidden) * tokens + pixels


def _lfm2_rest(arch: Architecture, norm: float, e: float, amp: bool) -> float:
    """Once an LFM2-VL tower, per (padded) patch: the interpolation weights of the positions, the post-LayerNorm, the
    gather's int64 index, and per merged token the projector's LayerNorm (input, mean and rstd), linear_1's input,
    GELU's and linear_2's (projector_hidden_size each) and the kept-token mask; under autocast the pixels' cast."""
    h, merge, p = arch.vision_hidden, arch.vision_merge * arch.vision_merge, arch.vision_projector
    positions = (2 if amp else 4) * arch.vision_positions
    projector = ((4 if amp else e) * h + 8 / merge if arch.vision_projector_norm else 0) + e * h + (2 * e * p + 1) / merge
    pixels = 3 * arch.vision_patch ** 2 * 2 if amp else 0
    return positions + norm + 8 + projector + pixels


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
        return saved, _qwen_rest(arch, block, e, amp)
    if not full:
        saved -= e * h                                              # o_proj reads SDPA's output itself
        saved += 2 * e * h if amp else 0                            # q, k and v_proj cast the fp32 norm each
        saved += e * _padding_mask(setup)                           # LFM2-VL: the additive mask, a row a patch
    norm = sum(t.bytes_per_token for t in _norm_terms(block, e, amp, 0, "post-LayerNorm"))
    if arch.vision_family == "internvl":
        saved += 0 if full else 2 * e * h                           # the layer scales' inputs (lambda_1, lambda_2)
        return saved, _internvl_rest(arch, e, amp)
    if arch.vision_family == "clip":
        saved += 0 if full else e * arch.vision_ffn                 # QuickGELU's sigmoid, which its product keeps
        # the blocks past the feature layer free their QuickGELU's sigmoid and fc2's input with their unused output
        # (measured: the rest of what they save stays held)
        unused = 0 if full else arch.vision_unused_layers * 2 * e * arch.vision_ffn
        return saved, _clip_rest(arch, norm, e, amp) - unused
    if arch.vision_family == "llama4":
        return saved, _llama4_rest(arch, norm, e)
    if arch.vision_family == "siglip2":
        return saved, _lfm2_rest(arch, norm, e, amp)
    pixels = 3 * arch.vision_patch ** 2 * e if amp else 0           # the patch Conv2d's cast of the pixels
    return saved, 8 + norm + e * h + (4 * h + 4 + 4 * h + e * h) / merge + pixels


def _padding_mask(setup: "Setup") -> int:
    """LFM2-VL: the row of the s × s additive mask each padded patch has in each block (s = max_num_patches), when a
    picture of the image is padded; 0 for every other tower."""
    seeing, work = vision.tower(setup.arch), setup.workload
    if setup.arch.vision_family != "siglip2" or not seeing:
        return 0
    longest = seeing.padded_patches()
    padded = any(rows * columns < longest for rows, columns in seeing.tile_shapes(*work.image_size))
    return longest if padded else 0


def patches(setup: "Setup") -> int:
    """Positions the tower runs over for one micro-batch (pycore/model/vision.py VisionTower.patches)."""
    seeing, work = vision.tower(setup.arch), setup.workload
    if not seeing or not work.images:
        return 0
    return work.batch * work.images * seeing.patches(*work.image_size)


def _pixel_values(setup: "Setup", moments: "tuple[str, ...]",
                  after: "tuple[str, ...]" = ("backward end", "optimizer step")) -> "list[Pool]":
    """The micro-batch's pixel_values, held by the caller through the step (the Trainer's inputs) or the whole
    generate() call, in the weights' dtype as the model cards' examples pass them
    (``processor(...).to(model.device, torch.bfloat16)``)."""
    seeing, work = vision.tower(setup.arch), setup.workload
    if not seeing or not work.images:
        return []
    e = 4 if setup.policy.bytes("weight") >= 4 else 2
    values = work.batch * work.images * seeing.pixels(*work.image_size)
    q = sym("e", e) * sym("X", values)
    held = moments + tuple(m for m in after if m not in moments)
    return [make("image_inputs", "Image inputs (pixel_values)", q, held, "pycore/model/vision.py VisionTower.pixels; "
                 "checked in docs/validation.md (validation/measure_vl.py)",
                 "e = bytes a value (the weights' dtype); X = pixel values of the micro-batch's images (each "
                 "processed picture's channels × pixels, LFM2-VL's padded to max_num_patches)")]


def pools(setup: "Setup", stage: "Stage", moments: "tuple[str, ...]") -> "list[Pool]":
    """The tower's saved activations and the pixel values for one micro-batch, on the stage that holds the embedding;
    no activations when the model has no measured tower, no images are given, or the tower is frozen."""
    arch, work = setup.arch, setup.workload
    if not (work.training and work.image_tokens and stage.has_embedding):
        return []
    inputs = _pixel_values(setup, moments)
    if arch.vision_family not in MEASURED or setup.finetune.adapters:
        return inputs
    block, rest = per_patch(setup)
    q = (sym("v", block) * sym("Lv", arch.vision_layers) + sym("r", rest)) * sym("P", patches(setup)) * \
        sym("m", stage.in_flight)
    return [make("vision_activations", "Vision tower activations (saved for backward)", q, moments, SOURCE,
                 "v = bytes one vision block saves per patch; Lv = vision blocks; r = the tower's other saved bytes "
                 "per patch (embeddings, merger or projector); P = image patches of the micro-batch "
                 "(each tile's with Llama 4's class token, each picture's padded to max_num_patches for LFM2-VL); "
                 "m = micro-batches in flight (1F1B)" +
                 ("; full recompute keeps each block's input" if work.recompute == "full" else ""))] + inputs


ENCODER = "vision encoder"      # generate()'s moment before the prefill: the tower over every image of the batch
INFERENCE_SOURCE = "the tower's forward without gradients, its widest moment read off the live tensors of " \
                   "transformers 5.24's towers, pycore/memory/vision_activations.py inference_per_patch; checked in " \
                   "docs/validation.md (validation/measure_vl.py --generate)"


def inference_per_patch(setup: "Setup") -> "tuple[float, float]":
    """(bytes per patch of a block's widest moment, bytes per patch the tower holds beside its blocks) in a forward
    without gradients (generate()), e = the activations' bytes, h and f the block's width and MLP width:

    - every block holds its input x and its norm's output (the attention's argument) while it runs;
    - Qwen2.5-VL and Qwen3-VL: the fused qkv output (v is a view of it) while the rotary runs in fp32
      (apply_rotary_pos_emb_vision: fp32 copies of q and k unless e is 4, then q·cos, rotate_half's cat, its
      product with sin and the sum, four fp32 tensors at once), or at the output projection the rotated q and k, the
      per-window outputs, their cat and the projection (10·e·h); beside them the rotary cos and sin (fp32, h/heads
      each), the patches' int64 position ids, and Qwen3-VL's interpolated learned positions (fp32, summed) and its
      deepstack mergers' outputs (the decoder's width a merged token each, held for the decoder);
    - SigLIP (Gemma 3, LFM2-VL): x, the norm, q, k, v, SDPA's output and o_proj's (7·e·h), or the MLP's fc1 and GELU
      outputs (2·e·f); the embeddings stay referenced by the encoder's frame; CLIP (LLaVA) the same, its QuickGELU
      (x · sigmoid(1.702·x)) holding fc1's output, the sigmoid and their product (3·e·f); InternViT's MLP beside two
      more hidden-wide tensors (4·e·h + 2·e·f, read off its live tensors), and InternViT-6B's query/key RMSNorm
      beside q, k, v, x and the block's norm (5·e·h and two fp32 hidden-wide tensors);
    - Llama 4: q, k, v beside x, the norm and layernorm_pre's output, while the 2D rotary multiplies fp32 complex
      copies of q and k (copies unless e is 4) and casts the products back (unless e is 4).
    LFM2-VL's padding mask (SDPA's additive copy of the bool mask, a picture's s² each) is per picture, not per patch:
    see ``_padding_mask_inference``."""
    arch, e = setup.arch, setup.policy.bytes("act")
    h, f, family = arch.vision_hidden, arch.vision_ffn, arch.vision_family
    copies = 0 if e >= 4 else 1
    if family in ("qwen2_5_vl", "qwen3_vl"):
        rotary = 5 * e * h + copies * 2 * 4 * h + 4 * 4 * h
        mlp = 2 * e * h + (3 if family == "qwen2_5_vl" else 2) * e * f
        block = max(rotary, 10 * e * h, mlp)
        rest = 2 * 4 * h / arch.vision_heads + 16 + (8 / arch.vision_merge ** 2 if family == "qwen2_5_vl" else
                                                     4 * h + 4 * 8 + 4 * 4)
        # Qwen3-VL: the deepstack mergers' outputs, the decoder's width a merged token, kept for the decoder
        return block, rest + arch.vision_deepstack * e * arch.hidden / arch.vision_merge ** 2
    if family == "llama4":
        rotary = 6 * e * h + copies * 2 * 4 * h + 2 * 4 * h + copies * 2 * e * h
        return max(rotary, 8 * e * h, 3 * e * h + 2 * e * f), 0
    if family == "internvl":        # the MLP runs beside the residual, the attention's scaled output and the norm
        # InternViT-6B's query/key norms: q, k and v beside x and the norm, and the norm's fp32 input and its square
        qk = 5 * e * h + 2 * 4 * h if arch.vision_qk_norm else 0
        return max(7 * e * h, 4 * e * h + 2 * e * f, qk), e * h
    if family == "clip":            # QuickGELU's product beside fc1's output and its sigmoid
        return max(7 * e * h, 2 * e * h + 3 * e * f), e * h
    return max(7 * e * h, 2 * e * h + 2 * e * f), e * h


def _padding_mask_inference(setup: "Setup") -> int:
    """LFM2-VL in a forward without gradients: the elements of the padding mask, s² a picture (s = max_num_patches),
    when a picture is padded; 0 otherwise. The encoder builds it once as bool; SDPA's additive copy of it, in the
    activations' dtype, lives while the attention runs (o_proj's output comes after it is freed)."""
    longest = _padding_mask(setup)
    if not longest:
        return 0
    seeing, work = vision.tower(setup.arch), setup.workload
    assert seeing is not None
    return work.batch * work.images * len(seeing.tile_shapes(*work.image_size)) * longest * longest


def served_in_rollout(pool: "Pool") -> bool:
    """Whether a generate() pool is the rollout's own: not the tower's forward before the prefill (not modelled inside a
    rollout) nor the pixel values, which the training step's inputs already hold (``pools``)."""
    return ENCODER not in pool.moments


def inference_pools(setup: "Setup", stage: "Stage", moments: "tuple[str, ...]") -> "list[Pool]":
    """generate() with images: the pixel values through the call, and at its first moment (``ENCODER``, before the
    prefill) the tower's forward over every image of the batch; none without images or a tower pycore models."""
    arch, work = setup.arch, setup.workload
    if not (work.image_tokens and work.images and stage.has_embedding and arch.vision_family in MEASURED):
        return []
    block, rest = inference_per_patch(setup)
    count = sym("P", patches(setup))
    q = (sym("v", block) + sym("r", rest)) * count
    mask = _padding_mask_inference(setup)
    if mask:
        # at SDPA: x, the norm, q, k, v and its output (6·e·h) beside the additive mask; the bool mask throughout
        e = setup.policy.bytes("act")
        q = maximum(sym("v", block) * count, sym("a", 6 * e * arch.vision_hidden) * count + sym("s", mask) * e) + \
            sym("r", rest) * count + sym("s", mask)
    held = _held_outputs(setup)
    working = make("vision_working", "Vision encoder working set", q, (ENCODER,), INFERENCE_SOURCE,
                   "v = bytes per patch of a block's widest moment; r = the tower's other bytes per patch (rotary "
                   "tables, positions, embeddings); P = image patches of the batch" +
                   ("; a = a block's bytes per patch at SDPA; s = the padding mask's elements (s² a picture), bool "
                    "throughout and SDPA's additive copy while it runs" if mask else ""))
    return [working, *held, *_pixel_values(setup, (ENCODER, *moments), ())]


# the tower's outputs a model's forward keeps while its language model runs the prefill (transformers 5.24), by
# tower: (copies of the patches' hidden states, copies of the image features, and of each deepstack feature)
_HELD = {"clip": (2, 2, 0), "internvl": (1, 1, 0), "qwen2_5_vl": (1, 2, 0), "qwen3_vl": (1, 2, 2)}


def _held_outputs(setup: "Setup") -> "list[Pool]":
    """What the model's forward keeps of the tower while its language model runs the prefill (transformers 5.24, read
    off the tensors live at the prefill's peak): the tower's output object, kept for the output's image_outputs
    (LLaVA's feature layer's hidden states and last hidden state, InternVL's and the Qwen towers' last hidden state,
    their merged features and Qwen3-VL's deepstack features), the features the forward projects or concatenates
    (LLaVA's list and their cat, the Qwen towers' cat, Qwen3-VL's cat of each deepstack feature), and with deepstack
    the decoder's hidden states cloned in each of its first layers (_deepstack_process) beside the layer's output;
    none for the other towers."""
    seeing, work = vision.tower(setup.arch), setup.workload
    held = _HELD.get(setup.arch.vision_family)
    if not seeing or not held:
        return []
    e, (width, height) = setup.policy.bytes("act"), work.image_size
    images, (hidden_copies, feature_copies, deepstack_copies) = work.batch * work.images, held
    features = feature_copies + deepstack_copies * seeing.deepstack
    q = sym("e", e) * (sym("n", images) * (
        sym("c", hidden_copies) * sym("P", seeing.patches(width, height)) * sym("hv", seeing.hidden) +
        sym("f", features) * sym("T", seeing.embeddings(width, height)) * sym("h", seeing.out_hidden)))
    if seeing.deepstack:
        q = q + sym("e", e) * sym("b", work.batch) * sym("s", work.seq) * sym("h", seeing.out_hidden)
    return [make("vision_outputs", "Vision tower outputs (held through the prefill)", q, ("prefill",),
                 "transformers 5.24 LlavaModel / InternVLModel / Qwen2_5_VLModel / Qwen3VLModel forward and "
                 "get_image_features: the tower's output object and the features made of it; checked in "
                 "docs/validation.md (validation/measure_vl.py --generate)",
                 "e = activation bytes; n = images in the batch; c = copies of the patches' hidden states (LLaVA: "
                 "the feature layer's and the last); P = patches an image (each picture's with its class token); "
                 "hv = the tower's width; f = copies of the image features (LLaVA: the list and their cat; the Qwen "
                 "towers: the merger's output and its cat; Qwen3-VL: two of each deepstack feature too); T = image "
                 "tokens an image; h = the decoder's width" +
                 ("; b × s × h: the hidden states a deepstack layer clones, beside its output" if seeing.deepstack
                  else ""))]


def note(setup: "Setup") -> str:
    """What the estimate says of the vision tower's own memory beside the image tokens."""
    arch, work = setup.arch, setup.workload
    if not work.training:
        if arch.vision_family not in MEASURED:
            return "the vision encoder's forward is not modelled for this tower yet"
        return "generate() runs the vision tower over the batch's images before the prefill: its working set and " \
            "the pixel values are counted at that moment of their own (the breakdown shows it when it is the peak)"
    if setup.finetune.adapters:
        return "the vision tower is taken as frozen, without adapters, so it keeps nothing for backward"
    if arch.vision_family not in MEASURED:
        return "the vision tower's saved activations are not modelled for this tower yet (Qwen2.5-VL's, Qwen3.5's, " \
            "Gemma 3's, Llama 4's, LFM2-VL's, LLaVA-1.5's and InternVL's are, measured by validation/measure_vl.py)"
    counted = "the vision tower's saved activations are counted per image patch (Vision tower activations)"
    ungraded = model_states.ungraded_params(setup)
    if not ungraded:
        return counted
    blocks = arch.vision_unused_layers
    unused = (f"{blocks} CLIP block{'s' if blocks > 1 else ''} past vision_feature_layer and " if blocks else "") + \
        "the post-LayerNorm"
    return (f"{counted}; no gradient reaches {unused}, whose outputs LLaVA does not use: their {ungraded:,} "
            "parameters get no gradient or optimizer state")
