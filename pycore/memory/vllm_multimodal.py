"""vLLM's start-up profiling of a vision-language model's encoder (vLLM 0.11.0), whose peak the KV cache is sized after.

``GPUModelRunner.profile_run`` (vllm/v1/worker/gpu_model_runner.py L3325-3404) builds one dummy item of the modality
with the most tokens (``MultiModalBudget``, vllm/v1/worker/utils.py L24-124: each modality asked at max_model_len,
count 1; an image wins a tie), repeats it N times, runs the encoder over the N items at once, pads each output to the
encoder budget's rows and keeps them in ``encoder_cache`` while the language model's dummy batch of
max_num_batched_tokens and the sampler run; the dummy pixel values (the processor's float32, moved to the GPU as they
are, ``_get_mm_dummy_batch`` L2867-2895) stay referenced until it returns. The profiled peak (torch's
``allocated_bytes.all.peak`` over the whole run, gpu_worker.py L254-266) is therefore the larger of the encoder's
forward and the language model's run beside the padded outputs.

- the budget B = max(max_num_batched_tokens, T) for an item's T contiguous placeholder tokens
  (``compute_mm_encoder_budget``, vllm/v1/core/encoder_cache_manager.py L292-333), and
  N = max(1, min(B // T, max_num_seqs × max(1, min(limit, max_model_len // T)))) (``get_max_items`` L84-124; the
  limit is --limit-mm-per-prompt's for the modality, which pycore's vllm serve line sets to the images a sequence
  holds, else 999, limit_mm_per_prompt's default, config/multimodal.py L106-114);
- Qwen2.5-VL (qwen2_vl.py L871-1064): an image at max_pixels, 3,584², 16,384 tokens; or a video of up to 14 frames of
  that size, as many as max_model_len holds (frames in pairs, temporal_patch_size 2)
  (one 7-pair video of 114,688 tokens at max_model_len 128,000, as a published vLLM log shows); below two images'
  tokens (32,768) the video ties the image, which wins;
- Gemma 3 (gemma3_mm.py L216-228): an image resized to 896², 256 embeddings, 260 placeholder tokens with its
  "\\n\\n<boi>" and "<eoi>\\n\\n" (31 items at a budget of 8,192, as a published log shows);
- Llama 4 (mllama4.py L545-623): a 336 × 5,376 image, 16 tiles and the global tile, 2,448 embeddings, 2,467
  placeholder tokens (3 items at 8,192, as a published log shows);
- LLaVA-1.5 (llava.py L165-193): an image of the tower's image_size², a token per patch (576 at 336² and 14-pixel
  patches), the class token's too with the "full" strategy; its CLIP tower is built only up to vision_feature_layer
  (L417-470), which the profiled working set, a block's, does not change; LLaVA-NeXT (llava_next.py L89-172) an
  image of the image_grid_pinpoints size with the most tokens (672² for llava-v1.6's grids: 2,928 tokens, five
  crops);
- Qwen3-VL (qwen3_vl.py L585-675, qwen2_vl.py L956-1009): a video, whose frames are added from two while the
  tokens of that many frames of the largest image (4,096², image_smart_resize within the image processor's
  size, 65,536 to 16,777,216 pixels) fit max_model_len, up to _MAX_FRAMES_PER_VIDEO (24,576), resized by the
  video processor's video_smart_resize within 25,165,824 pixels over all frames (the checkpoints'
  video_preprocessor_config.json, vLLM's "Official recommended max pixels is 24576 * 32 * 32"): two frames of
  3,520² (12,100 tokens) below a max_model_len of 16,200, 24,576 frames of 32² (12,288 tokens) from there; the
  budget counts each video token as 12.5 (its timestamp text and markers, L672-675), 153,600 for the latter, as
  published start-up logs print ("a budget of 153600 tokens, and profiled with 1 video items"). Its encoder's
  output is the merged features and the deepstack features side by side, (1 + deepstack) × the decoder's width
  (L529-531), and the model keeps deepstack input buffers of max_num_batched_tokens × the decoder's width, one per
  deepstack merger, from its construction (L1155-1162).
- InternVL (transformers' InternVLForConditionalGeneration, which vLLM 0.11 runs as InternS1: registry.py L237,
  interns1.py L155-296 and L440-470): its largest image, the grid of max_patches (12) tiles of the tower's
  image_size (448²) and the thumbnail, 13 × 256 = 3,328 embeddings within <img> and </img>; or a video of frames of
  448², one tile each, 256 embeddings a frame, each written "Frame{i}: <img>...</img>" and the frames joined by
  newlines. The budget counts the frames that fit max_model_len beside one largest image (get_num_frames_with_most_
  features asked with an image and a video: (max_model_len - 3,328) // 256), the profiling run's video those of the
  whole max_model_len (max_model_len // 256: _get_mm_dummy_batch asks for the video alone, gpu_model_runner.py
  L2867-2895), so its output can outgrow the budget and is then kept unpadded; the video is profiled from
  max_model_len 6,656 on (the budget's 13 frames outnumber the image's tokens; the video itself has 26).

The encoder's forward is counted with pycore.memory.vision_activations.inference_per_patch, read off transformers'
towers; vLLM's own tower code (flash attention over all windows at once, its rotary) is not measured here.
LFM2-VL (not in vLLM 0.11) is not modelled. Qwen3.5, not in vLLM 0.11 either, is profiled as vLLM 0.33.0, the
release of 2026-11-02, profiles it (qwen3_5.py L468-529: Qwen3-VL's processing and dummy inputs, no deepstack
buffers): the largest image, 4,096² and 16,384 tokens, since its dummy video is now two frames of 12,288 tokens
(qwen3_vl.py L1038-1068, L1146-1165); the pixels reach the GPU as uint8 and are normalised there into the tower's
dtype (config/multimodal.py mm_device_do_normalize, True; layers/fusion/mm_input_norm.py forward_cuda), and the
outputs are kept unpadded (gpu_model_runner.py L6110-6130).
"""

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pycore.base.expr import Q, ceil, maximum, sym
from pycore.memory import vision_activations
from pycore.memory.pools import Pool, make
from pycore.model import vision

