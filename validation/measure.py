"""Measure the real peak memory of training steps and generate() calls, for validating pycore.

Dev-only: needs torch and transformers (never dependencies of pycore). Each case is a set of pycore
schema inputs; the architecture comes from pycore itself, so both sides describe the same model.

For every training case: build the transformers model, run one warm-up step (so optimizer state
exists, as in steady state), ``zero_grad(set_to_none=True)``, then record the next step (forward,
backward, optimizer step) with PyTorch's MemTracker. Dense models run under FakeTensorMode (no memory
is allocated, so full-size models fit on this machine); mixture-of-experts routing and generate() are
data-dependent and run for real on small configs. Optimizers use the case's optimizer_impl, else
foreach=True (the CUDA default).
MemTracker rounds every allocation up to 512 bytes as CUDA's caching allocator does.

Usage:
    pip install torch==2.13.0 transformers
    python validation/measure.py                 # all cases -> validation/measured.json
    python validation/measure.py --only gpt2     # cases whose label contains 'gpt2', printed only
    python validation/measure.py --only amp --both   # amp cases under CPU and CUDA autocast rules, and the change
    python validation/measure.py --redo "amp-|gpt-oss" --both   # re-measure matching cases both ways, keep the rest
    python validation/measure.py --only falcon --diagnose        # also print what each block keeps after forward

amp-* cases run CUDA autocast's casting rules on the CPU (validation/cuda_autocast.py: pow, softmax,
layer_norm, sum and the rest of CUDA's fp32 lists return fp32, as on a GPU); --autocast cpu keeps
PyTorch's CPU rules, under which the cases recorded before it were measured. A record's "autocast" says
which (absent: cpu rules). A case's optimizer_impl (foreach, fused, for-loop) picks the optimizer kernel;
cases without one run foreach.
"""

import argparse
import contextlib
import json
import platform
import sys
import time
from pathlib import Path

import torch
import transformers
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.mem_tracker import MemTracker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import hf_models  # noqa: E402
from cuda_autocast import cuda_autocast  # noqa: E402
import compare  # noqa: E402
from pycore.inputs import frameworks
from pycore.inputs import schema  # noqa: E402
from pycore.memory.estimate import resolve_architecture  # noqa: E402

OUT = ROOT / "validation" / "measured.json"
CONFIGS = ROOT / "tests" / "configs"
PARTIAL = ROOT / "validation" / "measured.partial.jsonl"     # one line per finished case, for --resume

SMALL = {"layers": "2", "hidden": "512", "heads": "8", "ffn": "1408"}

