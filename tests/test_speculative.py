"""vLLM speculative decoding with the checkpoint's multi-token-prediction layers (speculative=mtp).

vLLM 0.11 loads DeepSeek-V3's and GLM-4.5's MTP layers through v1/spec_decode/eagle.py: per layer
(model_executor/models/deepseek_mtp.py DeepSeekMultiTokenPredictorLayer) enorm and hnorm (h each), eh_proj
(2h -> h, no bias), a decoder layer as the model's last (mtp_block), and shared_head's norm (h) and its own
ParallelLMHead (vocabulary x h, split t ways); the embedding is deleted and shared with the target. The MTP
layer's attention gets its own KV cache beside the model's layers.
"""

import pytest

from pycore import estimate
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
