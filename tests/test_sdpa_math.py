"""CUDA's SDPA runs its math kernel for grouped-query heads in fp32 (pycore.memory.activations.gqa_math_kernel):
transformers passes enable_gqa, flash takes 16-bit inputs only and the memory-efficient kernel no enable_gqa.
Measured on an H200 (validation/measured_cuda_explain.txt): qwen2.5-0.5b fp32 b4s1024 held 266 MiB a layer in
sdpa_attention_forward, 4 × 14 × 1,024² probabilities in fp32 plus q, k and v of 14 MiB each."""

from pycore import estimate
from pycore.inputs.schema import parse
from pycore.memory.setup import resolve

QWEN = {"model": "qwen2.5-0.5b", "precision": "fp32", "batch": "4", "seq": "1024"}


def _attention(inputs):
    return resolve(parse(inputs)).workload.attention


def test_auto_under_transformers_in_fp32_with_grouped_heads_is_the_math_kernel():
    assert _attention(QWEN) == "flash-math"
    assert _attention({**QWEN, "precision": "bf16"}) == "flash"              # flash takes 16-bit inputs
    assert _attention({**QWEN, "precision": "amp-bf16"}) == "flash"          # autocast feeds SDPA 16-bit q, k, v
    assert _attention({**QWEN, "model": "gpt2"}) == "flash"                  # no grouped heads: memory-efficient kernel
    assert _attention({**QWEN, "attention": "flash"}) == "flash"             # a fused kernel asked for by name
    assert _attention({**QWEN, "framework": "torchtune"}) == "flash-repeat"  # its own attention expands K/V first


def test_the_math_kernel_keeps_the_probabilities_of_each_layer():
    math, fused = estimate(QWEN), estimate({**QWEN, "attention": "flash"})
    per_layer = 4 * 14 * 1024 * 1024 * 4 + 3 * 4 * 1024 * 896 * 4         # probabilities, q, k and v (expanded)
    flash = 4 * 1024 * (896 + 2 * 128 + 896) * 4 + 4 * 1024 * 14 * 4        # q, k, v per kv head, output, logsumexp
    assert math.components["activations"] - fused.components["activations"] == 24 * (per_layer - flash)


def test_a_masked_window_runs_the_memory_efficient_kernel_and_only_cuda_runs_the_math_one():
    # transformers hands SDPA enable_gqa only without a mask: Mistral 7B's every layer is sliding (window 4,096), so at
    # 8,192 tokens each is masked, expands K/V itself and keeps no probabilities; the math kernel is CUDA's rule,
    # before sm_80 for every dtype (a V100 has no flash kernel), and no other runtime's
    mistral = {"model": "mistral-7b-v0.1", "precision": "fp32", "seq": "8192"}
    assert estimate(mistral).peak_bytes == estimate({**mistral, "attention": "flash-repeat"}).peak_bytes
    assert _attention({**QWEN, "gpu": "v100-32gb", "precision": "fp16"}) == "flash-math"
    for gpu in ("tpu-v5e", "mi300x", "apple-m4-max-128gb"):
        assert _attention({**QWEN, "gpu": gpu}) == "flash", gpu


def test_the_sliding_mask_copy_is_transformers_sdpas_not_other_frameworks():
    # torchtitan's and Megatron's own attention take no float mask per layer (pycore.inputs.frameworks.OWN_MODEL_CODE)
    inputs = {"model": "mistral-7b-v0.1", "seq": "8192", "recompute": "none"}
    def masks(framework):
        terms = estimate({**inputs, "framework": framework}).as_dict()["activation_terms"]
        return [t for t in terms if t["name"].startswith("sliding-window mask")]
    assert masks("hf-trainer") and not masks("torchtitan") and not masks("megatron")


def test_the_kernel_is_said_and_each_pass_runs_its_own_dtypes():
    from pycore.inputs.schema import parse
    from pycore.output.report import framework_line
    fp32 = estimate(QWEN)
    assert any(w.startswith("attention: transformers' SDPA meets grouped-query heads") for w in fp32.warnings)
    assert "attention=flash-math" in framework_line(parse(QWEN), fp32)
    # asked for by name where CUDA would run the math kernel: a warning; not for Gemma 2 (eager) or a masked window
    assert any(w.startswith("attention=flash is counted as asked") for w in estimate({**QWEN, "attention": "flash"}).warnings)
    for inputs in ({"model": "gemma-2-2b", "precision": "fp32", "attention": "flash"},
                   {"model": "mistral-7b-v0.1", "precision": "fp32", "seq": "8192", "attention": "flash"}):
        assert not any("attention" in w for w in estimate(inputs).warnings), inputs
    # vLLM runs its own attention backends: nothing resolved; a distill step's bf16 teacher runs flash, its fp32
    # update the math kernel
    assert _attention({**QWEN, "mode": "infer", "engine": "vllm"}) == "flash"
    distill = estimate({"model": "qwen2.5-0.5b", "method": "distill", "seq": "4096", "batch": "2"})
    teacher = {p.key: p for p in distill.pools}["teacher_forward"]
    assert teacher.bytes < 2**30          # its scores alone would be 2 · 4,096 × 14 heads × 4,096 × 10 bytes = 4.4 GiB
