"""Measure LoRA training steps as PEFT runs them, and what each adapted layer saves for backward.

Dev-only: needs torch, transformers and peft (never dependencies of pycore). Every case is a small Llama or
Qwen2 config wrapped by ``peft.get_peft_model`` exactly as a user calls it: ``LoraConfig(r, lora_alpha=2r,
lora_dropout, target_modules)`` and PEFT's default ``autocast_adapter_dtype=True`` (16-bit adapters upcast to
fp32 with ``.to()``), real tensors. The set-up is validation/measure.py's: the model built by its ``build()``
in the weight dtype, one warm-up step so AdamW's state exists, then MemTracker records the next step (forward,
backward, optimizer step; each allocation rounded to 512 bytes as CUDA's caching allocator does); amp-* cases
cast by CUDA autocast's rules (validation/cuda_autocast.py); dropout keeps CUDA's 1-byte mask (measure.py's
``cuda_like_dropout``); attention through SDPA, which transformers 5.24 hands grouped-query K/V unexpanded
(``use_gqa_in_sdpa``: no mask, head size <= 256), as on CUDA, so the cases name ``attention=flash``.

Beside each peak the record keeps what every block saves for backward (``saved_tensors_hooks`` over one
forward of the same batch: distinct storages, parameters and autocast's weight copies left out) and, for the
second block, those bytes per token by module and dtype: the terms pycore/memory/activations.py counts.

What PEFT 0.21's ``lora.Linear.forward`` (peft/tuners/lora/layer.py, lines 1088-1114) does, and so what
autograd keeps, with the base frozen:

- ``result = self.base_layer(x)``: the frozen linear keeps nothing of ``x`` (aten.mm saves its input only for
  the weight's gradient, which is not needed); under autocast it keeps the 16-bit copy of its weight.
- ``x = self._cast_input_dtype(x, lora_A.weight.dtype)`` (line 1100; tuners_utils.py ``_cast_input_dtype``):
  a 16-bit input is copied to the adapters' fp32, once per adapted layer (q, k and v each make their own).
- ``lora_B(lora_A(dropout(x))) * scaling`` (line 1102): with ``lora_dropout`` > 0, nn.Dropout keeps a 1-byte
  mask and lora_A keeps the dropout's output, again one per adapted layer; without it (nn.Identity) lora_A
  keeps x itself, shared by the layers that read the same x when no copy was made. Under autocast lora_A
  keeps its own 16-bit copy. lora_B keeps lora_A's output (r values a token). ``* scaling`` and the sum keep
  nothing.
- The norms' weights are frozen too: Llama's RMSNorm no longer keeps the normalised tensor that
  ``weight * x`` saves for the weight's gradient. Nothing before the first adapted layer needs a gradient (the
  embedding is frozen), so the first block's input norm keeps nothing.

DoRA (``use_dora=True``, the estimate's ``lora_variant=dora``; ``--dora``, the record's ``dora_study``). PEFT 0.21's
``DoraLinearVariant.forward`` (variants.py) hands ``result`` to ``DoraLinearLayer.forward`` (dora.py lines 132-165):
``(mag_norm_scale - 1) * base_result + mag_norm_scale * lora_result * scaling``. The magnitude vector is trained, so
autograd keeps, beside everything LoRA keeps, the base layer's output (its dtype: 2·out bytes a token on a bf16 base,
16-bit under autocast) and lora_B's output (the adapters' fp32, 4·out; 16-bit, 2·out, under autocast): 6·out per
adapted layer in bf16, 4·out under amp-bf16, exactly in the four study rows (q/v: 3,840 and 2,560 bytes a token more
per layer at hidden 512; all-linear 27,648 and 18,432). Each adapted layer's forward also builds, and frees when it
ends, ``torch.eye(in)`` in the adapters' dtype and ΔW = lora_B(lora_A(eye)) (``get_lora_weight``), the frozen weight
cast to x's dtype, scaling·ΔW and their sum, for the column norm (``get_weight_norm``): by the source (not measured
here) about in² + 4·in·out fp32 values at once on a 16-bit base with fp32 adapters, some 1.8 GB for Llama 3.1 8B's
down_proj (in = 14336), a transient of the forward and, with gradient checkpointing, of the backward's recomputation.

QLoRA is not measured here (bitsandbytes needs CUDA). PEFT's ``lora.bnb.Linear4bit.forward`` (bnb.py lines 543-552)
casts x to the adapters' dtype like ``lora.Linear`` when autocast is off, so the estimate applies the same terms;
``prepare_model_for_kbit_training`` also makes the embedding's output require grad (so the first block counts in
full) and upcasts the norms and embeddings to fp32, which the estimate does not model.

Usage:
    /tmp/measure/bin/python validation/measure_lora.py               # all cases -> validation/measured_lora.json
    /tmp/measure/bin/python validation/measure_lora.py --only qwen   # cases whose label contains 'qwen', printed
    /tmp/measure/bin/python validation/measure_lora.py --redo "amp"  # re-measure those, keep the others
    /tmp/measure/bin/python validation/measure_lora.py --dora        # the LoRA/DoRA study -> the record's dora_study
"""

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "validation"))
import measure  # noqa: E402  (replaces F.dropout with CUDA's 1-byte-mask dropout)
from cuda_autocast import cuda_autocast  # noqa: E402

