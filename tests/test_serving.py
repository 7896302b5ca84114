"""Serving as people run it (issue 9): the checkpoint's dtype, many GPUs, vLLM's start-up arithmetic,
context limits. Expected values are worked out by hand in each test from the model's config.json."""

import json

import pytest

from pycore import FieldError, estimate
from pycore.answers.answer import answer
from pycore.inputs.schema import parse
from pycore.output import web

GIB = 2**30


def test_serving_loads_the_checkpoint_dtype_not_the_training_policy():
    # Llama 3.1 8B's config.json says torch_dtype bfloat16: 8,030,261,248 parameters × 2 bytes.
    result = estimate({"model": "llama-3.1-8b", "mode": "infer"})
    assert result.components["weights"] == 8_030_261_248 * 2
    assert result.setup.precision == "bf16"
    # GPT-2's checkpoint is float32: transformers loads it as such, vLLM runs it in bf16.
    assert estimate({"model": "gpt2", "mode": "infer", "seq": "512"}).setup.weight_dtype == "fp32"
    assert estimate({"model": "gpt2", "mode": "infer", "seq": "512", "engine": "vllm"}).setup.weight_dtype == "bf16"
    # Training with the Trainer's defaults keeps the checkpoint's dtype too (pycore/inputs/frameworks.py); with
    # bf16=True (precision=amp-bf16) the weights are fp32 under autocast.
    assert estimate({"model": "llama-3.1-8b"}).components["weights"] == 8_030_261_248 * 2
    assert estimate({"model": "llama-3.1-8b", "precision": "amp-bf16"}).components["weights"] == 8_030_261_248 * 4


def test_tensor_parallel_weights_and_kv_per_gpu_llama_405b():
    # Llama 3.1 405B: 126 layers, hidden 16384, 128 heads, 8 kv heads of 128, ffn 53248, vocab 128256.
    # Per layer on one of 8 GPUs: attention (2·16384·16384 + 2·16384·1024)/8 = 71,303,168; MLP
    # 3·16384·53248/8 = 327,155,712; two norms replicated 32,768. Embedding and head 128256·16384/8 each,
    # plus the final norm 16,384.
    layer = 71_303_168 + 327_155_712 + 32_768
    per_gpu = 126 * layer + 2 * 128256 * 16384 // 8 + 16384
    result = estimate({"model": "llama-3.1-405b", "mode": "infer", "tp": "8"})
    assert result.components["weights"] == per_gpu * 2
    # 8 kv heads over 8 GPUs: one head per GPU, keys and values, 128 dims, 126 layers, 2 bytes.
    assert result.kv_bytes_per_token == 1 * 2 * 128 * 126 * 2


def test_kv_heads_are_replicated_when_fewer_than_tp():
    # vLLM get_num_kv_heads: max(1, kv_heads // tp). Llama 3.1 8B has 8 kv heads: tp 16 keeps one per GPU.
    eight = estimate({"model": "llama-3.1-8b", "mode": "infer", "tp": "8"}).kv_bytes_per_token
    sixteen = estimate({"model": "llama-3.1-8b", "mode": "infer", "tp": "16"}).kv_bytes_per_token
    assert eight == sixteen == 1 * 2 * 128 * 32 * 2


def test_pipeline_stages_hold_their_own_layers_and_cache():
    # pp=2 on Llama 3.1 8B: 16 layers a stage, so half the per-token cache: 8 kv · 128 · 2 · 16 layers · 2 B.
    result = estimate({"model": "llama-3.1-8b", "mode": "infer", "pp": "2"})
    assert result.kv_bytes_per_token == 8 * 128 * 2 * 16 * 2
    assert [s["layers"] for s in result.stages] == [16, 16]


def test_expert_parallel_splits_the_experts():
    # Mixtral 8x7B: 32 layers of 8 experts, each 3 · 4096 · 14336 = 176,160,768 parameters. ep=8 keeps one
    # expert a layer: 7 · 176,160,768 · 32 fewer parameters on each GPU.
    one = estimate({"model": "mixtral-8x7b-v0.1", "mode": "infer"}).components["weights"]
    eight = estimate({"model": "mixtral-8x7b-v0.1", "mode": "infer", "ep": "8"}).components["weights"]
    assert one - eight == 7 * 176_160_768 * 32 * 2


