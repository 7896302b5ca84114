"""Measure the hybrid and vision-language families' cases on a real GPU: the peak the CUDA caching allocator reports.

Dev-only: needs torch with CUDA, transformers and peft, and a GPU. ``--device cpu`` runs the same code on the CPU
with no memory figures, to try the script where there is no GPU.

The cases are validation/measure_hybrid.py's (``RUNS``: generate() and training steps of small qwen3_next,
granitemoehybrid, nemotron_h, falcon_h1, mamba2, jamba and lfm2 configs) and validation/measure_vl.py's (training
steps and generate() calls of small vision-language configs with images), built by those scripts' own code, the same
models, batches and images; and ``FULL``, whole models from their config.json in tests/configs (random weights, made
on the GPU in bf16), with the same batches and images, labelled (gpu). Each runs in a process of its own as
validation/measure_cuda.py runs its cases: a warm-up step or generate() call, ``torch.cuda.reset_peak_memory_stats()``, the measured call, then
``torch.cuda.max_memory_allocated()``, ``max_memory_reserved()`` and the process's memory as the driver reports it.
CUDA's own autocast, SDPA kernels and cuBLAS run instead of the CPU stand-ins.

A hybrid case labelled ``fla`` runs with flash-linear-attention importable (the folder ``--fla`` names is put on the
case's PYTHONPATH): transformers 5.24 then takes fla's ``chunk_gated_delta_rule`` for Qwen3-Next's gated DeltaNet
(hub_kernels.use_kernel_func_from_hub_with_fallback), while its convolution stays torch's (causal_conv1d is not
installed). The other cases run with neither, as the CPU record's did: transformers' reference torch scans.

Usage:
    python validation/measure_cuda_families.py --jobs 12 --fla /tmp/fla     # -> validation/measured_cuda_families.json
    python validation/measure_cuda_families.py --only lfm2 --device cpu      # try the code without a GPU
    python validation/measure_cuda_families.py --case "lfm2 a train bf16 b2s512"   # one case, JSON on stdout
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import measure_cuda  # noqa: E402

OUT = ROOT / "validation" / "measured_cuda_families.json"
CONFIGS = ROOT / "tests" / "configs"
# Whole models from their published config.json (tests/configs, random weights, bf16), labelled (gpu): measure_vl.py's
# cases take (family, precision, batch, text tokens, images a sequence, width, height[, method]) with the config's
# file; measure_hybrid.py's (family, size, mode, precision, batch, seq, new tokens). Qwen's images are whole multiples
# of patch x merge, so smart_resize leaves them as they are.
FULL = [
    ("gemma-3-27b-it", "vl-generate", ("gemma3", "bf16", 1, 128, 2, 896, 896)),
    ("qwen2.5-vl-7b-instruct", "vl-generate", ("qwen2_5_vl", "bf16", 1, 128, 1, 1288, 728)),
    ("qwen2.5-vl-7b-instruct", "vl", ("qwen2_5_vl", "bf16", 1, 256, 1, 1288, 728, "lora")),
    ("qwen3.5-9b", "vl-generate", ("qwen3_5", "bf16", 1, 128, 1, 1280, 736)),
    ("llava-1.5-7b-hf", "vl-generate", ("llava", "bf16", 4, 128, 1, 336, 336)),
    # Qwen3-VL: a long prompt with an image (its deepstack features and hidden-state clones through the prefill), the
    # MoE, and training at full width, the tower's and deepstack mergers' saved tensors among it
    ("qwen3-vl-4b-instruct", "vl-generate", ("qwen3_vl", "bf16", 1, 4096, 1, 1280, 736)),
    ("qwen3-vl-30b-a3b-instruct", "vl-generate", ("qwen3_vl_moe", "bf16", 1, 1024, 1, 1280, 736)),
    ("qwen3-vl-4b-instruct", "vl", ("qwen3_vl", "bf16", 1, 1024, 1, 1280, 736)),
    ("qwen3-vl-4b-instruct", "vl", ("qwen3_vl", "bf16", 1, 512, 1, 1280, 736, "lora")),
    # LLaVA-NeXT: the tower over a 1,280x720 image's five crops (1,948 image tokens)
    ("llava-v1.6-mistral-7b-hf", "vl-generate", ("llava_next", "bf16", 1, 256, 1, 1280, 720)),
    ("llava-v1.6-mistral-7b-hf", "vl", ("llava_next", "bf16", 1, 256, 1, 1280, 720, "lora")),
    # InternViT-6B (OpenGVLab's vit_6b_config, InternVL3-38B's and -78B's tower) over a small decoder: two 896x672
    # images, 13 tiles each
    ("variants/synthetic-internvl-vit-6b", "vl-generate", ("internvl", "bf16", 1, 128, 2, 896, 672)),
    ("nvidia-nemotron-nano-12b-v2-base", "hybrid", ("nemotron_h", "full", "infer", "bf16", 1, 4096, 16)),
    ("granite-4.0-h-350m", "hybrid", ("granitemoehybrid", "full", "train", "bf16", 4, 2048, 0)),
    ("falcon-h1-0.5b-instruct", "hybrid", ("falcon_h1", "full", "infer", "bf16", 8, 2048, 16)),
    # long prompts through gated DeltaNet and Mamba-1 layers: Qwen3.5-9B's text model, Qwen3-Next-80B's and Jamba 1.5
    # Mini's first layers at their full width (a name's "text" takes the config's text_config, "4L" its first 4 layers)
    ("qwen3.5-9b text", "hybrid", ("qwen3_5", "full", "infer", "bf16", 1, 16384, 4)),
    ("qwen3-next-80b-a3b-instruct 4L", "hybrid", ("qwen3_next", "full", "infer", "bf16", 1, 16384, 4)),
    ("ai21-jamba-1.5-mini 8L", "hybrid", ("jamba", "full", "infer", "bf16", 1, 2048, 4)),
    # training steps at full width: DeltaNet and Mamba-2 layers' saved tensors (scan_activations, fitted on small ones)
    ("qwen3.5-9b text 8L", "hybrid", ("qwen3_5", "full", "train", "bf16", 1, 4096, 0)),
    ("qwen3-next-80b-a3b-instruct 4L", "hybrid", ("qwen3_next", "full", "train", "bf16", 1, 2048, 0)),
    ("nvidia-nemotron-nano-12b-v2-base 8L", "hybrid", ("nemotron_h", "full", "train", "bf16", 1, 4096, 0)),
]
# the image placeholder and marker ids measure_vl.make_batch writes, set in a whole model's config in place of its own
TOKEN_KEYS = {"image_token_id": 999, "image_token_index": 999, "vision_start_token_id": 998, "boi_token_index": 998,
              "vision_end_token_id": 997, "eoi_token_index": 997, "video_token_id": 996}
CLAIM = 3 * 2**30       # every case here is small: what one may hold at once, CUDA context included, for --jobs


def cases():
    """(label, kind, arguments): measure_hybrid.py's RUNS (kind "hybrid", and "fla" for Qwen3-Next's again with
    flash-linear-attention), measure_vl.py's CASES ("vl") and GENERATE_CASES ("vl-generate", labelled generate)."""
    import measure_hybrid
    import measure_vl
    out = [(measure_hybrid.label_of(*run), "hybrid", run) for run in measure_hybrid.RUNS]
    out += [(measure_hybrid.label_of(*run) + " fla", "fla", run) for run in measure_hybrid.RUNS
            if run[0] == "qwen3_next"]
    out += [(f"{name} {measure_hybrid.label_of(*case).split(' ', 2)[2]} fla (gpu)", "fla", (name, *case))
            for name, kind, case in FULL if name.startswith("qwen3-next") and case[2] == "infer"]
    out += [(measure_vl.label_of(*case), "vl", case) for case in measure_vl.CASES]
    out += [("generate " + measure_vl.label_of(*case), "vl-generate", case) for case in measure_vl.GENERATE_CASES]
    for name, kind, case in FULL:
        shape = measure_hybrid.label_of(*case).split(" ", 2)[2] if kind == "hybrid" else \
            measure_vl.label_of(*case).split(" ", 1)[1]
        out.append((f"{'generate ' if kind == 'vl-generate' else ''}{name} {shape} (gpu)", kind, (name, *case)))
    return out