if TYPE_CHECKING:
    from pycore.memory.parallel import Stage
    from pycore.memory.setup import Setup

MAX_FRAMES = 14                 # qwen2_vl.py L82 _MAX_FRAMES_PER_VIDEO (vLLM 0.11.0)
QWEN_VIDEO_SIDE = 3584          # get_image_size_with_most_features at max_pixels 12,845,056 (qwen2_vl.py L956)
LLAMA4_IMAGE = (336, 5376)      # ImageSize(height=max_patches * image_size, width=image_size) (mllama4.py L557-566)
MODELLED = ("qwen2_5_vl", "siglip", "llama4", "clip", "qwen3_vl", "internvl")
# Qwen3-VL's classes (Qwen3.5 has the same tower, and no vLLM 0.11 code)
QWEN3_VL_CLASSES = ("Qwen3VLForConditionalGeneration", "Qwen3VLMoeForConditionalGeneration")
QWEN3_5_CLASSES = ("Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM")     # with a tower: Qwen3.5's, vLLM 0.33.0's rules
QWEN3_MAX_FRAMES = 24_576                   # qwen3_vl.py L90-91 _MAX_FRAMES_PER_VIDEO (vLLM 0.11.0)
QWEN3_VIDEO_PIXELS = (4_096, 25_165_824)    # the video processor's size: shortest_edge, longest_edge over all frames
QWEN3_VIDEO_TOKEN_COST = 12.5               # a video token's prompt tokens in the budget (qwen3_vl.py L672-675)
VIDEO = ("qwen2_5_vl", "qwen3_vl", "internvl")    # the towers vLLM also gives a video modality
# a video frame's "Frame{i}: " in InternVL's prompt (interns1.py L461-466): "Frame", ":" and " " one token each, and
# each digit of i one more, as Qwen2's byte-level BPE (InternVL3's tokenizer) splits it: its pre-tokenizer puts every
# digit alone (\p{N}); "\n" between frames one token
INTERNVL_FRAME_TEXT = 3
INTERNVL_STEPS = 4096       # the profile steps searched (a frame's 256 tokens each, to 1,048,576): past them, the last
SOURCE = ("vllm/v1/worker/gpu_model_runner.py profile_run L3325-3404 and vllm/v1/worker/utils.py MultiModalBudget "
          "(vLLM 0.11.0): the encoder over N dummy items, then its outputs padded to the budget beside the language "
          "model's dummy run; the encoder's working set as pycore/memory/vision_activations.py inference_per_patch")