def test_the_issues_examples_are_sized():
    # Both were refused with "serving is sized for one GPU"; now each is one GPU's share.
    whole = estimate({"model": "llama-3.1-405b", "mode": "infer", "precision": "bf16"}).components["weights"]
    split = estimate({"model": "llama-3.1-405b", "mode": "infer", "precision": "bf16", "tp": "8"})
    assert whole / 8 <= split.components["weights"] < whole / 8 * 1.01
    deepseek = estimate({"model": "deepseek-v3", "mode": "infer", "quant": "fp8", "ep": "8"})
    assert deepseek.components["weights"] < estimate({"model": "deepseek-v3", "mode": "infer",
                                                         "quant": "fp8"}).components["weights"] / 4


@pytest.mark.parametrize("inputs,key", [
    ({"tp": "3"}, "tp"), ({"pp": "33"}, "pp"), ({"ep": "2"}, "ep"),
    ({"model": "mixtral-8x7b-v0.1", "ep": "3"}, "ep"),
])
def test_bad_serving_layouts_name_the_field(inputs, key):
    with pytest.raises(FieldError) as error:
        estimate({"model": "llama-3.1-8b", "mode": "infer", **inputs})
    assert error.value.key == key


def test_vllm_capacity_against_a_published_start_up_log():
    # github.com/ilseokoh/vllm-gce README (vLLM 0.15.1, Llama-3.1-8B-Instruct, one A100-40GB,
    # gpu_memory_utilization 0.9, max_model_len 131072, max_num_batched_tokens 8192):
    #   Model loading took 14.99 GiB; Available KV cache memory: 19.28 GiB;
    #   GPU KV cache size: 157,936 tokens; Maximum concurrency for 131,072 tokens per request: 1.20x
    values = parse({"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "gpu": "a100-40gb",
                    "seq": "131071", "new_tokens": "1", "max_batched_tokens": "8192"})
    from pycore.memory.estimate import estimate_values
    result = estimate_values(values)
    answers = answer(values, result)
    assert abs(result.components["weights"] / GIB - 14.99) / 14.99 < 0.01
    assert abs(result.components["kv_cache"] / GIB - 19.28) / 19.28 < 0.05
    assert abs(answers["kv_cache_tokens"] - 157_936) / 157_936 < 0.05
    assert abs(answers["max_concurrency"] - 1.20) / 1.20 < 0.05
    # the arithmetic vLLM prints: whole blocks of 16 tokens of 128 KiB each
    assert answers["kv_cache_tokens"] % 16 == 0
    assert result.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2


def test_context_answers_stop_at_the_models_positions():
    # GPT-2 has 1,024 learned positions (n_positions): no sequence answer goes past it.
    values = parse({"model": "gpt2", "mode": "infer", "seq": "128", "new_tokens": "1"})
    from pycore.memory.estimate import estimate_values
    answers = answer(values, estimate_values(values))
    assert answers["max_context"] <= 1024
    # A sequence beyond Llama 3.1's 131,072 positions is estimated with a visible warning.
    payload = json.loads(web.run("model=llama-3.1-8b&seq=200000"))
    assert any("131,072 positions" in w for w in payload["warnings"])


def test_serving_answers_on_the_page():
    payload = json.loads(web.answers("model=llama-3.1-70b&mode=infer&gpu=h100-sxm-80gb"))["answers"]
    # 70B in bf16 is 141 GB of weights: two H100s at least; tp=2 is the smallest degree that fits.
    assert payload["min_tp"] == 2 and payload["gpus_needed"] == 2


