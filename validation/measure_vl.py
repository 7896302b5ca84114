"""Measure training steps of small vision-language models with images: Qwen2.5-VL, Qwen3.5, Qwen3-VL (dense and MoE),
Gemma 3, Llama 4, LFM2-VL, LLaVA-1.5, LLaVA-NeXT, InternVL.

Dev-only: needs torch and transformers (never dependencies of pycore). Each case builds a small config that keeps
its family's structure (a 2-layer text decoder, a 4-block vision tower; Qwen2.5-VL's window attention with one
full-attention block), puts each image's placeholder tokens into the text as the family's processor does, and
runs one warm-up step and then one recorded training step (forward with pixel_values, backward, a foreach AdamW
step) under MemTracker, real tensors, as validation/measure.py does. It also records what the vision tower alone
saves for backward (``torch.autograd.graph.saved_tensors_hooks``: distinct storages, parameters and the input
left out, each rounded to 512 bytes), per patch and block, at two image sizes.

The image tokens follow pycore/model/vision.py (which tests/test_vision.py checks against transformers' own
processors): Qwen2.5-VL's smart_resize grid (an image of W x H pixels is (H/14) x (W/14) patches, one token per
2 x 2; Qwen3.5's the same with 16-pixel patches), Gemma 3's mm_tokens_per_image for any size. Qwen3.5's M-RoPE
reads mm_token_type_ids, which its processor returns with the ids (1 on image tokens). Llama 4: each tile of
get_best_fit's canvas and, when there are several, the global tile, as 3 x image_size² pixels; LFM2-VL: each tile and
the thumbnail (or the image resized whole) patchified and padded to max_num_patches with its pixel_attention_mask and
spatial_shapes, as Lfm2VlImageProcessor returns them (pycore/model/vision.py VisionTower.tile_shapes: both processors
need torchvision, which has no build for this CPU torch). Their sequences hold pycore's image tokens: the placeholders
and the start, end, separators or markers around them. The pixel values are passed in the weights' dtype, as the
model cards' examples do (``processor(...).to(model.device, torch.bfloat16)``). A ``lora`` case puts PEFT's adapters
on the text decoder's q_proj and v_proj only, the tower frozen.

The lfm2_vl LoRA case was left out while pycore counted it at 37.91 MiB against the 33.40 measured (+13.5%): adapters
and their inputs in the short-convolution layers, which have no q_proj or v_proj, and the frozen convolution's input
(pycore.memory.finetune.layers_with, pycore.memory.activations._frozen_short_conv).

Usage:
    /tmp/hf/bin/python validation/measure_vl.py              # all cases -> validation/measured_vl.json
    /tmp/hf/bin/python validation/measure_vl.py --only gemma # cases whose label contains 'gemma', printed only
    /tmp/hf/bin/python validation/measure_vl.py --only gemma --replace   # ... and put in the record in place of theirs
    /tmp/hf/bin/python validation/measure_vl.py --compare    # the record beside pycore's estimate
    /tmp/hf/bin/python validation/measure_vl.py --generate   # generate() with images -> measured_vl_generate.json

``--generate`` measures ``model.generate()`` with the images instead (eval mode, no_grad, four new tokens, a warm-up
call first, MemTracker's per-module statistics cleared at each root call as validation/measure.py's measure_infer
does): the vision tower runs once, over every image of the batch, before the prefill, while the caller holds the
pixel values, so with large images its forward's working set, not the prefill's, is the peak.
"""

import argparse
import gc
import json
import platform
import sys
import time
import weakref
from pathlib import Path

import torch
import transformers
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402
import measure  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402

OUT = ROOT / "validation" / "measured_vl.json"
GENERATE_OUT = ROOT / "validation" / "measured_vl_generate.json"
IMAGE, START, END = 999, 998, 997         # special token ids inside the small vocabulary

