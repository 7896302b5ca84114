"""Vision encoders of vision-language models: their parameters and the tokens an image becomes.

Qwen2.5-VL (transformers 5.24 ``Qwen2_5_VisionTransformerPretrainedModel``): a Conv3d patch embedding over
temporal_patch_size frames of patch_size² pixels, ``depth`` blocks of RMSNorm, biased fused qkv and output
projections and a biased gated MLP, then a merger that
concatenates spatial_merge_size² patches and projects them to the decoder's width. An image is resized by
``smart_resize`` (image_processing_qwen2_vl.py) to multiples of patch_size × spatial_merge_size pixels within
[min_pixels, max_pixels] (the checkpoint's preprocessor_config.json: 3,136 and 12,845,056 pixels for Qwen2.5-VL, 4 to
16,384 tokens; 65,536 and 16,777,216 for Qwen3-VL and Qwen3.5), and becomes one token per merged tile.

Llama 4 (``Llama4VisionModel``): a linear patch embedding of patch_size² pixels, a class token and learned
positions for one tile of image_size², ``num_hidden_layers`` LayerNorm blocks with biased attention and a
biased plain GELU MLP, a pixel-shuffle adapter (2 × 2 patches into one, then two linears to
projector dims) and the projector to the decoder's width. An image is fitted to a canvas of up to
max_patches (16) tiles of image_size² (``get_best_fit``), each tile becoming (image_size / patch_size)² / 4
tokens; with more than one tile a global tile is added, and separators between tiles
(``Llama4Processor._prompt_split_image``).

Gemma 3 (``SiglipVisionModel`` without its head, transformers 5.24): a biased Conv2d patch embedding, learned
positions for one image of image_size², ``num_hidden_layers`` LayerNorm blocks with biased q/k/v/out projections and a
biased fc1/fc2 GELU MLP, a final LayerNorm; then ``Gemma3MultiModalProjector``: an average pool of merge × merge
patches, an RMSNorm and an unbiased projection to the decoder's width. Every image is resized to image_size² and
becomes mm_tokens_per_image tokens (``Gemma3Processor._get_num_multimodal_tokens``; pan-and-scan, off by default,
is not modelled).

LLaVA-1.5 (``CLIPVisionModel``, the whole of it, as LlavaModel builds it): a Conv2d patch embedding without bias, a
class token and learned positions for one image of image_size², a pre-LayerNorm, ``num_hidden_layers`` LayerNorm
blocks with biased q/k/v/out projections and a biased fc1/fc2 QuickGELU MLP, a post-LayerNorm; then
``LlavaMultiModalProjector``: two biased linears around a GELU, from the tower's width to the decoder's. Every image
is resized and cropped to image_size² (CLIPImageProcessor) and becomes a token per patch, and one more for the class
token with vision_feature_select_strategy "full"; the chat template's "<image>" is replaced by them alone.

InternVL (``InternVLVisionModel``, InternViT-300M's shape): a biased Conv2d patch embedding, a class token and learned
positions for one tile of image_size², ``num_hidden_layers`` LayerNorm blocks with q/k/v projections (biased with
attention_bias), a biased output projection, a biased fc1/fc2 GELU MLP and two layer scales, no final norm (mean
pooling); then ``InternVLMultiModalProjector``: a LayerNorm and two biased linears around a GELU over the 2 × 2
pixel-shuffled features. An image is cut into the grid of 1 to 12 tiles of image_size² closest to its aspect ratio
(GotOcr2ImageProcessor.crop_image_to_patches, crop_to_patches on as InternVLProcessor sets it), with a thumbnail
when there is more than one; each tile becomes (image_size / patch_size / 2)² tokens (256), between one <img> and
one </img> (InternVLProcessor).

LLaVA-NeXT (``LlavaNextModel``): LLaVA-1.5's tower and projector and an image_newline vector of the decoder's width.
An image is fitted to the image_grid_pinpoints resolution that keeps the most of it and wastes the least
(``select_best_resolution``), cut into that grid's crops of image_size², and resized whole as one more crop first; the
tower runs over every crop. ``pack_image_features`` keeps the whole image's features, then lays the crops' features
out as one grid, drops the rows or columns the image's padding became (``unpad_image``) and ends each row with
image_newline (LlavaNextProcessor._get_number_of_features counts the same).

LFM2-VL (``Siglip2VisionModel``): the same blocks over a biased linear patch embedding and num_patches learned
positions; ``Lfm2VlMultiModalProjector`` unshuffles merge × merge patches into one (with a LayerNorm when
projector_use_layernorm) and projects them through two biased linears of projector_hidden_size. An image is resized
to multiples of 32 pixels holding 64 to 256 tokens, or, when it is too large for one (``_is_image_too_large``), cut
into a grid of 2 to 10 tiles of 512² with a thumbnail (``Lfm2VlImageProcessor.resize_and_split``); the processor
writes a start, an end and a marker per tile around them (``Lfm2VlProcessor._build_image_tokens``).
"""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture

