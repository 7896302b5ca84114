"""vLLM speculative decoding with a draft model (issue 29: 'a draft model with its own weights and KV cache, and its
share of gpu_util'), as vllm/v1/spec_decode/draft_model.py (vLLM main, 2026: DraftModelProposer, from PR 24322) loads
it: the draft's weights over the target's tensor-parallel GPUs, and its attention layers registered beside the
target's, so each KV cache block holds both models' keys and values. Shapes from the models' config.json files
(presets/models.json): Llama 3.1 70B 80 layers, 8 KV heads of 128; Llama 3.2 1B 16 layers, 8 KV heads of 64,
1,235,814,400 parameters, the same 128,256-token vocabulary."""

import json

import pytest

from pycore import estimate
from pycore.answers.answer import answer
from pycore.base.errors import FieldError
from pycore.inputs import applies, frameworks
from pycore.inputs.schema import parse
from pycore.memory.estimate import estimate_values
from pycore.output import export, web

TARGET = {"model": "llama-3.1-70b", "mode": "infer", "engine": "vllm", "tp": "4", "seq": "8192"}
DRAFT = {**TARGET, "speculative": "draft", "draft_model": "llama-3.2-1b"}


def test_each_token_caches_both_models_keys_and_values():
    plain, drafted = estimate(TARGET), estimate(DRAFT)
    # bf16, tp=4: 70B 80 layers × 2 × (8 / 4) heads × 128 × 2 bytes; 1B 16 layers × 2 × (8 / 4) heads × 64 × 2 bytes
    assert plain.kv_bytes_per_token == 80 * 2 * 2 * 128 * 2 == 81_920
    assert drafted.kv_bytes_per_token == 81_920 + 16 * 2 * 2 * 64 * 2
    assert drafted.vllm["kv_cache_tokens"] < plain.vllm["kv_cache_tokens"]


def test_the_draft_takes_its_weights_out_of_the_kv_cache():
    plain, drafted = estimate(TARGET), estimate(DRAFT)
    draft = drafted.components["draft_weights"]
    assert draft == -(-1_235_814_400 // 4) * 2                   # its parameters over tp=4, in bf16
    # gpu_util's budget is the same: the cache gives up the draft's bytes (to within one block of 16 tokens)
    block = 16 * drafted.kv_bytes_per_token
    assert 0 <= plain.components["kv_cache"] - draft - drafted.components["kv_cache"] < block
    assert abs(drafted.total_bytes - plain.total_bytes) < block


def test_vllms_log_counts_the_draft_in_the_model_loading_line():
    values = frameworks.apply(parse(DRAFT))
    result = estimate_values(values)
    loaded = (result.components["weights"] + result.components["draft_weights"]) / 2**30
    assert answer(values, result)["vllm_log"][0] == f"Model loading took {loaded:.4f} GiB"


@pytest.mark.parametrize("change,key,words", [
    ({"draft_model": "qwen2.5-0.5b"}, "draft_model", "vocabulary (151,936) is not the target's (128,256)"),
    ({"draft_model": ""}, "draft_model", "needs the draft model"),
    ({"draft_model": "no-such-model"}, "draft_model", "unknown preset"),
    ({"model": "gemma-3-27b-it", "draft_model": "gemma-3-4b"}, "speculative", "not modelled"),
    ({"pp": "2"}, "speculative", "pipeline stages"),
])
def test_what_is_not_a_draft_or_not_modelled_is_named(change, key, words):
    with pytest.raises(FieldError) as raised:
        estimate({**DRAFT, **change})
    assert raised.value.key == key and words in raised.value.message
    payload = json.loads(web.run("&".join(f"{k}={v}" for k, v in {**DRAFT, **change}.items())))
    assert any(words in text for text in payload["errors"].values())    # the page says it, and keeps the others
    assert payload["result"] is not None


def test_draft_model_applies_only_to_a_draft():
    assert applies.ignored({**DRAFT}, ["draft_model"]) == []
    assert applies.ignored({**DRAFT, "speculative": "mtp"}, ["draft_model"]) == ["draft_model"]


def test_the_vllm_serve_line_names_the_draft_and_reads_back():
    values = frameworks.apply(parse(DRAFT))
    line = export.vllm(values, estimate_values(values))
    assert '"method": "draft_model", "model": "meta-llama/Llama-3.2-1B"' in line
    back = dict(json.loads(web.launch_read(line))["set"])
    assert (back["speculative"], back["draft_model"]) == ("draft", "meta-llama/Llama-3.2-1B")
    assert estimate({**TARGET, **back, "model": "llama-3.1-70b"}).components["draft_weights"] == \
        estimate(DRAFT).components["draft_weights"]