# (label, inputs). Small configs keep a family's structure and shrink its size.
CASES = [
    # Llama family, full size, every precision policy
    ("llama-3.2-1b fp32 adamw", dict(model="llama-3.2-1b", precision="fp32", batch="1", seq="1024")),
    ("llama-3.2-1b amp-bf16 adamw", dict(model="llama-3.2-1b", precision="amp-bf16", batch="1", seq="2048")),
    ("llama-3.2-1b amp-fp16 adamw", dict(model="llama-3.2-1b", precision="amp-fp16", batch="1", seq="2048")),
    ("llama-3.2-1b bf16 adamw", dict(model="llama-3.2-1b", precision="bf16", batch="2", seq="2048")),
    ("llama-3.2-1b fp16 sgd", dict(model="llama-3.2-1b", precision="fp16", optimizer="sgd-momentum", batch="2", seq="1024")),
    ("llama-3.2-1b bf16-master adamw", dict(model="llama-3.2-1b", precision="bf16-master", batch="1", seq="2048")),
    ("llama-3.2-1b fp16-master adamw", dict(model="llama-3.2-1b", precision="fp16-master", batch="4", seq="1024")),
    ("llama-3.2-1b bf16 full-recompute", dict(model="llama-3.2-1b", precision="bf16", recompute="full", batch="8", seq="2048")),
    ("llama-3.2-1b bf16 eager", dict(model="llama-3.2-1b", precision="bf16", attention="eager", batch="1", seq="2048")),
    ("llama-3.2-1b bf16 eager selective", dict(model="llama-3.2-1b", precision="bf16", attention="eager", recompute="selective", batch="1", seq="2048")),
    ("llama-3.1-8b bf16 adamw b1s1024", dict(model="llama-3.1-8b", precision="bf16", batch="1", seq="1024")),
    ("llama-3.1-8b amp-bf16 adamw b2s4096", dict(model="llama-3.1-8b", precision="amp-bf16", batch="2", seq="4096")),
    ("llama-3.1-8b bf16-master full-recompute b4s8192", dict(model="llama-3.1-8b", precision="bf16-master", recompute="full", batch="4", seq="8192")),
    ("llama small fp32 b8s1024", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", precision="fp32", batch="8", seq="1024")),
    ("llama small amp-bf16 b8s1024", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", precision="amp-bf16", batch="8", seq="1024")),
    ("llama small bf16 eager b4s1024", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", precision="bf16", attention="eager", batch="4", seq="1024")),
    ("llama small fp32 eager selective b4s512", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", precision="fp32", attention="eager", recompute="selective", batch="4", seq="512")),
    ("llama small bf16 full b16s1024", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", precision="bf16", recompute="full", batch="16", seq="1024")),
    ("llama small fp32 sgd b1s128", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", precision="fp32", optimizer="sgd-momentum", batch="1", seq="128")),
    # Mistral
    ("mistral-7b bf16 adamw b1s2048", dict(model="mistral-7b-v0.1", precision="bf16", batch="1", seq="2048")),
    ("mistral-7b bf16-master sgd b1s4096", dict(model="mistral-7b-v0.1", precision="bf16-master", optimizer="sgd-momentum", batch="1", seq="4096")),
    ("mistral small amp-bf16 b4s2048", dict(model="mistral-7b-v0.1", **SMALL, kv_heads="8", precision="amp-bf16", batch="4", seq="2048")),
    # Qwen2
    ("qwen2.5-0.5b fp32 adamw b4s1024", dict(model="qwen2.5-0.5b", precision="fp32", batch="4", seq="1024")),
    ("qwen2.5-0.5b bf16 adamw b8s2048", dict(model="qwen2.5-0.5b", precision="bf16", batch="8", seq="2048")),
    ("qwen2.5-0.5b amp-bf16 full b8s2048", dict(model="qwen2.5-0.5b", precision="amp-bf16", recompute="full", batch="8", seq="2048")),
    ("qwen2.5-7b bf16 adamw b1s512", dict(model="qwen2.5-7b", precision="bf16", batch="1", seq="512")),
    # Gemma
    ("gemma-2b bf16 adamw b2s2048", dict(model="gemma-2b", precision="bf16", batch="2", seq="2048")),
    ("gemma-2b amp-bf16 adamw b1s1024", dict(model="gemma-2b", precision="amp-bf16", batch="1", seq="1024")),
    ("gemma small fp32 eager b4s512", dict(model="gemma-2b", layers="2", hidden="512", heads="4", kv_heads="1", head_dim="128", ffn="2048", vocab="32000", precision="fp32", attention="eager", batch="4", seq="512")),
    # GPT-2 (LayerNorm, biases, learned positions, dropout 0.1)
    ("gpt2 fp32 adamw b8s1024", dict(model="gpt2", precision="fp32", batch="8", seq="1024")),
    ("gpt2 amp-bf16 adamw b8s1024", dict(model="gpt2", precision="amp-bf16", batch="8", seq="1024")),
    ("gpt2 fp32 eager b4s1024", dict(model="gpt2", precision="fp32", attention="eager", batch="4", seq="1024")),
    ("gpt2 bf16 full b16s1024", dict(model="gpt2", precision="bf16", recompute="full", batch="16", seq="1024")),
    ("gpt2 fp32 sgd b1s128", dict(model="gpt2", precision="fp32", optimizer="sgd-momentum", batch="1", seq="128")),
    # BERT encoder (masked LM on every position)
    ("bert-base fp32 adamw b32s512", dict(model="bert-base-uncased", precision="fp32", batch="32", seq="512")),
    ("bert-base amp-bf16 adamw b16s512", dict(model="bert-base-uncased", precision="amp-bf16", batch="16", seq="512")),
    ("bert-base bf16 eager b8s512", dict(model="bert-base-uncased", precision="bf16", attention="eager", batch="8", seq="512")),
    # Mixture of experts (real tensors: routing is data-dependent)
    ("mixtral small fp32 adamw b4s256", dict(model="mixtral-8x7b-v0.1", layers="2", hidden="256", heads="8", kv_heads="2", ffn="512", vocab="8000", precision="fp32", batch="4", seq="256")),
    ("mixtral small bf16 adamw b8s256", dict(model="mixtral-8x7b-v0.1", layers="2", hidden="256", heads="8", kv_heads="2", ffn="512", vocab="8000", precision="bf16", batch="8", seq="256")),
    # Real tensors for small dense cases, to show fake and real agree
    ("llama small fp32 b2s256 real", dict(model="llama-3.1-8b", layers="2", hidden="256", heads="4", kv_heads="2", ffn="704", vocab="8000", precision="fp32", batch="2", seq="256")),
    # LoRA with PEFT (the base frozen, fp32 adapters); real tensors, since PEFT moves adapters with .to()
    ("llama small lora qv bf16 b8s1024 real", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", method="lora", lora_targets="qv", precision="bf16", batch="8", seq="1024")),
    ("llama small lora all-linear bf16 b4s1024 real", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", method="lora", lora_targets="all-linear", lora_rank="64", precision="bf16", batch="4", seq="1024")),
    ("qwen small lora attention fp32 b4s512 real", dict(model="qwen2.5-0.5b", layers="2", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000", method="lora", lora_targets="attention", precision="fp32", batch="4", seq="512")),
    ("llama small lora all-linear amp-bf16 b4s512 real", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", method="lora", lora_targets="all-linear", precision="amp-bf16", batch="4", seq="512")),
    # Issue 10: families pycore imports, each with its optimizer kernel named (optimizer_impl). "4L": the preset cut
    # to 4 layers at full width (fake-tensor time grows with the layer count; the per-layer terms are what is tested).
    # Gemma 2 (logit softcapping, post-norms; eager attention, which softcapping needs) and Gemma 3 (q/k norms)
    ("gemma-2-2b 4L bf16 eager b1s2048", dict(model="gemma-2-2b", layers="4", precision="bf16", attention="eager", optimizer_impl="foreach", batch="1", seq="2048")),
    ("gemma-2-2b 4L amp-bf16 eager b1s1024", dict(model="gemma-2-2b", layers="4", precision="amp-bf16", attention="eager", optimizer_impl="foreach", batch="1", seq="1024")),
    ("gemma-3-1b 6L bf16 adamw b2s2048", dict(model="gemma-3-1b", layers="6", precision="bf16", optimizer_impl="foreach", batch="2", seq="2048")),
    ("gemma-3-1b 6L amp-bf16 adamw b1s2048", dict(model="gemma-3-1b", layers="6", precision="amp-bf16", optimizer_impl="foreach", batch="1", seq="2048")),
    # q/k norms: Qwen3 (per head), OLMo 2 (over all of q and k)
    ("qwen3-0.6b 4L bf16 adamw b4s2048", dict(model="qwen3-0.6b", layers="4", precision="bf16", optimizer_impl="foreach", batch="4", seq="2048")),
    ("qwen3-0.6b 4L amp-bf16 eager b2s1024", dict(model="qwen3-0.6b", layers="4", precision="amp-bf16", attention="eager", optimizer_impl="foreach", batch="2", seq="1024")),
    ("olmo-2-7b 4L bf16 adamw b1s2048", dict(model="olmo-2-1124-7b", layers="4", precision="bf16", optimizer_impl="foreach", batch="1", seq="2048")),
    ("olmo-2-7b 4L amp-bf16 adamw b1s1024", dict(model="olmo-2-1124-7b", layers="4", precision="amp-bf16", optimizer_impl="foreach", batch="1", seq="1024")),
    # Qwen3-MoE: routed experts narrower than the dense ffn (real tensors: routing is data-dependent)
    ("qwen3-moe small fp32 adamw b4s256 real", dict(model="qwen3-30b-a3b", layers="2", hidden="256", heads="8", kv_heads="2", head_dim="32", ffn="512", expert_ffn="128", experts="16", experts_per_token="4", vocab="8000", precision="fp32", optimizer_impl="foreach", batch="4", seq="256")),
    ("qwen3-moe small bf16 adamw b8s256 real", dict(model="qwen3-30b-a3b", layers="2", hidden="256", heads="8", kv_heads="2", head_dim="32", ffn="512", expert_ffn="128", experts="16", experts_per_token="4", vocab="8000", precision="bf16", optimizer_impl="foreach", batch="8", seq="256")),
    # Optimizer kernels other than foreach
    ("gpt2 amp-bf16 fused b8s1024", dict(model="gpt2", precision="amp-bf16", optimizer_impl="fused", batch="8", seq="1024")),
    ("gpt2 fp32 for-loop b4s1024", dict(model="gpt2", precision="fp32", optimizer_impl="for-loop", batch="4", seq="1024")),
    ("llama-3.2-1b 4L bf16 fused b1s2048", dict(model="llama-3.2-1b", layers="4", precision="bf16", optimizer_impl="fused", batch="1", seq="2048")),
    # Grouped-query attention through SDPA (attention=flash), and LoRA on it
    ("llama-3.1-8b 4L bf16 flash b1s4096", dict(model="llama-3.1-8b", layers="4", precision="bf16", attention="flash", optimizer_impl="foreach", batch="1", seq="4096")),
    ("qwen2.5-7b 4L amp-bf16 flash b1s2048", dict(model="qwen2.5-7b", layers="4", precision="amp-bf16", attention="flash", optimizer_impl="foreach", batch="1", seq="2048")),
    ("qwen3 small lora all-linear bf16 flash b4s1024 real", dict(model="qwen3-0.6b", **SMALL, kv_heads="2", head_dim="64", vocab="32000", method="lora", lora_targets="all-linear", attention="flash", precision="bf16", optimizer_impl="foreach", batch="4", seq="1024")),
    ("llama small lora qv amp-bf16 flash b4s1024 real", dict(model="llama-3.1-8b", **SMALL, kv_heads="2", vocab="32000", method="lora", lora_targets="qv", attention="flash", precision="amp-bf16", optimizer_impl="foreach", batch="4", seq="1024")),
    # One case per family pycore imports from config.json
    ("pythia-160m amp-bf16 b8s2048 (gpt_neox)", dict(model="pythia-160m", precision="amp-bf16", optimizer_impl="foreach", batch="8", seq="2048")),
    ("starcoder 4L bf16 b1s2048 (gpt_bigcode)", dict(model="starcoder", layers="4", precision="bf16", optimizer_impl="foreach", batch="1", seq="2048")),
    ("falcon-7b 4L bf16 b1s2048 (falcon)", dict(model="falcon-7b", layers="4", precision="bf16", optimizer_impl="foreach", batch="1", seq="2048")),
    ("phi-2 4L amp-bf16 b1s2048 (phi)", dict(model="phi-2", layers="4", precision="amp-bf16", optimizer_impl="foreach", batch="1", seq="2048")),
    ("starcoder2-3b 4L bf16 b1s4096 (starcoder2)", dict(model="starcoder2-3b", layers="4", precision="bf16", optimizer_impl="foreach", batch="1", seq="4096")),
    ("granite-3.1-2b 4L bf16 b2s2048 (granite)", dict(model="granite-3.1-2b-base", layers="4", precision="bf16", optimizer_impl="foreach", batch="2", seq="2048")),
    ("command-r small bf16 b2s2048 (cohere)", dict(model="c4ai-command-r-v01", layers="4", hidden="1024", heads="8", kv_heads="8", ffn="2816", precision="bf16", optimizer_impl="foreach", batch="2", seq="2048")),
    ("qwen1.5-moe small bf16 b4s256 real (qwen2_moe)", dict(model="qwen1.5-moe-a2.7b", layers="2", hidden="256", heads="8", kv_heads="8", ffn="512", expert_ffn="128", experts="8", experts_per_token="2", vocab="8000", precision="bf16", optimizer_impl="foreach", batch="4", seq="256")),
    ("deepseek-v2-lite small bf16 b4s256 real (deepseek_v2)", dict(model="deepseek-v2-lite", layers="2", hidden="256", heads="8", kv_heads="8", ffn="512", expert_ffn="128", experts="8", experts_per_token="2", vocab="8000", precision="bf16", optimizer_impl="foreach", batch="4", seq="256")),
    ("gpt-oss small bf16 eager b4s256 real (gpt_oss)", dict(model="gpt-oss-20b", attention="eager", layers="2", hidden="256", heads="8", kv_heads="2", head_dim="32", ffn="256", experts="8", experts_per_token="2", vocab="8000", precision="bf16", optimizer_impl="foreach", batch="4", seq="256")),
    # Serving: generate() with a KV cache
    ("llama small infer bf16 b4 s512+64", dict(model="llama-3.1-8b", layers="4", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000", mode="infer", precision="bf16", batch="4", seq="512", new_tokens="64")),
    ("llama small infer fp32 b1 s1024+32", dict(model="llama-3.1-8b", layers="4", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000", mode="infer", precision="fp32", batch="1", seq="1024", new_tokens="32")),
    ("qwen small infer bf16 b8 s256+128", dict(model="qwen2.5-0.5b", layers="4", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000", mode="infer", precision="bf16", batch="8", seq="256", new_tokens="128")),
    ("gpt2 infer fp32 b4 s512+64", dict(model="gpt2", mode="infer", precision="fp32", batch="4", seq="512", new_tokens="64")),
    ("llama small infer bf16 b16 s64+768 (decode-bound)", dict(model="llama-3.1-8b", layers="4", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000", mode="infer", precision="bf16", batch="16", seq="64", new_tokens="768")),
    ("qwen small infer fp32 b8 s32+512 (decode-bound)", dict(model="qwen2.5-0.5b", layers="4", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000", mode="infer", precision="fp32", batch="8", seq="32", new_tokens="512")),
]

REAL = ("mixtral", "real", "infer")
DIAGNOSE = False            # --diagnose: print each training case's forward-end bytes and what each block keeps

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def cuda_like_dropout(input, p=0.5, training=True, inplace=False):
    """Dropout as CUDA runs it: the fused kernel keeps a 1-byte bool mask. On the CPU, PyTorch's
    unfused dropout keeps a mask in the input's dtype (4 bytes in fp32), which no GPU run would."""
    if not training or p == 0:
        return input
    return torch.native_dropout(input, p, True)[0]


torch.nn.functional.dropout = cuda_like_dropout


def hf_config(arch, attention, model_id=""):
    # compare.measured_inputs names what these cases ran as flash-repeat (CPU's SDPA expands K/V), and pycore names
    # CUDA's math kernel for fp32 grouped-query heads flash-math: the same SDPA
    attention = "flash" if attention in ("flash-repeat", "flash-math") else attention
    family = arch.hf_class.removesuffix("ForCausalLM")
    config = None
    if family in hf_models.PUBLISHED_FAMILIES:
        config = hf_models.published_config(arch.name or model_id, arch, CONFIGS) or \
            hf_models.published_config(model_id, arch, CONFIGS)
    if config is None:
        config = hf_models.config_for(arch)
    config.use_cache = False
    config._attn_implementation = {"flash": "sdpa", "eager": "eager"}[attention]
    if attention == "flash":
        # FlashAttention on CUDA applies attention dropout inside the kernel and stores no s×s mask.
        # The CPU's SDPA cannot, and falls back to the math kernel that stores the scores; measuring
        # that would describe no GPU run. So fused-attention cases train without attention dropout.
        for key in ("attn_pdrop", "attention_probs_dropout_prob", "attention_dropout"):
            if hasattr(config, key):
                setattr(config, key, 0.0)
    return config


def selective_recompute(model):
    """Recompute the attention core (scores, softmax, dropout) in backward: Korthikanti's selective."""
    from torch.utils.checkpoint import checkpoint
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    inner = ALL_ATTENTION_FUNCTIONS.get_interface(model.config._attn_implementation, None) \
        if hasattr(ALL_ATTENTION_FUNCTIONS, "get_interface") else None
    if inner is None:
        module = sys.modules[type(model).__module__]
        inner = module.eager_attention_forward

    def checkpointed(module, query, key, value, attention_mask, **kwargs):
        def core(q, k, v):
            return inner(module, q, k, v, attention_mask, **kwargs)[0]
        return checkpoint(core, query, key, value, use_reentrant=False), None

    ALL_ATTENTION_FUNCTIONS["selective_ckpt"] = checkpointed
    model.config._attn_implementation = "selective_ckpt"
    for sub in model.modules():
        if hasattr(sub, "config"):
            sub.config._attn_implementation = "selective_ckpt"


def build(inputs):
    """The model, created directly in its weight dtype (fake tensors cannot be converted later)."""
    # The inputs as the estimate reads them (validation/compare.py measured_inputs), with every "auto" left to
    # the framework resolved as pycore resolves it (attention=flash, recompute=none for the HF Trainer).
    values = frameworks.apply(schema.parse(compare.measured_inputs(inputs)))
    arch = resolve_architecture(values)
    config = hf_config(arch, values["attention"], values["model"])
    weight_dtype = DTYPES[values["precision"][:4]] if values["precision"][:4] in ("bf16", "fp16") else torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(weight_dtype)
    try:
        model = getattr(transformers, arch.hf_class)(config)
    finally:
        torch.set_default_dtype(previous)
    return values, arch, model


def make_batch(values, arch):
    shape = (values["batch"], values["seq"])
    ids = torch.randint(0, arch.vocab, shape)
    return {"input_ids": ids, "labels": ids.clone()}


# pycore's optimizer_impl -> the optimizer's keyword arguments. Cases that name none ran foreach (the CUDA
# default when nothing is set), which validation/compare.py's MEASURED_CONDITIONS states.
KERNELS = {"foreach": dict(foreach=True), "fused": dict(fused=True), "for-loop": dict(foreach=False, fused=False)}


def make_optimizer(params, name, impl="foreach"):
    kernel = KERNELS[impl]
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kernel)
    return torch.optim.AdamW(params, lr=1e-5, **kernel)


def optimizer_impl(inputs):
    """The kernel a case runs: its optimizer_impl, else foreach (validation/compare.py MEASURED_CONDITIONS)."""
    return frameworks.apply(schema.parse(compare.measured_inputs(inputs)))["optimizer_impl"]


def train_step(model, batch, optimizer, precision, masters):
    """One training step as the precision policy runs it."""
    if precision.startswith("amp-"):
        with torch.autocast("cpu", dtype=DTYPES[precision[4:]]):
            loss = model(**batch).loss
    else:
        loss = model(**batch).loss
    loss.backward()
    del loss
    if masters is not None:      # *-master: fp32 master weights own the fp32 grads and optimizer state
        for param, master in zip(model.parameters(), masters):
            master.grad = param.grad.float()
            param.grad = None
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if masters is not None:
        with torch.no_grad():
            for param, master in zip(model.parameters(), masters):
                param.copy_(master)


LORA_MODULES = {"qv": ["q_proj", "v_proj"], "attention": ["q_proj", "k_proj", "v_proj", "o_proj"],
                "all-linear": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}


def with_lora(model, values):
    """PEFT's LoRA with the schema's rank and targets (dropout 0, PEFT's default fp32 adapters)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=values["lora_rank"], lora_alpha=2 * values["lora_rank"], lora_dropout=0.0,
                        target_modules=LORA_MODULES[values["lora_targets"]])
    model = get_peft_model(model, config, autocast_adapter_dtype=False)
    # PEFT's default upcasts 16-bit adapters to fp32 with .to(), which fake tensors cannot do in place;
    # the same result, built directly:
    dtype = DTYPES[values["lora_dtype"]]
    for name, module in model.named_modules():
        if name.endswith(("lora_A.default", "lora_B.default")):
            module.weight = torch.nn.Parameter(torch.zeros(module.weight.shape, dtype=dtype))
    return model


def measure_train(values, arch, model, impl="foreach", autocast="cuda"):
    precision = values["precision"]
    if values["method"] == "lora":
        model = with_lora(model, values)
    model.train()
    if values["recompute"] == "full":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    elif values["recompute"] == "selective":
        selective_recompute(model)
    masters = None
    if precision.endswith("-master"):
        masters = [p.detach().float().requires_grad_(True) for p in model.parameters()]
        optimizer = make_optimizer(masters, values["optimizer"], impl)
    else:
        optimizer = make_optimizer([p for p in model.parameters() if p.requires_grad], values["optimizer"], impl)
    batch = make_batch(values, arch)
    with cuda_autocast(autocast == "cuda"):
        train_step(model, batch, optimizer, precision, masters)    # warm-up: creates optimizer state
    tracker = MemTracker()
    if values["method"] != "full":
        # MemTracker hooks every parameter's gradient and cannot hook frozen ones; without the hooks
        # adapter gradients are still counted, under another category. The total is what is compared.
        track = tracker._track_module_params_and_buffers
        tracker._track_module_params_and_buffers = lambda module, install_grad_hooks=True: track(module, False)
    tracker.track_external(model, optimizer, *(masters or ()), *batch.values())
    with tracker, cuda_autocast(autocast == "cuda"):
        train_step(model, batch, optimizer, precision, masters)
    return tracker


def measure_infer(values, arch, model):
    model.eval()
    model.config.use_cache = True              # hf_config turns the cache off for training
    model.generation_config.use_cache = True
    model.generation_config.pad_token_id = 0
    ids = torch.randint(1, arch.vocab, (values["batch"], values["seq"]))
    kwargs = dict(max_new_tokens=values["new_tokens"], min_new_tokens=values["new_tokens"], do_sample=False)
    return track_generate(model, (ids,), lambda: model.generate(ids, **kwargs))


def track_generate(model, inputs, generate):
    """``generate()`` once to warm up, then again under MemTracker (tracking ``model`` and the ``inputs`` tensors),
    without gradients; the tracker."""
    with torch.no_grad():
        generate()                                                        # warm-up
        tracker = MemTracker()
        tracker.track_external(model, *inputs)
        # generate() calls the model once per token; MemTracker's per-module statistics allow one call of
        # the root module, so they are cleared at each root call. The global peak is kept.
        track_module = tracker._pre_fw_hook

        def pre_forward(module, args):
            if module is model and module in tracker.memory_tracking:
                tracker.reset_mod_stats()
            track_module(module, args)
        tracker._pre_fw_hook = pre_forward
        with tracker:
            generate()
    return tracker


def blocks(model, layers):
    """The transformer blocks: the first ModuleList with one entry per layer (experts lists come later)."""
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == layers]
    return list(lists[0]) if lists else []


def forward_profile(tracker, model, layers):
    """From a training step's MemTracker: bytes live at the end of the forward pass by category, and the bytes
    each block leaves behind (its saved activations and output), for comparing with the estimate."""
    from torch.distributed._tools.mem_tracker import _ModState
    stats = tracker.memory_tracking
    root = stats[model].snapshots[_ModState.POST_FW][-1] if model in stats else {}
    (forward_end,) = root.values() if root else ({},)
    saved = []
    for block in blocks(model, layers):
        if block in stats:
            pre = next(iter(stats[block].snapshots[_ModState.PRE_FW][0].values()))["Total"]
            post = next(iter(stats[block].snapshots[_ModState.POST_FW][0].values()))["Total"]
            saved.append(post - pre)
    return forward_end, saved


def write_record(out, about, results):
    """A measurement file: what it holds, the versions it was measured with, and its cases."""
    out.write_text(json.dumps({"about": about, "torch": torch.__version__, "transformers": transformers.__version__,
                               "python": platform.python_version(), "machine": platform.machine(),
                               "cases": results}, indent=1) + "\n")
    print(f"wrote {out.relative_to(ROOT)} ({len(results)} cases)")


def run_case(label, inputs, autocast="cuda"):
    """Measure one case. autocast: "cuda" casts as autocast("cuda") would (validation/cuda_autocast.py);
    "cpu" keeps PyTorch's CPU rules, as the cases recorded before it were measured."""
    torch.manual_seed(0)
    fake = not any(word in label for word in REAL)
    started = time.time()
    impl = optimizer_impl(inputs)
    with FakeTensorMode(allow_non_fake_inputs=False) if fake else contextlib.nullcontext():
        values, arch, model = build(inputs)
        params = sum(p.numel() for p in model.parameters())
        if values["mode"] == "infer":
            tracker = measure_infer(values, arch, model)
        else:
            tracker = measure_train(values, arch, model, impl, autocast)
    peak = tracker.get_tracker_snapshot("peak")
    (device_peak,) = peak.values()
    if DIAGNOSE and values["mode"] == "train":
        forward_end, saved = forward_profile(tracker, model, arch.layers)
        print(f"  forward end: {forward_end.get('Total')} B; each block leaves {saved} B", flush=True)
    return {
        "label": label,
        "inputs": inputs,
        "tensor_mode": "fake" if fake else "real",
        "optimizer_impl": impl,
        "autocast": autocast if inputs.get("precision", "amp-bf16").startswith("amp-") else "none",
        "params": params,
        "peak_bytes": device_peak["Total"],
        "peak_breakdown": {k: v for k, v in device_peak.items() if k != "Total"},
        "seconds": round(time.time() - started, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text; print, do not save")
    parser.add_argument("--resume", action="store_true", help="keep the cases finished by an interrupted run")
    parser.add_argument("--redo", help="re-measure the cases whose label contains this text (a|b: either); keep the "
                                       "others, and measure cases not yet recorded")
    parser.add_argument("--autocast", choices=("cuda", "cpu"), default="cuda",
                        help="amp-* cases: cast as autocast('cuda') does (default) or as PyTorch's CPU autocast")
    parser.add_argument("--both", action="store_true",
                        help="amp-* cases: also measure under the other autocast rule; the record keeps both peaks")
    parser.add_argument("--diagnose", action="store_true",
                        help="print each training case's bytes at forward end and what each block keeps")
    args = parser.parse_args()
    global DIAGNOSE
    DIAGNOSE = args.diagnose
    done = {}
    if args.resume and PARTIAL.exists():
        done = {r["label"]: r for r in map(json.loads, PARTIAL.read_text().splitlines())}
    if args.redo:
        redo = args.redo.split("|")
        done = {r["label"]: r for r in json.loads(OUT.read_text())["cases"] if not any(t in r["label"] for t in redo)}
        PARTIAL.unlink(missing_ok=True)
    elif not args.only:
        PARTIAL.unlink(missing_ok=True)
    results, failed = [], []
    for label, inputs in CASES:
        if args.only and args.only not in label:
            continue
        if label in done and done[label]["inputs"] == inputs:
            results.append(done[label])
            continue
        try:
            result = run_case(label, inputs, args.autocast)
        except Exception as error:        # one family's failure must not lose the others' measurements
            print(f"{label:48s} FAILED: {type(error).__name__}: {str(error)[:300]}", flush=True)
            failed.append(label)
            continue
        if args.both and result["autocast"] != "none":
            other = "cpu" if args.autocast == "cuda" else "cuda"
            result[f"peak_bytes_{other}_autocast"] = run_case(label, inputs, other)["peak_bytes"]
            peaks = {args.autocast: result["peak_bytes"], other: result[f"peak_bytes_{other}_autocast"]}
            change = peaks["cuda"] - peaks["cpu"]
            print(f"{'':48s} CUDA rules minus CPU rules: {change:+,d} B", flush=True)
        if not args.only:
            with PARTIAL.open("a") as handle:
                handle.write(json.dumps(result) + "\n")
        print(f"{label:48s} peak {result['peak_bytes'] / 2**30:9.3f} GiB  params {result['params']:>14,d}"
              f"  {result['seconds']:6.1f}s", flush=True)
        results.append(result)
    if failed:
        print("failed:", ", ".join(failed))
    if args.only:
        return
    record = {
        "about": "Peak tensor bytes of real PyTorch steps, recorded by validation/measure.py",
        "torch": torch.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "machine": platform.machine(),
        "cases": results,
    }
    OUT.write_text(json.dumps(record, indent=1) + "\n")
    PARTIAL.unlink()
    print(f"wrote {OUT.relative_to(ROOT)} ({len(results)} cases)")


if __name__ == "__main__":
    main()
