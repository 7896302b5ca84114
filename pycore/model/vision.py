"""Vision encoders of vision-language models: their parameters and the tokens an image becomes.

Qwen2.5-VL (transformers 5.24 ``Qwen2_5_VisionTransformerPretrainedModel``): a Conv3d patch embedding over
temporal_patch_size frames of patch_size² pixels, ``depth`` blocks of RMSNorm, biased fused qkv and output
projections and a biased gated MLP, then a merger that
concatenates spatial_merge_size² patches and projects them to the decoder's width. An image is resized by
``smart_resize`` (image_processing_qwen2_vl.py) to multiples of patch_size × spatial_merge_size pixels within
[min_pixels, max_pixels] (the processor's defaults, 56·56 and 28·28·1280), and becomes one token per merged
tile.
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

    family: str                 # qwen2_5_vl
    layers: int                 # depth
    hidden: int
    ffn: int                    # intermediate_size
    patch: int                  # patch_size in pixels
    temporal_patch: int         # frames per patch (an image is repeated to fill them)
    merge: int                  # spatial_merge_size: merge² patches become one token
    channels: int               # in_channels
    out_hidden: int             # the decoder's hidden size the merger projects to

    def params(self) -> int:
        """Exact parameter count of the tower and its merger."""
        h, f = self.hidden, self.ffn
        patch = self.channels * self.temporal_patch * self.patch * self.patch * h
        block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * (h * f + f) + (f * h + h)   # norms, qkv, proj, MLP
        merged = h * self.merge * self.merge
        merger = h + merged * merged + merged + merged * self.out_hidden + self.out_hidden     # ln_q, two linears
        return patch + self.layers * block + merger

    def grid(self, width: int, height: int) -> "tuple[int, int]":
        """Patches along (height, width) after smart_resize."""
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
        rows, columns = self.grid(width, height)
        return rows * columns // (self.merge * self.merge)


def tower(arch: "Architecture") -> "VisionTower | None":
    """The vision tower an architecture carries, or None for a text-only model."""
    if not arch.vision_layers:
        return None
    return VisionTower(arch.vision_family, arch.vision_layers, arch.vision_hidden, arch.vision_ffn, arch.vision_patch,
                       arch.vision_temporal_patch, arch.vision_merge, 3, arch.hidden)
