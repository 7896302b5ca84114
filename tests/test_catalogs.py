"""The model and GPU catalogs: complete, exact, cited."""

import json
import re
from pathlib import Path

import pytest

from pycore import estimate
from pycore.model import catalog
from pycore.model.architecture import count_parameters

ROOT = Path(__file__).resolve().parent.parent
COUNTS = json.loads((ROOT / "validation" / "param_counts.json").read_text())["counts"]
VISION = json.loads((ROOT / "validation" / "vision_measured.json").read_text())["models"]

FAMILIES = ["llama-2-7b", "llama-3-8b", "llama-3.1-405b", "llama-3.2-1b", "llama-3.3-70b-instruct", "mistral-7b-v0.1",
            "mixtral-8x7b-v0.1", "mixtral-8x22b-v0.1", "qwen2.5-0.5b", "qwen2.5-72b", "qwen3-8b", "qwen3-30b-a3b",
            "gemma-2-9b", "gemma-3-27b-pt", "phi-3-mini-4k-instruct", "phi-4", "deepseek-v3", "olmo-2-1124-7b", "gpt2",
            "gpt2-medium", "gpt2-large", "gpt2-xl", "bert-base-uncased", "bert-large-uncased", "t5-small", "t5-base", "resnet-50",
            "vit-base-patch16-224"]
GPUS = ["v100-16gb", "v100-32gb", "a10g", "a100-40gb", "a100-sxm-80gb", "l4", "l40s", "h100-pcie-80gb", "h100-sxm-80gb",
        "h100-nvl-94gb", "h200-141gb", "b200-180gb", "b300-288gb", "gb200-186gb", "rtx-3090", "rtx-4090", "rtx-5090",
        "rtx-6000-ada", "rtx-pro-6000", "mi250x-gcd", "mi300x", "mi325x", "mi355x", "gaudi3", "tpu-v5e", "tpu-v5p",
        "tpu-v6e"]


def test_at_least_45_models_covering_the_families():
    assert len(catalog.models()) >= 45
    assert set(FAMILIES) <= set(catalog.models())


@pytest.mark.parametrize("model_id", sorted(COUNTS))
def test_count_equals_transformers_on_meta_device(model_id):
    # validation/param_counts.json: transformers' own sum(p.numel()) for the same config.
    assert count_parameters(catalog.architecture(model_id)).total == COUNTS[model_id]
    assert catalog.models()[model_id]["params"] == COUNTS[model_id]


@pytest.mark.parametrize("model_id", sorted(VISION))
def test_vision_presets_carry_measured_figures(model_id):
    entry = catalog.models()[model_id]
    assert entry["params"] == VISION[model_id]["params"]
    assert entry["act_per_sample_fp32"] == VISION[model_id]["act_per_sample_fp32"]


def test_every_transformer_preset_was_counted():
    generic = {m for m, e in catalog.models().items() if e.get("kind") == "generic"}
    assert set(catalog.models()) - generic == set(COUNTS)


@pytest.mark.parametrize("model_id", sorted(catalog.models()))
def test_every_model_has_a_source_and_estimates(model_id):
    entry = catalog.models()[model_id]
    assert "huggingface.co/" in entry["source"]
    # Training by default: at least weights and gradients of 2 bytes (bf16) a recorded parameter.
    # at a sequence a learned position table can embed (GPT-2 1,024, BERT 512)
    limit = catalog.architecture(model_id).max_positions
    result = estimate({"model": model_id, "seq": str(min(2048, limit or 2048))}).as_dict()
    assert result["components"]["weights"] >= 2 * entry["params"] and result["peak_bytes"] >= 4 * entry["params"]


def test_moe_active_parameters():
    # Qwen3-30B-A3B model card: 30.5B total, 3.3B activated; DeepSeek-V3 report: 671B total, 37B activated.
    # Both round down to the figure they print.
    for model_id, total, active in (("qwen3-30b-a3b", 30.5, 3.3), ("deepseek-v3", 671, 37)):
        counts = count_parameters(catalog.architecture(model_id))
        assert total <= counts.total / 1e9 < total + (0.1 if total < 100 else 1)
        assert active <= counts.active / 1e9 < active + (0.1 if active < 10 else 1)


def test_aliases_resolve():
    assert catalog.architecture("qwen2.5-72b-instruct").name == "qwen2.5-72b"
    assert catalog.architecture("Llama-3.1-8B-Instruct").name == "llama-3.1-8b"


def test_gpu_catalog_is_complete_and_cited():
    gpus = catalog.gpus()
    assert len(gpus) >= 25 and set(GPUS) <= set(gpus)
    for gpu in gpus.values():
        assert isinstance(gpu["usable_bytes"], int) and gpu["usable_bytes"] > 2**30
        for key in ("memory_marketed", "usable_source", "datasheet", "price_source"):
            assert gpu[key]
        assert gpu["bandwidth_GBps"] > 0
        assert gpu["price_usd_per_gpu_hour"] is None or gpu["price_usd_per_gpu_hour"] > 0
        # the arch sets PyTorch's BLAS workspace (pycore/memory/device.py): every CUDA and ROCm GPU names its own
        if gpu["runtime"] == "CUDA":
            assert re.fullmatch(r"sm_\d{2,3}", gpu["arch"]), gpu["id"]
        elif gpu["runtime"] == "ROCm":
            assert re.fullmatch(r"gfx[0-9a-f]{3,4}", gpu["arch"]), gpu["id"]


def test_h100_usable_is_the_nvidia_smi_total_not_the_box():
    # nvidia-smi reports 81,559 MiB for an H100 80GB: 79.65 GiB, not 80 GB (74.5 GiB) nor 80 GiB.
    assert catalog.gpus()["h100-sxm-80gb"]["usable_bytes"] == 81559 * 2**20
