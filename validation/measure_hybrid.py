"""Measure generate() and one training step of the hybrid families (state-space, DeltaNet and short-conv layers).

Dev-only: needs torch and transformers (never dependencies of pycore). It reuses validation/measure.py: its
``measure_infer`` (generate() after a warm-up call, MemTracker's per-module statistics cleared at each root
call, the global peak kept) and ``measure_train`` (a warm-up step so the AdamW state exists, then forward,
backward and a foreach AdamW step recorded by MemTracker; CUDA autocast's rules where a case uses amp). Every
case runs real tensors (the scans and routing are data-dependent), on small configs that keep each family's
layer mix: size "a" is tests/configs/variants/synthetic-<family>*.json as saved (hidden 256), size "b" the same
file with the widths, heads, state and chunk sizes changed (hidden 512), so per-layer terms can be fitted.

For each case the record holds the inputs pycore reads (``config`` is a file written from the case's
``config_json``: see ``compare_rows``), the peak by MemTracker category, and:
- serving: the bytes of the cache generate() ends with, by kind (attention keys/values, convolution states,
  recurrent states), each tensor rounded to 512 bytes as CUDA's caching allocator does;
- training: per block, its mixer kind and what the block and its mixer module leave live after their forward
  (saved activations plus the output).

``--mixers`` also runs each mixer module alone under ``torch.autograd.graph.saved_tensors_hooks`` at several
sizes, in bf16, fp32 and amp-bf16 (CUDA autocast's rules), and records the bytes it saves for backward
(distinct storages, each rounded to 512 bytes; parameters, the input and autocast's weight copies left out):
``mixer_sweep``. ``MIXER_FORMULAS`` are per-token formulas for those bytes, read off the saved tensors'
shapes; ``mixer_fit`` holds them beside every sweep row and every training case's mixers in the whole model.
``--compare`` prints each case beside pycore's estimate.

Kernels. transformers runs its reference PyTorch paths when the kernel packages are missing (on the CPU
always; it says so in a warning), and that is what these numbers describe. A GPU with them runs instead:
- Mamba-2 (mamba2, granitemoehybrid, nemotron_h, falcon_h1): when training without a cache, mamba_ssm's
  ``mamba_split_conv1d_scan_combined`` (causal_conv1d + the SSD Triton kernels + gated RMSNorm + out_proj in one
  autograd Function, ssd_combined.py), which saves the in_proj output zxbcdt, out_x (tokens x inner) and the
  norm's rstd and recomputes the rest: about e*(3*inner + 2*groups*state + heads) + 4*groups bytes a token,
  where the reference path keeps fp32 copies of x, B, C and three (chunk x chunk) fp32 matrices per head and
  chunk (MIXER_FORMULAS["mamba2"]): 15-17 times more in these cases' bf16 layers, the gap growing with the
  chunk size;
- gated DeltaNet (qwen3_next): fla's ``chunk_gated_delta_rule`` (use_qk_l2norm_in_kernel), which saves q, k
  (l2-normalised), their rstd, v, g (fp32 cumsum), beta and A (tokens x heads x 64, k's dtype), where the
  reference ``torch_chunk_gated_delta_rule`` keeps fp32 copies of q and k repeated to the value heads, the
  (64 x 64) per-chunk matrices and every chunk's state; the gated RMSNorm around it runs in torch either way;
- short convolution (lfm2) and the depthwise convs of the others: causal_conv1d's CUDA kernel, which saves its
  input (as F.conv1d does) and returns an unpadded output (F.conv1d's is padded by K-1 and sliced);
- Mamba-1 (jamba): mamba_ssm's ``selective_scan_fn`` (saves u, delta, B, C, z, the output and one state per
  2048 tokens), where the reference scan loops over tokens in Python and keeps every token's (inner x state)
  state in fp32 and in the model dtype: its activations are far above a GPU's.
Weights and caches do not depend on the kernel (transformers' cache classes allocate them either way). The
prefill working set does: the reference chunked scan makes (batch x chunks x heads x chunk x chunk) fp32
temporaries, several at once, that the kernels never materialise.

Usage:
    /tmp/hf/bin/python validation/measure_hybrid.py              # all cases -> validation/measured_hybrid.json
    /tmp/hf/bin/python validation/measure_hybrid.py --only lfm2  # cases whose label contains 'lfm2', printed only
    /tmp/hf/bin/python validation/measure_hybrid.py --mixers     # also the mixers-alone sweep
    /tmp/hf/bin/python validation/measure_hybrid.py --redo "falcon_h1 a train"   # re-measure those, keep the rest
    /tmp/hf/bin/python validation/measure_hybrid.py --compare    # the record beside pycore's estimate
"""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch
import transformers

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402   (also sets measure's CUDA-like dropout and puts pycore on the path)
from cuda_autocast import cuda_autocast  # noqa: E402
import compare  # noqa: E402
from pycore.inputs import frameworks, schema  # noqa: E402
from pycore.memory.estimate import resolve_architecture  # noqa: E402

OUT = ROOT / "validation" / "measured_hybrid.json"
VARIANTS = ROOT / "tests" / "configs" / "variants"

# family -> (synthetic variant, size "b" changes to it). Size b doubles hidden and widens the mixer (heads, head
# size, state, chunk) so that per-layer formulas are fitted over more than one shape.
FAMILIES = {
    "qwen3_next": ("synthetic-qwen3-next-dense-layers", dict(
        hidden_size=512, intermediate_size=1024, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
        linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=64, linear_value_head_dim=64,
        moe_intermediate_size=128, shared_expert_intermediate_size=192)),
    "granitemoehybrid": ("synthetic-granite-hybrid-dense-attention", dict(
        hidden_size=512, intermediate_size=1024, shared_intermediate_size=768, num_attention_heads=8,
        mamba_n_heads=16, mamba_d_head=64, mamba_d_state=64, mamba_n_groups=1, mamba_chunk_size=128)),
    "nemotron_h": ("synthetic-nemotron-h-override-pattern", dict(
        hidden_size=512, intermediate_size=1024, num_attention_heads=8, head_dim=64, mamba_num_heads=16,
        mamba_head_dim=64, ssm_state_size=64, n_groups=4, chunk_size=256, moe_intermediate_size=256,
        moe_shared_expert_intermediate_size=384)),
    "falcon_h1": ("synthetic-falcon-h1-rms-norm", dict(
        hidden_size=512, intermediate_size=1024, num_attention_heads=8, mamba_d_ssm=1024, mamba_n_heads=16,
        mamba_d_head=64, mamba_n_groups=1, mamba_d_state=64, mamba_chunk_size=128)),
    "mamba2": ("synthetic-mamba2-biased", dict(
        hidden_size=512, num_heads=16, head_dim=64, state_size=64, n_groups=1, chunk_size=128, time_step_rank=32)),
    "jamba": ("synthetic-jamba-periods", dict(
        hidden_size=512, intermediate_size=1024, num_attention_heads=8, mamba_d_state=16, mamba_dt_rank=32)),
    "lfm2": ("synthetic-lfm2-conv-layers", dict(
        hidden_size=512, intermediate_size=1536, num_attention_heads=8, conv_L_cache=4)),
    # Qwen3.5-MoE's text model: Qwen3.5's gated DeltaNet and gated attention, routed experts and a gated shared expert in
    # every layer
    "qwen3_5_moe": ("synthetic-qwen3-5-moe-small", dict(
        hidden_size=512, num_attention_heads=8, num_key_value_heads=2, head_dim=64, linear_num_key_heads=4,
        linear_num_value_heads=8, linear_key_head_dim=64, linear_value_head_dim=64, moe_intermediate_size=128,
        shared_expert_intermediate_size=192)),
}

# (family, size, mode, precision, batch, seq, new_tokens). Jamba's reference Mamba-1 scan loops over tokens in
# Python and keeps every step for backward, so its training cases are shorter.
RUNS = [
    *((f, "a", "infer", "bf16", 2, 512, 8) for f in FAMILIES),
    *((f, "b", "infer", "bf16", 1, 1024, 8) for f in FAMILIES),
    *((f, "a", "train", "bf16", 2, 256 if f == "jamba" else 512, 0) for f in FAMILIES),
    *((f, "b", "train", "bf16", 1, 256 if f == "jamba" else 1024, 0) for f in FAMILIES),
    ("mamba2", "a", "train", "fp32", 2, 512, 0),
    ("qwen3_next", "a", "train", "fp32", 1, 512, 0),
    ("mamba2", "a", "train", "amp-bf16", 2, 512, 0),
    ("qwen3_next", "a", "train", "amp-bf16", 2, 512, 0),
    ("lfm2", "a", "train", "amp-bf16", 2, 512, 0),
]


def config_json(family, size):
    variant, changes = FAMILIES[family]
    config = json.loads((VARIANTS / f"{variant}.json").read_text())
    if size == "b":
        config.update(changes)
    return config


def label_of(family, size, mode, precision, batch, seq, new_tokens):
    shape = f"b{batch} s{seq}+{new_tokens}" if mode == "infer" else f"b{batch}s{seq}"
    return f"{family} {size} {mode} {precision} {shape}"


def case_inputs(path, mode, precision, batch, seq, new_tokens):
    inputs = dict(config=str(path), mode=mode, precision=precision, batch=str(batch), seq=str(seq),
                  optimizer_impl="foreach")
    if mode == "infer":
        inputs["new_tokens"] = str(new_tokens)
    return inputs


def build(config, values):
    """The transformers model of a config.json dict, created in the case's weight dtype."""
    fields = dict(config)
    model_type = fields.pop("model_type")
    hf_config = transformers.AutoConfig.for_model(model_type, **fields)
    hf_config.use_cache = False
    if model_type != "mamba2":
        hf_config._attn_implementation = "sdpa"      # measure.py's attention=flash (CPU: K/V expanded)
    dtype = measure.DTYPES[values["precision"][:4]] if values["precision"][:4] in ("bf16", "fp16") else torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        model = transformers.AutoModelForCausalLM.from_config(hf_config)
    finally:
        torch.set_default_dtype(previous)
    return model


def rounded(tensor):
    return -(-tensor.untyped_storage().nbytes() // 512) * 512


def cache_bytes(cache):
    """The tensors a generate() cache holds, by kind: attention keys/values, convolution and recurrent states."""
    seen, out = set(), {"kv_cache": 0, "conv_state": 0, "recurrent_state": 0, "other": 0}

    def walk(obj, name, depth):
        if depth > 6:
            return
        if isinstance(obj, torch.Tensor):
            key = obj.untyped_storage().data_ptr()
            if key in seen or obj.numel() == 0:
                return
            seen.add(key)
            lowered = name.lower()
            kind = ("conv_state" if "conv" in lowered else "recurrent_state" if ("recurrent" in lowered or "ssm" in lowered)
                    else "kv_cache" if ("key" in lowered or "value" in lowered) else "other")
            out[kind] += rounded(obj)
        elif isinstance(obj, (list, tuple)):
            for item in obj:
                walk(item, name, depth + 1)
        elif isinstance(obj, dict):
            for key, item in obj.items():
                walk(item, f"{name}.{key}", depth + 1)
        elif hasattr(obj, "__dict__") and not isinstance(obj, (torch.nn.Module, type)):
            for key, item in vars(obj).items():
                walk(item, key, depth + 1)

    walk(cache, "cache", 0)
    return out


MIXER_ATTRS = ("linear_attn", "mamba", "mixer", "conv", "self_attn")


def mixer_of(block):
    """The block's sequence mixer and its kind: attention, mamba2, mamba, deltanet or shortconv."""
    for attr in MIXER_ATTRS:
        module = getattr(block, attr, None)
        if isinstance(module, torch.nn.Module):
            name = type(module).__name__.lower()
            kind = ("deltanet" if "deltanet" in name else "shortconv" if "shortconv" in name
                    else "attention" if "attention" in name
                    else "mamba2" if ("mamba2" in name or "mambalayer" in name or "falconh1mixer" in name)
                    else "mamba" if "mamba" in name else name)
            return attr, module, kind
    return None, None, "mlp"


def block_profile(tracker, model, layers):
    """Per block: the mixer kind, and the bytes the block and its mixer leave live after their forward."""
    from torch.distributed._tools.mem_tracker import _ModState
    stats = tracker.memory_tracking

    def delta(module):
        if module not in stats or not stats[module].snapshots.get(_ModState.POST_FW):
            return None
        pre = next(iter(stats[module].snapshots[_ModState.PRE_FW][0].values()))["Total"]
        post = next(iter(stats[module].snapshots[_ModState.POST_FW][0].values()))["Total"]
        return post - pre
    rows = []
    for block in measure.blocks(model, layers):
        attr, mixer, kind = mixer_of(block)
        # Falcon-H1 runs attention and Mamba-2 side by side in every block
        if attr == "mamba" and isinstance(getattr(block, "self_attn", None), torch.nn.Module):
            kind = "attention+mamba2"
        rows.append({"kind": kind, "block": delta(block), "mixer": delta(mixer) if mixer is not None else None})
    return rows


def run_case(family, size, mode, precision, batch, seq, new_tokens, config_dir):
    torch.manual_seed(0)
    config = config_json(family, size)
    path = Path(config_dir) / f"{family}-{size}.json"
    path.write_text(json.dumps(config))
    inputs = case_inputs(path, mode, precision, batch, seq, new_tokens)
    values = frameworks.apply(schema.parse(compare.measured_inputs(inputs)))
    arch = resolve_architecture(values)
    started = time.time()
    model = build(config, values)
    params = sum(p.numel() for p in model.parameters())
    result = {"label": label_of(family, size, mode, precision, batch, seq, new_tokens), "family": family,
              "size": size, "inputs": {k: v for k, v in inputs.items() if k != "config"}, "config_json": config,
              "tensor_mode": "real", "optimizer_impl": values["optimizer_impl"], "params": params,
              "layer_pattern": arch.layer_pattern}
    if mode == "infer":
        tracker = measure.measure_infer(values, arch, model)
        ids = torch.randint(1, arch.vocab, (batch, seq))
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                 return_dict_in_generate=True)
        result["cache_bytes"] = cache_bytes(out.past_key_values)
        del out
    else:
        tracker = measure.measure_train(values, arch, model, values["optimizer_impl"], "cuda")
        result["blocks"] = block_profile(tracker, model, arch.layers)
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    result["peak_bytes"] = peak["Total"]
    result["peak_breakdown"] = {getattr(k, "value", str(k)): v for k, v in peak.items() if k != "Total"}
    result["seconds"] = round(time.time() - started, 1)
    return result


# ---- mixers alone: the bytes each saves for backward ----

def saved_bytes(module, x, amp=False):
    """Bytes of the distinct storages ``module(x)`` saves for backward, parameters and x itself left out,
    each rounded to 512 bytes; and the bytes by dtype. amp: under autocast to bf16 with CUDA's casting rules."""
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    # autocast's bf16 copies of the weights (a per-layer constant, not per token): a saved bf16 tensor of a
    # weight's shape. The sweep's token counts (320, 640) are no weight's dimension, so none is mistaken.
    shapes = {tuple(p.shape) for p in module.parameters() if p.dim() >= 2}
    shapes |= {s[::-1] for s in shapes} | {(s[0], s[-1]) for s in shapes if len(s) == 3}
    storages, casts = {}, {}

    def pack(tensor):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in params and key != x.untyped_storage().data_ptr():
            if amp and tensor.dtype == torch.bfloat16 and tuple(tensor.shape) in shapes:
                casts[key] = storage.nbytes()
            else:
                storages[key] = (storage.nbytes(), tensor.dtype)
        return tensor
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast, cuda_autocast(amp):
        out = module(x)
    out = out[0] if isinstance(out, tuple) else out
    total = sum(-(-n // 512) * 512 for n, _ in storages.values())
    by_dtype = {}
    for n, dtype in storages.values():
        by_dtype[str(dtype).removeprefix("torch.")] = by_dtype.get(str(dtype).removeprefix("torch."), 0) + n
    return total, by_dtype, len(storages), sum(casts.values())


MIXER_SWEEP = {
    # family: list of config changes; each run at (batch, seq) in SWEEP_SHAPES
    "mamba2": [dict(hidden_size=256, num_heads=8, head_dim=64, state_size=16, n_groups=2, chunk_size=256),
               dict(hidden_size=512, num_heads=16, head_dim=64, state_size=64, n_groups=1, chunk_size=128),
               dict(hidden_size=512, num_heads=8, head_dim=128, state_size=128, n_groups=8, chunk_size=64),
               dict(hidden_size=384, num_heads=12, head_dim=64, state_size=32, n_groups=4, chunk_size=256,
                    conv_kernel=2)],
    "qwen3_next": [dict(hidden_size=256, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32,
                        linear_value_head_dim=48),
                   dict(hidden_size=512, linear_num_key_heads=4, linear_num_value_heads=8, linear_key_head_dim=64,
                        linear_value_head_dim=64),
                   dict(hidden_size=512, linear_num_key_heads=2, linear_num_value_heads=8, linear_key_head_dim=128,
                        linear_value_head_dim=32, linear_conv_kernel_dim=2)],
    "lfm2": [dict(hidden_size=256, conv_L_cache=3), dict(hidden_size=512, conv_L_cache=4),
             dict(hidden_size=768, conv_L_cache=2)],
    "jamba": [dict(hidden_size=256, mamba_d_state=8, mamba_dt_rank=24),
              dict(hidden_size=512, mamba_d_state=16, mamba_dt_rank=32),
              dict(hidden_size=256, mamba_d_state=32, mamba_dt_rank=16, mamba_expand=4)],
}
SWEEP_SHAPES = ((1, 320), (2, 320), (1, 640))


def mixer_module(family, changes, dtype):
    config = config_json(family, "a")
    config.update(changes)
    config["num_hidden_layers"] = {"jamba": 2, "lfm2": 1, "qwen3_next": 1, "mamba2": 1}[family]
    if family == "jamba":
        config.update(attn_layer_period=2, attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1)
    if family == "lfm2":
        config["layer_types"] = ["conv"]
    if family == "qwen3_next":
        config["layer_types"] = ["linear_attention"]
        config["mlp_only_layers"] = [0]
    torch.set_default_dtype(dtype)
    try:
        model = build(config, {"precision": "bf16" if dtype == torch.bfloat16 else "fp32"})
    finally:
        torch.set_default_dtype(torch.float32)
    model.train()
    _, module, kind = mixer_of(measure.blocks(model, config["num_hidden_layers"])[0])
    return config, module, kind


def mixer_sweep():
    rows = []
    for family, variants in MIXER_SWEEP.items():
        for changes in variants:
            for precision in ("bf16", "fp32", "amp-bf16"):
                dtype = torch.bfloat16 if precision == "bf16" else torch.float32
                torch.manual_seed(0)
                config, module, kind = mixer_module(family, changes, dtype)
                for batch, seq in SWEEP_SHAPES:
                    x = torch.randn(batch, seq, config["hidden_size"], dtype=dtype, requires_grad=True)
                    total, by_dtype, count, casts = saved_bytes(module, x, amp=precision == "amp-bf16")
                    row = {"family": family, "kind": kind, "precision": precision,
                           "batch": batch, "seq": seq, "config": changes, "saved_bytes": total,
                           "saved_by_dtype": by_dtype, "tensors": count, "weight_casts": casts}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
    return rows


# ---- what each mixer saves for backward, as formulas fitted to the sweep ----
# Bytes one mixer layer keeps for backward for a batch of B sequences of S tokens on transformers 5.24's reference
# (torch) path, beyond its input (which the block's norm output is anyway), parameters and autocast's weight copies
# left out. Dimensions as pycore/model/mixers.py names them; T = B*S tokens; S' = S rounded up to the chunk size,
# T' = B*S'; c = S'/l chunks; pad = (S+K-1)/S (F.conv1d's padded output, sliced but kept whole).
MIXER_FORMULAS = {
    "mamba2": {
        "dims": "I = heads*head_dim (inner), H heads, P head_dim, G groups, N state, l chunk, K conv width",
        "bf16": "2*T*[(2I+2GN+H) + (I+2GN)*pad + 2H + I] + 4*T*(5I+2H+G) + 4*T'*(5I+5HN+3Hl+2H) + 4*B*HPN(2c+1) + 2*l^2",
        "fp32": "4*T*[(2I+2GN+H) + (I+2GN)*pad + 2H] + 4*T*(5I+2H+G+2GN-H) + 4*T'*(5I+5HN+3Hl+2H) + 4*B*HPN(2c+1) + 2*l^2",
        "amp-bf16": "2*T*[h + (I+2GN)*(1+pad) + I] + 2*T'*(3I+4HN+2Hl) + 2*B*HPN(2c+1) + 4*T*(5I+2H+G) + 4*T'*(2I+HN+Hl+2H)",
    },
    "deltanet": {
        "dims": "Hk key heads, Hv value heads, dk key dim, dv value dim, K conv width, C = 64 (the torch path's "
                "chunk), conv = 2*Hk*dk + Hv*dv; q and k are repeated to Hv heads before the scan",
        "bf16": "2*T*[conv*(1+pad) + Hv + 3*Hv*dv] + 4*T*(8*Hv*dk + 5*Hv*C + 6*Hv*dv + 9*Hv + Hv*dk*dv/C) + C^2",
        "fp32": "4*T*[conv*(1+pad) + 12*Hv*dk + 5*Hv*C + 9*Hv*dv + 10*Hv + Hv*dk*dv/C] + C^2",
        "amp-bf16": "2*T*[h + conv*(1+pad) + Hv + Hv*dk*(5+2(c-1)/c) + 3*Hv*C + 4*Hv*dv + 2*Hv*dk*dv/C] "
                    "+ 4*T*(6*Hv*dk + 2*Hv*C + 6*Hv*dv + 9*Hv + Hv*dk*dv/C) + C^2",
    },
    "shortconv": {
        "dims": "h hidden, K = conv_L_cache",
        "bf16": "2*T*h*(5 + pad)", "fp32": "4*T*h*(5 + pad)", "amp-bf16": "2*T*h*(6 + pad)",
    },
    "mamba": {
        "dims": "D = expand*hidden (inner), N state, R dt rank, K conv width; the reference scan loops over tokens "
                "and keeps each step's D x N state",
        "bf16": "2*T*[8D + D*pad + D*N + R + 2N] + 4*T*(3*D*N + 2D + 3N + R)",
        "fp32": "4*T*[3*D*N + 8D + D*pad + 3R + 6N + 3]",
        "amp-bf16": "2*T*[h + 6D + D*pad + D*N + 2R + 2N] + 4*T*(3*D*N + 4D + 3N + R)",
    },
}


def mixer_dims(family, config):
    """(mixer kind, its dimensions) of a family's config.json dict."""
    c, h = config, config["hidden_size"]
    if family in ("mamba2", "granitemoehybrid", "nemotron_h", "falcon_h1"):
        keys = {"mamba2": ("num_heads", "head_dim", "n_groups", "state_size", "chunk_size", "conv_kernel"),
                "granitemoehybrid": ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state",
                                     "mamba_chunk_size", "mamba_d_conv"),
                "nemotron_h": ("mamba_num_heads", "mamba_head_dim", "n_groups", "ssm_state_size", "chunk_size",
                               "conv_kernel"),
                "falcon_h1": ("mamba_n_heads", "mamba_d_head", "mamba_n_groups", "mamba_d_state", "mamba_chunk_size",
                              "mamba_d_conv")}[family]
        H, P, G, N, l, K = (c[k] for k in keys)  # noqa: E741   (the formulas' symbols)
        inner = c["mamba_d_ssm"] if family == "falcon_h1" else H * P
        return "mamba2", dict(h=h, I=inner, H=H, P=P, G=G, N=N, l=l, K=K)
    if family in ("qwen3_next", "qwen3_5_moe"):
        return "deltanet", dict(h=h, Hk=c["linear_num_key_heads"], Hv=c["linear_num_value_heads"],
                                dk=c["linear_key_head_dim"], dv=c["linear_value_head_dim"], K=c["linear_conv_kernel_dim"])
    if family == "lfm2":
        return "shortconv", dict(h=h, K=c["conv_L_cache"])
    return "mamba", dict(h=h, D=int(c.get("mamba_expand", 2) * h), N=c["mamba_d_state"], R=c["mamba_dt_rank"],
                         K=c["mamba_d_conv"])


def mixer_saved(kind, d, batch, seq, precision):
    """MIXER_FORMULAS[kind][precision] evaluated (bytes for the batch)."""
    T, pad = batch * seq, (seq + d["K"] - 1) / seq
    if kind == "shortconv":
        return T * d["h"] * ((6 + pad) * 2 if precision == "amp-bf16" else (5 + pad) * (4 if precision == "fp32" else 2))
    if kind == "mamba2":
        I, H, P, G, N, l, h = (d[k] for k in "I H P G N l h".split())  # noqa: E741
        c = -(-seq // l)
        Tp, states = batch * c * l, batch * H * P * N * (2 * c + 1)
        if precision == "amp-bf16":
            return (2 * (T * (h + (I + 2 * G * N) * (1 + pad) + I) + Tp * (3 * I + 4 * H * N + 2 * H * l) + states)
                    + 4 * (T * (5 * I + 2 * H + G) + Tp * (2 * I + H * N + H * l + 2 * H)))
        e = 2 if precision == "bf16" else 4
        own = T * ((2 * I + 2 * G * N + H) + (I + 2 * G * N) * pad + 2 * H + (I if e == 2 else 0))
        fp32 = T * (5 * I + 2 * H + G + (2 * G * N - H if e == 4 else 0)) + Tp * (5 * I + 5 * H * N + 3 * H * l + 2 * H)
        return e * own + 4 * (fp32 + states) + 2 * l * l
    if kind == "deltanet":
        Hk, Hv, dk, dv, h, C = d["Hk"], d["Hv"], d["dk"], d["dv"], d["h"], 64
        conv, c = 2 * Hk * dk + Hv * dv, -(-seq // C)
        if precision == "amp-bf16":
            return T * (2 * (h + conv * (1 + pad) + Hv + Hv * dk * (5 + 2 * (c - 1) / c) + 3 * Hv * C + 4 * Hv * dv
                             + 2 * Hv * dk * dv / C)
                        + 4 * (6 * Hv * dk + 2 * Hv * C + 6 * Hv * dv + 9 * Hv + Hv * dk * dv / C)) + C * C
        if precision == "bf16":
            return T * (2 * (conv * (1 + pad) + Hv + 3 * Hv * dv)
                        + 4 * (8 * Hv * dk + 5 * Hv * C + 6 * Hv * dv + 9 * Hv + Hv * dk * dv / C)) + C * C
        return T * 4 * (conv * (1 + pad) + 12 * Hv * dk + 5 * Hv * C + 9 * Hv * dv + 10 * Hv + Hv * dk * dv / C) + C * C
    D, N, R, h = d["D"], d["N"], d["R"], d["h"]
    if precision == "amp-bf16":
        return T * (2 * (h + 6 * D + D * pad + D * N + 2 * R + 2 * N) + 4 * (3 * D * N + 4 * D + 3 * N + R))
    if precision == "bf16":
        return T * (2 * (8 * D + D * pad + D * N + R + 2 * N) + 4 * (3 * D * N + 2 * D + 3 * N + R))
    return T * 4 * (3 * D * N + 8 * D + D * pad + 3 * R + 6 * N + 3)


def mixer_matrices(kind, d):
    """Elements of a mixer's projection and convolution weights: what autocast keeps a bf16 copy of."""
    if kind == "mamba2":
        inner, groups, state, heads = d["I"], d["G"], d["N"], d["H"]
        return ((2 * inner + 2 * groups * state + heads) * d["h"] + d["h"] * inner
                + (inner + 2 * groups * state) * d["K"])
    if kind == "deltanet":
        key, value = d["Hk"] * d["dk"], d["Hv"] * d["dv"]
        return (2 * key + 2 * value + 2 * d["Hv"]) * d["h"] + d["h"] * value + (2 * key + value) * d["K"]
    if kind == "shortconv":
        return 4 * d["h"] * d["h"] + d["h"] * d["K"]
    return (2 * d["D"] * d["h"] + d["D"] * (d["R"] + 2 * d["N"]) + d["R"] * d["D"] + d["h"] * d["D"]
            + d["D"] * d["K"])


def mixer_fit(sweep, cases):
    """The formulas beside what was measured: each sweep row (a mixer alone), and each training case's mixers in
    the whole model (MemTracker: what the mixer module leaves live after its forward, less its output; Falcon-H1's
    mixer also keeps its input times ssm_in_multiplier, h*e more; under amp, autocast's bf16 weight copies)."""
    rows = []
    for row in sweep:
        config = {**config_json(row["family"], "a"), **row["config"]}
        kind, d = mixer_dims(row["family"], config)
        predicted = mixer_saved(kind, d, row["batch"], row["seq"], row["precision"])
        rows.append({"where": "mixer alone", "family": row["family"], "kind": kind, "precision": row["precision"],
                     "batch": row["batch"], "seq": row["seq"], "dims": d, "measured": row["saved_bytes"],
                     "formula": round(predicted), "error": round((predicted - row["saved_bytes"]) / row["saved_bytes"], 5)})
    for case in cases:
        if case["inputs"]["mode"] != "train":
            continue
        batch, seq, precision = int(case["inputs"]["batch"]), int(case["inputs"]["seq"]), case["inputs"]["precision"]
        kind, d = mixer_dims(case["family"], case["config_json"])
        e = 4 if precision == "fp32" else 2          # the mixer's output (out_proj's, bf16 under autocast)
        block = next(b for b in case["blocks"] if b["kind"] in (kind, "attention+" + kind))
        measured = block["mixer"] - batch * seq * d["h"] * e
        predicted = mixer_saved(kind, d, batch, seq, precision) + (batch * seq * d["h"] * e
                                                                     if case["family"] == "falcon_h1" else 0)
        if precision == "amp-bf16":       # in the model, the mixer's bf16 weight copies are live too
            predicted += 2 * mixer_matrices(kind, d)
        rows.append({"where": "in the model", "family": case["family"], "kind": kind, "precision": precision,
                     "batch": batch, "seq": seq, "dims": d, "measured": measured, "formula": round(predicted),
                     "error": round((predicted - measured) / measured, 5)})
    return {"formulas": MIXER_FORMULAS, "rows": rows}


def compare_rows(path=OUT):
    """Each case beside pycore's estimate for the same inputs: the peak, and per pool where the measurement
    names it (weights: MemTracker's parameters; kv_cache and recurrent_state: the cache generate() ends with;
    activations: what MemTracker calls activations and temporaries at the peak). Standard library and pycore only."""
    from pycore import estimate
    record = json.loads(Path(path).read_text())
    out = []
    with tempfile.TemporaryDirectory() as config_dir:
        for case in record["cases"]:
            config = Path(config_dir) / f"{case['family']}-{case['size']}.json"
            config.write_text(json.dumps(case["config_json"]))
            result = estimate(compare.measured_inputs({**case["inputs"], "config": str(config)}))
            pools, breakdown = result.components, case["peak_breakdown"]
            measured = {"weights": breakdown.get("Parameter", 0) + breakdown.get("Buffer", 0)}
            if "cache_bytes" in case:
                cache = case["cache_bytes"]
                measured.update(kv_cache=cache["kv_cache"], recurrent_state=cache["conv_state"] + cache["recurrent_state"])
            else:
                measured.update(optimizer=breakdown.get("Optstate", 0), gradients=breakdown.get("Gradient", 0),
                                activations=breakdown.get("Activation", 0) + breakdown.get("Temp", 0))
            out.append({"label": case["label"], "family": case["family"], "mode": case["inputs"]["mode"],
                        "measured": case["peak_bytes"], "estimated": result.peak_bytes,
                        "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"],
                        "phase": result.peak_phase, "pools": {k: (v, pools.get(k)) for k, v in measured.items()},
                        "estimated_pools": dict(pools), "params_match": case["params"] == result.params_total})
    return record, out


def print_comparison():
    """The record's cases beside the estimate (Markdown), then the mixer formulas' worst error per kind."""
    record, rows = compare_rows()
    mib = 2 ** 20
    print("| case | measured MiB | estimate MiB | error | estimated peak | pools: measured / estimated MiB |")
    print("|---|---:|---:|---:|---|---|")
    for r in rows:
        pools = ", ".join(f"{k} {m / mib:.2f} / {(e or 0) / mib:.2f}" for k, (m, e) in r["pools"].items())
        print(f"| {r['label']} | {r['measured'] / mib:.1f} | {r['estimated'] / mib:.1f} | {100 * r['error']:+.1f}% "
              f"| {r['phase']} | {pools} |")
    worst = {}
    for row in record.get("mixer_fit", {}).get("rows", []):
        key = (row["where"], row["kind"], row["precision"])
        worst[key] = max(worst.get(key, 0.0), abs(row["error"]))
    for (where, kind, precision), error in sorted(worst.items()):
        print(f"{kind:9s} {precision:8s} {where:12s} formula within {100 * error:.2f}%")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text; print, do not save")
    parser.add_argument("--mixers", action="store_true", help="also run the mixers-alone sweep (else keep the record's)")
    parser.add_argument("--keep", action="store_true", help="keep the cases already in the record; measure the rest")
    parser.add_argument("--redo", help="re-measure the cases whose label contains this text (a|b: either), keep the rest")
    parser.add_argument("--compare", action="store_true",
                        help="measure nothing: print each recorded case beside pycore's estimate, as a Markdown table")
    args = parser.parse_args()
    if args.compare:
        print_comparison()
        return
    previous = json.loads(OUT.read_text()) if OUT.exists() else {"cases": [], "mixer_sweep": []}
    done = {}
    if args.keep or args.redo:
        redo = args.redo.split("|") if args.redo else []
        done = {c["label"]: c for c in previous["cases"] if not any(t in c["label"] for t in redo)}
    sweep = previous.get("mixer_sweep", [])
    results = []

    def save():
        measure.write_record(OUT, ABOUT, results)
        record = json.loads(OUT.read_text())
        record["mixer_sweep"] = sweep
        record["mixer_fit"] = mixer_fit(sweep, results)
        OUT.write_text(json.dumps(record, indent=1) + "\n")
    with tempfile.TemporaryDirectory() as config_dir:
        for run in RUNS:
            label = label_of(*run)
            if args.only and args.only not in label:
                continue
            if label in done:
                results.append(done[label])
                continue
            try:
                result = run_case(*run, config_dir)
            except Exception as error:          # one family's failure must not lose the others' measurements
                print(f"{label:44s} FAILED: {type(error).__name__}: {str(error)[:300]}", flush=True)
                continue
            print(f"{label:44s} peak {result['peak_bytes'] / 2**20:9.2f} MiB  params {result['params']:>10,d}"
                  f"  {result['seconds']:6.1f}s  {result.get('cache_bytes') or ''}", flush=True)
            results.append(result)
            if not args.only:
                save()
    if args.mixers:
        sweep = mixer_sweep()
    if not args.only:
        save()


ABOUT = ("Peak tensor bytes of generate() and one AdamW training step of the hybrid families on small configs, "
         "real tensors, transformers' reference (CPU) kernels, recorded by validation/measure_hybrid.py")

if __name__ == "__main__":
    main()
