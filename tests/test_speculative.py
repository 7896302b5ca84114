"""vLLM speculative decoding with the checkpoint's multi-token-prediction layers (speculative=mtp).

vLLM 0.11 loads DeepSeek-V3's and GLM-4.5's MTP layers through v1/spec_decode/eagle.py: per layer
(model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictorLayer) enorm and hnorm (h each), eh_proj
(2h -> h, no bias), a decoder layer as the model's last (mtp_block), and shared_head's norm (h) and its own
ParallelLMHead (vocabulary x h, split t ways); the embedding is deleted and shared with the target. The MTP
layer's attention gets its own KV cache beside the model's layers. Qwen3-Next's one MTP layer
(qwen3_next_mtp.py) shares the target's head as well, and its full-attention layer joins the hybrid cache's groups.
"""

import pytest

from pycore import estimate, parse
from pycore.answers.answer import answer
from pycore.memory.estimate import estimate_values
from pycore.model import catalog
from pycore.model.architecture import layer_params

SERVE = {"model": "deepseek-v3", "mode": "infer", "engine": "vllm", "tp": "8", "pp": "2", "gpu": "h200-141gb"}


def test_the_mtp_layer_is_loaded_on_the_last_stage():
    arch = catalog.architecture("deepseek-v3")
    assert arch.mtp_layers == 1                       # tests/configs/deepseek-v3.json num_nextn_predict_layers
    result = estimate({**SERVE, "speculative": "mtp"})
    h = arch.hidden
    per_gpu = layer_params(arch, arch.layers - 1, 8, 1) + -(-(2 * h * h) // 8) + 3 * h + -(-(arch.vocab * h) // 8)
    assert result.components["mtp_weights"] == per_gpu * 2          # bf16
    assert result.stage == 1                                        # the stage with the fewest KV blocks


def test_the_mtp_layer_caches_one_more_latent_per_token():
    plain, mtp = estimate(SERVE), estimate({**SERVE, "speculative": "mtp"})
    assert plain.stage == 1 and mtp.stage == 1
    # MLA in vLLM caches kv_lora_rank + qk_rope_head_dim = 512 + 64 values a token and layer, bf16
    assert mtp.kv_bytes_per_token - plain.kv_bytes_per_token == (512 + 64) * 2
    assert mtp.vllm["max_concurrency"] < plain.vllm["max_concurrency"]


@pytest.mark.parametrize("query", [{"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm"},
                                   {"model": "deepseek-v3", "mode": "infer", "tp": "8", "pp": "2"}])
def test_speculative_changes_nothing_without_mtp_layers_or_vllm(query):
    assert estimate({**query, "speculative": "mtp"}).total_bytes == estimate(query).total_bytes


QWEN3_NEXT = {"model": "qwen3-next-80b-a3b", "mode": "infer", "engine": "vllm", "tp": "4", "seq": "32768"}


def test_qwen3_next_loads_one_mtp_layer_with_the_targets_head():
    # vLLM 0.11 qwen3_next_mtp.py: num_mtp_layers = getattr(config, "num_nextn_predict_layers", 1) (its config.json
    # names none); fc (2h -> h), three RMSNorms and a full-attention decoder layer with the model's experts; its
    # top-level lm_head and its embedding are pointed at the target's by v1/spec_decode/eagle.py (method mtp, one
    # pipeline stage), so no vocabulary-sized tensor stays
    arch = catalog.architecture("qwen3-next-80b-a3b")
    assert arch.mtp_layers == 1 and arch.layer_pattern[3] == "A"
    result = estimate({**QWEN3_NEXT, "speculative": "mtp"})
    h = arch.hidden
    assert result.components["mtp_weights"] == (layer_params(arch, 3, 4, 1) + -(-(2 * h * h) // 4) + 3 * h) * 2
    # the model and the drafter load under one DeviceMemoryProfiler (gpu_model_runner.py load_model)
    values = parse({**QWEN3_NEXT, "speculative": "mtp"})
    loaded = (result.components["weights"] + result.components["mtp_weights"]) / 2**30
    assert answer(values, estimate_values(values))["vllm_log"][0] == f"Model loading took {loaded:.4f} GiB"


def test_qwen3_next_mtp_attention_joins_the_hybrid_cache_groups():
    # 12 full-attention layers + the drafter's against 36 DeltaNet layers: vLLM 0.11's
    # _get_kv_cache_groups_uniform_page_size takes the fewest kind's count (13) as the group size, so the DeltaNet
    # layers form 3 groups (39 slots, 3 of them padding) where without MTP 12 made 3 groups exactly
    plain, mtp = estimate(QWEN3_NEXT), estimate({**QWEN3_NEXT, "speculative": "mtp"})
    for result, group in ((plain, 12), (mtp, 13)):
        # a page: block_tokens x one KV head of 256 (2 heads split 4 ways keep 1) x keys and values x bf16
        page = result.vllm["block_tokens"] * 1 * 256 * 2 * 2
        assert result.vllm["kv_cache_blocks"] == result.vllm["kv_bytes_available"] // page // group
        assert result.vllm["state_groups"] == 3 and result.vllm["attention_groups"] == 1
