"""LoRA/QLoRA, quantized weights, KV caches, serving answers, and comparisons."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pycore import estimate, parse
from pycore.answers.answer import answer
from pycore.memory.estimate import estimate_values, kv_cache_bytes
from pycore.memory.finetune import adapter_params
from pycore.memory.quantization import bits_per_weight
from pycore.model import catalog
from pycore.output import web

ROOT = Path(__file__).resolve().parent.parent


def test_lora_trainable_parameters_match_peft():
    # PEFT's LoRA quicktour: Llama-2-7B with r=8 on q_proj and v_proj prints
    # "trainable params: 4,194,304".
    assert adapter_params(catalog.architecture("llama-2-7b"), 8, "qv") == 4_194_304


def test_lora_trains_only_the_adapters():
    result = estimate({"model": "llama-3.1-8b", "method": "lora", "precision": "bf16", "lora_rank": "16"})
    # Llama 3.1 8B config.json: 32 layers, hidden 4096, 8 kv heads of 128 (k/v width 1024). LoRA on q_proj
    # (4096 -> 4096) and v_proj (4096 -> 1024) adds r·(in + out) each: 16·(4096 + 4096) + 16·(4096 + 1024)
    # = 131,072 + 81,920 = 212,992 a layer, × 32 layers = 6,815,744 (the same rule gives PEFT's 4,194,304
    # for Llama-2-7B at r=8 above: 32 · 8 · (4096 + 4096) · 2).
    adapters = 32 * (16 * (4096 + 4096) + 16 * (4096 + 1024))
    assert adapters == 6_815_744
    c = result.components
    assert c["gradients"] == adapters * 4 and c["optimizer"] == adapters * 8        # fp32 adapters, AdamW
    assert c["weights"] == 8_030_261_248 * 2 + adapters * 4


@pytest.mark.parametrize("name,group,bits", [
    ("nf4", 128, 4.5),                         # Dettmers et al. 2023: one fp32 absmax per 64 weights
    ("nf4-dq", 128, 4 + 8 / 64 + 32 / (64 * 256)),   # ... double quantization: 0.127 bits of constants
    ("gptq-int4", 128, 4 + 20 / 128),          # fp16 scale and 4-bit zero per group of 128
    ("q8_0", 128, 8.5),                         # ggml block_q8_0: 34 bytes per 32 weights
    ("q4_0", 128, 4.5),                         # ggml block_q4_0: 18 bytes per 32 weights
])
def test_bits_per_weight(name, group, bits):
    assert bits_per_weight(name, group, 4096) == pytest.approx(bits)


def test_qlora_stores_the_base_in_nf4():
    lora = estimate({"model": "llama-3.1-8b", "method": "lora", "precision": "bf16"}).components["weights"]
    qlora = estimate({"model": "llama-3.1-8b", "method": "qlora", "precision": "bf16"}).components["weights"]
    # By hand from Llama 3.1 8B's config.json: the block linears are q 4096·4096 + k, v 4096·1024 each +
    # o 4096·4096 + gate, up, down 3·4096·14336 = 218,103,808 a layer, × 32 = 6,979,321,856, stored in NF4
    # with double-quantized constants (Dettmers et al. 2023, QLoRA section 3: 4 + 8/64 + 32/(64·256) =
    # 4.126953125 bits) = 3,600,416,768 B; the other 8,030,261,248 − 6,979,321,856 = 1,050,939,392
    # (embedding, head, norms) stay bf16, 2,101,878,784 B; plus the q/v adapters at the default rank 16 in
    # fp32, 32 · 16 · ((4096 + 4096) + (4096 + 1024)) = 6,815,744 parameters · 4 B = 27,262,976 B.
    linears = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    assert linears == 6_979_321_856
    bits = 4 + 8 / 64 + 32 / (64 * 256)
    adapters = 32 * 16 * ((4096 + 4096) + (4096 + 1024))
    assert qlora == round(linears * bits / 8) + (8_030_261_248 - linears) * 2 + adapters * 4 == 5_729_558_528
    assert lora == 8_030_261_248 * 2 + adapters * 4
    assert 0.3 < qlora / lora < 0.4


def test_quantized_full_training_is_refused():
    from pycore import InputError
    with pytest.raises(InputError, match="adapters"):
        estimate({"quant": "int8"})


def test_mla_caches_the_latent():
    # DeepSeek-V2 paper, section 2.1.2: MLA caches (d_c + d_h^R) = 512 + 64 values per token and layer.
    # vLLM stores that latent (vllm/v1/kv_cache_interface.py MLAAttentionSpec); transformers' DynamicCache
    # keeps the decompressed keys (128 heads × (128 nope + 64 rope)) and values (128 heads × 128).
    arch = catalog.architecture("deepseek-v3")
    assert kv_cache_bytes(arch, 1, 2, engine="vllm") == (512 + 64) * 61 * 2
    assert kv_cache_bytes(arch, 1, 2, engine="hf") == 128 * (128 + 64 + 128) * 61 * 2


def test_sliding_window_layers_keep_the_window():
    mistral = catalog.architecture("mistral-7b-v0.1")             # window 4096 on every layer
    assert kv_cache_bytes(mistral, 32768, 2) == kv_cache_bytes(mistral, 4096, 2)
    gemma = catalog.architecture("gemma-2-9b")                    # every other layer global
    long, short = kv_cache_bytes(gemma, 8192, 2), kv_cache_bytes(gemma, 4096, 2)
    assert long == pytest.approx(1.5 * short)


def test_fp8_cache_halves_bf16():
    bf16 = estimate({"model": "llama-3.1-8b", "mode": "infer", "precision": "bf16"}).components["kv_cache"]
    fp8 = estimate({"model": "llama-3.1-8b", "mode": "infer", "precision": "bf16", "kv_dtype": "fp8"})
    assert fp8.components["kv_cache"] * 2 == bf16


def test_serving_answers_are_boundaries():
    values = parse({"model": "llama-3.1-8b", "mode": "infer", "precision": "bf16", "seq": "4096",
                    "new_tokens": "512", "gpu": "l40s"})
    got = answer(values, estimate_values(values))
    usable = catalog.gpus()["l40s"]["usable_bytes"]
    fits = lambda **c: estimate_values({**values, **c}).total_bytes <= usable  # noqa: E731
    assert fits(batch=got["max_concurrency"]) and not fits(batch=got["max_concurrency"] + 1)
    assert got["max_context"] == got["max_seq"] + 512
    assert fits(seq=got["max_seq"]) and not fits(seq=got["max_seq"] + 1)


def test_negative_saving_is_said_plainly():
    # Short sequences: model states dominate, and bf16 weights + fp32 master + fp32 gradient copies at the
    # step (2 + 4 + 2 + 8 + 4 = 20 bytes a parameter) outweigh fp32's 16.
    payload = json.loads(web.answers("model=llama-3.1-8b&precision=bf16-master&seq=128&compare=baseline"))
    comparison = payload["answers"]["comparison"]
    assert comparison["saving"] < 0 and "more memory" in comparison["message"]


def test_baseline_inputs_come_from_base_keys():
    payload = json.loads(web.answers("model=gpt2&seq=1024&batch=8&base.batch=2&base.precision=bf16"))
    comparison = payload["answers"]["comparison"]
    assert dict(comparison["baseline_query"])["batch"] == "2"
    expected = estimate({"model": "gpt2", "seq": "1024", "batch": "2", "precision": "bf16", "attention": "eager"})
    assert comparison["baseline_total_bytes"] == expected.total_bytes


def test_training_and_serving_side_by_side():
    payload = json.loads(web.answers("model=llama-3.1-8b&compare=serving"))
    served = estimate({"model": "llama-3.1-8b", "mode": "infer"})
    assert payload["answers"]["comparison"]["baseline_total_bytes"] == served.total_bytes


def test_cli_compare_matches_the_page():
    args = ["model=qwen2.5-7b", "precision=bf16", "recompute=full"]
    done = subprocess.run([sys.executable, "-m", "pycore", "--json", *args, "--compare", "batch=4"], cwd=ROOT,
                          capture_output=True, text=True, check=True)
    cli = json.loads(done.stdout)["answers"]["comparison"]
    page = json.loads(web.answers("&".join(args) + "&base.batch=4"))["answers"]["comparison"]
    assert cli == page


def test_serving_how_to_fit_offers_serving_changes_that_help():
    values = parse({"model": "qwen2.5-72b", "mode": "infer", "precision": "bf16", "seq": "32768", "batch": "4"})
    result = estimate_values(values)
    rows = answer(values, result)["how_to_fit"]
    assert {"kv_dtype=fp8", "quant=awq-int4"} <= {r["change"] for r in rows}
    assert all(r["total_bytes"] < result.total_bytes for r in rows)