OUT = ROOT / "validation" / "measured_lora.json"

LLAMA = dict(model="llama-3.1-8b", layers="2", hidden="512", heads="8", kv_heads="2", ffn="1408", vocab="32000",
             attention="flash", method="lora")
LLAMA4 = {**LLAMA, "layers": "4", "vocab": "8000"}
QWEN = dict(model="qwen2.5-0.5b", layers="2", hidden="448", heads="7", kv_heads="1", ffn="1216", vocab="32000",
            attention="flash", method="lora")
QWEN4 = {**QWEN, "layers": "4", "vocab": "8000"}


def case(base, targets, precision, rank, batch, seq, dropout, **more):
    inputs = {**base, "lora_targets": targets, "precision": precision, "lora_rank": str(rank), "batch": str(batch),
              "seq": str(seq), **more}
    family = "llama" if base["model"].startswith("llama") else "qwen2"
    size = f"{base['layers']}L"
    extra = " ".join(f"{k}={v}" for k, v in more.items())
    label = f"{family} {size} lora {targets} r{rank} {precision} dropout {dropout:g} b{batch}s{seq} {extra}".strip()
    return label, inputs, dropout


# (label, schema inputs, lora_dropout)
CASES = [
    case(LLAMA, "qv", "bf16", 8, 4, 1024, 0.0),
    case(LLAMA, "qv", "bf16", 8, 4, 1024, 0.05),
    case(LLAMA, "attention", "bf16", 16, 2, 1024, 0.0),
    case(LLAMA, "attention", "bf16", 16, 2, 1024, 0.1),
    case(LLAMA, "all-linear", "bf16", 64, 4, 512, 0.0),
    case(LLAMA, "all-linear", "bf16", 64, 4, 512, 0.05),
    case(LLAMA, "qv", "amp-bf16", 16, 4, 512, 0.0),
    case(LLAMA, "attention", "amp-bf16", 8, 2, 1024, 0.05),
    case(LLAMA, "all-linear", "amp-bf16", 16, 1, 1024, 0.0),
    case(LLAMA, "all-linear", "amp-bf16", 64, 2, 512, 0.1),
    case(LLAMA4, "all-linear", "bf16", 16, 4, 1024, 0.05),
    case(LLAMA4, "qv", "amp-bf16", 16, 4, 1024, 0.0),
    case(LLAMA4, "all-linear", "bf16", 16, 4, 1024, 0.05, recompute="full"),
    case(QWEN, "qv", "bf16", 16, 4, 512, 0.0),
    case(QWEN, "attention", "bf16", 64, 2, 1024, 0.05),
    case(QWEN, "all-linear", "bf16", 8, 1, 1024, 0.1),
    case(QWEN, "qv", "amp-bf16", 8, 4, 256, 0.05),
    case(QWEN, "attention", "amp-bf16", 16, 4, 256, 0.0),
    case(QWEN, "all-linear", "amp-bf16", 16, 2, 512, 0.0),
    case(QWEN4, "attention", "bf16", 16, 4, 1024, 0.0),
    case(QWEN4, "all-linear", "amp-bf16", 64, 2, 1024, 0.05),
    # adapters in the input's dtype, no dropout: lora_A keeps the input itself, once for the layers reading it
    case(QWEN, "attention", "bf16", 16, 4, 512, 0.0, lora_dtype="bf16"),
    case(LLAMA, "all-linear", "fp32", 16, 2, 512, 0.0),
    # DoRA (use_dora=True): the outputs it multiplies per token, and its column-norm working set, which the last
    # case (a wide MLP, 64 tokens) makes the peak
    case(LLAMA, "qv", "bf16", 16, 4, 512, 0.0, lora_variant="dora"),
    case(LLAMA, "all-linear", "bf16", 16, 2, 512, 0.0, lora_variant="dora"),
    case(LLAMA, "all-linear", "amp-bf16", 16, 2, 512, 0.0, lora_variant="dora"),
    case(QWEN, "attention", "bf16", 16, 4, 512, 0.0, lora_variant="dora"),
    case(LLAMA4, "all-linear", "bf16", 16, 4, 512, 0.0, recompute="full", lora_variant="dora"),
    case({**LLAMA, "ffn": "5632"}, "all-linear", "bf16", 8, 1, 64, 0.0, lora_variant="dora"),
]