QWEN_VL = {
    "model_type": "qwen2_5_vl", "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "image_token_id": IMAGE, "video_token_id": 996, "vision_start_token_id": START, "vision_end_token_id": END,
    "tie_word_embeddings": False,
    "text_config": {"model_type": "qwen2_5_vl_text", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "max_position_embeddings": 4096, "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]},
                    "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2},
    "vision_config": {"depth": 4, "hidden_size": 128, "intermediate_size": 256, "num_heads": 4, "patch_size": 14,
                      "spatial_merge_size": 2, "temporal_patch_size": 2, "window_size": 112,
                      "fullatt_block_indexes": [3], "out_hidden_size": 256, "in_channels": 3},
}
GEMMA3 = {
    "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "image_token_index": IMAGE,
    "boi_token_index": START, "eoi_token_index": END, "mm_tokens_per_image": 16,
    "text_config": {"model_type": "gemma3_text", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                    "sliding_window": 64, "max_position_embeddings": 4096, "bos_token_id": 1, "eos_token_id": 2,
                    "pad_token_id": 0},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 128, "intermediate_size": 256,
                      "num_hidden_layers": 4, "num_attention_heads": 4, "image_size": 224, "patch_size": 14,
                      "vision_use_head": False},
}
QWEN3_5 = {
    "model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"], "image_token_id": IMAGE,
    "video_token_id": 996, "vision_start_token_id": START, "vision_end_token_id": END, "tie_word_embeddings": False,
    "text_config": {"model_type": "qwen3_5_text", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
                    "num_hidden_layers": 4, "full_attention_interval": 4, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 64, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                    "linear_key_head_dim": 32, "linear_value_head_dim": 32, "max_position_embeddings": 4096,
                    "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "mrope_section": [4, 6, 6],
                                        "mrope_interleaved": True, "partial_rotary_factor": 0.25}},
    "vision_config": {"model_type": "qwen3_5", "depth": 4, "hidden_size": 128, "intermediate_size": 256,
                      "num_heads": 4, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                      "num_position_embeddings": 256, "out_hidden_size": 256, "in_channels": 3,
                      "deepstack_visual_indexes": [], "hidden_act": "gelu_pytorch_tanh"},
}
# Qwen3-VL: Qwen3's decoder layers (q/k norms, M-RoPE) and Qwen3.5's tower with two deepstack mergers, whose
# features are added to the first two decoder layers' outputs at the image tokens
QWEN3_VL = {
    "model_type": "qwen3_vl", "architectures": ["Qwen3VLForConditionalGeneration"], "image_token_id": IMAGE,
    "video_token_id": 996, "vision_start_token_id": START, "vision_end_token_id": END, "tie_word_embeddings": False,
    "text_config": {"model_type": "qwen3_vl_text", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
                    "max_position_embeddings": 4096, "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
                    "rope_parameters": {"rope_type": "default", "rope_theta": 5000000, "mrope_section": [8, 12, 12],
                                        "mrope_interleaved": True}},
    "vision_config": {"model_type": "qwen3_vl", "depth": 4, "hidden_size": 128, "intermediate_size": 256,
                      "num_heads": 4, "patch_size": 16, "spatial_merge_size": 2, "temporal_patch_size": 2,
                      "num_position_embeddings": 256, "out_hidden_size": 256, "in_channels": 3,
                      "deepstack_visual_indexes": [1, 2], "hidden_act": "gelu_pytorch_tanh"},
}
# Qwen3-VL-MoE: the same with routed experts in every decoder layer (Qwen3-MoE's, top-k weights cast to bf16)
QWEN3_VL_MOE = {
    **QWEN3_VL, "model_type": "qwen3_vl_moe", "architectures": ["Qwen3VLMoeForConditionalGeneration"],
    "text_config": {**QWEN3_VL["text_config"], "model_type": "qwen3_vl_moe_text", "num_experts": 4,
                    "num_experts_per_tok": 2, "moe_intermediate_size": 128, "decoder_sparse_step": 1,
                    "norm_topk_prob": True},
    "vision_config": {**QWEN3_VL["vision_config"], "model_type": "qwen3_vl_moe"},
}
LLAMA4 = {
    "model_type": "llama4", "architectures": ["Llama4ForConditionalGeneration"], "image_token_index": IMAGE,
    "boi_token_index": START, "eoi_token_index": END, "tie_word_embeddings": False,
    "text_config": {"model_type": "llama4_text", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
                    "intermediate_size_mlp": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "head_dim": 64, "num_local_experts": 2, "num_experts_per_tok": 1,
                    "moe_layers": [], "attention_chunk_size": 8192, "max_position_embeddings": 4096,
                    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "tie_word_embeddings": False},
    # intermediate_size is both the blocks' MLP width and the pixel shuffle's output (4 x hidden), as in Llama 4
    "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 128, "intermediate_size": 512,
                      "num_hidden_layers": 4, "num_attention_heads": 4, "image_size": 224, "patch_size": 14,
                      "vision_output_dim": 256, "projector_input_dim": 256, "projector_output_dim": 256,
                      "pixel_shuffle_ratio": 0.5, "rope_parameters": {"rope_type": "default", "rope_theta": 10000}},
}
LFM2_VL = {
    "model_type": "lfm2_vl", "architectures": ["Lfm2VlForConditionalGeneration"], "image_token_id": IMAGE,
    "projector_hidden_size": 256, "downsample_factor": 2, "projector_use_layernorm": True, "tie_word_embeddings": False,
    "text_config": {"model_type": "lfm2", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 768,
                    "num_hidden_layers": 2, "layer_types": ["full_attention", "conv"], "num_attention_heads": 4,
                    "num_key_value_heads": 2, "max_position_embeddings": 4096, "conv_L_cache": 3,
                    "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0, "tie_word_embeddings": False},
    "vision_config": {"model_type": "siglip2_vision_model", "hidden_size": 128, "intermediate_size": 256,
                      "num_hidden_layers": 4, "num_attention_heads": 4, "patch_size": 16, "num_patches": 256,
                      "vision_use_head": False},
}
LLAVA = {
    "model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "image_token_index": IMAGE,
    "vision_feature_layer": -2, "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu",
    "tie_word_embeddings": False,
    "text_config": {"model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4,
                    "max_position_embeddings": 4096, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0},
    "vision_config": {"model_type": "clip_vision_model", "hidden_size": 128, "intermediate_size": 256,
                      "num_hidden_layers": 4, "num_attention_heads": 4, "image_size": 224, "patch_size": 14},
}
# LLaVA-NeXT: LLaVA's tower over 224-pixel crops (16 x 16 patches of 14), five grids of them as llava-v1.6's five of
# 336-pixel crops, and image_newline
LLAVA_NEXT = {
    **LLAVA, "model_type": "llava_next", "architectures": ["LlavaNextForConditionalGeneration"],
    "image_grid_pinpoints": [[224, 448], [448, 224], [448, 448], [672, 224], [224, 672]],
    "text_config": {**LLAVA["text_config"], "model_type": "mistral", "num_key_value_heads": 2, "sliding_window": None},
}
INTERNVL = {
    "model_type": "internvl", "architectures": ["InternVLForConditionalGeneration"], "image_token_id": IMAGE,
    "image_seq_length": 16, "downsample_ratio": 0.5, "vision_feature_layer": -1,
    "vision_feature_select_strategy": "default", "projector_hidden_act": "gelu", "tie_word_embeddings": False,
    "text_config": {"model_type": "qwen2", "vocab_size": 1000, "hidden_size": 256, "intermediate_size": 512,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                    "max_position_embeddings": 4096, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
                    "tie_word_embeddings": False},
    # InternViT-300M's shape, narrow, over 112-pixel tiles (8 x 8 patches of 14, 16 tokens a tile)
    "vision_config": {"model_type": "internvl_vision", "hidden_size": 128, "intermediate_size": 256,
                      "num_hidden_layers": 4, "num_attention_heads": 4, "image_size": [112, 112],
                      "patch_size": [14, 14], "attention_bias": True},
}


# InternViT-6B's settings (OpenGVLab's internvl_custom2hf vit_6b_config: RMSNorm blocks, query/key norms, no q/k/v
# biases) on the same narrow tower
INTERNVL_6B = {**INTERNVL, "vision_config": {**INTERNVL["vision_config"], "attention_bias": False, "use_qk_norm": True,
                                             "norm_type": "rms_norm"}}


def _wider(config, **changes):
    """A config whose tower is 2 blocks of 256 wide with 8 heads (num_hidden_layers-style keys), and ``changes``."""
    vision = {**config["vision_config"], "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 8,
              **changes}
    return {**config, "vision_config": vision}


FAMILIES = {"qwen2_5_vl": QWEN_VL, "llava": LLAVA, "internvl": INTERNVL, "gemma3": GEMMA3, "qwen3_5": QWEN3_5, "llama4": LLAMA4, "lfm2_vl": LFM2_VL,
            "qwen3_vl": QWEN3_VL, "qwen3_vl_moe": QWEN3_VL_MOE, "llava_next": LLAVA_NEXT, "internvl-6b": INTERNVL_6B,
            # a wider, shallower tower of each: the per-patch terms checked at a second width
            "qwen2_5_vl-w": {**QWEN_VL, "vision_config": {**QWEN_VL["vision_config"], "depth": 2, "hidden_size": 256,
                                                           "intermediate_size": 640, "num_heads": 8,
                                                           "fullatt_block_indexes": [1]}},
            **{f"{name}-w": _wider(config, intermediate_size=1024 if name == "llama4" else 640)
               for name, config in (("llava", LLAVA), ("internvl", INTERNVL), ("gemma3", GEMMA3), ("llama4", LLAMA4),
                                    ("lfm2_vl", LFM2_VL))}}
# (family, precision, batch, text tokens, images a sequence, image width, height)
CASES = [
    ("qwen2_5_vl", "bf16", 1, 128, 1, 224, 224), ("qwen2_5_vl", "bf16", 2, 128, 1, 448, 336),
    ("qwen2_5_vl", "bf16", 1, 64, 2, 448, 448), ("qwen2_5_vl", "fp32", 1, 128, 1, 448, 336),
    ("qwen2_5_vl", "amp-bf16", 1, 128, 1, 448, 336),
    ("gemma3", "bf16", 1, 128, 1, 224, 224), ("gemma3", "bf16", 2, 128, 2, 224, 224),
    ("gemma3", "fp32", 1, 128, 1, 224, 224), ("gemma3", "amp-bf16", 2, 64, 1, 224, 224),
    ("qwen3_5", "bf16", 1, 64, 1, 448, 320), ("qwen3_5", "bf16", 2, 128, 1, 320, 320),
    ("qwen3_5", "fp32", 1, 64, 2, 320, 320), ("qwen3_5", "amp-bf16", 1, 128, 1, 448, 320),
    ("qwen2_5_vl-w", "bf16", 1, 128, 1, 448, 336), ("qwen2_5_vl-w", "amp-bf16", 1, 128, 1, 448, 336),
    ("gemma3-w", "bf16", 2, 128, 1, 224, 224), ("gemma3-w", "fp32", 1, 128, 2, 224, 224),
    ("llama4", "bf16", 1, 128, 1, 224, 224), ("llama4", "bf16", 1, 64, 1, 448, 224),
    ("llama4", "fp32", 2, 64, 1, 224, 224), ("llama4", "amp-bf16", 1, 64, 1, 448, 224),
    ("llama4", "bf16", 1, 64, 1, 448, 224, "lora"),
    ("lfm2_vl", "bf16", 1, 128, 1, 256, 256), ("lfm2_vl", "bf16", 1, 64, 1, 1280, 720),
    ("lfm2_vl", "bf16", 2, 64, 1, 512, 512), ("lfm2_vl", "fp32", 2, 64, 1, 640, 480),
    ("lfm2_vl", "amp-bf16", 1, 64, 1, 1280, 720), ("lfm2_vl", "bf16", 1, 64, 1, 1280, 720, "lora"),
    ("llama4-w", "bf16", 1, 64, 1, 448, 224), ("llama4-w", "fp32", 1, 128, 1, 224, 224),
    ("lfm2_vl-w", "bf16", 1, 128, 1, 256, 256), ("lfm2_vl-w", "amp-bf16", 1, 64, 1, 1280, 720),
    ("llava", "bf16", 1, 128, 1, 224, 224), ("llava", "bf16", 2, 64, 2, 224, 224), ("llava", "fp32", 1, 128, 1, 640, 480),
    ("llava", "amp-bf16", 1, 128, 1, 224, 224), ("llava", "bf16", 1, 128, 1, 224, 224, "lora"),
    ("llava-w", "bf16", 1, 128, 1, 224, 224), ("llava-w", "amp-bf16", 2, 64, 1, 224, 224),
    ("internvl", "bf16", 1, 128, 1, 224, 224), ("internvl", "bf16", 2, 64, 1, 448, 224),
    ("internvl", "fp32", 1, 64, 1, 336, 224), ("internvl", "amp-bf16", 1, 64, 1, 224, 224),
    ("internvl", "bf16", 1, 64, 1, 224, 224, "lora"), ("internvl-w", "bf16", 1, 64, 1, 224, 224),
    ("internvl-w", "amp-bf16", 1, 128, 2, 224, 224),
    ("qwen3_vl", "bf16", 1, 64, 1, 448, 320), ("qwen3_vl", "bf16", 2, 128, 1, 320, 320),
    ("qwen3_vl", "fp32", 1, 64, 2, 320, 320), ("qwen3_vl", "amp-bf16", 1, 128, 1, 448, 320),
    ("qwen3_vl", "bf16", 1, 64, 1, 448, 320, "lora"), ("qwen3_vl_moe", "bf16", 1, 64, 1, 448, 320),
    ("qwen3_vl_moe", "amp-bf16", 2, 64, 1, 320, 320),
    ("llava_next", "bf16", 1, 64, 1, 640, 480), ("llava_next", "bf16", 2, 64, 1, 448, 448),
    ("llava_next", "fp32", 1, 64, 1, 1280, 720), ("llava_next", "amp-bf16", 1, 64, 1, 640, 480),
    ("llava_next", "bf16", 1, 64, 1, 640, 480, "lora"),
    ("internvl-6b", "bf16", 1, 64, 1, 224, 224), ("internvl-6b", "bf16", 2, 64, 1, 448, 224),
    ("internvl-6b", "fp32", 1, 64, 1, 336, 224), ("internvl-6b", "amp-bf16", 1, 64, 1, 224, 224),
]


# generate() with images: (family, precision, batch, text tokens, images a sequence, image width, height)
GENERATE_CASES = [
    ("qwen2_5_vl", "bf16", 1, 64, 1, 448, 448), ("qwen2_5_vl", "bf16", 1, 64, 1, 896, 896),
    ("qwen2_5_vl", "fp32", 1, 64, 1, 896, 672), ("qwen2_5_vl", "bf16", 2, 128, 1, 224, 224),
    ("qwen2_5_vl-w", "bf16", 1, 64, 1, 896, 896),
    ("gemma3", "bf16", 1, 64, 1, 224, 224), ("gemma3", "bf16", 2, 64, 2, 224, 224), ("gemma3", "fp32", 1, 64, 1, 224, 224),
    ("gemma3-w", "bf16", 1, 64, 1, 224, 224),
    ("qwen3_5", "bf16", 1, 64, 1, 640, 640), ("qwen3_5", "fp32", 1, 64, 1, 448, 448),
    ("qwen3_5", "bf16", 2, 64, 1, 320, 320),
    ("llama4", "bf16", 1, 64, 1, 448, 448), ("llama4", "fp32", 1, 64, 1, 448, 224),
    ("llama4-w", "bf16", 1, 64, 1, 448, 448),
    ("lfm2_vl", "bf16", 1, 64, 1, 1280, 720), ("lfm2_vl", "bf16", 1, 64, 1, 512, 512),
    ("lfm2_vl", "fp32", 1, 64, 1, 640, 480), ("lfm2_vl-w", "bf16", 1, 64, 1, 1280, 720),
    ("llava", "bf16", 1, 64, 1, 224, 224), ("llava", "bf16", 2, 64, 2, 224, 224), ("llava", "fp32", 1, 64, 1, 640, 480),
    ("llava-w", "bf16", 1, 64, 1, 224, 224),
    ("internvl", "bf16", 1, 64, 1, 224, 224), ("internvl", "bf16", 2, 64, 1, 448, 224),
    ("internvl", "fp32", 1, 64, 1, 336, 224), ("internvl-w", "bf16", 1, 64, 1, 224, 224),
    ("qwen3_vl", "bf16", 1, 64, 1, 640, 640), ("qwen3_vl", "fp32", 1, 64, 1, 448, 448),
    ("qwen3_vl", "bf16", 2, 64, 1, 320, 320), ("qwen3_vl_moe", "bf16", 1, 64, 1, 640, 640),
    ("qwen3_vl", "bf16", 4, 512, 1, 448, 448), ("qwen3_vl", "fp32", 2, 1024, 2, 320, 320),
    ("llava_next", "bf16", 1, 64, 1, 640, 480), ("llava_next", "bf16", 2, 64, 1, 448, 448),
    ("llava_next", "fp32", 1, 64, 1, 1280, 720),
    ("internvl-6b", "bf16", 1, 64, 1, 448, 224), ("internvl-6b", "fp32", 1, 64, 1, 336, 224),
    ("internvl-6b", "bf16", 1, 16, 2, 896, 672),
]
NEW_TOKENS = 4


def label_of(family, precision, batch, text, images, width, height, method="full"):
    return f"{family} {precision} b{batch} text{text} {images}x{width}x{height}" + ("" if method == "full" else
                                                                                     f" {method}")


def image_inputs(family, config, images, width, height):
    """(pixel_values and the other image inputs, placeholder tokens per image) for ``images`` images."""
    if family.startswith("gemma3"):
        side = config["vision_config"]["image_size"]
        return {"pixel_values": torch.randn(images, 3, side, side)}, config["mm_tokens_per_image"]
    if family.startswith("internvl"):    # GotOcr2ImageProcessor's tiles and thumbnail, each image_size²
        side = config["vision_config"]["image_size"][0]
        tiles = seeing(config).tile_shapes(width, height)
        per_tile = (side // config["vision_config"]["patch_size"][0] // 2) ** 2
        return {"pixel_values": torch.randn(images * len(tiles), 3, side, side)}, len(tiles) * per_tile
    if family.startswith("llava_next"):  # LlavaNextImageProcessor: the image resized whole, then its grid's crops
        side, tower = config["vision_config"]["image_size"], seeing(config)
        crops = len(tower.tile_shapes(width, height))
        return {"pixel_values": torch.randn(images, crops, 3, side, side),
                "image_sizes": torch.tensor([[height, width]] * images)}, tower.embeddings(width, height)
    if family.startswith("llava"):       # CLIPImageProcessor: every image resized and cropped to image_size²
        side = config["vision_config"]["image_size"]
        return {"pixel_values": torch.randn(images, 3, side, side)}, (side // config["vision_config"]["patch_size"]) ** 2
    if family.startswith(("llama4", "lfm2_vl")):
        return tiled_inputs(family, config, images, width, height)
    vision = config["vision_config"]
    patch, merge, frames = vision["patch_size"], vision["spatial_merge_size"], vision["temporal_patch_size"]
    rows, columns = height // patch, width // patch
    grid = torch.tensor([[1, rows, columns]] * images)
    pixels = torch.randn(images * rows * columns, 3 * frames * patch * patch)
    return {"pixel_values": pixels, "image_grid_thw": grid}, rows * columns // (merge * merge)


def seeing(config):
    """pycore's VisionTower of a config: the processors' arithmetic, which tests/test_vision.py checks against
    transformers' own (Llama4ImageProcessor's get_best_fit; Lfm2VlImageProcessor's resize-or-tile, by
    validation/lfm2_image_tokens.py, as its module needs torchvision)."""
    from pycore.model import hf_config, vision
    return vision.tower(hf_config.architecture_from_dict(json.loads(json.dumps(config))))


def tiled_inputs(family, config, images, width, height):
    """Llama 4: every tile (and the global tile of a tiled image) a 3 x image_size² picture, image_size²/patch²/4
    placeholders each. LFM2-VL: every tile (and the thumbnail) as Lfm2VlImageProcessor returns it, patchified and
    padded to max_num_patches (the larger of max_image_tokens x 4 and a tile's patches) with its pixel_attention_mask
    and spatial_shapes, (rows / 2) x (columns / 2) placeholders each."""
    tower = seeing(config)
    shapes = tower.tile_shapes(width, height)           # (rows, columns) of patches per tile, thumbnail last
    if family.startswith("llama4"):
        side = config["vision_config"]["image_size"]
        per = len(shapes)
        return {"pixel_values": torch.randn(images * per, 3, side, side)}, per * shapes[0][0] * shapes[0][1] // 4
    longest, patch = tower.padded_patches(), tower.patch
    pixels = torch.zeros(images * len(shapes), longest, 3 * patch * patch)
    mask = torch.zeros(images * len(shapes), longest, dtype=torch.long)
    for i, (rows, columns) in enumerate(shapes * images):
        pixels[i, :rows * columns] = torch.randn(rows * columns, 3 * patch * patch)
        mask[i, :rows * columns] = 1
    spatial = torch.tensor(shapes * images)
    tokens = sum(rows // 2 * (columns // 2) for rows, columns in shapes)
    return {"pixel_values": pixels, "pixel_attention_mask": mask, "spatial_shapes": spatial}, tokens


def make_batch(family, config, batch, text, images, width, height):
    """Token ids with each image's placeholders after a start token, the image inputs for every sequence."""
    pictures, per_image = image_inputs(family, config, images * batch, width, height)
    # the placeholders and the tokens around them, as many as pycore/model/vision.py's tokens (which include them): Qwen's
    # chat template's <|vision_start|> and <|vision_end|>, Gemma 3's "\n\n<boi>" and "<eoi>\n\n", Llama 4's and
    # LFM2-VL's start, end, tile separators or markers, the global tile's <|image|> or the thumbnail's; LLaVA's
    # "<image>" becomes its placeholders alone
    markers = seeing(config).tokens(width, height) - per_image
    image_part = [START, *[IMAGE] * per_image, *[996] * (markers - 2), END] if markers else [IMAGE] * per_image
    # text ids from 1: generate() reads a 0, its pad_token_id, as padding and hands SDPA a materialised mask
    rows = [torch.cat([torch.tensor(image_part * images), torch.randint(1, 990, (text,))]) for _ in range(batch)]
    ids = torch.stack(rows)
    labels = ids.clone()
    labels[ids == IMAGE] = -100
    inputs = {"input_ids": ids, "labels": labels, **pictures}
    if family.startswith("gemma3"):
        inputs["token_type_ids"] = (ids == IMAGE).long()      # Gemma 3 needs them in training
    if family.startswith(("qwen3_5", "qwen3_vl")):
        inputs["mm_token_type_ids"] = (ids == IMAGE).int()    # Qwen3.5's and Qwen3-VL's M-RoPE: 1 marks image tokens
    return inputs, per_image


def build(family, precision, config=None):
    """The model of FAMILIES[family], or of ``config`` (a config.json dict of that family), in the case's dtype."""
    if family.startswith("llama4"):
        # transformers 5.24's Llama4ForConditionalGeneration.forward reads outputs.image_outputs off its text model's
        # MoeCausalLMOutputWithPast, which has no such field (an AttributeError with return_dict): read it as None
        from transformers.modeling_outputs import MoeCausalLMOutputWithPast
        MoeCausalLMOutputWithPast.image_outputs = None
    config = transformers.AutoConfig.for_model(**(config or FAMILIES[family]))
    torch.manual_seed(0)
    model = transformers.AutoModelForImageTextToText.from_config(config, attn_implementation="sdpa")
    dtype = torch.float32 if precision in ("fp32", "amp-bf16") else torch.bfloat16
    model = model.to(dtype)
    if family.startswith("llama4"):
        # .to(bfloat16) casts the complex rotary table to real; from_pretrained(dtype=...) keeps it complex64
        rotary = model.vision_model.rotary_embedding
        rotary.freqs_ci = rotary._compute_freqs_ci(config.vision_config)
    return model, dtype


def tower_saved(model, pictures, dtype, amp):
    """Bytes the vision tower and its merger / projector save for backward and still hold once the image features
    are returned, by distinct storage, 512-rounded (LLaVA's blocks past vision_feature_layer run, and what they save
    is freed with their unused output)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    pixels = pictures["pixel_values"].to(dtype)
    storages = {}

    def pack(tensor):
        key = tensor.untyped_storage().data_ptr()
        if key not in params and key != pixels.untyped_storage().data_ptr():
            storages.setdefault(key, [tensor.untyped_storage().nbytes(), []])[1].append(weakref.ref(tensor))
        return tensor
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp), cuda_autocast(amp):
        if "image_grid_thw" in pictures:
            features = model.model.get_image_features(pixels, pictures["image_grid_thw"])
        elif "spatial_shapes" in pictures:
            features = model.model.get_image_features(pixels, pictures["spatial_shapes"],
                                                      pictures["pixel_attention_mask"])
        elif "image_sizes" in pictures:                 # LLaVA-NeXT: the crops' features packed per image
            features = model.model.get_image_features(pixels, pictures["image_sizes"])
        elif hasattr(model, "vision_model"):            # Llama 4: the projector runs in forward, on the flat features
            hidden = model.vision_model(pixels).last_hidden_state
            features = model.multi_modal_projector(hidden.view(-1, hidden.size(-1)))
        else:
            features = model.model.get_image_features(pixels)
    pooled = getattr(features, "pooler_output", None)
    # what the model's forward goes on to use: the merged features, and Qwen3-VL's deepstack features
    features = features if pooled is None else (pooled, getattr(features, "deepstack_features", None))
    gc.collect()
    held = sum(-(-n // 512) * 512 for n, refs in storages.values() if any(ref() is not None for ref in refs))
    del features
    return held


def with_lora(model):
    """PEFT's LoRA (r 16, alpha 32, PEFT's fp32 adapters) on the text decoder's q and v projections only: the module
    names q_proj and v_proj alone would match the vision tower's attention too (Llama 4's, SigLIP2's), which pycore's
    method=lora takes as frozen."""
    from peft import LoraConfig, get_peft_model
    config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0,
                        target_modules=r".*language_model.*\.(q_proj|v_proj)")
    return get_peft_model(model, config)


def run_case(family, precision, batch, text, images, width, height, method="full"):
    model, dtype = build(family, precision)
    model.train()
    inputs, per_image = make_batch(family, FAMILIES[family], batch, text, images, width, height)
    inputs = {k: (v.to(dtype) if k == "pixel_values" else v) for k, v in inputs.items()}
    amp = precision.startswith("amp-")
    base, params = model, sum(p.numel() for p in model.parameters())      # without the adapters, as pycore counts
    if method == "lora":
        model = with_lora(model)
    optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], "adamw")
    with cuda_autocast(amp):
        measure.train_step(model, inputs, optimizer, precision, None)      # warm-up: the optimizer state
    tracker = MemTracker()
    if method == "lora":        # as measure_dpo.py: frozen parameters take no gradient hooks
        track = tracker._track_module_params_and_buffers
        tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(module, False)
    tracker.track_external(model, optimizer, *inputs.values())
    started = time.time()
    with tracker, cuda_autocast(amp):
        measure.train_step(model, inputs, optimizer, precision, None)
    peak = tracker.get_tracker_snapshot("peak")
    device = next(iter(peak))
    breakdown = {str(k).split(".")[-1].capitalize(): v for k, v in peak[device].items() if str(k) != "Total"}
    pictures = ("pixel_values", "image_grid_thw", "spatial_shapes", "pixel_attention_mask", "image_sizes")
    saved = tower_saved(base, {k: inputs[k] for k in pictures if k in inputs}, dtype, amp)
    config = json.loads(base.config.to_json_string())
    lora = {"method": "lora", "lora_rank": "16", "lora_targets": "qv", "lora_dtype": "fp32"} if method == "lora" else {}
    return {"label": label_of(family, precision, batch, text, images, width, height, method), "family": family,
            "inputs": {"mode": "train", "precision": precision, "batch": str(batch),
                       "seq": str(text), "images": str(images),      # pycore's image tokens hold their markers
                       "image_size": f"{width}x{height}", "optimizer_impl": "foreach", **lora},
            "config_json": config, "image_tokens": per_image, "params": params,
            "peak_bytes": peak[device]["Total"], "peak_breakdown": breakdown, "tower_saved": saved,
            "seconds": round(time.time() - started, 1)}


def run_generate(family, precision, batch, text, images, width, height):
    """generate() with the images: the peak of the recorded call, the tower's forward included."""
    model, dtype = build(family, precision)
    model.eval()
    model.config.use_cache = True
    model.generation_config.use_cache = True
    model.generation_config.pad_token_id = 0
    inputs, per_image = make_batch(family, FAMILIES[family], batch, text, images, width, height)
    inputs.pop("labels")
    inputs.pop("token_type_ids", None)                  # Gemma 3 needs them in training only
    inputs = {k: (v.to(dtype) if k == "pixel_values" else v) for k, v in inputs.items()}
    kwargs = dict(max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    started = time.time()
    tracker = measure.track_generate(model, tuple(inputs.values()), lambda: model.generate(**inputs, **kwargs))
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    return {"label": label_of(family, precision, batch, text, images, width, height), "family": family,
            "inputs": {"mode": "infer", "precision": precision, "batch": str(batch),
                       "seq": str(text), "images": str(images),
                       "image_size": f"{width}x{height}", "new_tokens": str(NEW_TOKENS)},
            "config_json": json.loads(model.config.to_json_string()), "image_tokens": per_image,
            "params": sum(p.numel() for p in model.parameters()), "peak_bytes": peak["Total"],
            "peak_breakdown": {str(k).split(".")[-1].capitalize(): v for k, v in peak.items() if str(k) != "Total"},
            "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text; print, do not save")
    parser.add_argument("--compare", action="store_true", help="print the record beside pycore's estimate")
    parser.add_argument("--generate", action="store_true", help="measure generate() with images instead")
    parser.add_argument("--replace", action="store_true", help="with --only: put the cases run in the saved record in "
                                                                "place of those of the same label")
    args = parser.parse_args()
    if args.generate:
        cases = []
        for case in GENERATE_CASES:
            if args.only and args.only not in label_of(*case):
                continue
            result = run_generate(*case)
            print(f"{result['label']:44s} peak {result['peak_bytes'] / 2**20:8.2f} MiB  ({result['seconds']} s)",
                  flush=True)
            cases.append(result)
        save(GENERATE_OUT, "generate() with images: " + __doc__.split("\n\n")[0], cases, args)
        return
    if args.compare:
        for row in compare.vl_rows()[1]:
            print(f"{row['label']:44s} measured {row['measured'] / 2**20:8.2f} MiB  estimate "
                  f"{row['estimated'] / 2**20:8.2f} MiB  {100 * row['error']:+6.1f}%  tower saved "
                  f"{row['tower'][0] / 2**20:6.2f} / {row['tower'][1] / 2**20:6.2f} MiB  "
                  f"params {'=' if row['params_match'] else '!='}  ({row['phase']})")
        return
    cases = []
    for case in CASES:
        if args.only and args.only not in label_of(*case):
            continue
        result = run_case(*case)
        print(f"{result['label']:44s} peak {result['peak_bytes'] / 2**20:8.2f} MiB  tower saved "
              f"{result['tower_saved'] / 2**20:6.2f} MiB  ({result['seconds']} s)", flush=True)
        cases.append(result)
    save(OUT, __doc__.split("\n\n")[0], cases, args)


def save(path, about, cases, args):
    """Write the record: every case, or with --only --replace the saved one with these cases in place of their
    labels' (with --only alone, nothing)."""
    if args.only and not args.replace:
        return
    if args.only:
        fresh = {case["label"]: case for case in cases}
        cases = [fresh.pop(case["label"], case) for case in json.loads(path.read_text())["cases"]] + list(fresh.values())
    path.write_text(json.dumps({"about": about, "torch": torch.__version__, "transformers": transformers.__version__,
                                "python": platform.python_version(), "cases": cases}, indent=1) + "\n")


if __name__ == "__main__":
    main()
