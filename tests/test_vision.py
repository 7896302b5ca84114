"""Vision-language models: the vision tower's weights and the tokens images add to a sequence.

Expected counts: validation/config_counts.json (transformers 5.24's AutoModelForImageTextToText on the meta device,
validation/count_configs.py): Qwen2.5-VL-7B-Instruct's text side 7,615,616,512 and vision tower 676,550,144.
Expected image tokens: transformers 5.24's own ``smart_resize`` (models/qwen2_vl/image_processing_qwen2_vl.py, run on
these sizes with the processor's default min_pixels 3,136 and max_pixels 1,003,520), merged 2 x 2 patches of 14 px.
"""

import json
from pathlib import Path

import pytest

from pycore import estimate
from pycore.inputs.schema import InputError
from pycore.model import catalog, vision
from pycore.model.architecture import count_parameters
from pycore.model.hf_config import architecture_from_dict

COUNTS = json.loads((Path(__file__).resolve().parent.parent / "validation" / "config_counts.json").read_text())
QWEN_VL = "qwen2.5-vl-7b-instruct"


def test_the_vision_tower_is_counted_exactly():
    counts = count_parameters(catalog.architecture(QWEN_VL))
    assert counts.parts["vision"] == COUNTS["vision_counts"]["qwen2.5-vl-7b-instruct.json"] == 676_550_144
    assert counts.total == COUNTS["counts"]["qwen2.5-vl-7b-instruct.json"] + 676_550_144


@pytest.mark.parametrize("width,height,tokens", [
    # smart_resize(height, width) within Qwen/Qwen2.5-VL-7B-Instruct's preprocessor_config.json bounds (3,136 to
    # 12,845,056 pixels) -> (728, 1288), (2156, 3836), (224, 224), (56, 56), (28, 560); tokens = tiles of 28 px.
    # 3840 x 2160 stays 2156 x 3836 = 8,270,416 pixels (under the class default's 1,003,520 it was 1,222 tokens)
    (1280, 720, 1196), (3840, 2160, 10549), (224, 224, 64), (30, 30, 4), (1000, 10, 20),
])
def test_an_image_becomes_the_tokens_its_processor_gives(width, height, tokens):
    tower = vision.tower(catalog.architecture(QWEN_VL))
    assert tower.embeddings(width, height) == tokens
    # and in the prompt the chat template's "<|vision_start|>" and "<|vision_end|>" around the <|image_pad|> run
    assert tower.tokens(width, height) == tokens + 2


def test_images_lengthen_every_sequence_and_its_kv_cache():
    base = {"model": QWEN_VL, "mode": "infer", "seq": "512", "batch": "2"}
    plain, seen = estimate(base), estimate({**base, "images": "2", "image_size": "1280x720"})
    # each 1,280 x 720 image: 1,196 pads and their two markers (test above)
    assert seen.tokens == plain.tokens + 2 * 2 * 1198
    assert seen.components["kv_cache"] - plain.components["kv_cache"] == 2 * 2 * 1198 * seen.kv_bytes_per_token
    assert any("add 2,396 tokens" in w for w in seen.warnings)


def test_a_text_model_is_unchanged_by_images():
    assert estimate({"model": "llama-3.1-8b", "images": "3"}).total_bytes == estimate({"model": "llama-3.1-8b"}).total_bytes


@pytest.mark.parametrize("size", ["big", "1280x", "0x720", "١٢٨٠x720", "1280x720x3"])
def test_a_bad_image_size_is_refused_by_name(size):
    with pytest.raises(InputError, match="image_size: width x height in pixels"):
        estimate({"model": QWEN_VL, "images": "1", "image_size": size})
    # without images too, as every other field is checked whether it applies or not (a newcomer's finding: 'abc'
    # was only said to be ignored)
    with pytest.raises(InputError, match="image_size: width x height in pixels"):
        estimate({"model": "llama-3.1-8b", "image_size": size})