@dataclass(frozen=True)
class ProfiledItem:
    """The dummy item vLLM profiles: its modality, placeholder tokens, output rows, patches and pixel values."""
    modality: str
    tokens: int                 # T: the contiguous placeholder tokens the budget counts
    embeddings: int             # rows of the encoder's output for one item
    patches: int                # positions the tower's blocks run over for one item
    pixels: int                 # values of its pixel_values
    pixel_bytes: int = 4        # bytes a value on the GPU: the processor's float32 (vLLM 0.33.0's Qwen3.5: uint8)
    padded: bool = True         # whether an output shorter than the budget is padded to it (not in vLLM 0.33.0)
    shape: str = ""             # a video's frames in words ("32 frames of 448²"), for the note
    version: str = ""           # the vLLM whose profiling this is, when not 0.11 (Qwen3.5: 0.33.0)


def profiled_item(setup: "Setup", max_model_len: int) -> "ProfiledItem | None":
    """The item vLLM 0.11 profiles the encoder with, or None where pycore does not model it."""
    arch = setup.arch
    seeing = vision.tower(arch)
    if seeing is None or arch.vision_family not in MODELLED or setup.workload.mm_profiling == "off":
        return None
    if seeing.pinpoints:        # LLaVA-NeXT: the pinpoint whose image has the most tokens, the first of equals
        height, width = max(seeing.pinpoints, key=lambda hw: seeing.embeddings(hw[1], hw[0]))
        return ProfiledItem("image", seeing.tokens(width, height), seeing.embeddings(width, height),
                            seeing.patches(width, height), seeing.pixels(width, height))
    if arch.vision_family == "qwen3_vl" and arch.hf_class in QWEN3_5_CLASSES:
        side = _largest_side(seeing)
        return ProfiledItem("image", seeing.embeddings(side, side), seeing.embeddings(side, side),
                            seeing.patches(side, side), seeing.pixels(side, side), pixel_bytes=1, padded=False,
                            version="0.33.0")
    if arch.vision_family == "qwen3_vl":
        return _qwen3_vl_item(seeing, max_model_len, setup.workload.mm_profiling) \
            if arch.hf_class in QWEN3_VL_CLASSES else None
    if arch.vision_family == "internvl":
        return _internvl_item(seeing, max_model_len, setup.workload.mm_profiling)
    if arch.vision_family in ("siglip", "clip"):
        side = seeing.tile       # Gemma 3's placeholder is the whole "\n\n<boi>...<eoi>\n\n" (gemma3_mm.py L216-228)
        return ProfiledItem("image", seeing.tokens(side, side), seeing.embeddings(side, side),
                            seeing.patches(side, side), seeing.pixels(side, side))
    if arch.vision_family == "llama4":
        width, height = LLAMA4_IMAGE
        return ProfiledItem("image", seeing.tokens(width, height), seeing.embeddings(width, height),
                            seeing.patches(width, height), seeing.pixels(width, height))
    side = QWEN_VIDEO_SIDE
    image = seeing.embeddings(side, side)   # the pads alone are replaced (qwen2_vl.py L1093-1108)
    # _get_max_video_frames: frames while their tokens fit max_model_len; every two frames are one temporal patch
    pairs = max(1, min(max_model_len // image if image else 1, MAX_FRAMES // seeing.temporal_patch))
    if pairs * image > image and setup.workload.mm_profiling == "auto":
        return ProfiledItem("video", pairs * image, pairs * image, pairs * seeing.patches(side, side),
                            pairs * seeing.pixels(side, side),
                            shape=f"{pairs * seeing.temporal_patch:,} frames of {side:,}²")
    return ProfiledItem("image", image, image, seeing.patches(side, side), seeing.pixels(side, side))


def _largest_side(seeing: "vision.VisionTower") -> int:
    """The side of the largest image a Qwen processor makes (get_image_size_with_most_features: 9,999,999² resized)."""
    return seeing.grid(9_999_999, 9_999_999)[0] * seeing.patch


def _qwen3_vl_item(seeing: "vision.VisionTower", max_model_len: int, profiling: str) -> ProfiledItem:
    """Qwen3-VL's profiled video (or, with mm_profiling=image, its largest image, 4,096²: 16,384 tokens)."""
    side = _largest_side(seeing)
    image = seeing.embeddings(side, side)
    if profiling != "auto":
        return ProfiledItem("image", image, image, seeing.patches(side, side), seeing.pixels(side, side))
    breaks = _qwen3_vl_breaks(seeing.patch, seeing.merge, seeing.temporal_patch, side)
    frames = next((frames for needs, frames in breaks if needs > max_model_len), QWEN3_MAX_FRAMES)
    rows, columns = _video_grid(seeing.patch * seeing.merge, seeing.temporal_patch, side, frames)
    pairs = -(-frames // seeing.temporal_patch)
    patches = pairs * (rows // seeing.patch) * (columns // seeing.patch)
    tokens = patches // seeing.merge ** 2
    return ProfiledItem("video", int(tokens * QWEN3_VIDEO_TOKEN_COST), tokens, patches,
                        patches * seeing.channels * seeing.temporal_patch * seeing.patch ** 2,
                        shape=f"{frames:,} frames of {rows:,}², {tokens:,} embeddings, each counted as "
                              f"{QWEN3_VIDEO_TOKEN_COST} tokens")


def _internvl_item(seeing: "vision.VisionTower", max_model_len: int, profiling: str) -> ProfiledItem:
    """InternVL's profiled item (InternS1 in vLLM 0.11): its video once its budgeted tokens pass the largest image's,
    else that image (12 tiles and the thumbnail)."""
    side = seeing.tile
    width = side * vision.INTERNVL_MAX_TILES
    image = ProfiledItem("image", seeing.tokens(width, side), seeing.embeddings(width, side),
                         seeing.patches(width, side), seeing.pixels(width, side))
    frame = seeing.embeddings(side, side)
    budgeted = max(1, (max_model_len - image.embeddings) // frame)
    tokens = budgeted * (INTERNVL_FRAME_TEXT + seeing.tokens(side, side)) + _digits(budgeted) + budgeted - 1
    if profiling != "auto" or tokens <= image.tokens:       # an image wins a tie
        return image
    frames = max(1, max_model_len // frame)
    return ProfiledItem("video", tokens, frames * frame, frames * seeing.patches(side, side),
                        frames * seeing.pixels(side, side), shape=f"{frames:,} frames of {side:,}², "
                                                                    f"{frames * frame:,} embeddings")


def _digits(count: int) -> int:
    """The digits of the numbers 1 to ``count`` written out (1 to 9 one each, 10 to 99 two each, ...)."""
    total, width, low = 0, 1, 1
    while low <= count:
        total += (min(count, low * 10 - 1) - low + 1) * width
        width, low = width + 1, low * 10
    return total


def _video_grid(factor: int, temporal: int, side: int, frames: int) -> "tuple[int, int]":
    """(height, width) in pixels of ``frames`` frames of a side² image after Qwen3VLVideoProcessor's smart_resize
    (transformers video_processing_qwen3_vl.py), within QWEN3_VIDEO_PIXELS over all frames."""
    least, most = QWEN3_VIDEO_PIXELS
    bar = round(side / factor) * factor
    if round(frames / temporal) * temporal * bar * bar > most:
        beta = math.sqrt(frames * side * side / most)
        bar = max(factor, math.floor(side / beta / factor) * factor)
    elif round(frames / temporal) * temporal * bar * bar < least:
        bar = math.ceil(side * math.sqrt(least / (frames * side * side)) / factor) * factor
    return bar, bar


@lru_cache(maxsize=8)
def _qwen3_vl_breaks(patch: int, merge: int, temporal: int, side: int) -> "tuple[tuple[int, int], ...]":
    """get_num_frames_with_most_features for one video (qwen2_vl.py L974-1009) adds frames from two while one more
    frame's tokens fit max_model_len, at most QWEN3_MAX_FRAMES: ((tokens, frames), ...) ascending, where a
    max_model_len under ``tokens`` stops at ``frames`` (the first of them that applies; none: QWEN3_MAX_FRAMES)."""
    breaks, most = [], 0
    for frames in range(2, QWEN3_MAX_FRAMES):
        rows, columns = _video_grid(patch * merge, temporal, side, frames + 1)
        pairs = (frames + 1 + (frames + 1) % temporal) // temporal
        tokens = pairs * (rows // patch) * (columns // patch) // merge ** 2
        if tokens > most:
            breaks.append((tokens, frames))
            most = tokens
    return tuple(breaks)


def deepstack_buffers(setup: "Setup", stage: "Stage") -> "Pool | None":
    """Qwen3-VL under vLLM: the deepstack input buffers its model makes at construction, one per deepstack merger,
    max_num_batched_tokens × the decoder's width in the model's dtype (qwen3_vl.py L1155-1162), on every rank that
    builds the tower; None for other models."""
    arch = setup.arch
    if not arch.vision_deepstack or arch.hf_class not in QWEN3_VL_CLASSES:
        return None
    q = sym("d", arch.vision_deepstack) * sym("Tb", setup.workload.max_batched_tokens) * sym("h", arch.hidden) * \
        setup.policy.bytes("weight")
    return make("deepstack_buffers", "Deepstack input buffers (vLLM)", q, ("serving",),
                "vLLM 0.11.0 qwen3_vl.py L1155-1162: torch.zeros(max_num_batched_tokens, hidden_size) per deepstack "
                "level, made with the model", "d = deepstack mergers; Tb = max_batched_tokens; h = the decoder's "
                "width")


UNBUILT_SOURCE = "vLLM 0.11 llava.py L417-470 and L542: LLaVA's CLIP tower is built only up to vision_feature_layer, " \
                 "without its post-LayerNorm"


def unbuilt_params(setup: "Setup") -> int:
    """LLaVA: the tower's parameters vLLM does not build (pycore/model/vision.py VisionTower.unused_params)."""
    seeing = vision.tower(setup.arch)
    return seeing.unused_params() if seeing else 0


def unbuilt_weights(setup: "Setup", stage: "Stage") -> "Q | None":
    """The bytes of those parameters on the first stage's GPU, which its weights leave out; None elsewhere or when the
    weights are a checkpoint's headers."""
    unbuilt = unbuilt_params(setup)
    if not unbuilt or not stage.has_embedding or setup.weight_bytes:
        return None
    return ceil(sym("Pu", unbuilt) / sym("t", setup.layout.tp)) * setup.policy.bytes("weight")


def tower_weights(setup: "Setup", stage: "Stage") -> "Pool | None":
    """The vision tower's weights on a pipeline stage past the first, which vLLM also builds and loads there (the first
    stage's are among its weights, pycore.memory.parallel); None on the first stage or without a tower."""
    parts = setup.counts.parts
    if stage.has_embedding or not parts.get("vision"):
        return None
    q = ceil(sym("Pv", parts["vision"] - unbuilt_params(setup)) / sym("t", setup.layout.tp)) * \
        setup.policy.bytes("weight")
    return make("vision_tower_weights", "Vision tower weights (every pipeline rank)", q, ("serving",),
                "vLLM 0.11.0 qwen2_5_vl.py L1011-1021, L1464-1469: the tower is built and loaded on every pipeline "
                "rank", "Pv = the vision tower's parameters; t = tensor-parallel degree")


def context_of(setup: "Setup") -> int:
    """vLLM's max_model_len for this setup: the one given, else the prompt and new tokens (the exported line's)."""
    work = setup.workload
    return work.max_model_len or work.seq + work.new_tokens


def items_per_batch(item: ProfiledItem, batched_tokens: int, max_num_seqs: int, max_model_len: int,
                    limit: int = 999) -> "tuple[int, int]":
    """(the encoder budget B in rows, the items N the profiling batch holds) — MultiModalBudget (vLLM 0.11.0), with
    ``limit`` the modality's limit_mm_per_prompt (999 unless given)."""
    budget = max(batched_tokens, item.tokens)
    per_prompt = max(1, min(limit, max_model_len // item.tokens))
    return budget, max(1, min(budget // item.tokens, max_num_seqs * per_prompt))


def _batch(setup: "Setup", seqs: int) -> "tuple[ProfiledItem, int, int] | None":
    """(the profiled item, the budget, the items) for this setup, or None where nothing is profiled or modelled. An
    image's limit is the images a sequence holds when they are given (the exported --limit-mm-per-prompt)."""
    work = setup.workload
    item = profiled_item(setup, context_of(setup))
    if item is None:
        return None
    limit = work.images if item.modality == "image" and work.images else 999
    budget, count = items_per_batch(item, work.max_batched_tokens, seqs, context_of(setup), limit)
    return item, budget, count


def profile_key(setup: "Setup", seqs: int, max_model_len: int) -> "tuple[str, int, bool]":
    """What changes the profiling run's peak other than the item's size, at ``max_model_len``: the modality, the items
    profiled and whether their outputs are padded to the budget. Along steps with the same key the item only grows,
    so the peak does too (pycore.memory.estimate._longest_over_profiles bisects within them)."""
    span = replace(setup, workload=replace(setup.workload, max_model_len=max_model_len))
    profiled = _batch(span, seqs)
    if profiled is None:
        return "", 0, False
    item, budget, count = profiled
    return item.modality, count, item.embeddings < budget and item.padded


def encoder_log(setup: "Setup", seqs: int) -> "dict[str, Any] | None":
    """What profile_run logs of the encoder (gpu_model_runner.py L3339-3346, vLLM 0.11): the budget in tokens, the
    items and their modality; None where nothing is profiled or pycore does not model it."""
    profiled = _batch(setup, seqs)
    if profiled is None:
        return None
    item, budget, count = profiled
    return {"budget": budget, "items": count, "modality": item.modality}


def profile_activation(setup: "Setup", language: Q, seqs: int) -> "tuple[Q, str] | None":
    """The profiling run's peak with the encoder: the larger of the encoder's forward over N items (their float32
    pixels and its working set; the weights' dtype copy of the pixels is freed by the patch embedding before the blocks
    run) and the language model's run ``language`` beside the padded outputs and the pixels; with its symbols. None
    for a model without a tower pycore models."""
    profiled = _batch(setup, seqs)
    if profiled is None:
        return None
    item, budget, count = profiled
    # Qwen3-VL's encoder returns its deepstack features beside the merged ones (qwen3_vl.py L529-531)
    e, hidden = setup.policy.bytes("act"), setup.arch.hidden * (1 + setup.arch.vision_deepstack)
    block, rest = vision_activations.inference_per_patch(setup)
    n = sym("N", count)
    pixels = n * sym("X", item.pixels) * item.pixel_bytes
    encoder = pixels + (sym("v", block) + sym("r", rest)) * n * sym("Pi", item.patches)
    outputs = n * sym("E", item.embeddings) * sym("D", hidden) * e
    padded = item.embeddings < budget and item.padded
    if padded:
        # each output padded into a new (B, D) tensor; the batch's own outputs stay referenced by the loop variable
        outputs = n * sym("B", budget) * sym("D", hidden) * e + outputs
    symbols = (f"N = dummy {item.modality}s profiled ({item.tokens:,} placeholder tokens each); X = pixel values of "
               f"one ({'float32' if item.pixel_bytes == 4 else 'uint8, normalised on the GPU'}); v, r = the "
               "tower's bytes per patch (a block's widest moment, the rest); Pi = patches "
               "of one; " + ("B = the encoder budget's rows each output is padded to; " if padded else "") +
               "D = the decoder's hidden size" + (" × (1 + deepstack mergers)" if setup.arch.vision_deepstack else "") +
               "; E = an output's own rows" + ("" if padded else ", kept as they are" if item.embeddings < budget else
                                               f", no fewer than the budget's {budget:,}: kept as they are"))
    return maximum(encoder, pixels + outputs + language), symbols


NOT_MODELLED = ("vLLM's start-up profiling also runs the vision encoder on the largest input its processor makes and "
                "holds its outputs while it profiles the language model; for this tower that peak is not modelled, "
                "so the KV cache is overstated by it (mm_profiling=off, vLLM's --skip-mm-profiling, leaves it out)")
OFF = ("vLLM skips its start-up profiling of the vision encoder (--skip-mm-profiling): the KV cache is sized without "
       "it, and the first large image or video then runs the encoder in memory the cache does not leave")


def note(setup: "Setup", seqs: int, levers: bool = True) -> str:
    """What the estimate says of vLLM's encoder profiling for a vision-language model (``seqs``: max_num_seqs;
    ``levers``: name the inputs and flags that change it, which a colocated TRL engine does not take)."""
    if setup.workload.mm_profiling == "off":
        return OFF
    profiled = _batch(setup, seqs)
    if profiled is None:
        return NOT_MODELLED
    item, budget, count = profiled
    said = []
    if levers and item.modality == "video":
        said.append("mm_profiling=image profiles the largest image alone, --limit-mm-per-prompt with \"video\": 0")
    if levers:
        said.append("mm_profiling=off leaves it out, --skip-mm-profiling")
    if item.embeddings > budget:
        said.append("its output is longer than the budget: the profiled video takes the frames of the whole "
                    "max_model_len, the budget those beside one largest image")
    said.append("the encoder's working set is transformers' tower's, vLLM's own is not measured")
    if item.version:
        said.append(f"vLLM 0.11, which the rest of this estimate follows, does not run this model: the profiling is "
                    f"vLLM {item.version}'s, its largest image with its pixels as uint8")
    return (f"vLLM profiles the vision encoder at start-up on {count} dummy {item.modality}"
            f"{'s' if count > 1 else ''} of {item.tokens:,} tokens ({f'{item.shape}; ' if item.shape else ''}its "
            f"largest input at max_model_len {context_of(setup):,}; the encoder budget is {budget:,} tokens) and holds "
            "their outputs while it profiles the language model: the profiling run's peak, which the KV cache is "
            "sized after, is the larger of the encoder's forward and the language model's run beside those outputs "
            f"({'; '.join(said)})")


def refusal_hint(setup: "Setup") -> str:
    """What to change when vLLM would refuse to start and a profiled video is why the cache is short: "" otherwise."""
    item = profiled_item(setup, context_of(setup))
    if item is None or item.modality != "video":
        return ""
    return (f"; its profiling run includes the vision encoder over a dummy video of {item.tokens:,} tokens: "
            "mm_profiling=image (--limit-mm-per-prompt with \"video\": 0) or a shorter max_model_len profiles a "
            "smaller one")


def profile_steps(setup: "Setup") -> "list[int]":
    """The max_model_len at which the profiled item grows (Qwen2.5-VL's video by a pair of frames: 2, 3 ... 7 images'
    tokens; InternVL's by a frame every 256 tokens, up to the model's positions and at most INTERNVL_STEPS of them),
    ascending; [] where it does not change with max_model_len."""
    seeing = vision.tower(setup.arch)
    if setup.arch.vision_family == "internvl" and seeing:
        if setup.workload.mm_profiling != "auto":
            return []
        frame = seeing.embeddings(seeing.tile, seeing.tile)
        last = min(setup.arch.max_positions or context_of(setup), INTERNVL_STEPS * frame)
        first = next((frames * frame for frames in range(1, last // frame + 1)
                      if _internvl_item(seeing, frames * frame, "auto").modality == "video"), 0)
        return list(range(first, last + frame, frame)) if first else []
    image = profiled_item(replace(setup, workload=replace(setup.workload, mm_profiling="image")), 0)
    video = profiled_item(setup, 10 ** 9)
    if image is None or video is None or video.modality != "video":
        return []
    if setup.arch.vision_family == "qwen3_vl" and seeing:      # Qwen3-VL's video: its frame count's steps
        breaks = _qwen3_vl_breaks(seeing.patch, seeing.merge, seeing.temporal_patch, _largest_side(seeing))
        return [needs for needs, _ in breaks]
    return [pairs * image.tokens for pairs in range(2, video.tokens // image.tokens + 1)]
