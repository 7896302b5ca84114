"""The engine against published numbers and against its own invariants."""

import pytest

from pycore import estimate
from pycore.inputs.schema import InputError
from pycore.memory.activations import korthikanti
from pycore.model.architecture import Architecture


def static_bytes(result):
    c = result["components"]
    return c["weights"] + c.get("master_weights", 0) + c["gradients"] + c["optimizer"]


def test_zero_paper_baseline_16_bytes_per_parameter():
    # Rajbhandari et al. 2020 (ZeRO), section 3.1: mixed-precision Adam keeps (2 + 2 + 12)Ψ bytes, so a
    # 7.5B-parameter model needs 120 GB before activations.
    result = estimate({"params": "7.5B", "precision": "bf16-master", "activations": "per-sample"}).as_dict()
    assert static_bytes(result) == 120 * 10**9


@pytest.mark.parametrize("precision,optimizer,bytes_per_param", [
    # EleutherAI, "Transformer Math 101" (2023): fp32 weights 4 B, AdamW 12 B with mixed precision
    # (fp32 copy 4 + momentum 4 + variance 4) or 8 B in pure fp32, gradients as the weights.
    ("fp32", "adamw", 4 + 4 + 8),
    ("bf16-master", "adamw", 2 + 2 + 4 + 8),
    ("bf16-master", "sgd-momentum", 2 + 2 + 4 + 4),
    ("bf16", "adamw", 2 + 2 + 4),
    ("fp32", "sgd", 4 + 4),
])
def test_bytes_per_parameter(precision, optimizer, bytes_per_param):
    result = estimate({"params": "1B", "precision": precision, "optimizer": optimizer, "activations": "per-sample"}).as_dict()
    assert static_bytes(result) == bytes_per_param * 10**9


def test_korthikanti_equation_1():
    # Korthikanti et al. 2022, eq. (1): sbh(34 + 5as/h) bytes per layer at 16 bit. GPT-3 175B shape
    # (h=12288, a=96) at s=2048, b=1: 2048·12288·(34 + 80) = 2,868,903,936 bytes per layer.
    arch = Architecture("gpt3", layers=1, hidden=12288, heads=96, kv_heads=96, ffn=4 * 12288, vocab=51200)
    assert korthikanti(arch, 1, 2048, "none", 2) == 2_868_903_936
    assert korthikanti(arch, 1, 2048, "selective", 2) == 34 * 2048 * 12288          # eq. (2)
    assert korthikanti(arch, 1, 2048, "full", 2) == 2 * 2048 * 12288                # layer inputs only


def test_kv_cache_bytes_per_token_llama_3_8b():
    # vLLM reports Llama 3 8B's KV cache at 131,072 bytes per token in bf16 (32 layers, 8 KV heads, 128 dims).
    result = estimate({"model": "llama-3.1-8b", "mode": "infer", "precision": "bf16"}).as_dict()
    assert result["kv_bytes_per_token"] == 131_072


def test_multiplier_and_per_sample_models():
    result = estimate({"model": "gpt2", "activations": "multiplier", "act_multiplier": "10", "precision": "bf16",
                       "batch": "2", "seq": "1024"}).as_dict()
    # batch · seq · hidden · layers · multiplier · activation bytes (2 for bf16), not halved
    assert result["components"]["activations"] == 2 * 1024 * 768 * 12 * 10 * 2
    result = estimate({"params": "100M", "activations": "per-sample", "act_per_sample": "1GiB", "batch": "3"}).as_dict()
    assert result["components"]["activations"] == 3 * 2**30


def test_peak_is_the_largest_phase_and_total_adds_overhead():
    result = estimate({"model": "llama-3.2-1b", "batch": "4", "overhead": "10%"}).as_dict()
    assert result["peak_bytes"] == max(result["phases"].values())
    assert result["overhead_bytes"] == round(result["peak_bytes"] / 10)
    assert result["total_bytes"] == result["peak_bytes"] + result["overhead_bytes"]


def test_memory_savers_save_memory():
    base = {"model": "llama-3.2-1b", "batch": "8", "seq": "4096", "precision": "bf16"}
    plain = estimate(base).components["activations"]
    assert estimate({**base, "recompute": "full"}).components["activations"] < plain / 5
    assert estimate({**base, "attention": "eager"}).components["activations"] > plain


def test_activations_grow_linearly_with_batch():
    one = estimate({"model": "gpt2", "batch": "1", "seq": "1024"}).components["activations"]
    four = estimate({"model": "gpt2", "batch": "4", "seq": "1024"}).components["activations"]
    assert four == pytest.approx(4 * one, rel=1e-9)


