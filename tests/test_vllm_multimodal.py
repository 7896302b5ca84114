"""vLLM 0.11's start-up profiling of a vision-language model's encoder (pycore/memory/vllm_multimodal.py): the dummy
item and how many of them, as published vLLM logs print them ("Encoder cache will be initialized with a budget of N
tokens, and profiled with M <modality> items of the maximum feature size"), and the KV cache a published log reports."""

import sys
from pathlib import Path

import pytest

from pycore import estimate
from pycore.inputs import frameworks, schema
from pycore.memory import setup as setups
from pycore.memory import vllm_multimodal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402

QWEN_3B = str(ROOT / "tests" / "configs" / "qwen2.5-vl-3b-instruct.json")


def _setup(values):
    return setups.resolve(frameworks.apply(schema.parse({"mode": "infer", "engine": "vllm", **values})))


@pytest.mark.parametrize("values,batched,modality,budget,count", [
    # Qwen2.5-VL-3B on an L4, vLLM 0.11.0, max_model_len 8192 (ray-project/ray's vision batch-inference example):
    # "budget of 16384 tokens, and profiled with 1 image items"
    ({"config": QWEN_3B, "seq": "8192", "new_tokens": "0"}, 2048, "image", 16_384, 1),
    # Qwen2.5-VL-7B at its default max_model_len 128000 (a published vLLM 0.23 log on an A100, which then refuses to
    # start at gpu_memory_utilization 0.22): "budget of 114688 tokens, and profiled with 1 video items"
    ({"model": "qwen2.5-vl-7b-instruct", "seq": "128000", "new_tokens": "0"}, 8192, "video", 114_688, 1),
    # gemma-3-27b-it, max_num_batched_tokens 8192 (a published vLLM 0.11.0rc2 log): "budget of 8192 tokens, and
    # profiled with 31 image items"; at 2048, 7 items of 260 placeholder tokens
    ({"model": "gemma-3-27b-it", "seq": "4096"}, 8192, "image", 8192, 31),
    ({"model": "gemma-3-27b-it", "seq": "4096"}, 2048, "image", 2048, 7),
    # Llama-4-Scout (a published log): "budget of 8192 tokens, and profiled with 3 image items"
    ({"model": "llama-4-scout-17b-16e-instruct", "seq": "8192"}, 8192, "image", 8192, 3),
])
def test_the_profiled_items_are_the_ones_vllm_logs(values, batched, modality, budget, count):
    setup = _setup({**values, "max_batched_tokens": str(batched)})
    context = setup.workload.seq + setup.workload.new_tokens
    item = vllm_multimodal.profiled_item(setup, context)
    assert item is not None and item.modality == modality
    assert vllm_multimodal.items_per_batch(item, batched, 256, context) == (budget, count)


def test_qwen2_5_vl_profiles_a_video_of_frame_pairs_past_one_images_tokens():
    # _get_max_video_frames: 16,384 tokens per pair of 3,584² frames, as many pairs as max_model_len holds, 7 at most
    for context, modality, tokens in ((16_384, "image", 16_384), (32_768, "video", 32_768), (65_535, "video", 49_152),
                                      (262_144, "video", 114_688)):
        setup = _setup({"model": "qwen2.5-vl-7b-instruct", "seq": str(context), "new_tokens": "0"})
        item = vllm_multimodal.profiled_item(setup, context)
        assert (item.modality, item.tokens, item.patches) == (modality, tokens, tokens * 4)


def test_the_profiling_peak_is_the_encoder_or_the_language_model_beside_its_outputs():
    values = {"config": QWEN_3B, "gpu": "l4", "seq": "8192", "new_tokens": "0", "max_batched_tokens": "2048"}
    result = estimate({"mode": "infer", "engine": "vllm", **values})
    # one 3,584² image: 65,536 patches of 3 x 2 x 14² float32 values (their bf16 copy is freed by the patch embedding
    # before the blocks run) beside the tower's 43,520 + 658 bytes a patch (vision_activations.inference_per_patch)
    pixels = 65_536 * 1176
    encoder = pixels * 4 + round(65_536 * (43_520 + 2 * 4 * 80 + 16 + 2))
    assert result.components["profile_activations"] == encoder
    # the other side is smaller: the language model's run at 2,048 tokens (its widest intermediate, 3 x 11,008, and
    # 3 x 2,048 in bf16) and the sampler's three fp32 copies of 256 sequences' logits over 151,936 tokens, beside the
    # 16,384 output rows of 2,048 and the float32 pixels
    language = (3 * 11_008 + 3 * 2048) * 2 * 2048 + 151_936 * 256 * 12
    assert language + 16_384 * 2048 * 2 + pixels * 4 < encoder