def full_config(name):
    """A whole model's config.json as transformers reads it ({"__float__": "Infinity"} is the float), with
    measure_vl.make_batch's image token ids."""
    import transformers
    file, *changes = name.split()
    config = dict(transformers.PreTrainedConfig._decode_special_floats(json.loads((CONFIGS / f"{file}.json").read_text())))
    for change in changes:
        if change == "text":
            config = dict(config["text_config"])
        else:                                       # the first N layers, and the per-layer lists' first N entries
            layers = int(change[:-1])
            config = {**config, "num_hidden_layers": layers, **{key: config[key][:layers] for key in (
                "layer_types", "layers_block_type", "hybrid_override_pattern") if key in config}}
    return {**config, **{k: v for k, v in TOKEN_KEYS.items() if k in config}}


def _modules():
    """measure_hybrid and measure_vl, with torch's own dropout put back (measure.py replaces it with a CPU stand-in)."""
    import torch
    original = torch.nn.functional.dropout
    import measure_hybrid
    import measure_vl
    torch.nn.functional.dropout = original
    return measure_hybrid, measure_vl


def _step(model, batch, optimizer, amp, device):
    import torch
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
        loss = model(**batch).loss
    loss.backward()
    del loss
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def _hybrid(run, device, folder):
    """A measure_hybrid.py case: the model, the inputs record, and the call to measure (run twice)."""
    import torch
    import compare
    import measure
    from pycore.inputs import frameworks, schema
    from pycore.memory.estimate import resolve_architecture
    measure_hybrid, _ = _modules()
    name, run = (run[0], run[1:]) if len(run) == 8 else (None, run)
    family, size, mode, precision, batch, seq, new_tokens = run
    config = full_config(name) if name else measure_hybrid.config_json(family, size)
    path = Path(folder) / f"{family}-{size}.json"
    path.write_text(json.dumps(config))
    inputs = measure_hybrid.case_inputs(path, mode, precision, batch, seq, new_tokens)
    values = frameworks.apply(schema.parse(compare.measured_inputs(inputs)))
    arch = resolve_architecture(values)
    torch.manual_seed(0)
    with device:                                # a whole model is made on the GPU: minutes fewer than on the CPU
        model = measure_hybrid.build(config, values).to(device)
    record = {"inputs": {k: v for k, v in inputs.items() if k != "config"}, "config_json": config,
              "params": sum(p.numel() for p in model.parameters())}
    if mode == "infer":
        model.eval()
        model.config.use_cache = True
        model.generation_config.use_cache = True
        model.generation_config.pad_token_id = 0
        ids = torch.randint(1, arch.vocab, (batch, seq), device=device)
        kwargs = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        return model, record, lambda: model.generate(ids, **kwargs)
    model.train()
    optimizer = measure.make_optimizer(list(model.parameters()), "adamw", values["optimizer_impl"])
    data = {k: v.to(device) for k, v in measure.make_batch(values, arch).items()}
    return model, record, lambda: _step(model, data, optimizer, precision.startswith("amp-"), device)