def test_fit_uses_usable_bytes():
    from pycore.answers.fit import gpu_fits
    # nvidia-smi reports 81,559 MiB for an H100 80GB (tests/test_catalogs.py): an estimate of exactly that
    # fits with no headroom, one byte more does not; the 80 GB on the box (74.5 GiB) is not the limit.
    usable = 81559 * 2**20
    for total, fits in ((80 * 10**9, True), (usable, True), (usable + 1, False)):
        (h100,) = [gpu for gpu in gpu_fits(total, "h100-sxm-80gb") if gpu["id"] == "h100-sxm-80gb"]
        assert h100["chosen"] and h100["memory_bytes"] == usable
        assert h100["fits"] is fits and h100["headroom_bytes"] == usable - total


@pytest.mark.parametrize("inputs,key", [
    ({"kv_heads": "5"}, "kv_heads"),
    ({"model": "no-such-model"}, "model"),
    ({"gpu": "h100-pcie-81gb"}, "gpu"),
    ({"params": "1B", "activations": "korthikanti"}, "layers"),
    ({"experts_per_token": "2"}, "experts_per_token"),
    ({"config": "/nonexistent/config.json"}, "config"),
])
def test_impossible_inputs_name_the_key(inputs, key):
    with pytest.raises(InputError) as error:
        estimate(inputs)
    assert error.value.key == key


def test_serving_kv_cache_grows_with_context():
    short = estimate({"model": "llama-3.1-8b", "mode": "infer", "seq": "1024", "new_tokens": "1"}).as_dict()
    long = estimate({"model": "llama-3.1-8b", "mode": "infer", "seq": "4096", "new_tokens": "1"}).as_dict()
    assert long["components"]["kv_cache"] == 4 * short["components"]["kv_cache"]


def test_bert_base_worked_example_of_the_multiplier_calculators():
    # The worked example quoted in issue 13 (BERT-base as a bare 110M fp32 network, AdamW, batch 32,
    # seq 128, 12 layers × 768 × multiplier 4, fp16 activations): weights 110M × 4 B, gradients the same,
    # AdamW two fp32 states, activations 32·128·768·12·4·2 B = 288.0 MiB. The 419.5 MiB rows are
    # 110M × 4 B = 419.6 MiB here (2^20 bytes a MiB) and its 289 is 288.0: both differ in rounding only.
    mib = 2**20
    result = estimate({"params": "110M", "layers": "12", "hidden": "768", "precision": "fp32", "act_dtype": "fp16",
                       "act_multiplier": "4", "batch": "32", "seq": "128", "overhead": "0"}).as_dict()
    c = result["components"]
    assert round(c["weights"] / mib, 1) == 419.6 and round(c["gradients"] / mib, 1) == 419.6
    assert round(c["optimizer"] / mib, 1) == 839.2
    assert c["activations"] == 32 * 128 * 768 * 12 * 4 * 2 == 288 * mib
    # and PyTorch's two cuBLAS workspaces of 32 MiB on the default H100 (pycore/memory/device.py), no calculator's
    assert result["total_bytes"] == 110_000_000 * 16 + 288 * mib + 2 * 32 * mib


def test_a_bare_parameter_count_answers_with_model_states():
    result = estimate({"params": "7B"}).as_dict()
    # The Trainer trains in the checkpoint's dtype, bf16 where unknown: weights, gradients and two AdamW
    # states of 2 bytes each (pycore/inputs/frameworks.py), the forward's and the backward's cuBLAS workspaces (32 MiB
    # each on the default H100) and the CUDA context allowance (pycore/memory/device.py); nothing is allocated and
    # freed within the step, so the allocator's cache adds nothing.
    assert result["peak_bytes"] == 7 * 10**9 * 8 + 2 * 32 * 2**20   # 56 GB: 4 tensors of 2 B a parameter
    assert result["reserved_bytes"] == result["peak_bytes"]        # no allocator cache
    rows = {row["key"]: row["bytes"] for row in result["breakdown"]}
    assert rows["weights"] == rows["gradients"] == 7 * 10**9 * 2 and rows["optimizer"] == 7 * 10**9 * 4
    # Above the peak only the CUDA context (what nvidia-smi adds, outside PyTorch's allocator) remains.
    assert result["total_bytes"] - result["peak_bytes"] == rows["cuda_context"] > 0
    assert any("activations are not counted" in note for note in result["warnings"])


def test_grouped_query_keys_and_values_are_saved_per_kv_head_under_flash():
    # transformers 5.23 integrations/sdpa_attention.py use_gqa_in_sdpa: no mask and head size <= 256 pass
    # K/V to SDPA unexpanded. Llama 3.1 8B (32 heads, 8 kv heads of 128, bf16): K and V save
    # 2 · 2 B · 8 · 128 instead of 2 · 2 B · 32 · 128 per token and layer, 12,288 bytes less; over 32 layers
    # and 2,048 tokens that is 805,306,368 bytes.
    base = {"model": "llama-3.1-8b", "precision": "bf16", "seq": "2048"}
    native = estimate({**base, "attention": "flash"}).components["activations"]
    expanded = estimate({**base, "attention": "flash-repeat"}).components["activations"]
    assert expanded - native == 12_288 * 32 * 2048