def test_llama_4s_tower_is_counted_exactly():
    counts = count_parameters(catalog.architecture("llama-4-scout-17b-16e-instruct"))
    assert counts.parts["vision"] == COUNTS["vision_counts"]["llama-4-scout-17b-16e-instruct.json"] == 871_932_416


@pytest.mark.parametrize("width,height,tokens", [
    # transformers 5.24's get_best_fit over find_supported_resolutions(16 tiles of 336 px) and
    # Llama4Processor._prompt_split_image with 144 patches a tile, its tokens counted: a 3 x 4 canvas -> 12 tiles of 144,
    # 9 x- and 3 y-separators, the global tile's 144 and 3 markers
    (1280, 720, 1887), (4000, 3000, 1887), (336, 336, 147), (672, 336, 437), (100, 100, 147),
])
def test_a_llama_4_image_becomes_the_tokens_its_processor_gives(width, height, tokens):
    assert vision.tower(catalog.architecture("llama-4-scout-17b-16e-instruct")).tokens(width, height) == tokens


@pytest.mark.parametrize("width,height,pictures", [(1280, 720, 13), (336, 336, 1)])
def test_llama_4s_tower_runs_over_every_tile_and_its_class_token(width, height, pictures):
    # the canvases above: 12 tiles and the global one, or one tile; each 24 x 24 patches of 14 px and the class token
    # Llama4VisionModel.forward appends (transformers 5.24), 3 x 336² pixels a tile (Llama4ImageProcessor)
    tower = vision.tower(catalog.architecture("llama-4-scout-17b-16e-instruct"))
    assert tower.patches(width, height) == pictures * (24 * 24 + 1)
    assert tower.pixels(width, height) == pictures * 3 * 336 * 336


def test_qwen3_5s_tower_is_counted_exactly():
    counts = count_parameters(catalog.architecture("qwen3.5-9b"))
    assert counts.parts["vision"] == COUNTS["vision_counts"]["qwen3.5-9b.json"] == 456_010_480
    assert counts.total == COUNTS["counts"]["qwen3.5-9b.json"] + 456_010_480


CONFIGS = Path(__file__).resolve().parent / "configs"


@pytest.mark.parametrize("model_id,text,tower", [
    # validation/config_counts.json: AutoModelForImageTextToText from tests/configs/<id>.json on the meta device,
    # transformers 5.24 (the model cards say 4.4B and 31B in all)
    ("qwen3-vl-4b-instruct", 4_022_468_096, 415_347_712), ("qwen3-vl-30b-a3b-instruct", 30_532_122_624, 538_631_408),
])
def test_qwen3_vls_towers_and_deepstack_mergers_are_counted_exactly(model_id, text, tower):
    assert COUNTS["counts"][f"{model_id}.json"] == text and COUNTS["vision_counts"][f"{model_id}.json"] == tower
    for arch in (catalog.architecture(model_id),
                 architecture_from_dict(json.loads((CONFIGS / f"{model_id}.json").read_text()), warnings=[])):
        counts = count_parameters(arch)
        assert (counts.parts["vision"], counts.total) == (tower, text + tower)
        assert (arch.vision_family, arch.vision_deepstack) == ("qwen3_vl", 3)


def test_a_qwen3_vl_tower_without_deepstack_indexes_has_its_config_class_default_three():
    # Qwen3VLVisionConfig.deepstack_visual_indexes defaults to (8, 16, 24) (transformers 5.24), and Qwen3VLVisionModel
    # builds a merger for each, whether or not the tower has that block (this one has 24); an empty list builds none
    config = json.loads((CONFIGS / "qwen3-vl-4b-instruct.json").read_text())
    del config["vision_config"]["deepstack_visual_indexes"]
    assert architecture_from_dict(config).vision_deepstack == 3
    config["vision_config"]["deepstack_visual_indexes"] = []
    merger = 4 * 1024 * 2 + (4 * 1024) ** 2 + 4 * 1024 + 4 * 1024 * 2560 + 2560     # postshuffle norm, fc1, fc2
    assert count_parameters(architecture_from_dict(config)).parts["vision"] == 415_347_712 - 3 * merger
    config["vision_config"]["deepstack_visual_indexes"] = [5, "11"]
    with pytest.raises(InputError, match=r"vision_config.deepstack_visual_indexes: a list of block numbers, got "
                                         r"\[5, '11'\]"):
        architecture_from_dict(config)