def _vl(case, device, generate):
    """A measure_vl.py case: the model, the inputs record, and the call to measure (run twice)."""
    import torch
    import measure
    _, measure_vl = _modules()
    name, case = (case[0], case[1:]) if case[0] in {n for n, _, _ in FULL} else (None, case)
    family, precision, batch, text, images, width, height = case[:7]
    method = case[7] if len(case) > 7 else "full"
    config = full_config(name) if name else measure_vl.FAMILIES[family]
    previous = torch.get_default_dtype()
    if name:        # a whole model is made on the GPU in its dtype (27B in fp32 first would not fit beside the others)
        torch.set_default_dtype(torch.bfloat16 if precision == "bf16" else torch.float32)
    try:
        with device:
            model, dtype = measure_vl.build(family, precision, config)
    finally:
        torch.set_default_dtype(previous)
    model = model.to(device)
    data, _ = measure_vl.make_batch(family, config, batch, text, images, width, height)
    data = {k: (v.to(dtype) if k == "pixel_values" else v).to(device) for k, v in data.items()}
    record = {"config_json": json.loads(model.config.to_json_string()), "params": sum(p.numel() for p in model.parameters())}
    inputs = {"mode": "infer" if generate else "train", "precision": precision, "batch": str(batch), "seq": str(text),
              "images": str(images), "image_size": f"{width}x{height}"}
    if generate:
        inputs["new_tokens"] = str(measure_vl.NEW_TOKENS)
        data.pop("labels")
        data.pop("token_type_ids", None)
        model.eval()
        model.config.use_cache = True
        model.generation_config.use_cache = True
        model.generation_config.pad_token_id = 0
        new = measure_vl.NEW_TOKENS
        return model, {"inputs": inputs, **record}, \
            lambda: model.generate(**data, max_new_tokens=new, min_new_tokens=new, do_sample=False)
    inputs["optimizer_impl"] = "foreach"
    if method == "lora":
        inputs.update(method="lora", lora_rank="16", lora_targets="qv", lora_dtype="fp32")
        model = measure_vl.with_lora(model)
    model.train()
    optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad], "adamw")
    return model, {"inputs": inputs, **record}, \
        lambda: _step(model, data, optimizer, precision.startswith("amp-"), device)


