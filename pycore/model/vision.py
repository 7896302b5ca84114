"""Vision encoders of vision-language models: their parameters and the tokens an image becomes.

Qwen2.5-VL (transformers 5.24 ``Qwen2_5_VisionTransformerPretrainedModel``): a Conv3d patch embedding over
temporal_patch_size frames of patch_size² pixels, ``depth`` blocks of RMSNorm, biased fused qkv and output
projections and a biased gated MLP, then a merger that
concatenates spatial_merge_size² patches and projects them to the decoder's width. An image is resized by
``smart_resize`` (image_processing_qwen2_vl.py) to multiples of patch_size × spatial_merge_size pixels within
[min_pixels, max_pixels] (the processor's defaults, 56·56 and 28·28·1280), and becomes one token per merged
tile.

Llama 4 (``Llama4VisionModel``): a linear patch embedding of patch_size² pixels, a class token and learned
positions for one tile of image_size², ``num_hidden_layers`` LayerNorm blocks with biased attention and a
biased plain GELU MLP, a pixel-shuffle adapter (2 × 2 patches into one, then two linears to
projector dims) and the projector to the decoder's width. An image is fitted to a canvas of up to
max_patches (16) tiles of image_size² (``get_best_fit``), each tile becoming (image_size / patch_size)² / 4
tokens; with more than one tile a global tile is added, and separators between tiles
(``Llama4Processor._prompt_split_image``).
"""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture

MIN_PIXELS = 56 * 56            # Qwen2VLImageProcessor's defaults (transformers 5.24)
MAX_PIXELS = 28 * 28 * 1280


@dataclass(frozen=True)
class VisionTower:
    """The fields of a config's vision_config that its weights and image tokens depend on."""

    family: str                 # qwen2_5_vl | qwen3_vl | llama4
    layers: int                 # depth
    hidden: int
    ffn: int                    # intermediate_size
    patch: int                  # patch_size in pixels
    temporal_patch: int         # frames per patch (an image is repeated to fill them)
    merge: int                  # spatial_merge_size: merge² patches become one token
    channels: int               # in_channels
    out_hidden: int             # the decoder's hidden size the merger projects to
    tile: int = 0               # Llama 4: image_size, the side of one tile in pixels
    positions: int = 0          # Qwen3-VL: learned position embeddings
    projector: int = 0          # Llama 4: projector_input_dim = projector_output_dim = vision_output_dim

    def params(self) -> int:
        """Exact parameter count of the tower and its merger (or adapter and projector)."""
        if self.family == "llama4":
            return self._llama4_params()
        if self.family == "qwen3_vl":
            return self._qwen3_vl_params()
        h, f = self.hidden, self.ffn
        patch = self.channels * self.temporal_patch * self.patch * self.patch * h
        block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * (h * f + f) + (f * h + h)   # norms, qkv, proj, MLP
        merged = h * self.merge * self.merge
        merger = h + merged * merged + merged + merged * self.out_hidden + self.out_hidden     # ln_q, two linears
        return patch + self.layers * block + merger

    def _qwen3_vl_params(self) -> int:
        """Qwen3-VL / Qwen3.5 (Qwen3VLVisionModel): a biased Conv3d patch embedding, learned positions, LayerNorm
        blocks with biased qkv, proj and a plain fc1/fc2 MLP, and a merger (LayerNorm over one patch, fc1 and fc2
        over merge² patches)."""
        h, f = self.hidden, self.ffn
        patch = self.channels * self.temporal_patch * self.patch * self.patch * h + h
        block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h)
        merged = h * self.merge * self.merge
        merger = 2 * h + merged * merged + merged + merged * self.out_hidden + self.out_hidden
        return patch + self.positions * h + self.layers * block + merger

    def _llama4_params(self) -> int:
        h, f, p = self.hidden, self.ffn, self.projector
        positions = (self.tile // self.patch) ** 2 + 1
        embed = h + positions * h + self.channels * self.patch * self.patch * h + 2 * 2 * h   # class, positions, patches,
        block = 4 * h * h + 4 * h + (h * f + f) + (f * h + h) + 2 * 2 * h                      # pre/post norms
        adapter = h * self.merge * self.merge * p + p * p
        return embed + self.layers * block + adapter + p * self.out_hidden

    def _llama4_tokens(self, width: int, height: int) -> int:
        """Llama4ImageProcessor (max_patches 16, no upscaling past the canvas) and _prompt_split_image."""
        canvases = [(rows * self.tile, (chunks // rows) * self.tile) for chunks in range(16, 0, -1)
                    for rows in range(1, chunks + 1) if chunks % rows == 0]
        scales = [min(w / width, h / height) for h, w in canvases]
        up = [s for s in scales if s >= 1]
        chosen = min(up) if up else max(s for s in scales if s < 1)
        rows, columns = min(((h, w) for (h, w), s in zip(canvases, scales) if s == chosen), key=lambda c: c[0] * c[1])
        rows, columns = rows // self.tile, columns // self.tile
        per_tile = (self.tile // self.patch) ** 2 // (self.merge * self.merge)
        tiles = rows * columns
        split = tiles * per_tile + (columns - 1) * rows + rows if tiles > 1 else 0
        return 1 + split + 1 + per_tile + 1      # image_start, tiles and separators, <|image|>, global tile, image_end

    def grid(self, width: int, height: int) -> "tuple[int, int]":
        """Patches along (height, width) after smart_resize (Qwen3.5 uses the same Qwen2VLImageProcessor: transformers
        5.24 auto/image_processing_auto.py; its tiles are patch_size x merge, 32 pixels)."""
        factor = self.patch * self.merge
        if max(height, width) / min(height, width) > 200:
            raise ValueError("image_size: the processor refuses an aspect ratio over 200")
        h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
        if h_bar * w_bar > MAX_PIXELS:
            beta = math.sqrt(height * width / MAX_PIXELS)
            h_bar = max(factor, math.floor(height / beta / factor) * factor)
            w_bar = max(factor, math.floor(width / beta / factor) * factor)
        elif h_bar * w_bar < MIN_PIXELS:
            beta = math.sqrt(MIN_PIXELS / (height * width))
            h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
        return h_bar // self.patch, w_bar // self.patch

    def tokens(self, width: int, height: int) -> int:
        """Decoder tokens one image of width × height pixels becomes."""
        if self.family == "llama4":
            return self._llama4_tokens(width, height)
        rows, columns = self.grid(width, height)
        return rows * columns // (self.merge * self.merge)


def tower(arch: "Architecture") -> "VisionTower | None":
    """The vision tower an architecture carries, or None for a text-only model."""
    if not arch.vision_layers:
        return None
    return VisionTower(arch.vision_family, arch.vision_layers, arch.vision_hidden, arch.vision_ffn, arch.vision_patch,
                       arch.vision_temporal_patch, arch.vision_merge, 3, arch.hidden, tile=arch.vision_tile,
                       projector=arch.vision_projector, positions=arch.vision_positions)