def test_qwen3_5_builds_no_deepstack_mergers_whatever_its_config_lists():
    # Qwen3_5VisionModel has no deepstack_merger_list (transformers 5.24): the key counts nothing there
    config = json.loads((CONFIGS / "qwen3.5-9b.json").read_text())
    config["vision_config"]["deepstack_visual_indexes"] = [8, 16, 24]
    assert count_parameters(architecture_from_dict(config)).parts["vision"] == 456_010_480


def test_qwen3_vls_generate_holds_its_deepstack_features_through_the_prefill():
    # the live tensors of validation/measure_vl.py --generate's qwen3_vl cases at the prefill's peak: the tower's last
    # hidden state, the merged features and their cat, two copies of each of the 3 deepstack features, and the clone
    # of the hidden states a deepstack layer makes beside its output (docs/validation.md)
    result = estimate({"model": "qwen3-vl-4b-instruct", "mode": "infer", "images": "1", "image_size": "1280x720",
                       "seq": "1024"})
    (record,) = [pool for pool in result.pools if pool.key == "vision_outputs"]
    tokens, patches, prompt = 880, 880 * 4, 1024 + 882
    assert record.bytes == 2 * (patches * 1024 + (2 + 2 * 3) * tokens * 2560 + prompt * 2560)
    assert "deepstack" in record.symbols


@pytest.mark.parametrize("width,height,tokens", [
    # transformers 5.24's smart_resize with factor 32 (patch 16 x merge 2: Qwen3.5 is processed by Qwen2VLImageProcessor,
    # auto/image_processing_auto.py) within Qwen/Qwen3.5-27B's preprocessor_config.json bounds (size shortest_edge
    # 65,536, longest_edge 16,777,216): (704, 1280); (2176, 3840) = 8,355,840 pixels, under the most; 224 x 224 =
    # 50,176 pixels, under the least, scaled up by sqrt(65,536 / 50,176) to (256, 256), 64 tokens
    (1280, 720, 880), (3840, 2160, 8160), (224, 224, 64),
])
def test_a_qwen3_5_image_becomes_the_tokens_its_processor_gives(width, height, tokens):
    tower = vision.tower(catalog.architecture("qwen3.5-9b"))
    assert (tower.embeddings(width, height), tower.tokens(width, height)) == (tokens, tokens + 2)


def test_gemma_3s_siglip_tower_is_counted_exactly():
    # validation/config_counts.json: google/gemma-3-27b-it's config.json (tests/configs/gemma-3-27b-it.json) built by
    # AutoModelForImageTextToText on the meta device: 27,009,346,304 in the text decoder, 423,060,336 in the SigLIP
    # tower (416,866,032) and Gemma3MultiModalProjector (1,152 x 5,376 + an RMSNorm of 1,152)
    counts = count_parameters(catalog.architecture("gemma-3-27b-it"))
    assert counts.parts["vision"] == COUNTS["vision_counts"]["gemma-3-27b-it.json"] == 423_060_336
    assert counts.total == COUNTS["counts"]["gemma-3-27b-it.json"] + 423_060_336


@pytest.mark.parametrize("width,height", [(1280, 720), (224, 224), (4000, 3000)])
def test_a_gemma_3_image_is_256_embeddings_in_260_tokens_at_any_size(width, height):
    # Gemma3Processor resizes every image to 896 x 896 and writes image_seq_length (mm_tokens_per_image, 256) tokens
    # for it (transformers 5.24 processing_gemma3.py _get_num_multimodal_tokens); pan-and-scan is off by default. In
    # the prompt they sit in its full_image_sequence, "\n\n<start_of_image>" + 256 + "<end_of_image>\n\n", "\n\n" one
    # token of Gemma 3's vocabulary: 260 (vLLM 0.11 gemma3_mm.py's placeholder is the same 260)
    tower = vision.tower(catalog.architecture("gemma-3-27b-it"))
    assert (tower.embeddings(width, height), tower.tokens(width, height)) == (256, 260)