MIN_PIXELS = 56 * 56            # Qwen2VLImageProcessor's class defaults (transformers 5.24)
MAX_PIXELS = 28 * 28 * 1280
# smart_resize's pixel bounds as the checkpoints' preprocessor_config.json set them, which override the class defaults
# (AutoProcessor.from_pretrained, and vLLM's processor, read that file): Qwen/Qwen2.5-VL-7B-Instruct's min_pixels 3,136
# and max_pixels 12,845,056, 4 to 16,384 tokens of 28² pixels ("the default range for the number of visual tokens per
# image in the model is 4-16384", Qwen2-VL's model card); Qwen/Qwen3-VL-8B-Instruct's and Qwen/Qwen3.5-27B's size
# shortest_edge 65,536 and longest_edge 16,777,216, 64 to 16,384 tokens of 32²
PIXEL_BOUNDS = {"qwen2_5_vl": (3_136, 12_845_056), "qwen3_vl": (65_536, 16_777_216)}
# Lfm2VlImageProcessor's defaults (transformers 5.24), which LFM2-VL's config.json repeats: image tokens per tile or
# resized image, tiles per grid, and how far past max_image_tokens an image may be before it is tiled
LFM2_MIN_TOKENS, LFM2_MAX_TOKENS, LFM2_MIN_TILES, LFM2_MAX_TILES, LFM2_TOLERANCE = 64, 256, 2, 10, 2.0
# The prompt tokens around an image's placeholders. Qwen2.5-VL's, Qwen3-VL's and Qwen3.5's chat templates write
# "<|vision_start|><|image_pad|><|vision_end|>" for an image, and the processor repeats <|image_pad|> once per merged
# tile (Qwen2_5_VLProcessor.__call__); Gemma3Processor replaces the template's <start_of_image> with
# full_image_sequence, "\n\n<start_of_image>" + mm_tokens_per_image × <image_soft_token> + "<end_of_image>\n\n",
# "\n\n" one token (108) of Gemma 3's vocabulary: 260 tokens for 256 embeddings (vLLM 0.11 gemma3_mm.py L216-228 too)
QWEN_MARKERS, GEMMA_MARKERS = 2, 4
# InternVLProcessor writes <img>, the image's tokens and </img>; GotOcr2ImageProcessor's tiles a grid (InternVL's
# preprocessor_config.json: min_patches 1, max_patches 12)
INTERNVL_MARKERS, INTERNVL_MIN_TILES, INTERNVL_MAX_TILES = 2, 1, 12