def with_peft(model, values, dropout):
    """PEFT's LoRA as a user calls it: PEFT's defaults, fp32 adapters on a 16-bit base."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=values["lora_rank"], lora_alpha=2 * values["lora_rank"], lora_dropout=dropout,
                        target_modules=measure.LORA_MODULES[values["lora_targets"]],
                        use_dora=values.get("lora_variant") == "dora")
    # lora_dtype=bf16 on a bf16 base: the adapters left in the base's dtype (autocast_adapter_dtype=False)
    upcast = values["lora_dtype"] == "fp32"
    return get_peft_model(model, config, autocast_adapter_dtype=upcast)


def saved_profile(model, batch, values, layers):
    """One forward under saved_tensors_hooks: bytes each block saves (distinct storages, parameters and
    autocast's 16-bit weight copies left out), and the second block's bytes per token by module and dtype."""
    amp = values["precision"].startswith("amp-")
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    shapes = {tuple(p.shape) for p in model.parameters() if p.dim() >= 2}
    shapes |= {s[::-1] for s in shapes}
    stack, seen, handles = ["model"], {}, []
    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(lambda m, a, n=name: stack.append(n) and None))
        handles.append(module.register_forward_hook(lambda m, a, o: stack.pop() and None))

    def pack(tensor):
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in params and key not in seen:
            copy = amp and tensor.dtype == torch.bfloat16 and tuple(tensor.shape) in shapes
            seen[key] = (stack[-1], str(tensor.dtype).removeprefix("torch."), storage.nbytes(), copy)
        return tensor
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), cuda_autocast(amp), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        model(**batch)
    for handle in handles:
        handle.remove()
    tokens = values["batch"] * values["seq"]
    blocks, second = [0] * layers, defaultdict(float)
    for where, dtype, size, copy in seen.values():
        for index in range(layers):
            if f".layers.{index}." in where and not copy:
                blocks[index] += size
                if index == 1:
                    second[f"{where.split('.layers.1.')[1]} {dtype}"] += size / tokens
    return blocks, {k: round(v, 2) for k, v in sorted(second.items())}


def saved_by_module(inputs, dora, seq):
    """Bytes the second block saves for backward, by module and dtype, after one forward of a (1, seq) batch
    (every saved tensor held, so no storage is reused and counted twice; autocast's weight copies included)."""
    torch.manual_seed(0)
    values, arch, model = measure.build({**inputs, "batch": "1", "seq": str(seq)})
    from peft import LoraConfig, get_peft_model
    config = LoraConfig(r=values["lora_rank"], lora_alpha=2 * values["lora_rank"], use_dora=dora,
                        target_modules=measure.LORA_MODULES[values["lora_targets"]])
    model = get_peft_model(model, config)
    model.train()
    stack, seen = ["model"], {}
    for name, module in model.named_modules():
        module.register_forward_pre_hook(lambda m, a, n=name: stack.append(n) and None)
        module.register_forward_hook(lambda m, a, o: stack.pop() and None)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}

    def pack(tensor):
        key = tensor.untyped_storage().data_ptr()
        if key not in params and key not in seen:
            seen[key] = (stack[-1], str(tensor.dtype).removeprefix("torch."), tensor)
        return tensor
    amp = values["precision"].startswith("amp-")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), cuda_autocast(amp), \
            torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        model(**measure.make_batch(values, arch))
    out = defaultdict(int)
    for where, dtype, tensor in seen.values():
        if ".layers.1." in where:
            out[f"{where.split('.layers.1.')[1].replace('.default', '')} {dtype}"] += tensor.untyped_storage().nbytes()
    return out