def test_vllms_default_max_num_seqs_is_no_more_than_its_batched_tokens():
    # vllm/engine/arg_utils.py L1676-1682 (v0.11): max_num_seqs left unset is min(the GPU's default, 1,024 on an
    # H100, max_num_batched_tokens), so a step of 512 tokens starts with 512 sequences; given 1,024 it is refused
    # (config/scheduler.py _verify_args). A newcomer saw the default start while the sampler's warm-up took 1,024
    from pycore.inputs import frameworks, schema
    from pycore.memory import setup as setups
    from pycore.memory.serving import max_num_seqs
    from pycore.model.catalog import gpus
    query = {"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "max_batched_tokens": "512"}
    work = setups.resolve(frameworks.apply(schema.parse(query))).workload
    assert max_num_seqs(work, gpus()["h100-sxm-80gb"]) == 512
    assert estimate(query).vllm["starts"]
    assert not estimate({**query, "max_num_seqs": "1024"}).vllm["starts"]


@pytest.mark.parametrize("query,last", [
    # nothing left after the weights, non-torch memory and the profiling run (L4: 0.9 x 22.49 GiB < 17.53 + 0.25 +
    # 2.80): kv_cache_utils.py check_enough_kv_cache_memory raises before the cache is laid out (v0.11)
    ({"model": "qwen3.5-9b", "seq": "8192", "gpu": "l4"}, "ValueError: No available memory for the cache blocks."),
    # one request of max_model_len not held: the same check, its other message
    ({"model": "llama-3.1-8b", "seq": "131072", "gpu": "l4", "max_positions": "200000"},
     "ValueError: To serve at least one request"),
    # memory left, but less than one block (a review's finding: 'GPU KV cache size: 0 tokens' was logged)
    ({"model": "llama-3.1-8b", "seq": "4096", "gpu": "l4", "gpu_util": "0.729932"},
     "ValueError: To serve at least one request"),
    # refused as the engine's config is made (config/scheduler.py), before any weight loads
    ({"model": "llama-3.1-8b", "max_batched_tokens": "512", "max_num_seqs": "1024"},
     "ValueError: max_num_batched_tokens (512) must be greater than or equal to max_num_seqs (1024)."),
])
def test_a_refused_vllm_logs_up_to_its_error_and_not_the_cache_it_never_lays_out(query, last):
    # a newcomer saw "GPU KV cache size: 0 tokens" and "Maximum concurrency ... 0.00x", which vLLM never prints
    from pycore.memory.estimate import estimate_values
    values = parse({"mode": "infer", "engine": "vllm", **query})
    log = answer(values, estimate_values(values))["vllm_log"]
    assert log[-1].startswith(last)
    assert not any(line.startswith(("GPU KV cache size", "Maximum concurrency")) for line in log)
    result = estimate({"mode": "infer", "engine": "vllm", **query})
    left = result.vllm.get("kv_bytes_left")
    if last.startswith("ValueError: No available"):
        assert left < 0 and f"Available KV cache memory: {left / GIB:.2f} GiB" in log


def test_bf16_on_a_gpu_without_it_is_refused_by_vllm_and_auto_falls_back_to_float16():
    # vLLM 0.11 platforms/cuda.py check_if_supports_dtype: bf16 needs compute capability 8.0 (the V100 is 7.0,
    # presets/gpus.json sm_70); --dtype auto serves a bf16 checkpoint in float16 there (config/model.py
    # _resolve_auto_dtype), the same bytes. A newcomer found --dtype bfloat16 called fitting on a V100
    query = {"model": "llama-3.1-8b", "mode": "infer", "engine": "vllm", "gpu": "v100-32gb"}
    asked = estimate({**query, "precision": "bf16"})
    assert not asked.vllm["starts"] and "bf16 needs compute capability 8.0" in asked.refused
    auto = estimate(query)
    assert auto.vllm["starts"] and auto.total_bytes == asked.total_bytes
    assert any("--dtype auto serves this model in float16 on the NVIDIA V100" in w for w in auto.warnings)
    # a refused start offers the change that makes it start (answer.py _vllm_changes)
    fixes = answer(parse({**query, "precision": "bf16"}), asked)["how_to_fit"]
    assert any(fix["query"] == {"precision": "fp16"} and fix["fits"] for fix in fixes)
    assert "--dtype auto" in web.launch("model=llama-3.1-8b&mode=infer&engine=vllm&gpu=v100-32gb")
    assert estimate({**query, "gpu": "a100-sxm-80gb", "precision": "bf16"}).vllm["starts"]