@dataclass(frozen=True)
class VisionTower:
    """The fields of a config's vision_config that its weights and image tokens depend on."""

    family: str                 # qwen2_5_vl | qwen3_vl | llama4 | siglip (Gemma 3) | siglip2 (LFM2-VL) | clip (LLaVA)
                                # | internvl
    layers: int                 # depth
    hidden: int
    ffn: int                    # intermediate_size
    patch: int                  # patch_size in pixels
    temporal_patch: int         # frames per patch (an image is repeated to fill them)
    merge: int                  # spatial_merge_size: merge² patches become one token
    channels: int               # in_channels
    out_hidden: int             # the decoder's hidden size the merger projects to
    tile: int = 0               # Llama 4, Gemma 3, LFM2-VL: the side of one tile (or image) in pixels
    positions: int = 0          # Qwen3-VL, LFM2-VL: learned position embeddings
    projector: int = 0          # Llama 4: projector_input_dim = projector_output_dim = vision_output_dim;
                                # LFM2-VL: projector_hidden_size
    projector_norm: bool = False    # LFM2-VL: projector_use_layernorm
    keep_cls: bool = False          # LLaVA: the class token's feature is an image token too
    unused_layers: int = 0          # LLaVA: blocks past vision_feature_layer
    qkv_bias: bool = False          # InternVL: attention_bias
    deepstack: int = 0              # Qwen3-VL: deepstack mergers
    rms_norm: bool = False          # InternViT-6B: weight-only RMSNorms in its blocks
    qk_norm: bool = False           # InternViT-6B: RMSNorms over the query and the key
    pinpoints: "tuple[tuple[int, int], ...]" = ()     # LLaVA-NeXT: image_grid_pinpoints, (height, width) each

    def _siglip_params(self) -> int:
        """SigLIP's embeddings, blocks and post-LayerNorm, and the projector Gemma 3 or LFM2-VL puts after it."""
        h, p = self.hidden, self.projector
        block = self._plain_block()
        patches = self.channels * self.patch * self.patch * h + h
        if self.family == "siglip":
            positions = (self.tile // self.patch) ** 2
            return patches + positions * h + self.layers * block + 2 * h + (h + h * self.out_hidden)
        unshuffled = h * self.merge * self.merge
        projector = (2 * unshuffled if self.projector_norm else 0) + unshuffled * p + p + p * self.out_hidden + \
            self.out_hidden
        return patches + self.positions * h + self.layers * block + 2 * h + projector

    def _clip_params(self) -> int:
        """CLIP's embeddings (class token, unbiased patch Conv2d, positions), pre-LayerNorm, blocks and post-LayerNorm,
        and LLaVA's projector."""
        h, o = self.hidden, self.out_hidden
        block = self._plain_block()
        embeddings = h + self.channels * self.patch * self.patch * h + ((self.tile // self.patch) ** 2 + 1) * h
        newline = o if self.pinpoints else 0            # LLaVA-NeXT's image_newline
        return embeddings + 2 * h + self.layers * block + 2 * h + (h * o + o) + (o * o + o) + newline

    def _anyres_grid(self, width: int, height: int) -> "tuple[int, int]":
        """LLaVA-NeXT: (rows, columns) of image_size² crops of the pinpoint select_best_resolution picks
        (transformers 5.24 image_processing_utils.py) for an image of width × height."""
        best, most, least = self.pinpoints[0], 0, float("inf")
        for rows, columns in self.pinpoints:
            scale = min(columns / width, rows / height)
            effective = min(int(width * scale) * int(height * scale), width * height)
            wasted = rows * columns - effective
            if effective > most or (effective == most and wasted < least):
                best, most, least = (rows, columns), effective, wasted
        return best[0] // self.tile, best[1] // self.tile

    def _anyres_embeddings(self, width: int, height: int) -> int:
        """LLaVA-NeXT: the whole image's features, then the crops' grid with the padding's rows or columns taken off
        and a newline ending each row (LlavaNextProcessor._get_number_of_features and _get_unpadded_features)."""
        side = self.tile // self.patch
        grid_rows, grid_columns = self._anyres_grid(width, height)
        rows, columns = side * grid_rows, side * grid_columns
        if width / height > columns / rows:
            rows -= (rows - int(round(height * (columns / width), 7))) // 2 * 2
        else:
            columns -= (columns - int(round(width * (rows / height), 7))) // 2 * 2
        return rows * columns + rows + side * side

    def _internvl_params(self) -> int:
        """InternViT's embeddings (class token, biased patch Conv2d, positions) and blocks, and InternVL's projector."""
        h, f, o, shuffled = self.hidden, self.ffn, self.out_hidden, 4 * self.hidden
        norms = 2 * (1 if self.rms_norm else 2) * h + (2 * h if self.qk_norm else 0)
        block = norms + 3 * (h * h + (h if self.qkv_bias else 0)) + (h * h + h) + 2 * h + (h * f + f) + (f * h + h)
        embeddings = h + self.channels * self.patch * self.patch * h + h + ((self.tile // self.patch) ** 2 + 1) * h
        return embeddings + self.layers * block + 2 * shuffled + (shuffled * o + o) + (o * o + o)

    def _internvl_tiles(self, width: int, height: int) -> int:
        """Pictures the tower sees for one image: the grid's tiles and, with more than one, the thumbnail."""
        columns, rows = _closest_grid(width, height, self.tile, INTERNVL_MIN_TILES, INTERNVL_MAX_TILES, listed=True)
        return columns * rows + 1 if columns * rows > 1 else 1

    def unused_params(self) -> int:
        """LLaVA: the tower's parameters whose output nothing uses, the blocks past vision_feature_layer and the
        post-LayerNorm (LlavaModel.get_image_features replaces the pooled output it makes): in training no gradient
        reaches them, and vLLM does not build them (vLLM 0.11 llava.py L417-470 and L542, require_post_norm=False);
        0 for the other towers."""
        if self.family != "clip":
            return 0
        return self.unused_layers * self._plain_block() + 2 * self.hidden

    def _plain_block(self) -> int:
        """One CLIP block: two LayerNorms, biased q/k/v/out projections, a biased fc1/fc2 MLP."""
        h, f = self.hidden, self.ffn
        return 2 * 2 * h + 4 * (h * h + h) + (h * f + f) + (f * h + h)

    def _lfm2_grid(self, width: int, height: int) -> "tuple[int, int] | None":
        """(columns, rows) of tiles an image too large for one resize is cut into (_is_image_too_large), else None."""
        factor, pixels = self.patch * self.merge, (self.patch * self.merge) ** 2

        def near(x: int) -> int:
            return round(x / factor) * factor
        large = max(self.patch, near(height)) * max(self.patch, near(width)) > LFM2_MAX_TOKENS * pixels * LFM2_TOLERANCE
        return _closest_grid(width, height, self.tile) if large else None

    def _lfm2_resized(self, width: int, height: int) -> "tuple[int, int]":
        """(height, width) in pixels of the image resized whole (smart_resize), or of a tiled image's thumbnail."""
        factor, pixels = self.patch * self.merge, (self.patch * self.merge) ** 2

        def near(x: int) -> int:
            return round(x / factor) * factor
        single = max(factor, near(height)) * max(factor, near(width))
        if single > LFM2_MAX_TOKENS * pixels:
            beta = math.sqrt(height * width / (LFM2_MAX_TOKENS * pixels))
            rows, columns = (max(factor, math.floor(x / beta / factor) * factor) for x in (height, width))
        elif single < LFM2_MIN_TOKENS * pixels:
            beta = math.sqrt(LFM2_MIN_TOKENS * pixels / (height * width))
            rows, columns = (math.ceil(x * beta / factor) * factor for x in (height, width))
        else:
            rows, columns = max(factor, near(height)), max(factor, near(width))
        return rows, columns

    def params(self) -> int:
        """Exact parameter count of the tower and its merger (or adapter and projector)."""
        if self.family == "llama4":
            return self._llama4_params()
        if self.family == "qwen3_vl":
            return self._qwen3_vl_params()
        if self.family in ("siglip", "siglip2"):
            return self._siglip_params()
        if self.family == "clip":
            return self._clip_params()
        if self.family == "internvl":
            return self._internvl_params()
        h, f = self.hidden, self.ffn
        patch = self.channels * self.temporal_patch * self.patch * self.patch * h
        block = 2 * h + (3 * h * h + 3 * h) + (h * h + h) + 2 * (h * f + f) + (f * h + h)   # norms, qkv, proj, MLP
        merged = h * self.merge * self.merge
        merger = h + merged * merged + merged + merged * self.out_hidden + self.out_hidden     # ln_q, two linears
        return patch + self.layers * block + merger

    def _qwen3_vl_params(self) -> int:
        """Qwen3-VL / Qwen3.5 (Qwen3VLVisionModel): a biased Conv3d patch embedding, learned positions, LayerNorm
        blocks with biased qkv, proj and a plain fc1/fc2 MLP, and a merger (LayerNorm over one patch, fc1 and fc2
        over merge² patches); Qwen3-VL's deepstack mergers the same with their LayerNorm over the merged patches
        (Qwen3VLVisionPatchMerger, use_postshuffle_norm)."""
        h, f = self.hidden, self.ffn
        patch = self.channels * self.temporal_patch * self.patch * self.patch * h + h
        block = 2 * 2 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * f + f) + (f * h + h)
        merged = h * self.merge * self.merge
        linears = merged * merged + merged + merged * self.out_hidden + self.out_hidden
        return patch + self.positions * h + self.layers * block + 2 * h + linears + \
            self.deepstack * (2 * merged + linears)

    def _llama4_params(self) -> int:
        h, f, p = self.hidden, self.ffn, self.projector
        positions = (self.tile // self.patch) ** 2 + 1
        embed = h + positions * h + self.channels * self.patch * self.patch * h + 2 * 2 * h   # class, positions, patches,
        block = 4 * h * h + 4 * h + (h * f + f) + (f * h + h) + 2 * 2 * h                      # pre/post norms
        adapter = h * self.merge * self.merge * p + p * p
        return embed + self.layers * block + adapter + p * self.out_hidden

    def _llama4_tokens(self, width: int, height: int) -> int:
        """Llama4ImageProcessor (max_patches 16, no upscaling past the canvas) and _prompt_split_image."""
        rows, columns = self._llama4_grid(width, height)
        per_tile = (self.tile // self.patch) ** 2 // (self.merge * self.merge)
        tiles = rows * columns
        split = tiles * per_tile + (columns - 1) * rows + rows if tiles > 1 else 0
        return 1 + split + 1 + per_tile + 1      # image_start, tiles and separators, <|image|>, global tile, image_end

    def _llama4_grid(self, width: int, height: int) -> "tuple[int, int]":
        """(rows, columns) of tiles of the canvas get_best_fit chooses."""
        canvases = [(rows * self.tile, (chunks // rows) * self.tile) for chunks in range(16, 0, -1)
                    for rows in range(1, chunks + 1) if chunks % rows == 0]
        scales = [min(w / width, h / height) for h, w in canvases]
        up = [s for s in scales if s >= 1]
        chosen = min(up) if up else max(s for s in scales if s < 1)
        rows, columns = min(((h, w) for (h, w), s in zip(canvases, scales) if s == chosen), key=lambda c: c[0] * c[1])
        return rows // self.tile, columns // self.tile

    def tile_shapes(self, width: int, height: int) -> "list[tuple[int, int]]":
        """(rows, columns) of patches of each picture the tower sees for one image: Llama 4's tiles and, when there are
        several, the global tile; LFM2-VL's tiles and thumbnail, or the image resized whole; one grid for the others."""
        side = self.tile // self.patch
        if self.family == "llama4":
            tiles = math.prod(self._llama4_grid(width, height))
            return [(side, side)] * (tiles + 1 if tiles > 1 else 1)
        if self.family == "siglip2":
            rows, columns = self._lfm2_resized(width, height)
            grid = self._lfm2_grid(width, height)
            return [(side, side)] * (grid[0] * grid[1] if grid else 0) + [(rows // self.patch, columns // self.patch)]
        if self.family == "internvl":
            return [(side, side)] * self._internvl_tiles(width, height)
        if self.pinpoints:              # LLaVA-NeXT: the whole image resized, then its grid's crops
            return [(side, side)] * (1 + math.prod(self._anyres_grid(width, height)))
        return [(side, side)] if self.family in ("siglip", "clip") else [self.grid(width, height)]

    def padded_patches(self) -> int:
        """LFM2-VL: the patches every picture is padded to (Lfm2VlImageProcessor's max_num_patches: the larger of
        max_image_tokens × downsample_factor² and a tile's patches); the tower and its projector run over all of them."""
        return max(LFM2_MAX_TOKENS * self.merge * self.merge, (self.tile // self.patch) ** 2)

    def pixels(self, width: int, height: int) -> int:
        """Values of pixel_values for one image, as the processor returns them: Qwen's patches of temporal_patch
        frames of patch² pixels in 3 channels, Gemma 3's and Llama 4's 3 × tile² a picture, LFM2-VL's 3 × patch² a
        patch of every picture padded to padded_patches."""
        if self.family in ("qwen2_5_vl", "qwen3_vl"):
            rows, columns = self.grid(width, height)
            return rows * columns * self.channels * self.temporal_patch * self.patch * self.patch
        if self.family == "siglip2":
            return len(self.tile_shapes(width, height)) * self.padded_patches() * self.channels * self.patch ** 2
        return len(self.tile_shapes(width, height)) * self.channels * self.tile * self.tile

    def patches(self, width: int, height: int) -> int:
        """Positions the tower's blocks run over for one image: Llama 4's tiles and CLIP's image each with a class
        token, LFM2-VL's pictures each padded to padded_patches, the patches of the grid for the others."""
        shapes = self.tile_shapes(width, height)
        if self.family in ("llama4", "clip", "internvl"):
            return sum(rows * columns + 1 for rows, columns in shapes)
        if self.family == "siglip2":
            return len(shapes) * self.padded_patches()
        return sum(rows * columns for rows, columns in shapes)

    def grid(self, width: int, height: int) -> "tuple[int, int]":
        """Patches along (height, width) after smart_resize (Qwen3.5 uses the same Qwen2VLImageProcessor: transformers
        5.24 auto/image_processing_auto.py; its tiles are patch_size x merge, 32 pixels)."""
        factor = self.patch * self.merge
        if max(height, width) / min(height, width) > 200:
            raise ValueError("image_size: the processor refuses an aspect ratio over 200")
        least, most = PIXEL_BOUNDS.get(self.family, (MIN_PIXELS, MAX_PIXELS))
        h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
        if h_bar * w_bar > most:
            beta = math.sqrt(height * width / most)
            h_bar = max(factor, math.floor(height / beta / factor) * factor)
            w_bar = max(factor, math.floor(width / beta / factor) * factor)
        elif h_bar * w_bar < least:
            beta = math.sqrt(least / (height * width))
            h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
        return h_bar // self.patch, w_bar // self.patch

    def tokens(self, width: int, height: int) -> int:
        """Prompt tokens one image of width × height pixels takes: the placeholders its embeddings replace and the
        markers around them (Qwen's chat template's <|vision_start|> and <|vision_end|>; Gemma 3's "\\n\\n<boi>" and
        "<eoi>\\n\\n"; Llama 4's and LFM2-VL's starts, ends, separators and tile markers)."""
        if self.family == "llama4":
            return self._llama4_tokens(width, height)
        if self.family == "siglip2":        # an image start and end, and with tiles a marker each and the thumbnail's
            grid = self._lfm2_grid(width, height)
            return self.embeddings(width, height) + (grid[0] * grid[1] + 3 if grid else 2)
        markers = {"siglip": GEMMA_MARKERS, "clip": 0, "internvl": INTERNVL_MARKERS, "qwen2_5_vl": QWEN_MARKERS,
                   "qwen3_vl": QWEN_MARKERS}[self.family]
        return self.embeddings(width, height) + markers

    def embeddings(self, width: int, height: int) -> int:
        """Rows of the encoder's output for one image: the placeholder tokens among its prompt tokens that they replace."""
        if self.family == "llama4":
            return len(self.tile_shapes(width, height)) * (self.tile // self.patch) ** 2 // (self.merge * self.merge)
        if self.family == "siglip":
            return (self.tile // self.patch // self.merge) ** 2
        if self.family == "clip":
            if self.pinpoints:
                return self._anyres_embeddings(width, height)
            return (self.tile // self.patch) ** 2 + self.keep_cls
        if self.family == "internvl":
            return self._internvl_tiles(width, height) * (self.tile // self.patch // self.merge) ** 2
        if self.family == "siglip2":
            rows, columns = self._lfm2_resized(width, height)
            grid = self._lfm2_grid(width, height)
            per_tile = math.ceil(self.tile // self.patch / self.merge) ** 2
            resized = math.ceil(rows // self.patch / self.merge) * math.ceil(columns // self.patch / self.merge)
            return (grid[0] * grid[1] * per_tile if grid else 0) + resized
        rows, columns = self.grid(width, height)
        return rows * columns // (self.merge * self.merge)


def _closest_grid(width: int, height: int, tile: int, least: int = LFM2_MIN_TILES,
                  most: int = LFM2_MAX_TILES, listed: bool = False) -> "tuple[int, int]":
    """(columns, rows) of a tile grid of ``least`` to ``most`` tiles: LFM2-VL's find_closest_aspect_ratio (2 to 10,
    its grids a set sorted by area) or, ``listed``, GotOcr2ImageProcessor's get_optimal_tiled_canvas (InternVL, 1 to
    12, its grids listed width by width, then sorted by area: get_all_supported_aspect_ratios), the same search."""
    if listed:
        grids = sorted([(w, h) for w in range(1, most + 1) for h in range(1, most + 1) if least <= w * h <= most],
                       key=lambda g: g[0] * g[1])
    else:
        grids = sorted(set([(w, h) for n in range(least, most + 1) for w in range(1, n + 1)
                            for h in range(1, n + 1) if least <= w * h <= most]), key=lambda g: g[0] * g[1])
    best, best_diff = (1, 1), float("inf")
    for w, h in grids:
        diff = abs(width / height - w / h)
        if diff < best_diff:
            best, best_diff = (w, h), diff
        elif diff == best_diff and width * height > 0.5 * tile * tile * w * h:
            best = (w, h)
    return best


def tower(arch: "Architecture") -> "VisionTower | None":
    """The vision tower an architecture carries, or None for a text-only model."""
    if not arch.vision_layers:
        return None
    return VisionTower(arch.vision_family, arch.vision_layers, arch.vision_hidden, arch.vision_ffn, arch.vision_patch,
                       arch.vision_temporal_patch, arch.vision_merge, 3, arch.hidden, tile=arch.vision_tile,
                       projector=arch.vision_projector, positions=arch.vision_positions,
                       projector_norm=arch.vision_projector_norm, keep_cls=arch.vision_keep_cls,
                       unused_layers=arch.vision_unused_layers, qkv_bias=arch.vision_qkv_bias,
                       deepstack=arch.vision_deepstack, rms_norm=arch.vision_rms_norm, qk_norm=arch.vision_qk_norm,
                       pinpoints=tuple(
                           (int(h), int(w)) for h, w in (p.split("x") for p in arch.vision_pinpoints.split(",") if p)))