def test_a_published_vl_start_up_log_is_within_10_percent_and_the_encoder_is_why():
    row = next(r for r in compare.vllm_rows() if r["label"].startswith("Qwen2.5-VL-3B-Instruct"))
    assert abs(row["error"]) < 0.10
    # without the encoder's profiling the same row is more than 30% over the tokens vLLM logged (269,568)
    from pycore.answers.answer import answer
    from pycore.memory.estimate import estimate_values
    values = schema.parse({**dict(compare.parse_qsl(row["query"])), "mm_profiling": "off"})
    assert answer(values, estimate_values(values))["kv_cache_tokens"] / 269_568 - 1 > 0.30


def test_a_tower_not_modelled_says_so():
    result = estimate({"model": "lfm2.5-vl-1.6b", "mode": "infer", "engine": "vllm", "seq": "4096"})
    assert any("for this tower that peak is not modelled" in w for w in result.warnings)


def test_mm_profiling_image_keeps_to_the_largest_image_and_off_leaves_the_encoder_out():
    base = {"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "gpu": "l4", "seq": "128000",
            "new_tokens": "0"}
    video = estimate(base)
    image = estimate({**base, "mm_profiling": "image"})
    off = estimate({**base, "mm_profiling": "off"})
    assert video.components["profile_activations"] > image.components["profile_activations"] > \
        off.components["profile_activations"]
    # the video's profiling fills the L4; vLLM would refuse, and says what would profile less
    assert any("dummy video of 114,688 tokens: mm_profiling=image" in w for w in video.warnings)
    assert any("skips its start-up profiling of the vision encoder" in w for w in off.warnings)


@pytest.mark.parametrize("choice,flag", [("auto", ""), ("image", '{"image": 1, "video": 0}'),
                                         ("off", "--skip-mm-profiling")])
def test_mm_profiling_goes_out_as_vllm_flags_and_reads_back(choice, flag):
    from pycore.memory.estimate import estimate_values
    from pycore.output import export
    query = {"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "images": "1", "seq": "4096",
             "mm_profiling": choice}
    values = schema.parse(query)
    result = estimate_values(values)
    line = export.export("vllm", values, result)
    assert flag in line
    assert ("--skip-mm-profiling" in line) == (choice == "off") and ('"video"' in line) == (choice == "image")
    back = export.read(line)
    assert back.get("mm_profiling", "auto") == choice
    assert not {"--skip-mm-profiling", "--limit-mm-per-prompt"} & set(export.unread(line))
    # the line's max_model_len holds the image's tokens, so the read-back estimate is the same
    assert estimate(back).components["profile_activations"] == result.components["profile_activations"]


