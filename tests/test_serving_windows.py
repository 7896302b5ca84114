"""vLLM 0.11 with sliding-window and chunked-attention layers: their own KV cache groups, each request holding at
most its window there (v1/kv_cache_interface.py SlidingWindowSpec.max_memory_usage_bytes:
cdiv(min(sliding_window - 1 + max_num_batched_tokens, max_model_len), block) + 1 blocks; ChunkedLocalAttentionSpec:
cdiv(min(attention_chunk_size + max_num_batched_tokens, max_model_len), block)), beside the full-attention layers'
groups; v1/core/kv_cache_utils.py groups the layers of each kind in groups of the fewest kind's count, gives
available // page // group_size blocks shared by every group, and logs blocks // groups x block tokens."""

import pytest

from pycore import estimate

VLLM = {"mode": "infer", "engine": "vllm", "gpu": "h200-141gb"}


def test_gpt_oss_half_sliding_half_full():
    # gpt-oss-20b: 12 sliding layers of 128 tokens and 12 full ones: groups of 12, one of each kind
    result = estimate({**VLLM, "model": "gpt-oss-20b", "seq": "2048", "new_tokens": "256"})
    capacity = result.vllm
    full = -(-2304 // 16)
    window = -(-min(128 - 1 + 8192, 2304) // 16) + 1          # the prefill budget keeps the whole context here
    assert capacity["blocks_needed"] == full + window
    assert capacity["max_concurrency"] == pytest.approx(capacity["kv_cache_blocks"] / (full + window))
    assert capacity["kv_cache_tokens"] == capacity["kv_cache_blocks"] // 2 * 16


def test_a_long_context_is_capped_by_the_window_plus_the_prefill_budget():
    # at 131,072 tokens the sliding group holds 128 - 1 + 8,192 tokens a request, the full group all of them
    result = estimate({**VLLM, "model": "gpt-oss-20b", "seq": "131072", "new_tokens": "0"})
    assert result.vllm["blocks_needed"] == 131072 // 16 + (-(-(127 + 8192) // 16) + 1)


def test_a_model_of_sliding_layers_alone_has_no_length_limit_from_memory():
    # Mistral 7B v0.1: every layer slides over 4,096 tokens: one group of all 32; a request never holds more
    result = estimate({**VLLM, "model": "mistral-7b-v0.1", "seq": "30000", "new_tokens": "0"})
    assert result.vllm["blocks_needed"] == -(-(4096 - 1 + 8192) // 16) + 1
    assert result.vllm["longest_max_model_len"] is None


def test_llama_4s_chunked_layers_are_held_whole_as_vllm_turns_its_hybrid_manager_off():
    # vLLM 0.11 disables the hybrid KV cache manager for chunked local attention by default (config/__init__.py,
    # VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE) and unify_hybrid_kv_cache_specs makes every layer full
    # attention: Llama-4-Scout's 48 layers each hold a request's every token, no chunk-sized groups
    scout = {**VLLM, "model": "llama-4-scout-17b-16e-instruct", "tp": "4", "seq": "65536", "new_tokens": "0"}
    result = estimate(scout)
    assert result.vllm["blocks_needed"] == 65536 // 16 and "attention_groups" not in result.vllm
    assert result.kv_bytes_per_token == 48 * 2 * 8 * 128 * 2 // 4        # every layer, 8 kv heads of 128 over tp=4


def test_the_longest_context_of_several_requests_counts_their_windows_at_that_length():
    # Gemma 3 27B under vLLM, 4 requests: each holds its full-attention blocks and, in every sliding group, the blocks
    # of min(window + the batch being prefilled, its length) (vllm/v1/kv_cache_interface.py SlidingWindowSpec
    # max_memory_usage_bytes): the longest context is the largest L whose 4 requests fit, whatever seq was asked
    from pycore.answers.answer import answer
    from pycore.inputs.schema import parse
    from pycore.memory.estimate import estimate_values
    from pycore.memory.serving import longest_context
    answers = []
    for seq in ("2048", "16000"):
        values = parse({"model": "gemma-3-27b-it", "mode": "infer", "engine": "vllm", "batch": "4", "seq": seq})
        capacity = estimate_values(values).vllm
        longest = longest_context(capacity, 4)
        block = capacity["block_tokens"]

        def blocks(length):
            windowed = -(-min(capacity["sliding_tokens"], length) // block) + capacity["sliding_extra_block"]
            return capacity["attention_groups"] * -(-length // block) + capacity["sliding_groups"] * windowed + \
                capacity["state_only_groups"]
        assert 4 * blocks(longest) <= capacity["kv_cache_blocks"] < 4 * blocks(longest + 1)
        answers.append(answer(values, estimate_values(values))["max_context"])
    assert answers[0] == answers[1] > 0