def test_lfm2_vls_siglip2_tower_is_counted_exactly():
    counts = count_parameters(catalog.architecture("lfm2.5-vl-1.6b"))
    assert counts.parts["vision"] == COUNTS["vision_counts"]["lfm2.5-vl-1.6b.json"] == 426_285_296
    assert counts.total == COUNTS["counts"]["lfm2.5-vl-1.6b.json"] + 426_285_296


@pytest.mark.parametrize("width,height,tokens", [
    # validation/lfm2_image_tokens.py's output: transformers 5.24's Lfm2VlImageProcessor resize-or-tile arithmetic and
    # Lfm2VlProcessor._build_image_tokens, special tokens counted (a start, an end, a marker a tile, a thumbnail's)
    (1280, 720, 769), (512, 512, 258), (256, 256, 66), (2000, 3000, 1792), (100, 100, 66), (1024, 1024, 1287),
    (3840, 2160, 2311), (700, 500, 236),
])
def test_an_lfm2_vl_image_becomes_the_tokens_its_processor_gives(width, height, tokens):
    assert vision.tower(catalog.architecture("lfm2.5-vl-1.6b")).tokens(width, height) == tokens


def test_every_lfm2_vl_picture_is_padded_to_max_num_patches():
    # Lfm2VlImageProcessor._preprocess pads each tile and thumbnail to max(max_image_tokens x 2², (512 / 16)²) = 1,024
    # patches of 3 x 16² values (pad_along_first_dim, transformers 5.24); validation/lfm2_image_tokens.py: 1280x720 is
    # two 512² tiles and a 384 x 672 thumbnail, 256x256 one 256² picture
    tower = vision.tower(catalog.architecture("lfm2.5-vl-1.6b"))
    assert tower.tile_shapes(1280, 720) == [(32, 32), (32, 32), (24, 42)] and tower.tile_shapes(256, 256) == [(16, 16)]
    assert tower.patches(1280, 720) == 3 * 1024 and tower.patches(256, 256) == 1024
    assert tower.pixels(1280, 720) == 3 * 1024 * 3 * 16 * 16


def test_an_lfm2_vl_config_with_other_processor_settings_is_refused_by_name():
    config = json.loads((Path(__file__).resolve().parent / "configs" / "lfm2.5-vl-1.6b.json").read_text())
    with pytest.raises(InputError, match="max_tiles: pycore counts LFM2-VL's image tokens with the processor's default"):
        architecture_from_dict({**config, "max_tiles": 4})