def dora_study():
    """LoRA and DoRA (use_dora=True) side by side: what the second block saves per token, by module and dtype (the
    slope between 256 and 1024 tokens), and the bytes that do not grow with the tokens (held here because every
    saved tensor is held: DoRA's identity matrix and weight copies are freed when the layer's forward ends)."""
    rows = []
    for precision in ("bf16", "amp-bf16"):
        for targets in ("qv", "all-linear"):
            inputs = {**LLAMA, "vocab": "8000", "precision": precision, "lora_targets": targets, "lora_rank": "16"}
            for dora in (False, True):
                a, b = saved_by_module(inputs, dora, 256), saved_by_module(inputs, dora, 1024)
                slope = {k: (b.get(k, 0) - a.get(k, 0)) / 768 for k in sorted(set(a) | set(b))}
                rows.append({"precision": precision, "targets": targets, "use_dora": dora, "hidden": 512, "ffn": 1408,
                             "per_token": {k: round(v, 1) for k, v in slope.items() if v},
                             "per_token_total": round(sum(slope.values()), 1),
                             "fixed_bytes": round(sum(a.values()) - sum(slope.values()) * 256)})
                print(f"{precision} {targets} dora={dora}: {rows[-1]['per_token_total']} B/token, "
                      f"{rows[-1]['fixed_bytes'] / 2**20:.2f} MiB fixed", flush=True)
    return rows


def run_case(label, inputs, dropout):
    torch.manual_seed(0)
    started = time.time()
    values, arch, model = measure.build(inputs)
    model = with_peft(model, values, dropout)
    batch = measure.make_batch(values, arch)
    model.train()
    blocks, second = saved_profile(model, batch, values, arch.layers)
    # measure.measure_train with PEFT's model: it applies recompute, the warm-up step and the tracked step
    original = measure.with_lora
    measure.with_lora = lambda m, v: m
    try:
        tracker = measure.measure_train(values, arch, model, measure.optimizer_impl(inputs), "cuda")
    finally:
        measure.with_lora = original
    (peak,) = tracker.get_tracker_snapshot("peak").values()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"label": label, "inputs": inputs, "lora_dropout": dropout, "tensor_mode": "real",
            "autocast": "cuda" if values["precision"].startswith("amp-") else "none",
            "params": sum(p.numel() for p in model.parameters()), "trainable_params": trainable,
            "peak_bytes": peak["Total"],
            "peak_breakdown": {getattr(k, "value", str(k)): v for k, v in peak.items() if k != "Total"},
            "saved_per_block": blocks, "saved_per_token_block_1": second,
            "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text; print, do not save")
    parser.add_argument("--redo", help="re-measure the cases whose label contains this text (a|b: either)")
    parser.add_argument("--dora", action="store_true", help="only the LoRA/DoRA saved-tensor study: the record's "
                                                            "dora_study, the cases kept")
    args = parser.parse_args()
    if args.dora:
        record = json.loads(OUT.read_text())
        record["dora_study"] = dora_study()
        OUT.write_text(json.dumps(record, indent=1) + "\n")
        return
    done = {}
    if args.redo and OUT.exists():
        redo = args.redo.split("|")
        done = {r["label"]: r for r in json.loads(OUT.read_text())["cases"] if not any(t in r["label"] for t in redo)}
    results = []
    for label, inputs, dropout in CASES:
        if args.only and args.only not in label:
            continue
        if label in done and done[label]["inputs"] == inputs and done[label]["lora_dropout"] == dropout:
            results.append(done[label])
            continue
        result = run_case(label, inputs, dropout)
        print(f"{label:64s} {result['peak_bytes'] / 2**20:9.1f} MiB  blocks {result['saved_per_block']}  "
              f"{result['seconds']} s", flush=True)
        results.append(result)
    if not args.only:
        import peft
        about = ("LoRA training steps through PEFT (validation/measure_lora.py): peak of live tensor bytes of one "
                 f"step after a warm-up step, MemTracker; peft {peft.__version__}")
        study = json.loads(OUT.read_text()).get("dora_study") if OUT.exists() else None
        measure.write_record(OUT, about, results)
        if study:                                   # the --dora study is kept beside the cases
            record = json.loads(OUT.read_text())
            OUT.write_text(json.dumps({**record, "dora_study": study}, indent=1) + "\n")


if __name__ == "__main__":
    main()