def run_one(label, kind, arguments, device_name="cuda", explain=None):
    """Measure one case in this process (which must be fresh); on the CPU its memory figures are None. explain: a
    folder to write what is live at the measured call's peak to (validation/cuda_peak.py)."""
    import torch
    started = time.time()
    device = torch.device(device_name)
    cuda = device.type == "cuda"
    with tempfile.TemporaryDirectory() as folder:
        if kind in ("hybrid", "fla"):
            model, record, call = _hybrid(arguments, device, folder)
            if kind == "fla" and cuda:
                record["fla_guard_lifted"] = _lift_fla_guard()
        else:
            model, record, call = _vl(arguments, device, kind == "vl-generate")
        with torch.set_grad_enabled(record["inputs"]["mode"] == "train"):
            call()                                  # warm-up: the optimizer state, kernels' autotuning
            start = measure_cuda._reset_peak(cuda, explain)
            call()
    figures = measure_cuda.peak_figures(label, cuda, start, explain)
    return {"label": label, "kind": kind, **record, **figures,
            "fla": _fla_loaded(), "seconds": round(time.time() - started, 1)}


def _lift_fla_guard():
    """fla 0.6.0 refuses its gated chunk_bwd_dqkwg on Hopper with Triton 3.4 to 3.7.0 (wrong results, fla issue #640);
    the GPU's image has Triton 3.6. The kernel's buffers are allocated by its Python wrapper whatever Triton computes,
    so for the bytes alone the check is lifted: True when it was."""
    import fla.ops.common.chunk_o as chunk_o
    lifted = not chunk_o.TRITON_ABOVE_3_7_1
    chunk_o.TRITON_ABOVE_3_7_1 = True
    return lifted


def _fla_loaded():
    return "fla" in sys.modules


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="run only cases whose label contains this text (printed, not saved)")
    parser.add_argument("--case", help="measure this one case in this process and print its record as JSON")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once, each in its own process")
    parser.add_argument("--deadline", type=float, help="seconds after which no case is started")
    parser.add_argument("--timeout", type=int, default=600, help="seconds one case may take")
    parser.add_argument("--fla", help="a folder holding flash-linear-attention (fla-core), for the fla cases")
    parser.add_argument("--explain", type=Path, help="write what is live at each case's peak to this folder")
    parser.add_argument("--out", type=Path, help=f"the record's path (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args()
    case_list = cases()
    if args.case:
        _, kind, arguments = next(c for c in case_list if c[0] == args.case)
        print(json.dumps(run_one(args.case, kind, arguments, args.device, args.explain)))
        return
    if args.device == "cuda":
        import torch
        if not torch.cuda.is_available():
            sys.exit("no CUDA device")
        budget = int(measure_cuda.FIT_MARGIN * torch.cuda.get_device_properties(0).total_memory)
    else:
        budget = args.jobs * CLAIM
    kinds = {label: kind for label, kind, _ in case_list}
    # the fla cases first (their kernels' autotuning takes longest), by a claim one byte larger
    steps = [{"label": label, "runs": kind != "fla" or bool(args.fla), "estimated_reserved_bytes": CLAIM
              - measure_cuda.CONTEXT_BYTES + (kind == "fla")} for label, kind, _ in case_list
             if not args.only or args.only in label]
    out = args.out or (None if args.only else OUT)
    started = time.time()

    def launch(step):
        env = dict(os.environ)
        if kinds[step["label"]] == "fla":
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [args.fla, env.get("PYTHONPATH")]))
        return measure_cuda.launch_case(__file__, step["label"], args.device, args.explain, env)

    def poll(handle):
        return measure_cuda.poll_case(handle, args.timeout)

    results, skipped = [], [{"label": s["label"], "why": "no --fla folder"} for s in steps if not s["runs"]]
    deadline = started + args.deadline if args.deadline else None
    order = {label: i for i, (label, _, _) in enumerate(case_list)}
    for step, record, error in measure_cuda.schedule(steps, budget, args.jobs, launch, poll, deadline):
        if record is None:
            skipped.append({"label": step["label"], "why": error})
            print(f"{step['label']:52s} {error}", flush=True)
            continue
        results.append(record)
        figures = "" if record["peak_bytes"] is None else \
            f"allocated {record['peak_bytes'] / 2**20:9.2f} MiB  reserved {record['reserved_bytes'] / 2**20:9.2f} MiB"
        print(f"{step['label']:52s} {figures}  {record['seconds']:6.1f}s  [{time.time() - started:5.0f}s]", flush=True)
        if out is not None:
            measure_cuda.write(out, sorted(results, key=lambda r: order[r["label"]]), skipped, args.device,
                               "Peak GPU memory of validation/measure_hybrid.py's and measure_vl.py's cases on a "
                               "real GPU, recorded by validation/measure_cuda_families.py")
    if out is not None:
        print(f"wrote {out} ({len(results)} cases, {len(skipped)} not run)")


if __name__ == "__main__":
    main()