def test_vllm_serving_of_a_vl_model_names_the_encoders_profiling_run():
    # vLLM 0.11.0 gpu_model_runner.py profile_run: the encoder runs on the processor's largest input before the KV cache
    # is sized; pycore counts it (pycore/memory/vllm_multimodal.py) and says what it profiled, with the input and the
    # flag that leave it out
    from pycore import estimate
    result = estimate({"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "images": "1"})
    said = " ".join(result.warnings)
    assert "profiles the vision encoder at start-up on 1 dummy image of 16,384 tokens" in said
    assert "mm_profiling=off" in said and "--skip-mm-profiling" in said
    assert "vision encoder included" in result.as_dict()["breakdown"][2]["label"]


@pytest.mark.parametrize("seq,budget,frames,side", [
    # vLLM 0.11.0 qwen3_vl.py L585-675 and qwen2_vl.py L956-1009: frames of the largest image (4,096², the image
    # processor's 16,777,216 pixels) are added from two while one more frame's tokens fit max_model_len (3 frames:
    # 16,200), up to 24,576, resized within the video processor's 25,165,824 pixels over all frames; the budget counts a
    # video token as 12.5. Published start-up logs at max_model_len 16,384 (vllm#29743, Qwen3-VL-4B-Instruct) and at
    # others (QwenLM/Qwen3-VL#1589, vllm PR #30475): "Encoder cache will be initialized with a budget of 153600 tokens,
    # and profiled with 1 video items of the maximum feature size"
    (8192 - 1, 151_250, 2, 3520), (16_384 - 1, 153_600, 24_576, 32),
])
def test_vllm_profiles_qwen3_vl_on_the_video_its_code_and_logs_give(seq, budget, frames, side):
    result = estimate({"model": "qwen3-vl-4b-instruct", "mode": "infer", "engine": "vllm", "seq": str(seq),
                       "new_tokens": "1"})
    said = " ".join(result.warnings)
    assert f"profiles the vision encoder at start-up on 1 dummy video of {budget:,} tokens" in said
    assert f"the encoder budget is {budget:,} tokens" in said
    tokens = -(-frames // 2) * (side // 16) ** 2 // 4             # 12,100 and 12,288 video tokens
    assert int(tokens * 12.5) == budget
    # the output, padded to the budget's rows, is the merged features and three deepstack features side by side,
    # 4 x 2,560 wide in bf16 (qwen3_vl.py L529-531)
    (profile,) = [pool for pool in result.pools if pool.key == "profile_activations"]
    assert f"1 × {budget:,} × 10,240 × 2" in profile.substituted and "(1 + deepstack mergers)" in profile.symbols
    (buffers,) = [pool for pool in result.pools if pool.key == "deepstack_buffers"]
    assert buffers.bytes == 3 * 8192 * 2560 * 2         # qwen3_vl.py L1155-1162, max_num_batched_tokens 8,192


LLAVA = "llava-1.5-7b-hf"
LLAVA_NEXT = "llava-v1.6-mistral-7b-hf"


def test_llava_nexts_tower_and_image_newline_are_counted_exactly():
    # validation/config_counts.json: llava-hf/llava-v1.6-mistral-7b-hf's config.json built by AutoModelForImageTextToText
    # on the meta device: LLaVA-1.5's CLIP tower and projector (324,487,168) and image_newline (4,096)
    counts = count_parameters(catalog.architecture(LLAVA_NEXT))
    file = f"{LLAVA_NEXT}.json"
    assert counts.parts["vision"] == COUNTS["vision_counts"][file] == 324_491_264
    assert counts.total == COUNTS["counts"][file] + 324_491_264 == 7_566_747_648


@pytest.mark.parametrize("width,height,tokens,crops", [
    # transformers 5.24's LlavaNextProcessor._get_number_of_features (less the class token, strategy "default") and
    # image_size_to_num_patches for llava-v1.6's five grids, run on these sizes (and on 300 random ones, all equal,
    # when this was written): the whole image's 576, then the crops' grid unpadded with a newline ending each row
    (1280, 720, 1948, 5), (720, 1280, 1968, 5), (336, 336, 1176, 3), (4000, 3000, 2340, 5), (640, 480, 2340, 5),
    (100, 2000, 936, 4),
])
def test_a_llava_next_image_becomes_the_tokens_and_crops_its_processor_gives(width, height, tokens, crops):
    tower = vision.tower(catalog.architecture(LLAVA_NEXT))
    assert (tower.embeddings(width, height), tower.tokens(width, height)) == (tokens, tokens)
    assert len(tower.tile_shapes(width, height)) == crops
    assert tower.pixels(width, height) == crops * 3 * 336 * 336


def test_vllm_profiles_llava_next_on_its_pinpoint_with_the_most_tokens():
    # vLLM 0.11.0 llava_next.py L157-172 get_image_size_with_most_features: of llava-v1.6's five pinpoints, 672x672 has
    # the most tokens (its 2 x 2 crops' 48 x 48 features, 48 newlines and the whole image's 576: 2,928); the budget of
    # max_num_batched_tokens (8,192) holds two (vllm/v1/worker/utils.py MultiModalBudget)
    result = estimate({"model": LLAVA_NEXT, "mode": "infer", "engine": "vllm", "images": "1"})
    said = " ".join(result.warnings)
    assert "profiles the vision encoder at start-up on 2 dummy images of 2,928 tokens" in said
    assert 48 * 48 + 48 + 576 == 2928


@pytest.mark.parametrize("name,change,words", [
    (f"{LLAVA_NEXT}.json", {"image_grid_pinpoints": [[336, 672], [672, 336]]}, "the image's crop grids"),
    ("qwen3-vl-4b-instruct.json", {"vision_config": "deepstack_visual_indexes"}, "the vision tower's deepstack mergers"),
])
def test_an_import_unlike_its_preset_in_a_vision_setting_carries_its_config_and_says_why(name, change, words):
    # the page's import: a preset with overrides has no key for the crop grids (which change the image tokens) or the
    # deepstack mergers (which change the count), so the link carries the config itself and names the difference
    from pycore.model.config_import import import_config
    config = json.loads((CONFIGS / name).read_text())
    if "vision_config" in change:
        config["vision_config"]["deepstack_visual_indexes"] = [5]
    else:
        config.update(change)
    answer = import_config(json.dumps(config))
    assert answer["carried"] and words in answer["message"]


def test_a_llava_next_config_with_malformed_grids_is_refused_by_name():
    config = json.loads((Path(__file__).resolve().parent / "configs" / f"{LLAVA_NEXT}.json").read_text())
    config["image_grid_pinpoints"] = [[336, 700]]
    with pytest.raises(InputError, match="image_grid_pinpoints: a list of \\[height, width\\] pairs, multiples of"):
        architecture_from_dict(config)


def test_llavas_clip_tower_is_counted_exactly():
    # validation/config_counts.json: llava-hf/llava-1.5-7b-hf's config.json (tests/configs/llava-1.5-7b-hf.json) built
    # by AutoModelForImageTextToText on the meta device: 6,738,939,904 in the Vicuna decoder, 324,487,168 in the whole
    # CLIPVisionModel (303,507,456) and LlavaMultiModalProjector (1,024 x 4,096 and 4,096 x 4,096, biased)
    counts = count_parameters(catalog.architecture(LLAVA))
    assert counts.parts["vision"] == COUNTS["vision_counts"]["llava-1.5-7b-hf.json"] == 324_487_168
    assert counts.total == COUNTS["counts"]["llava-1.5-7b-hf.json"] + 324_487_168


@pytest.mark.parametrize("width,height", [(1280, 720), (224, 224), (4000, 3000)])
def test_a_llava_image_is_576_tokens_at_any_size(width, height):
    # CLIPImageProcessor resizes the shortest edge to 336 and crops 336 x 336: (336 / 14)² = 576 patch features, the
    # class token's dropped by vision_feature_select_strategy "default"; the processor expands "<image>" to them alone
    # (transformers 5.24 LlavaConfig's image_seq_length 576); the tower runs over the 577 with the class token
    tower = vision.tower(catalog.architecture(LLAVA))
    assert (tower.embeddings(width, height), tower.tokens(width, height), tower.patches(width, height)) == \
        (576, 576, 577)


def test_the_clip_blocks_past_the_feature_layer_get_no_gradient_or_optimizer_state():
    # vision_feature_layer -2: the 24th block (12,596,224 parameters: two LayerNorms, biased q/k/v/out of 1,024 and a
    # biased 1,024 -> 4,096 -> 1,024 MLP) and the post-LayerNorm (2,048) get no gradient, so AdamW keeps no state
    # for them (measured: validation/measure_vl.py's LLaVA cases, docs/validation.md)
    result = estimate({"model": LLAVA, "seq": "512", "images": "1", "precision": "bf16"})
    graded = 7_063_427_072 - 12_596_224 - 2_048
    assert result.components["gradients"] == 2 * graded
    assert any("12,598,272 parameters get no gradient" in w for w in result.warnings)


LLAVA_CONFIG = json.loads((Path(__file__).resolve().parent / "configs" / "llava-1.5-7b-hf.json").read_text())


def test_a_llava_strategy_transformers_refuses_is_refused_by_name():
    with pytest.raises(InputError, match="vision_feature_select_strategy"):
        architecture_from_dict({**LLAVA_CONFIG, "vision_feature_select_strategy": "cls"})


@pytest.mark.parametrize("change,words", [
    ({"vision_feature_layer": [-2, -5]}, "vision_feature_layer [-2, -5]"),     # concatenated layers: a wider projector
    ({"projector_hidden_act": "silu"}, "projector_hidden_act silu"),
    ({"multimodal_projector_bias": 1}, "multimodal_projector_bias 1"),
])
def test_a_llava_tower_pycore_does_not_model_is_left_out_and_named(change, words):
    # transformers builds these; pycore reads the text decoder alone (6,738,939,904, validation/config_counts.json)
    # and says which setting left the tower out
    warnings: "list[str]" = []
    arch = architecture_from_dict({**LLAVA_CONFIG, **change}, warnings=warnings)
    assert count_parameters(arch).total == COUNTS["counts"]["llava-1.5-7b-hf.json"] and not arch.vision_layers
    assert any(words in w and "not counted" in w for w in warnings)


@pytest.mark.parametrize("config", [
    {key: value for key, value in LLAVA_CONFIG.items() if key != "vision_config"},        # LlavaConfig's own tower
    {**LLAVA_CONFIG, "vision_config": {k: v for k, v in LLAVA_CONFIG["vision_config"].items() if k != "model_type"}},
])
def test_a_llava_config_naming_no_tower_gets_the_one_llavaconfig_builds(config):
    # LlavaConfig builds CLIP ViT-L/14-336 when vision_config is missing, and a clip_vision_model when it names no
    # model_type (transformers 5.24 configuration_llava.py): the preset's count either way
    assert count_parameters(architecture_from_dict(config)).total == 7_063_427_072


@pytest.mark.parametrize("layer,unused", [(-2, 1), (-1, 0), (23, 1), (24, 0), (-24, 23)])
def test_llavas_feature_layer_may_count_from_either_end(layer, unused):
    # hidden_states[k] is the embeddings for k = 0 and block k's output after; negative k counts from the end
    assert architecture_from_dict({**LLAVA_CONFIG, "vision_feature_layer": layer}).vision_unused_layers == unused


@pytest.mark.parametrize("change,words", [
    ({"vision_feature_layer": -1}, "the vision tower's feature layer"),
    ({"vision_feature_select_strategy": "full"}, "the image's class-token feature"),
])
def test_an_imported_llava_with_another_feature_setting_carries_its_config(change, words):
    # the count is the preset's, but the image tokens or what gets a gradient are not: the link carries the config
    from pycore.model.config_import import import_config
    answer = import_config(json.dumps({**LLAVA_CONFIG, **change}))
    assert "config" in dict(answer["query"]) and words in answer["message"]


def test_the_ungraded_tower_parameters_keep_their_state_where_buffers_are_flat():
    # a plain step with images: the 12,598,272 parameters past the feature layer get no gradient; without images the
    # whole tower and projector (324,487,168) never run and get none; ZeRO / FSDP flatten every trainable parameter
    # into buffers and fp32 masters keep a copy of each, whatever reaches them
    base = {"model": LLAVA, "seq": "512", "precision": "bf16"}
    full = 7_063_427_072 * 2
    assert estimate({**base, "images": "1"}).components["gradients"] == full - 12_598_272 * 2
    textual = estimate({**base, "images": "0"})
    assert textual.components["gradients"] == full - 324_487_168 * 2
    assert any("324,487,168 parameters get no gradient" in w for w in textual.warnings)
    assert estimate({**base, "images": "1", "precision": "bf16-master"}).components["gradients"] == full
    zero = estimate({**base, "images": "1", "zero": "2", "dp": "2"})
    assert zero.components["gradients"] == full // 2


INTERNVL = json.loads((Path(__file__).resolve().parent / "configs" / "families" / "internvl.json").read_text())


@pytest.mark.parametrize("width,height,tiles", [
    # transformers 5.24 GotOcr2ImageProcessor.get_number_of_image_patches with InternVL's crop_to_patches, 1 to 12
    # tiles of 448: get_optimal_tiled_canvas picks the grid closest to the image's aspect ratio, the larger of two as
    # close ones while the image covers more than half of it; a thumbnail is added when there is more than one tile.
    # 1,280 x 720 (1.78): 2 x 1 and 4 x 2 tie at 2.0, and 921,600 pixels are over half of 4 x 2 tiles' -> 8 + 1;
    # 640 x 480: 4 x 3 exactly -> 12 + 1; 448 x 448: 1 x 1 (2 x 2 would need over 401,408 pixels) -> 1
    (1280, 720, 9), (640, 480, 13), (448, 448, 1), (896, 448, 3), (1000, 10, 13),
])
def test_an_internvl_image_is_256_tokens_a_tile_between_its_markers(width, height, tiles):
    tower = vision.tower(architecture_from_dict(INTERNVL))
    assert tower.embeddings(width, height) == 256 * tiles
    assert tower.tokens(width, height) == 256 * tiles + 2          # InternVLProcessor's <img> and </img>
    assert tower.patches(width, height) == tiles * (32 * 32 + 1)   # each tile's patches and its class token


def test_internvit_6bs_rms_norms_and_query_key_norms_are_counted_exactly():
    # variants/synthetic-internvl-vit-6b.json: OpenGVLab's internvl_custom2hf vit_6b_config (InternVL3-38B and -78B:
    # RMSNorm blocks, use_qk_norm, no q/k/v biases, 3,200 wide, 45 blocks) over a Qwen2.5-0.5B-sized decoder;
    # AutoModelForImageTextToText on the meta device: 493,798,016 in the decoder, 5,548,795,008 in the tower and
    # projector (validation/config_counts.json)
    name = "variants/synthetic-internvl-vit-6b.json"
    arch = architecture_from_dict(json.loads((CONFIGS / name).read_text()))
    counts = count_parameters(arch)
    assert (arch.vision_rms_norm, arch.vision_qk_norm) == (True, True)
    assert counts.parts["vision"] == COUNTS["vision_counts"][name] == 5_548_795_008
    assert counts.total == COUNTS["counts"][name] + 5_548_795_008


@pytest.mark.parametrize("change,words", [
    ({"use_mean_pooling": False}, "use_mean_pooling False"),     # a final LayerNorm over the class token's feature
    ({"image_size": [448, 224]}, "image_size [448, 224]"),
])
def test_an_internvit_unlike_300ms_is_left_out_and_named(change, words):
    # the text decoder alone: families/internvl.json's 11,427,516,416 (validation/config_counts.json)
    warnings: "list[str]" = []
    arch = architecture_from_dict({**INTERNVL, "vision_config": {**INTERNVL["vision_config"], **change}},
                                  warnings=warnings)
    assert count_parameters(arch).total == COUNTS["counts"]["families/internvl.json"] and not arch.vision_layers
    assert any(words in w and "not counted" in w for w in warnings)


def test_a_malformed_internvl_size_is_refused_by_name():
    with pytest.raises(InputError, match="vision_config.image_size"):
        architecture_from_dict({**INTERNVL, "vision_config": {**INTERNVL["vision_config"], "image_size": "big"}})


def test_the_longest_text_leaves_the_images_their_positions():
    # LLaVA-1.5-7B's 4,096 positions (its text_config's max_position_embeddings) less two 576-token images: the
    # longest text is 2,944 tokens, not the 4,096 a text-only search would stop at (the page said 3,804 before)
    from pycore.answers.answer import answer
    from pycore.inputs.schema import parse
    from pycore.memory.estimate import estimate_values
    values = parse({"model": LLAVA, "images": "2", "seq": "512", "batch": "1", "gpu": "h200-141gb"})
    found = answer(values, estimate_values(values))
    assert found["max_seq"] == 4096 - 2 * 576
    assert any("less the images' 1,152 tokens" in note for note in found["notes"])