def test_vllm_is_not_said_to_fit_an_apple_gpu():
    # docs.vllm.ai, Installation, CPU: vLLM runs on Apple silicon only on its CPU; its Metal plugin runs on MLX
    from pycore.answers.fit import gpu_fits
    from pycore.memory.estimate import estimate_values
    values = schema.parse({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm"})
    result = estimate_values(values)
    rows = {row["id"]: row for row in gpu_fits(result.total_bytes, "h100-sxm-80gb", result.refused, values)}
    apple = rows["apple-m2-ultra-192gb"]
    assert not apple["fits"] and apple["headroom_text"] == "vLLM does not run" and "no Metal backend" in apple["why"]
    assert rows["h100-sxm-80gb"]["fits"] and rows["h100-sxm-80gb"]["why"] == ""
    chosen = estimate({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "gpu": "apple-m4-max-128gb"})
    assert chosen.warnings[0].startswith("vLLM has no Metal backend")
    # transformers' generate() runs on Metal (MPS): no such word
    assert not any("Metal backend" in w for w in estimate({"model": "llama-3.1-8b", "mode": "infer",
                                                            "gpu": "apple-m4-max-128gb"}).warnings)


def test_the_item_count_follows_the_image_limit_the_served_line_sets():
    # --limit-mm-per-prompt '{"image": 1}' (pycore's vllm serve line for images=1) with max_num_seqs 4: get_max_items
    # gives min(8,192 // 260, 4 x min(1, 9)) = 4 dummy images, not 31
    setup = _setup({"model": "gemma-3-27b-it", "seq": "4096", "images": "1", "image_size": "896x896",
                    "max_num_seqs": "4"})
    assert "on 4 dummy images of 260 tokens" in vllm_multimodal.note(setup, 4)


def test_every_pipeline_rank_holds_the_tower_and_profiles_the_encoder():
    result = estimate({"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "pp": "2"})
    first, second = (stage["components"] for stage in result.as_dict()["stages"])
    # qwen2_5_vl.py builds and loads visual on every rank: 676,550,144 parameters in bf16 (tests/configs count)
    assert "vision_tower_weights" not in first and second["vision_tower_weights"] == 676_550_144 * 2
    # and profile_run's encoder pass has no rank guard: both profiles exceed the 16,384-token image's float32 pixels
    assert min(first["profile_activations"], second["profile_activations"]) > 65_536 * 1176 * 4


def test_a_longer_max_model_len_that_grows_the_profile_bounds_the_longest_context():
    # Qwen2.5-VL-3B on an L4: max_model_len from 32,768 profiles a video of 2 frame pairs, from 49,152 of 3, from
    # 65,536 of 4; the estimate at each start says whether the KV cache left holds that length
    values = {"model": "qwen2.5-vl-3b-instruct", "mode": "infer", "engine": "vllm", "gpu": "l4", "new_tokens": "0"}
    assert estimate({**values, "seq": "49152"}).vllm["starts"]
    assert not estimate({**values, "seq": "65536"}).vllm["starts"]
    for seq in ("8192", "65536"):
        assert estimate({**values, "seq": seq}).vllm["longest_max_model_len"] == 65_535


def test_all_limits_zero_read_as_no_encoder_profiling():
    from pycore.output import export
    line = "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 8192 --limit-mm-per-prompt '{\"image\": 0, \"video\": 0}'"
    assert export.read(line)["mm_profiling"] == "off"


def test_vision_inputs_on_a_text_model_are_said_to_be_ignored():
    said = estimate({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "images": "2",
                     "mm_profiling": "off"}).warnings
    assert "images is ignored: llama-3.1-8b has no vision tower pycore counts" in said
    assert "mm_profiling is ignored: llama-3.1-8b has no vision tower pycore counts" in said


def test_a_grpo_rollout_holds_the_pixels_once_and_its_engine_takes_no_mm_profiling():
    base = {"model": "qwen2.5-vl-7b-instruct", "method": "grpo", "images": "1", "image_size": "1280x720"}
    result = estimate(base)
    assert "image_inputs" in result.components and "rollout_image_inputs" not in result.components
    colocated = {**base, "rollout": "vllm-colocate", "seq": "2048"}
    # TRL's LLM(...) passes neither limit_mm_per_prompt nor skip_mm_profiling: mm_profiling changes nothing there
    assert estimate(colocated).total_bytes == estimate({**colocated, "mm_profiling": "image"}).total_bytes


def test_a_video_limit_alone_reads_back_as_the_image_profile():
    # a modality the line leaves out keeps vLLM's 999: '{"video": 0}' still profiles the largest image
    from pycore.output import export
    line = "vllm serve Qwen/Qwen2.5-VL-7B-Instruct --max-model-len 8192 --limit-mm-per-prompt '{\"video\": 0}'"
    assert export.read(line)["mm_profiling"] == "image"


def test_a_refused_vl_engine_is_offered_the_longest_max_model_len_it_would_accept():
    from pycore.answers.answer import answer
    from pycore.memory.estimate import estimate_values
    values = schema.parse({"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "gpu": "l4",
                           "seq": "128000", "new_tokens": "0"})
    result = estimate_values(values)
    accepted = result.vllm["longest_max_model_len"]
    assert any(f"the longest max_model_len it would accept is {accepted:,}" in w for w in result.warnings)
    fixes = answer(values, result)["how_to_fit"]
    assert fixes[0]["query"] == {"seq": str(accepted)} and fixes[0]["fits"]
    assert estimate({"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "gpu": "l4",
                     "seq": str(accepted), "new_tokens": "0"}).vllm["starts"]


def test_grpo_with_images_sizes_the_rollout_engine_by_the_prompt_with_its_image_tokens():
    # 2,048 text tokens + 1,198 of one 1,280 x 720 image (1,196 pads and their two markers, tests/test_vision.py)
    # + 512 completion tokens = 3,758: vLLM rejects a shorter
    # vllm_max_model_length, which the placements and changes offered leave out
    from pycore.answers.rollout_answers import trl_refuses
    values = {"model": "qwen2.5-vl-7b-instruct", "method": "grpo", "rollout": "vllm-colocate", "seq": "2048",
              "images": "1", "gpu": "h100-sxm-80gb", "dp": "8"}
    assert trl_refuses(schema.parse({**values, "vllm_max_model_length": "3757"}))
    assert not trl_refuses(schema.parse({**values, "vllm_max_model_length": "3758"}))


def test_the_served_line_names_the_checkpoint_the_alias_names():
    from pycore.memory.estimate import estimate_values
    from pycore.output import export
    values = schema.parse({"model": "gemma-3-27b-it", "mode": "infer", "engine": "vllm"})
    assert export.export("vllm", values, estimate_values(values)).startswith("vllm serve google/gemma-3-27b-it ")


@pytest.mark.parametrize("line,profiling", [
    # vLLM asks only the modalities a model takes: Gemma 3's is image, so a limit of 0 leaves nothing to profile
    ("vllm serve google/gemma-3-27b-it --limit-mm-per-prompt '{\"image\": 0}'", "off"),
    # Qwen2.5-VL also takes video, whose limit stays 999 unless set: its video is still profiled
    ("vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt '{\"image\": 0}'", "auto"),
    ("vllm serve Qwen/Qwen2.5-VL-7B-Instruct --limit-mm-per-prompt '{\"image\": 0, \"video\": 0}'", "off"),
])
def test_zero_limits_read_back_by_the_modalities_the_model_takes(line, profiling):
    from pycore.output import export
    assert export.read(line).get("mm_profiling", "auto") == profiling


def test_the_offered_max_model_len_leaves_room_for_the_images():
    from pycore.answers.answer import answer
    from pycore.memory.estimate import estimate_values
    values = schema.parse({"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "gpu": "l4",
                           "seq": "128000", "new_tokens": "0", "images": "2"})
    result = estimate_values(values)
    fix = answer(values, result)["how_to_fit"][0]
    # two 1,280 x 720 images are 2 x 1,198 tokens of the context
    assert int(fix["query"]["seq"]) + 2 * 1198 == result.vllm["longest_max_model_len"] and fix["fits"]


def test_a_hub_id_exports_as_itself():
    from pycore.memory.estimate import estimate_values
    from pycore.output import export
    values = schema.parse({"model": "google/gemma-3-27b-it", "mode": "infer", "engine": "vllm"})
    assert export.export("vllm", values, estimate_values(values)).startswith("vllm serve google/gemma-3-27b-it ")


def test_one_requests_longest_context_is_the_one_searched_over_the_profiles():
    # a shorter max_model_len profiles a smaller dummy video and leaves more cache: at batch 1 the longest context is
    # the one pycore.memory.estimate._longest_over_profiles found, not this length's own cache share (the second
    # review: the page said 44,992 beside "the longest max_model_len it would accept is 98,303")
    from pycore.answers.answer import answer
    from pycore.inputs.schema import parse
    inputs = {"model": "qwen2.5-vl-7b-instruct", "mode": "infer", "engine": "vllm", "seq": "100000",
              "new_tokens": "0", "gpu": "a100-40gb"}
    result = estimate(inputs)
    assert answer(parse(inputs), result)["max_context"] == result.vllm["longest_max_model_len"] == 98_303


def test_llava_is_profiled_on_images_of_its_towers_size():
    # vLLM 0.11 llava.py L182-193: the dummy image is the tower's image_size², 336², 576 tokens with the "default"
    # strategy; the encoder budget max(8,192, 576) holds 8,192 // 576 = 14 of them (MultiModalBudget)
    result = estimate({"model": "llava-1.5-7b-hf", "mode": "infer", "engine": "vllm", "images": "1"})
    assert any("on 14 dummy images of 576 tokens" in w for w in result.warnings)


def test_vllm_builds_llavas_tower_only_up_to_its_feature_layer():
    # vLLM 0.11 llava.py L417-470: vision_feature_layer -2 builds 23 of CLIP's 24 blocks and, with a block left out,
    # no post-LayerNorm (clip.py require_post_norm): 12,596,224 + 2,048 parameters fewer than transformers builds
    result = estimate({"model": "llava-1.5-7b-hf", "mode": "infer", "engine": "vllm", "images": "1"})
    assert result.components["weights"] == (7_063_427_072 - 12_596_224 - 2_048) * 2
    assert estimate({"model": "llava-1.5-7b-hf", "mode": "infer", "images": "1"}).components["weights"] == \
        7_063_427_072 * 2


INTERNVL = str(ROOT / "tests" / "configs" / "families" / "internvl.json")


@pytest.mark.parametrize("context,modality,tokens,rows", [
    # vLLM 0.11 runs InternVLForConditionalGeneration as InternS1 (registry.py L237). Its largest image
    # (interns1.py L204-238): 12 tiles of 448² and the thumbnail, 13 x 256 embeddings within <img> and </img>
    (4096, "image", 3330, 3328), (6400, "image", 3330, 3328),
    # its video (L240-256, L461-466): the budget's frames fit beside one largest image, (L - 3,328) // 256, each
    # "Frame{i}: " (3 tokens and a digit each) + <img> + 256 + </img>, newlines between; the profiled video asks for
    # the video alone (gpu_model_runner.py L2875-2880): L // 256 frames. 13 frames: 13 x 261 + 17 + 12 = 3,422 > 3,330
    (6656, "video", 3422, 26 * 256),
    # 115 frames: 115 x 261 + (9 + 180 + 48) digits + 114 newlines; 128 frames profiled
    (32768, "video", 30_366, 128 * 256),
])
def test_internvl_profiles_its_largest_image_then_a_video_of_a_frame_every_256_tokens(context, modality, tokens, rows):
    setup = _setup({"config": INTERNVL, "seq": str(context), "new_tokens": "0"})
    item = vllm_multimodal.profiled_item(setup, context)
    tiles = rows // 256
    assert (item.modality, item.tokens, item.embeddings) == (modality, tokens, rows)
    assert (item.patches, item.pixels) == (tiles * (32 * 32 + 1), tiles * 3 * 448 * 448)   # a class token a tile
    image = vllm_multimodal.profiled_item(_setup({"config": INTERNVL, "seq": str(context), "new_tokens": "0",
                                                  "mm_profiling": "image"}), context)
    assert (image.modality, image.tokens) == ("image", 3330)


def test_an_encoder_output_longer_than_the_budget_is_kept_unpadded():
    # InternVL at max_model_len 32,768: the budget is the 30,366 tokens counted, the video's output 32,768 rows of the
    # decoder's width; profile_run pads only outputs shorter than the budget (gpu_model_runner.py L3371-3381)
    setup = _setup({"config": INTERNVL, "seq": "32768", "new_tokens": "0", "max_batched_tokens": "8192"})
    from pycore.base.expr import num
    q, symbols = vllm_multimodal.profile_activation(setup, num(0), 256)
    pixels = 128 * 3 * 448 * 448 * 4
    assert q.value >= pixels + 32_768 * setup.arch.hidden * 2
    assert "E = an output's own rows, no fewer than the budget's 30,366: kept as they are" in symbols
    assert "B = " not in symbols


@pytest.mark.parametrize("values", [
    {"config": INTERNVL, "gpu": "l40s", "max_positions": "40960", "seq": "8192"},
    # fewer items, or outputs no longer padded to the budget, make a longer profile smaller (a review's finding: a
    # bisection over all the spans gave 7,104 and 7,120 here, and 23,952 for Qwen2.5-VL, where every span gives 7,456
    # and 65,535)
    {"config": INTERNVL, "gpu": "v100-32gb", "precision": "fp16", "gpu_util": "0.87", "seq": "32768"},
    {"config": INTERNVL, "gpu": "l40s", "gpu_util": "0.614", "seq": "8192"},
    {"model": "qwen2.5-vl-3b-instruct", "gpu": "a100-40gb", "gpu_util": "0.5", "max_batched_tokens": "65536",
     "seq": "100000"},
])
def test_the_longest_max_model_len_searched_over_the_profiles_is_the_one_every_profile_gives(values):
    query = {"mode": "infer", "engine": "vllm", "new_tokens": "0", **values}
    found = estimate(query).vllm["longest_max_model_len"]
    # every span of one profile, each estimated at its start: the highest whose own limit reaches it
    steps = vllm_multimodal.profile_steps(_setup(query))
    every = 0
    for begin, end in zip([1, *steps], [*steps, 0]):
        limit = estimate({**query, "seq": str(begin)}).vllm["longest_max_model_len"] or 0
        if limit >= begin:
            every = max(every, min(limit, end - 1) if end else limit)
    positions = _setup(query).arch.max_positions
    assert len(steps) > 2 and found == min(every, positions) > 0


def test_qwen3_5_is_profiled_as_the_vllm_that_runs_it_profiles_it():
    # vLLM 0.11 has no Qwen3.5; vLLM 0.33.0 (qwen3_5.py L468-529) gives it Qwen3-VL's processing, whose dummy video is
    # now two frames (12,288 tokens, qwen3_vl.py L1038-1068): its largest image, 4,096², 16,384 tokens, wins. The
    # pixels reach the GPU as uint8 (mm_device_do_normalize) and the outputs are not padded (gpu_model_runner.py
    # L6110-6130); there are no deepstack buffers
    setup = _setup({"model": "qwen3.5-9b", "seq": "65536", "new_tokens": "0", "max_batched_tokens": "32768"})
    item = vllm_multimodal.profiled_item(setup, 65_536)
    assert (item.modality, item.tokens, item.patches, item.pixel_bytes, item.padded) == \
        ("image", 16_384, 65_536, 1, False)
    from pycore.base.expr import num
    q, symbols = vllm_multimodal.profile_activation(setup, num(0), 256)
    assert "uint8" in symbols and "B = " not in symbols and "kept as they are" in symbols
    # two images in the budget of 32,768: their uint8 pixels beside the tower's working set over their patches, or
    # beside their outputs, 16,384 rows of the decoder's 4,096 each
    from pycore.memory import vision_activations
    block, rest = vision_activations.inference_per_patch(setup)
    pixels = 2 * 65_536 * 1536
    assert q.value == pytest.approx(max(pixels + (block + rest) * 2 * 65_536, pixels + 2 * 16_384 * 4096 * 2))
    assert vllm_multimodal.deepstack_buffers(setup, None) is None
    result = estimate({"model": "qwen3.5-9b", "mode": "infer", "engine": "vllm", "seq": "8192"})
    assert any("vLLM 0.11, which the rest of this estimate follows, does not run this model: the profiling is vLLM "
               "0.33.0's" in w for w in result.warnings)


@pytest.mark.parametrize("seq,images", [("32768", "1"), ("1", "1000"), ("100000000", "0")])
def test_the_longest_max_model_len_offered_over_profiles_is_within_the_models_positions(seq, images):
    # InternVL's default config has 32,768 positions, past which vLLM refuses any max_model_len (a newcomer saw 33,023
    # offered: the last 256-token span of profiles, not capped by them)
    result = estimate({"config": INTERNVL, "mode": "infer", "engine": "vllm", "seq": seq, "images": images,
                       "new_tokens": "0"})
    assert not result.vllm["starts"] and result.vllm["longest_max_model_len"] == 32_768
    assert any("the longest it would accept is 32,768" in w for w in result.warnings)


def test_the_would_be_log_has_the_encoder_line_vllm_prints():
    # gemma-3-27b-it at max_num_batched_tokens 8192, a published vLLM 0.11.0rc2 log: "Encoder cache will be initialized
    # with a budget of 8192 tokens, and profiled with 31 image items of the maximum feature size."
    from pycore.answers.answer import answer
    from pycore.memory.estimate import estimate_values
    query = {"model": "gemma-3-27b-it", "mode": "infer", "engine": "vllm", "seq": "4096", "max_batched_tokens": "8192"}
    log = answer(schema.parse(query), estimate_values(schema.parse(query)))["vllm_log"]
    assert log[1] == ("Encoder cache will be initialized with a budget of 8192 tokens, and profiled with 31 image "
                      "items of the maximum feature size.")
    off = {**query, "mm_profiling": "off"}
    # gpu_model_runner.py profile_run (v0.11) with --skip-mm-profiling
    assert answer(schema.parse(off), estimate_values(schema.parse(off)))["vllm_log"][1] == \
        "Skipping memory profiling for multimodal encoder and encoder cache."
