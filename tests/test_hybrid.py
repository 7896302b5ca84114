"""Hybrid and interleaved models: layers read by kind from config.json, a KV cache only in attention layers, a
recurrent and convolution state per sequence in the others.

Configs: tests/configs/families/<model_type>.json are transformers 5.24's own defaults for each family
(``AutoConfig.for_model(model_type).to_dict()``; Qwen3-Next's default is Qwen3-Next-80B-A3B's shape), their
parameter counts in validation/config_counts.json (validation/count_configs.py). State shapes follow
vllm/model_executor/layers/mamba/mamba_utils.py ``MambaStateShapeCalculator`` (v0.11) and transformers 5.24
``cache_utils.LinearAttentionLayer``; page sizes follow vllm/v1/kv_cache_interface.py.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from pycore import estimate
from pycore.memory.recurrent import vllm_pages
from pycore.memory.serving import _hybrid_capacity, vllm_capacity
from pycore.model import catalog
from pycore.model.hf_config import architecture_from_dict
from pycore.model.mixers import layer_counts

CONFIGS = Path(__file__).resolve().parent / "configs"
FAMILIES = CONFIGS / "families"


def _file(name: str) -> str:
    return str(FAMILIES / f"{name}.json")


def _arch(name: str):
    return architecture_from_dict(json.loads((FAMILIES / f"{name}.json").read_text()))


@pytest.mark.parametrize("name,pattern", [
    # each family's layer_types / layers_block_type / periods, as its configuration class reads them
    ("qwen3_next", {"L": 36, "A": 12}),             # full_attention every 4th layer
    ("granitemoehybrid", {"M": 32}),                # GraniteMoeHybridConfig's default: all Mamba-2
    ("nemotron_h", {"M": 1, "-": 2, "A": 1}),        # linear_attention, moe, full_attention, mlp
    ("falcon_h1", {"P": 32}),                        # attention and Mamba-2 side by side in every layer
    ("mamba2", {"M": 64}),
    ("jamba", {"m": 28, "A": 4}),                    # attention where i % 8 == 4
    ("llama4_text", {"C": 36, "A": 12}),             # NoPE full attention every 4th layer
    ("olmo3", {"S": 24, "A": 8}),
])
def test_layers_are_read_by_kind(name, pattern):
    assert layer_counts(_arch(name)) == pattern


def test_a_kv_cache_only_in_attention_layers():
    # Qwen3-Next-80B-A3B: 12 of its 48 layers are attention, 2 KV heads of 256, bf16:
    # 12 layers x 2 (k and v) x 2 heads x 256 x 2 bytes per token (FullAttentionSpec.page_size_bytes / block).
    result = estimate({"config": _file("qwen3_next"), "mode": "infer", "engine": "vllm", "seq": "4096"})
    assert result.kv_bytes_per_token == 12 * 2 * 2 * 256 * 2


@pytest.mark.parametrize("tp,block", [(2, 544), (4, 272)])
def test_vllm_pages_a_hybrid_as_its_hybrid_allocator_does(tp, block):
    # gated_delta_net_state_shape (v0.11): conv (K - 1, (2*16*128 + 32*128) / t), temporal (32 / t, 128, 128), bf16
    state_page = ((4 - 1) * (2 * 16 * 128 + 32 * 128) // tp + 32 * 128 * 128 // tp) * 2
    # FullAttentionSpec: 2 (k, v) x max(1, 2 KV heads / t) x 256 x 2 bytes per token and layer
    token_page = 2 * max(1, 2 // tp) * 256 * 2
    # HybridAttentionMambaModelConfig: the attention block is the smallest multiple of 16 whose page holds a state
    assert block == 16 * -(-state_page // (16 * token_page))
    result = estimate({"config": _file("qwen3_next"), "mode": "infer", "engine": "vllm", "seq": "8192",
                       "tp": str(tp), "gpu": "h200-141gb"})
    capacity = result.vllm
    assert capacity["block_tokens"] == block
    assert capacity["state_bytes_per_request"] == 36 * state_page
    # 12 attention + 36 DeltaNet layers: groups of 12, one attention group and three state groups sharing
    # available // (page x 12) blocks; a request takes cdiv(8,192 + 256, block) + 3 of them.
    blocks = capacity["kv_bytes_available"] // (block * token_page * 12)
    assert capacity["kv_cache_blocks"] == blocks > 0
    assert capacity["max_concurrency"] == pytest.approx(blocks / (-(-(8192 + 256) // block) + 3))
    assert capacity["kv_cache_tokens"] == blocks // 4 * block        # "GPU KV cache size": blocks // groups x block


def test_transformers_keeps_the_whole_kernel_and_an_fp32_state():
    # Mamba-2 defaults: 64 layers; conv (K = 4) over 8192 + 2*8*128 channels in bf16; state 128 x 64 x 128 in fp32
    per_sequence = 64 * (4 * (8192 + 2 * 8 * 128) * 2 + 128 * 64 * 128 * 4)
    result = estimate({"config": _file("mamba2"), "mode": "infer", "batch": "3", "seq": "1024"})
    assert result.components["recurrent_state"] == 3 * per_sequence
    assert result.kv_bytes_per_token == 0


def test_a_model_without_attention_is_sized_by_its_state_slots_in_vllm():
    result = estimate({"config": _file("mamba2"), "mode": "infer", "engine": "vllm", "seq": "100000"})
    state = 64 * (3 * (8192 + 2 * 8 * 128) * 2 + 128 * 64 * 128 * 2)
    assert result.vllm["state_bytes_per_request"] == state
    assert result.vllm["starts"]
    # no attention: one group of every layer, one page (a layer's state) per layer and request
    per_layer = state // 64
    assert result.vllm["max_concurrency"] == result.components["kv_cache"] // (per_layer * 64) > 100
    assert result.vllm["longest_max_model_len"] is None         # no KV cache: no length limit from memory


def test_sliding_and_chunked_layers_cache_at_most_their_window():
    # Llama 4 text defaults: 36 chunked layers of 8192 tokens, 12 full; 8 KV heads of 128, bf16
    arch = _arch("llama4_text")
    full = estimate({"config": _file("llama4_text"), "mode": "infer", "seq": "32768", "new_tokens": "1"})
    per_token_layer = 2 * 8 * 128 * 2
    assert arch.sliding_window == 8192
    pools = {pool.key: pool.bytes for pool in full.pools}
    assert pools["kv_cache"] == per_token_layer * (12 * 32768 + 36 * 8192)
    # right after the prefill transformers' DynamicSlidingWindowLayer still holds the whole prompt: its window is a
    # view of the prefill's keys and values (cache_utils.py, 5.24)
    assert pools["kv_cache_prompt"] == per_token_layer * 48 * 32768


def test_hybrid_training_says_which_kernels_it_counts():
    result = estimate({"config": _file("granitemoehybrid"), "seq": "1024"})
    assert any("32 Mamba-2 layers" in w and "reference torch scans" in w for w in result.warnings)
    assert not any("Mamba" in w for w in estimate({"model": "llama-3.1-8b"}).warnings)


def test_an_unknown_layer_type_is_refused_by_name():
    config = json.loads((FAMILIES / "qwen3_next.json").read_text())
    config["layer_types"][0] = "lightning_attention"
    with pytest.raises(ValueError, match="layer_types: layer type 'lightning_attention' is not one pycore knows"):
        architecture_from_dict(config)


def test_a_vision_encoder_pycore_cannot_count_yet_is_said_to_be_left_out():
    warnings: "list[str]" = []
    text = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())   # LLaVA-NeXT keeping the class tokens: not yet
    architecture_from_dict({"model_type": "llava_next", "text_config": text, "vision_feature_select_strategy": "full",
                            "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024}}, warnings=warnings)
    assert any("vision encoder" in w and "not counted" in w and "full" in w for w in warnings)


def test_a_published_qwen3_next_start_up_log_is_reproduced_by_the_page_layout():
    # github.com/vllm-project/vllm/issues/26646 (Qwen3-Next, kv_cache_dtype fp8, vLLM 0.11):
    #   "GPU KV cache size: 90,048 tokens" and "Maximum concurrency for 215,040 tokens per request: 1.66x".
    # With an fp8 KV cache and a bf16 state the attention block is 1,072 tokens (at tp 1 and 2 alike), the 48 layers
    # form 4 groups, and a request takes cdiv(215,040, 1,072) + 3 = 204 blocks: 339 blocks give both lines.
    result = estimate({"model": "qwen3-next-80b-a3b", "mode": "infer", "engine": "vllm", "tp": "2", "kv_dtype": "fp8",
                       "seq": "215040", "new_tokens": "0", "gpu": "h200-141gb"})
    pages = vllm_pages(catalog.architecture("qwen3-next-80b-a3b"), 0, 48, 2, (1, 2))
    assert result.vllm["block_tokens"] == pages["block_tokens"] == 1072
    logged = vllm_capacity({"kv_bytes_per_token": result.kv_bytes_per_token, "vllm_pages": pages,
                                    "components": {"kv_cache": 339 * pages["page_bytes"] * pages["group_size"]},
                                    "state_bytes_per_sequence": result.vllm["state_bytes_per_request"]},
                           SimpleNamespace(seq=215_040, new_tokens=0, max_model_len=0, max_num_seqs=0, max_batched_tokens=8192))
    assert logged["kv_cache_tokens"] == 90_048
    assert f"{logged['max_concurrency']:.2f}" == "1.66"


def test_the_answer_says_which_layers_were_read_as_which_kind():
    from pycore.output.report import summary
    result = estimate({"model": "qwen3-next-80b-a3b", "mode": "infer"})
    assert result.model.layers_read == (("gated DeltaNet (linear attention)", 36), ("full attention", 12),
                                        ("with routed experts", 48))
    assert "Layers read as 36 gated DeltaNet (linear attention), 12 full attention" in summary(result)["model"]
    # an alias names the preset itself, not a "closest preset"
    assert result.model.preset == "" and estimate({"model": "llama-3.1-8b"}).model.layers_read == ()


def test_the_longest_context_leaves_each_request_its_state_slots():
    from pycore.memory.serving import longest_context
    result = estimate({"model": "qwen3-next-80b-a3b", "mode": "infer", "engine": "vllm", "tp": "4"})
    capacity = result.vllm
    blocks, block = capacity["kv_cache_blocks"], capacity["block_tokens"]
    # 64 requests share the blocks; each keeps 3 for its DeltaNet groups' states, the rest hold its tokens
    assert longest_context(capacity, 64) == (blocks // 64 - 3) * block
    assert longest_context(estimate({"config": _file("mamba2"), "mode": "infer", "engine": "vllm"}).vllm, 4) is None


def test_a_state_the_config_keeps_in_fp32_is_paged_in_fp32():
    # Qwen3.5-9B's text_config says mamba_ssm_dtype float32: vLLM keeps its DeltaNet state (32 x 128 x 128) in fp32
    # and the convolution state (K - 1 = 3 columns of 2*16*128 + 32*128 channels) in bf16
    result = estimate({"model": "qwen3.5-9b", "mode": "infer", "engine": "vllm"})
    per_layer = 3 * (2 * 16 * 128 + 32 * 128) * 2 + 32 * 128 * 128 * 4
    assert result.vllm["state_bytes_per_request"] == 24 * per_layer      # 24 of its 32 layers are DeltaNet


def test_mutated_hybrid_and_vision_configs_get_a_message_never_a_crash(tmp_path):
    # every reader of this families fed wrong types and sizes in random keys (a fixed seed): an InputError
    # naming the config, or an estimate; never another exception (the command line would print a traceback)
    import random

    from pycore.inputs.schema import InputError
    rng = random.Random(7)
    files = sorted(FAMILIES.glob("*.json")) + sorted((CONFIGS / "variants").glob("synthetic-*.json")) + \
        [CONFIGS / name for name in ("qwen3.5-9b.json", "llama-4-scout-17b-16e-instruct.json",
                                     "qwen2.5-vl-7b-instruct.json", "lfm2.5-vl-1.6b.json", "qwen3-vl-4b-instruct.json",
                                     "qwen3-vl-30b-a3b-instruct.json")]
    values = [0, -1, 1, 2, 7, 64, 10**9, 0.5, None, True, "x", [], {}, [0], ["mamba"], "M*-E", float("nan")]
    queries = [{"mode": "infer"}, {"mode": "infer", "engine": "vllm", "tp": "2"}, {"seq": "256", "batch": "2"},
               {"mode": "infer", "images": "2"}, {"seq": "128", "pp": "2", "microbatches": "4"}]
    for round_ in range(300):
        config = json.loads(rng.choice(files).read_text())
        target = config.get("text_config", config) if rng.random() < 0.7 else config.get("vision_config", config)
        for _ in range(rng.randint(1, 3)):
            target[rng.choice(sorted(target))] = rng.choice(values)
        path = tmp_path / f"{round_}.json"
        path.write_text(json.dumps(config))
        try:
            estimate({"config": str(path), "seq": "512", **rng.choice(queries)})
        except InputError:
            pass


@pytest.mark.parametrize("name,where,key,value", [
    ("families/jamba.json", None, "mamba_dt_rank", None),               # read as "auto", as JambaConfig's default
    ("llama-4-scout-17b-16e-instruct.json", "text_config", "intermediate_size", None),
    ("llama-4-scout-17b-16e-instruct.json", "vision_config", "projector_input_dim", {}),
])
def test_the_fuzzers_finds_stay_fixed(name, where, key, value):
    from pycore.inputs.schema import InputError
    config = json.loads((CONFIGS / name).read_text())
    (config[where] if where else config)[key] = value
    try:
        architecture_from_dict(config)
    except InputError as error:
        assert "config" in str(error)


@pytest.mark.parametrize("path", [FAMILIES / "nemotron_h.json", FAMILIES / "qwen3_next.json", FAMILIES / "jamba.json",
                                  CONFIGS / "variants" / "synthetic-lfm2-conv-layers.json", FAMILIES / "falcon_h1.json"])
def test_fused_scan_kernels_keep_less_than_the_reference_ones(path):
    # mamba_split_conv1d_scan_combined, fla's chunk_gated_delta_rule, selective_scan_fn, causal_conv1d keep their
    # inputs and a few per-token tensors (from their source, validation/measure_hybrid.py's docstring)
    query = {"config": str(path), "seq": "1024"}
    reference, fused = estimate(query), estimate({**query, "scan_kernels": "fused"})
    assert fused.components["activations"] <= reference.components["activations"]
    # the warning says which of them is measured (fla's gated DeltaNet, validation/measured_cuda_families.json)
    assert any("fused kernels" in w and "DeltaNet's measured" in w and "from their source" in w for w in fused.warnings)
    served = estimate({**query, "mode": "infer", "scan_kernels": "fused"})
    assert served.components["prefill_working"] <= estimate({**query, "mode": "infer"}).components["prefill_working"]


def test_scan_kernels_change_nothing_for_attention_only_models():
    plain = estimate({"model": "llama-3.1-8b"})
    assert estimate({"model": "llama-3.1-8b", "scan_kernels": "fused"}).total_bytes == plain.total_bytes


def test_nemotron_h_prefill_counts_the_larger_of_its_scan_and_mlp_layers():
    # Nemotron-H's blocks hold one mixer each (mamba, attention, mlp or moe): a prefill's scan transient and an MLP's
    # intermediates are never live together. Granite 4.0 hybrid's layers hold Mamba-2 and an MLP, one after the other
    # (the Mamba-2 mixer's moment is counted whole by scan_activations.mamba2_chunk_scan, then freed).
    from pycore.memory.serving import scan_layers_apart
    assert scan_layers_apart(_arch("nemotron_h")) and not scan_layers_apart(_arch("granitemoehybrid"))
    assert not scan_layers_apart(_arch("mamba2")) and not scan_layers_apart(_arch("jamba"))
    # validation/measured_hybrid.json, nemotron_h a: generate() of 2 × 512 + 8 tokens peaked at 30,394,025 bytes
    case = next(c for c in json.loads((Path(__file__).resolve().parents[1] / "validation" / "measured_hybrid.json")
                                      .read_text())["cases"] if c["label"] == "nemotron_h a infer bf16 b2 s512+8")
    result = estimate({**case["inputs"], "config": json.dumps(case["config_json"]), "cublas_workspace": ":0:0"})
    assert abs(result.peak_bytes / case["peak_bytes"] - 1) < 0.10      # +27% when both were counted


def test_mamba2_reference_scan_moment_is_the_live_tensors_of_a_whole_models_prefill():
    # Nemotron-Nano-12B-v2 (128 heads of 80, state 128, 8 groups, chunks of 128) prefilling 4,096 tokens on an H200:
    # 2,823 MiB of mamba2_chunk_scan's own tensors live at the peak (validation/measured_cuda_explain.txt: einsum 741,
    # pad 674, L, M and B_decay 256 each, D·x 160, Y_off 160, the output and its sum with D·x 320), beside the in_proj
    # output (177 MiB) and the convolution's (96 MiB) in bf16
    from pycore.memory.scan_activations import mamba2_chunk_scan
    arch = architecture_from_dict(json.loads((CONFIGS / "nvidia-nemotron-nano-12b-v2-base.json").read_text()))
    per_token = mamba2_chunk_scan(arch, 4096, 2)
    assert abs(per_token * 4096 / 2**20 - (2823 + 177 + 96)) < 0.01 * 3096


def test_deltanet_reference_rule_moment_is_the_live_tensors_of_a_whole_models_prefill():
    # Qwen3.5-9B's text model (32 value heads of 128, key heads 16 of 128) prefilling 16,384 tokens on an H200: ten
    # 256 MiB and three 128 MiB fp32 tensors of torch_chunk_gated_delta_rule and 4 MiB of padded beta and decay live at
    # the peak, beside the convolution's output (256 MiB) and z, b and a (130 MiB) in bf16
    # (validation/measured_cuda_explain.txt, 'qwen3.5-9b text infer bf16 b1 s16384+4 (gpu)')
    from pycore.memory.scan_activations import deltanet_chunk_rule
    config = json.loads((CONFIGS / "qwen3.5-9b.json").read_text())["text_config"]
    per_token = deltanet_chunk_rule(architecture_from_dict(config), 16384, 2)
    assert abs(per_token * 16384 / 2**20 - (10 * 256 + 3 * 128 + 4 + 256 + 130)) < 0.01 * 3334


def test_a_hybrids_cache_per_request_is_split_by_layer_kind():
    # Qwen3-Next-80B-A3B at tp=4 under vLLM 0.11: per GPU a gated DeltaNet layer keeps (2 × 2,048 + 4,096) / 4
    # channels × 3 columns of convolution state and 32 × 128 × 128 / 4 recurrent values, bf16: 274,432 bytes, 36 layers
    # 9,879,552; an attention layer's token is 2 × 1 KV head × 256 × 2 = 1,024 bytes, so the page is 272 tokens
    # (the smallest multiple of 16 holding 274,432 bytes: HybridAttentionMambaModelConfig) of 278,528 bytes, and the
    # 12 attention and 36 DeltaNet layers form groups of 12 (one attention group, three state groups)
    from pycore.answers.answer import answer
    from pycore.inputs import frameworks
    from pycore.inputs.schema import parse
    from pycore.memory.estimate import estimate_values
    from pycore.output.report import display_answers

    def setup(inputs):
        values = frameworks.apply(parse(inputs))
        return values, estimate_values(values)
    values, result = setup({"model": "qwen3-next-80b-a3b-instruct", "mode": "infer", "engine": "vllm", "tp": "4"})
    answers = answer(values, result)
    request = answers["vllm_request"]
    assert request["block_bytes"] == 278_528 * 12 and request["block_tokens"] == 272
    assert request["attention_blocks"] == -(-2_304 // 272) == 9 and request["state_blocks"] == 3
    assert request["state_bytes_per_request"] == 36 * 274_432
    assert (9 + 3) * 278_528 * 12 == result.vllm["kv_bytes_needed"]
    shown = next(row["text"] for row in display_answers(result, answers) if row["key"] == "vllm_request")
    assert shown.startswith("12 blocks, 38.25 MiB (a block is a page of 272 tokens, 278,528 bytes, in each of 12 "
                            "layers: 3,342,336 bytes)") and "36 state layers" in shown and "4 layer groups" in shown
    # a model with attention only has no such line
    assert "vllm_request" not in answer(*setup({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm"}))


def test_a_context_past_the_positions_of_a_model_without_attention_names_no_rope():
    # transformers 5.24's default granitemoehybrid config: 32 Mamba-2 layers, max_position_embeddings 2,048
    said = " ".join(estimate({"config": _file("granitemoehybrid"), "mode": "infer", "engine": "vllm", "tp": "2"}).warnings)
    assert "beyond" in said and "no attention layers" in said and "rope" not in said


@pytest.mark.parametrize("model,seq", [("granite-4.0-h-350m", "64000"), ("ai21-jamba-1.5-mini", "300000")])
def test_nope_attention_is_not_told_to_scale_rope(model, seq):
    # granite-4.0-h-350m's config: position_embedding_type "nope" (tests/configs/granite-4.0-h-350m.json; transformers
    # 5.24 GraniteMoeHybrid rotates only with "rope"); JambaAttention applies no positional encoding
    assert catalog.architecture(model).positions == "none"
    said = " ".join(estimate({"model": model, "mode": "infer", "engine": "vllm", "seq": seq}).warnings)
    assert "beyond" in said and "NoPE" in said and "rope scaling" not in said


def test_a_published_qwen3_next_log_reads_back_from_its_own_kv_memory():
    # vLLM 0.10.2 starting Qwen3-Next-80B-A3B-Instruct at tp 2 (a console log kept in a public GitHub repository,
    # docs/validation.md "Serving with vLLM: published start-up logs"): "Setting attention block size to 544 tokens",
    # "Available KV cache memory: 44.59 GiB", "GPU KV cache size: 973,760 tokens", "Maximum concurrency for 262,144
    # tokens per request: 14.77x". From its own memory figure pycore's pages give its own tokens and concurrency.
    arch = catalog.architecture("qwen3-next-80b-a3b-instruct")
    pages = vllm_pages(arch, 0, arch.layers, 2, (2, 2), 8192, 0)
    assert pages["block_tokens"] == 544
    theirs = _hybrid_capacity(pages, int(44.59 * 2**30), 262_144, 0)
    assert theirs["kv_cache_tokens"] == 973_760
    assert round(theirs["max_concurrency"], 2) == 14.77
    # and pycore's own start-up arithmetic on the H200 (0.9 of 140.40 GiB, less the weights and the profiling run's
    # peak) leaves 48.85 GiB: 9.6% more than vLLM found, its profiling peak being larger than the 3.00 GiB estimated
    ours = estimate({"model": "qwen3-next-80b-a3b-instruct", "mode": "infer", "engine": "vllm", "tp": "2",
                     "gpu": "h200-141gb", "seq": "262144", "new_tokens": "0", "max_batched_tokens": "8192"})
    assert 0 < ours.vllm["kv_cache_tokens"] / 973_760 - 1 < 0.10


def test_vllms_start_check_counts_layer_by_layer_not_the_padded_groups():
    # vLLM 0.11 check_enough_kv_cache_memory sums each layer's max_memory_usage_bytes (v1/core/kv_cache_utils.py
    # max_memory_usage_bytes; v1/kv_cache_interface.py): Gemma 3 27B's 10 full-attention layers take cdiv(120,000, 16)
    # pages each, its 52 sliding layers cdiv(1,024 - 1 + 8,192, 16) + 1 each, a page of 16 tokens × 2 × 16 kv heads ×
    # 128 × 2 bytes; the 6 groups of 10 its sliding layers share the blocks in ask nothing for the 8 missing layers.
    # On an H100 that is 12.82 GiB of 13.20 GiB: vLLM starts (counting the padded groups said 13.38 GiB, a refusal).
    result = estimate({"model": "gemma-3-27b-it", "mode": "infer", "engine": "vllm", "seq": "120000",
                       "new_tokens": "0", "images": "0"})
    page = 16 * 2 * 16 * 128 * 2
    assert result.vllm["kv_bytes_needed"] == (10 * 7500 + 52 * (-(-(1023 + 8192) // 16) + 1)) * page
    assert result.vllm["starts"] and result.vllm["kv_bytes_needed"] <= result.vllm["kv_bytes_available"]
    longest = result.vllm["longest_max_model_len"]
    over = estimate({"model": "gemma-3-27b-it", "mode": "infer", "engine": "vllm", "seq": str(longest + 16),
                     "new_tokens": "0", "images": "0"})
    assert not over.vllm["starts"] and longest >= 120_000


def test_vllm_refuses_a_max_model_len_past_the_positions_at_its_config_check():
    # vllm/config/model.py _get_and_verify_max_len (v0.11): a max_model_len over max_position_embeddings is refused
    # before anything loads (Gemma 3's scaling is not applied again); the fixes offered shorten it
    from pycore.answers.answer import answer
    from pycore.inputs.schema import parse
    inputs = {"model": "gemma-3-27b-it", "mode": "infer", "engine": "vllm", "seq": "131072", "images": "0"}
    result = estimate(inputs)
    assert not result.vllm["starts"] and result.vllm["over_positions"] == (131_072 + 256, 131_072)
    assert any("is greater than the model's 131,072 positions" in w for w in result.warnings)
    found = answer(parse(inputs), result)
    assert found["vllm_log"][0].startswith("ValueError: User-specified max_model_len (131328) is greater than")
    assert found["how_to_fit"] and all(set(fix["query"]) == {"seq"} for fix in found["how_to_fit"])


def test_a_configs_rope_scaling_raises_the_positions_as_vllm_derives_them(tmp_path):
    # vllm/config/model.py _get_and_verify_max_len (v0.11): yarn's original_max_position_embeddings × factor, linear's
    # max_position_embeddings × factor; llama3's length is already scaled. Qwen2.5's documented yarn block (factor 4 of
    # 32,768) serves 100,000 tokens; without it vLLM refuses (the second review)
    config = json.loads((Path(__file__).resolve().parent / "configs" / "qwen2.5-0.5b.json").read_text())
    inputs = {"mode": "infer", "engine": "vllm", "seq": "100000", "new_tokens": "0"}
    for scaling, starts in (({"factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}, True),
                            ({"factor": 4.0, "rope_type": "linear"}, True), ({"factor": 8.0, "rope_type": "llama3"}, False),
                            (None, False)):
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**config, "rope_scaling": scaling}))
        assert estimate({**inputs, "config": str(path)}).vllm["starts"] is starts, scaling


def test_a_colocated_rollout_engine_refuses_a_length_past_the_positions_too():
    # TRL's vllm_max_model_length reaches vLLM's config check as max_model_len (the second review)
    result = estimate({"model": "qwen2.5-0.5b", "method": "grpo", "rollout": "vllm-colocate", "batch": "8",
                       "vllm_max_model_length": "100000"})
    assert not result.vllm["starts"] and result.vllm["over_positions"] == (100_000, 32_768)
    assert any(w.startswith("The colocated vLLM engine would refuse to start: vllm_max_model_length 100,000")
               for w in result.warnings)
