"""Compare pycore's peak_bytes with the measured peaks in validation/measured.json.

Standard library only. Writes docs/validation.md (the error table users read) and prints a summary.
The textbook column is the plain sum most calculators use: weights + gradients + optimizer state +
Korthikanti et al. 2022 activations, with no phases, loss buffers or temporaries.

Usage: python validation/compare.py [--check]   (--check: fail if docs/validation.md is stale)
"""

import json
import statistics
import sys
from pathlib import Path
from urllib.parse import parse_qsl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from pycore import estimate  # noqa: E402

MEASURED = ROOT / "validation" / "measured.json"
DOC = ROOT / "docs" / "validation.md"


# The conditions every recorded case ran under (validation/measure.py): foreach optimizers (PyTorch's
# default on CUDA when nothing is set), transformers generate() for serving, and, where a case names no
# precision, the amp-bf16 policy that was the estimator's default when it was recorded.
# MemTracker on the CPU has no cuBLAS handle, so no workspace, and the CPU's SDPA runs its flash kernel in fp32 too,
# where CUDA's runs the math kernel for grouped-query heads (validation/measure_cuda.py's records keep CUDA's own)
MEASURED_CONDITIONS = {"optimizer_impl": "foreach", "engine": "hf", "precision": "amp-bf16", "cublas_workspace": ":0:0",
                       "attention": "flash"}


def measured_inputs(inputs):
    """A recorded case's inputs with the conditions it was measured under made explicit. CPU's SDPA has no
    native grouped-query path, so what the harness measured as flash is flash-repeat (K/V expanded)."""
    conditions = {**MEASURED_CONDITIONS, **inputs}
    if conditions.get("attention", "flash") == "flash":
        conditions["attention"] = "flash-repeat"
    return conditions


def rows():
    """One row per measured case: label, measured, estimated, relative errors."""
    record = json.loads(MEASURED.read_text())
    out = []
    for case in record["cases"]:
        result = estimate(measured_inputs(case["inputs"])).as_dict()
        textbook = estimate({**measured_inputs(case["inputs"]), "activations": "korthikanti"}).as_dict()
        c = textbook["components"]
        plain = sum(c.get(k, 0) for k in ("weights", "master_weights", "gradients", "optimizer", "activations",
                                          "kv_cache"))
        measured = case["peak_bytes"]
        rule = case.get("autocast") or ("cpu" if measured_inputs(case["inputs"])["precision"].startswith("amp-")
                                        else "none")
        autocast = {"cuda": "CUDA", "cpu": "CPU", "none": "-"}[rule]
        out.append({"label": case["label"], "mode": case["tensor_mode"], "autocast": autocast,
                    "kind": case["inputs"].get("mode", "train"), "measured": measured,
                    "estimated": result["peak_bytes"], "phase": result["peak_phase"],
                    "error": (result["peak_bytes"] - measured) / measured,
                    "textbook_error": (plain - measured) / measured,
                    "params_measured": case["params"], "params_estimated": result["params"]["total"]})
    return record, out


FSDP = ROOT / "validation" / "measured_fsdp.json"

# torchtitan docs/performance.md (github.com/pytorch/torchtitan), Llama 3.1 on H100: Table 2 (8B, FSDP +
# CP, full activation checkpointing, local batch 1, torch.compile + Float8) and Table 4 (70B, FSDP 32 x TP 8,
# full activation checkpointing, local batch 16, torch.compile + Float8). Label, our inputs, their GiB.
# torchtitan's defaults (framework=torchtitan: fused AdamW, amp-bf16) and its run_train.sh's
# PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True".
TT = ("model=llama-3.1-8b&framework=torchtitan&precision=amp-bf16&fsdp=FULL_SHARD&recompute=full&batch=1"
      "&expandable_segments=yes")
# benchmarks/llama3_h100_202412_torchtitan.md Tables 1 and 3: FSDP alone (no torch.compile, no Float8), local
# batch 2, selective activation checkpointing as the Llama 3 recipe sets it (op); torchtitan's defaults. Shown,
# not held to 10%: the estimate is 11-15% under them and the gap is not explained yet.
TORCHTITAN_SAC = [
    ("Table 1: 8B, FSDP 8, batch 2, selective op AC", "model=llama-3.1-8b&framework=torchtitan&fsdp=FULL_SHARD"
     "&batch=2&seq=8192&expandable_segments=yes&dp=8", 82.4),
    ("Table 3: 8B, FSDP 128, batch 2, selective op AC", "model=llama-3.1-8b&framework=torchtitan&fsdp=FULL_SHARD"
     "&batch=2&seq=8192&expandable_segments=yes&dp=128", 67.0),
]
TORCHTITAN = [
    ("Table 2: 8B, FSDP 8, CP 1, seq 32768", TT + "&dp=8&cp=1&seq=32768", 83.9),
    ("Table 2: 8B, FSDP 4, CP 2, seq 65536", TT + "&dp=4&cp=2&seq=65536", 84.2),
    ("Table 2: 8B, FSDP 2, CP 4, seq 131072", TT + "&dp=2&cp=4&seq=131072", 84.0),
    ("Table 2: 8B, FSDP 1, CP 8, seq 262144", TT + "&dp=1&cp=8&seq=262144", 84.5),
    ("Table 4: 70B, FSDP 32, TP 8, batch 16", "model=llama-3.1-70b&precision=amp-bf16&fsdp=FULL_SHARD&recompute=full"
     "&dp=32&tp=8&sp=yes&batch=16&seq=8192&framework=torchtitan&expandable_segments=yes", 71.9),
]


# torchtune README (github.com/pytorch/torchtune), "Memory and training speed" table, Llama 3.1 8B, batch 2,
# packed sequence 2048, torch.compile: label, our inputs (recipe defaults: rank 8, adapters on attention and
# MLP, bf16, activation checkpointing on the 4090), their GiB.
TUNE = ("model=llama-3.1-8b&precision=bf16&batch=2&seq=2048&lora_rank=8&lora_targets=all-linear&recompute=full"
        "&loss_chunks=8")
TORCHTUNE = [
    ("LoRA, 1x 4090", TUNE + "&method=lora", 16.2),
    ("QLoRA, 1x 4090", TUNE + "&method=qlora", 7.4),
]


# vLLM start-up logs that were published (quoted in full in tests/test_serving.py and the notes below):
# label, our inputs, their "Available KV cache memory" GiB, their "GPU KV cache size" tokens, source.
VLLM = [
    ("Llama-3.1-8B, 1× A100-40GB, v0.15.1, util 0.9, max_model_len 131072",
     "model=llama-3.1-8b&mode=infer&engine=vllm&gpu=a100-40gb&seq=131071&new_tokens=1&max_batched_tokens=8192",
     19.28, 157_936, "github.com/ilseokoh/vllm-gce README"),
    ("Qwen3-235B-A22B-FP8, 4× H100, tp 4, v0.9-0.10, max_model_len 40960, LMCache connector",
     "model=qwen3-235b-a22b&mode=infer&engine=vllm&tp=4&quant=fp8&seq=40704&new_tokens=256",
     8.11, 178_880, "vllm-project/vllm issue 21348"),
    ("Qwen3-Next-80B-A3B-Instruct (36 gated DeltaNet, 12 attention layers), 2× H200, tp 2, v0.10.2, util 0.9 "
     "(default), max_model_len 262144",
     "model=qwen3-next-80b-a3b-instruct&mode=infer&engine=vllm&tp=2&gpu=h200-141gb&seq=262144&new_tokens=0"
     "&max_batched_tokens=8192",
     44.59, 973_760, "a console log kept in a public GitHub repository (its project: LegalAI-DataPipeline; the MoE "
     "config file it loads names the H200): \"Setting attention block size to 544 tokens\", as pycore pages it"),
    ("Qwen2.5-VL-3B-Instruct (vision-language), 1× L4, v0.11.0, util 0.9 (default), max_model_len 8192, "
     "max_num_batched_tokens 2048: the encoder profiled on 1 image of 16,384 tokens",
     "model=qwen2.5-vl-3b-instruct&mode=infer&engine=vllm&gpu=l4&seq=8192&new_tokens=0&max_batched_tokens=2048",
     9.26, 269_568, "ray-project/ray doc/source/data/examples/llm-batch-inference-vision/content/README.md (the "
     "notebook's output, Nov 2025): \"Encoder cache will be initialized with a budget of 16384 tokens, and profiled "
     "with 1 image items\", \"Model loading took 7.1550 GiB\""),
]


def vllm_rows():
    """Our vLLM capacity next to the published logs: KV GiB and tokens, and the error in tokens."""
    from pycore.answers.answer import answer
    from pycore.inputs.schema import parse
    from pycore.memory.estimate import estimate_values
    out = []
    for label, query, kv_gib, tokens, source in VLLM:
        values = parse(dict(parse_qsl(query)))
        result = estimate_values(values)
        ours = answer(values, result)["kv_cache_tokens"]
        out.append({"label": label, "query": query, "kv_gib": kv_gib, "tokens": tokens, "source": source,
                    "our_kv_gib": result.components["kv_cache"] / 2**30, "our_tokens": ours,
                    "error": (ours - tokens) / tokens})
    return out


# Published readings no one here made, each in the view it measures (pycore/memory/device.py): label, our inputs,
# their GiB, the view, the source, and why an error above 10% remains.
READINGS = [
    ("bert-large-uncased classifier, V100, batch 4, seq 512, fp32, AdamW",
     "model=bert-large-uncased&head=classification&batch=4&seq=512&precision=fp32&optimizer_impl=for-loop"
     "&attention=eager&gpu=v100-16gb", 14949 / 1024, "total_bytes",
     "transformers docs, model_memory_anatomy.md: \"GPU memory occupied: 14949 MB\" (pynvml, MiB)",
     "that Trainer kept gradients between steps (zero_grad without set_to_none, torch 1.x): +1.25 GiB "
     "we do not count"),
]


def reading_rows():
    out = []
    for label, query, theirs, view, source, why in READINGS:
        ours = estimate(dict(parse_qsl(query))).as_dict()[view] / 2**30
        out.append({"label": label, "query": query, "theirs": theirs, "ours": ours, "view": view,
                    "source": source, "why": why, "error": (ours - theirs) / theirs})
    return out


def fsdp_rows(path=FSDP, extra=None):
    """The cases of one measurement file (validation/measure_fsdp.py's by default): label, measured,
    estimated, error. ``extra`` inputs are added to each case's (a DDP rank is dp=2)."""
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        estimated = estimate({**measured_inputs(case["inputs"]), **(extra or {})}).peak_bytes
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": estimated,
                    "error": (estimated - case["peak_bytes"]) / case["peak_bytes"]})
    return record, out


PIPELINE = ROOT / "validation" / "measured_pipeline.json"


def pipeline_rows(path=PIPELINE):
    """validation/measure_pipeline.py's cases: each one stage of a pipeline, measured against the estimate of that
    stage (the record's ``stages``); ``worst`` says whether the estimate reports that stage as its most loaded."""
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        result = estimate(measured_inputs(case["inputs"]))
        estimated = result.stages[case["stage"]]["peak_bytes"]
        out.append({"label": case["label"], "stage": case["stage"], "measured": case["peak_bytes"],
                    "estimated": estimated, "worst": result.stage == case["stage"],
                    "error": (estimated - case["peak_bytes"]) / case["peak_bytes"]})
    return record, out


CUDA = ROOT / "validation" / "measured_cuda.json"
GPU_IDS = {"NVIDIA H200": "h200-141gb", "NVIDIA H100 80GB HBM3": "h100-sxm-80gb"}


def cuda_inputs(case, gpu):
    """A case measured on a real GPU: the harness's conditions, CUDA's own grouped-query SDPA (no K/V expanded
    first), PyTorch's cuBLAS workspaces and the GPU it ran on."""
    return {**MEASURED_CONDITIONS, "attention": "auto", **case["inputs"], "cublas_workspace": "auto", "gpu": gpu}


def cuda_rows(path=CUDA):
    """validation/measure_cuda.py's cases: max_memory_allocated, max_memory_reserved and the driver's figure for
    the process (read after the step), each beside the estimate's view of the same."""
    record = json.loads(path.read_text())
    gpu = GPU_IDS[record["gpu"]]
    out = []
    for case in record["cases"]:
        result = estimate(cuda_inputs(case, gpu))
        device = case["device_bytes_after"]
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": result.peak_bytes,
                    "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"],
                    "reserved": case["reserved_bytes"], "estimated_reserved": result.reserved_bytes,
                    "reserved_error": (result.reserved_bytes - case["reserved_bytes"]) / case["reserved_bytes"],
                    "device": device, "estimated_device": result.total_bytes,
                    "device_error": (result.total_bytes - device) / device if device else None})
    return record, out


def cuda_section():
    record, cases = cuda_rows()
    errors = [abs(r["error"]) for r in cases]
    reserved = [abs(r["reserved_error"]) for r in cases]
    device = [abs(r["device_error"]) for r in cases if r["device_error"] is not None]
    lines = ["", "## On a real GPU", "",
             f"`validation/measure_cuda.py` ran {len(cases)} cases on an {record['gpu']} (driver {record['driver']}, CUDA "
             f"{record['cuda']}, torch {record['torch']}, transformers {record['transformers']}, Python {record['python']},",
             "no PYTORCH_CUDA_ALLOC_CONF): the cases above, the accumulation cases below, and full-size `generate()` calls",
             "and LoRA steps only a GPU measures (labelled (gpu)). Each ran in a process of its own: a warm-up step, then",
             "the measured step's `torch.cuda.max_memory_allocated()`, `max_memory_reserved()`, and the process's memory",
             "as the driver reports it, read after the step. CUDA's own kernels ran: SDPA's flash, memory-efficient or",
             f"math attention, fused dropout, cuBLAS. The estimate is for the same GPU; {len(record['skipped'])} cases did "
             "not run (the record says why).", "",
             f"- allocated: {100 * statistics.median(errors):.1f}% median, {100 * max(errors):.1f}% worst;",
             f"- reserved: {100 * statistics.median(reserved):.1f}% median, {100 * max(reserved):.1f}% worst;",
             f"- the driver's figure: {100 * statistics.median(device):.1f}% median, {100 * max(device):.1f}% worst.",
             "",
             "What the GPU showed that the CPU's MemTracker does not, now modelled: cuBLAS's workspaces (32 MiB each on",
             "Hopper, one for the forward's thread and one for autograd's backward thread); the math kernel SDPA runs",
             "for grouped-query heads in fp32 (modelled from qwen2.5-0.5b; qwen3-0.6b, measured after, came within",
             "0.1%); transformers 5.24 runs no SDPA for Gemma 2 or gpt-oss, so their default attention is eager.",
             "`validation/measured_cuda_explain.txt` lists what was live at the peak of sixteen of them. The worst",
             "cases are small: below 1 GiB the allocator's rounding of blocks weighs more than any modelled term.", "",
             "| case | allocated GiB | estimate | error | reserved GiB | estimate | error | driver GiB | estimate | error |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in cases:
        device = "-" if r["device"] is None else f"{r['device'] / 2**30:.3f} | {r['estimated_device'] / 2**30:.3f} | " \
            f"{100 * r['device_error']:+.1f}%"
        lines.append(f"| {r['label']} | {r['measured'] / 2**30:.3f} | {r['estimated'] / 2**30:.3f} | "
                     f"{100 * r['error']:+.1f}% | {r['reserved'] / 2**30:.3f} | {r['estimated_reserved'] / 2**30:.3f} | "
                     f"{100 * r['reserved_error']:+.1f}% | {device} |")
    return lines


def summary(table):
    errors = [abs(r["error"]) for r in table]
    textbook = [abs(r["textbook_error"]) for r in table]
    training = [abs(r["error"]) for r in table if r["kind"] == "train"]
    serving = [abs(r["error"]) for r in table if r["kind"] == "infer"]
    return {"cases": len(table), "median": statistics.median(errors), "worst": max(errors),
            "training_worst": max(training), "serving_worst": max(serving, default=0.0),
            "textbook_median": statistics.median(textbook), "textbook_worst": max(textbook)}


def markdown(record, table):
    s = summary(table)
    lines = [
        "# How close the estimate is",
        "",
        "Generated by `python validation/compare.py` from `validation/measured.json`, which",
        f"`validation/measure.py` recorded with torch {record['torch']} and transformers {record['transformers']}",
        f"(Python {record['python']}, {record['machine']}). Each case runs a warm-up step, then MemTracker records",
        "the peak of live tensor bytes of the next training step (or `generate()` call), rounding each",
        "allocation to 512 bytes as CUDA's caching allocator does. That is the number",
        "`torch.cuda.max_memory_allocated()` reports; `nvidia-smi` shows it plus the runtime overhead.",
        "",
        f"Over {s['cases']} cases the estimate's error is {100 * s['median']:.1f}% in the median case and "
        f"{100 * s['worst']:.1f}% at worst ({100 * s['training_worst']:.1f}% worst over training steps, "
        f"{100 * s['serving_worst']:.1f}% over serving).",
        f"The textbook sum (weights + gradients + optimizer + Korthikanti activations) is off by "
        f"{100 * s['textbook_median']:.1f}% in the median and {100 * s['textbook_worst']:.1f}% at worst on the same cases.",
        "",
        "Known gaps, stated rather than tuned away:",
        "",
        "- Serving is measured with transformers' `generate()` and its DynamicCache; engines that page the",
        "  cache (vLLM) or chunk the prefill keep a smaller prefill working set than modelled here.",
        "- CPU stand-ins for GPU kernels: the measurement keeps a 1-byte dropout mask (as CUDA's fused dropout",
        "  does) and trains fused-attention cases without attention dropout, because the CPU's SDPA cannot",
        "  fuse it; the optimizers run the case's `optimizer_impl` (`foreach`, the CUDA default, where none is named).",
        "- amp-* cases marked CUDA autocast ran CUDA's autocast op lists on the CPU (validation/cuda_autocast.py:",
        "  pow, softmax, layer_norm, sum and the rest of CUDA's fp32 lists return fp32); the others were recorded",
        "  under PyTorch's CPU autocast, which keeps those ops in 16 bit.",
        "- Cases marked 4L or 6L are the preset cut to that many layers at full width.",
        "",
        "| case | tensors | autocast | measured GiB | estimate GiB | error | textbook error | peak phase | params match |",
        "|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    for r in table:
        match = "yes" if r["params_measured"] == r["params_estimated"] else \
            f"no ({r['params_estimated'] - r['params_measured']:+,d})"
        lines.append(f"| {r['label']} | {r['mode']} | {r['autocast']} | {r['measured'] / 2**30:.3f} | {r['estimated'] / 2**30:.3f} | "
                     f"{100 * r['error']:+.1f}% | {100 * r['textbook_error']:+.1f}% | {r['phase']} | {match} |")
    lines += cuda_section()
    fsdp_record, fsdp = fsdp_rows()
    worst = max(abs(r["error"]) for r in fsdp)
    lines += [
        "",
        "## Sharded training (FSDP2)",
        "",
        f"`validation/measure_fsdp.py` (torch {fsdp_record['torch']}) runs rank 0 of an N-GPU world with PyTorch's",
        "fake process group and records its peak with FSDPMemTracker: its shards, the layers gathered in",
        f"flight, the reduce-scatter buffers. Worst error over {len(fsdp)} cases: {100 * worst:.1f}%.",
        "",
        "| case | measured GiB | estimate GiB | error |",
        "|---|---:|---:|---:|",
    ]
    for r in fsdp:
        lines.append(f"| {r['label']} | {r['measured'] / 2**30:.3f} | {r['estimated'] / 2**30:.3f} | "
                     f"{100 * r['error']:+.1f}% |")
    lines += measured_section("## Gradient accumulation", ROOT / "validation" / "measured_accumulation.json", [
        "`validation/measure_accumulation.py` runs the Hugging Face Trainer's loop (`loss / N` and `backward()`",
        "per micro-batch into `.grad`, then the optimizer step and `zero_grad(set_to_none=True)`) with the same",
        "builder, kernels and CUDA autocast rules as measure.py. The peak is a later micro-batch's, with the",
        "first micro-batches' gradients beside its activations (pycore/memory/accumulation.py).",
    ])
    lines += pipeline_section()
    lines += measured_section("## torchtitan's selective activation checkpointing", ROOT / "validation" / "measured_sac.json", [
        "`validation/measure_sac.py` applies torchtitan's checkpoint policy (activation_checkpoint.py@v0.2.2:",
        "`recompute=op` keeps every other matmul's output and SDPA's, `recompute=layer` checkpoints every 2nd",
        "block whole) to transformers' Llama.",
    ])
    lines += measured_section("## Data parallelism through torch DDP", ROOT / "validation" / "measured_ddp.json", [
        "`validation/measure_ddp.py` wraps the model in DistributedDataParallel (one gloo rank) inside the",
        "tracked region: the reducer's buckets are a second copy of the gradients. Estimated as one rank of dp=2.",
    ], {"dp": "2"})
    lines += hybrid_section()
    lines += vl_section()
    lines += vl_generate_section()
    lines += cuda_families_section()
    lines += families_section()
    lines += lora_section()
    lines += dpo_section()
    lines += dpo_full_section()
    lines += kto_section()
    lines += grpo_section()
    lines += grpo_full_section()
    lines += reward_section()
    lines += ppo_section()
    lines += distill_section()
    lines += published("## Published multi-GPU runs: torchtitan", [
        "torchtitan's docs/performance.md reports per-GPU memory of Llama 3.1 training on H100s (FSDP2 with",
        "bf16 compute and fp32 master weights, here `precision=amp-bf16`; sequence 8192 unless stated). Their",
        "figure is `torch.cuda.max_memory_reserved()`, which adds the caching allocator's slack to the peak",
        "of live tensors; ours is `reserved_bytes`, the peak plus the allocator's cache with expandable segments",
        "on (pycore/memory/device.py), as torchtitan's run script sets them. Their runs also use torch.compile",
        "and Float8 linear layers, which this estimate does not model (both shrink saved activations and",
        "fuse the loss). The two differences pull in opposite directions.",
    ], "torchtitan table, run", TORCHTITAN)
    lines += published("## Published runs with selective checkpointing: torchtitan", [
        "benchmarks/llama3_h100_202412_torchtitan.md, Tables 1 and 3: FSDP alone (no torch.compile, no Float8),",
        "local batch 2, sequence 8192, selective checkpointing by op as torchtitan's Llama 3 recipe sets it;",
        "estimated at torchtitan's defaults (`framework=torchtitan`). The estimate is 11-15% under their",
        "`max_memory_reserved`, a gap not explained yet: the op policy itself is within 2% of measured steps",
        "(above), so the rest lies in what those runs hold beyond one step's tensors, unmeasured here without a GPU.",
    ], "torchtitan table, run", TORCHTITAN_SAC)
    lines += published("## Published fine-tuning runs: torchtune", [
        "torchtune's README reports peak memory per GPU for Llama 3.1 8B at batch size 2, a dataset packed to",
        "sequence length 2048, torch.compile on. Its recipes chunk the output projection and the",
        "cross-entropy in 8 (CEWithChunkedOutputLoss, `loss_chunks=8` here) and, on a 4090, checkpoint",
        "activations. What remains of the gap is what torch.compile fuses and the runtime overhead we add;",
        "the README does not state every setting, so this is shown for orientation, not as a check.",
    ], "torchtune README row", TORCHTUNE)
    lines += ["", "## Published readings in the view they measure", "",
              "`peak_bytes` is what `torch.cuda.max_memory_allocated()` reports, `reserved_bytes` what",
              "`max_memory_reserved()` reports (the caching allocator's cache added), `total_bytes` what",
              "nvidia-smi shows (plus the CUDA context and NCCL buffers). The allocator and context allowances",
              "are fit to readings like these (pycore/memory/device.py), not measured here.", "",
              "| run | view | theirs GiB | ours GiB | error | source | why the rest differs |",
              "|---|---|---:|---:|---:|---|---|"]
    for r in reading_rows():
        lines.append(f"| {r['label']} | {r['view']} | {r['theirs']:.2f} | {r['ours']:.2f} | {100 * r['error']:+.1f}% | "
                     f"{r['source']} | {r['why']} |")
    lines += ["", "## Serving with vLLM: published start-up logs", "",
              "vLLM sizes its KV cache at start-up: `gpu_util` of the GPU's memory, minus the weights, the memory",
              "outside PyTorch its profiler charges and the activation peak of a profiling run at",
              "`max_batched_tokens`, in whole blocks of 16 tokens (vLLM 0.11's `determine_available_memory`).",
              "These logs were published by people running it; the token count is what vLLM prints as",
              "\"GPU KV cache size\". The Qwen3 run used the LMCache KV connector, whose own GPU buffers and",
              "vLLM 0.9's absolute accounting (CUDA context and all non-torch memory charged) leave it less",
              "than our v0.11 arithmetic: an error above 10% that we state rather than tune away.",
              "At tp > 1 the memory outside PyTorch that vLLM charges stays the 0.25 GiB used here: a published",
              "tp=2 log (2x RTX 4090, DeepSeek-R1-Distill-Qwen-14B, vLLM 0.7; vllm-project/vllm issue 13061) reads",
              "\"non_torch_memory takes 0.25GiB\", and the same log ends in the kind of start-up refusal the answers",
              "now give (\"The model's max seq len (131072) is larger than the maximum number of tokens that can be",
              "stored in KV cache\"). vLLM 0.6 at tp=8 charged 5.2-5.7 GiB (issue 10702), when it still counted",
              "the CUDA context and NCCL's buffers there; later versions do not.",
              "The hybrid row (Qwen3-Next) checks the hybrid allocator: its block of 544 tokens and the 74.25 GiB",
              "of weights are vLLM's to 0.05%; its profiling run at 8,192 tokens (512 routed experts, DeltaNet's",
              "chunked scan) peaks higher than the 3.00 GiB estimated, which leaves our KV cache 9.6% larger.",
              "The vision-language row (Qwen2.5-VL-3B) checks the encoder's share of the profiling run",
              "(pycore/memory/vllm_multimodal.py): vLLM profiles the tower on its largest image, 65,536 patches,",
              "a 2.98 GiB peak counted with transformers' tower; without it our KV cache was 34% larger than vLLM's.",
              "Of what is left, the weights are a quarter (vLLM's load took 7.16 GiB, pycore counts the checkpoint's",
              "6.99); the rest is the profiling peak or the memory outside PyTorch.", "",
              "| run | their KV GiB | ours | their tokens | ours | error | source |",
              "|---|---:|---:|---:|---:|---:|---|"]
    for r in vllm_rows():
        lines.append(f"| {r['label']} | {r['kv_gib']:.2f} | {r['our_kv_gib']:.2f} | {r['tokens']:,} | "
                     f"{r['our_tokens']:,} | {100 * r['error']:+.1f}% | {r['source']} |")
    lines += [
        "",
        "Not measured here: tensor and expert parallelism runs (tested against Korthikanti et al.",
        "2022 and the ZeRO paper's formulas in tests/test_parallel.py).",
    ]
    return "\n".join(lines) + "\n"


def pipeline_section():
    """The pipeline stages measured by validation/measure_pipeline.py, each beside the estimate of that stage."""
    record, cases = pipeline_rows()
    errors = [abs(r["error"]) for r in cases]
    lines = ["", "## Pipeline parallelism (1F1B)", "",
             "`validation/measure_pipeline.py` runs one rank of a pipeline with PyTorch's fake process group under",
             "torch.distributed.pipelining's `Schedule1F1B` (as torchtitan runs it): transformers' Llama split as",
             "the estimate splits it (layers evenly, the embedding on the first stage, the final norm, head and",
             "loss on the last), one warm-up step, then MemTracker records the next. Each row is one stage, beside",
             "the estimate of that stage; the estimate reports its most loaded stage (marked). The first stage",
             "holds pp micro-batches' activations at once, beside the gradients it accumulates. Beyond the layers'",
             "own activations, torch.distributed.pipelining keeps a receive buffer per micro-batch for what a stage",
             "receives (activations unless first, gradients unless last) and each stage's output until its",
             "backward, so the last stage's logits live through its backward; Megatron's and DeepSpeed's own",
             "schedules are not measured and get neither (pycore/inputs/frameworks.py OWN_PIPELINE).",
             "Under autocast every forward casts the weights again, so a stage keeps a copy per micro-batch in",
             "flight. The interleaved cases run `ScheduleInterleaved1F1B` with 2 model chunks a GPU. Both",
             "schedules refuse fewer micro-batches than stages.",
             f"Torch {record['torch']}, transformers {record['transformers']}; error over {len(cases)} stages: "
             f"{100 * statistics.median(errors):.1f}% median, {100 * max(errors):.1f}% worst.", "",
             "| case | measured GiB | estimate GiB | error | reported as the most loaded |", "|---|---:|---:|---:|---|"]
    return lines + [f"| {r['label']} | {r['measured'] / 2**30:.3f} | {r['estimated'] / 2**30:.3f} | "
                    f"{100 * r['error']:+.1f}% | {'yes' if r['worst'] else ''} |" for r in cases]


def config_case_estimates(path):
    """A record whose cases carry their config.json (``config_json``), each case beside the estimate of that file:
    (record, [(case, result, row)]), row holding label, measured, estimated and error."""
    import tempfile
    record = json.loads(path.read_text())
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for case in record["cases"]:
            config = Path(folder) / "config.json"
            config.write_text(json.dumps(case["config_json"]))
            result = estimate({**measured_inputs(case["inputs"]), "config": str(config)})
            out.append((case, result, {"label": case["label"], "measured": case["peak_bytes"],
                                       "estimated": result.peak_bytes,
                                       "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"]}))
    return record, out


HYBRID = ROOT / "validation" / "measured_hybrid.json"


def hybrid_rows(path=HYBRID):
    """validation/measure_hybrid.py's cases, each beside the estimate of its config.json (written from the case's
    config_json), with the weights and the generate() cache as measured and as estimated."""
    record, estimated = config_case_estimates(path)
    out = []
    for case, result, row in estimated:
        pools, breakdown = result.components, case["peak_breakdown"]
        pairs = [(breakdown["Parameter"] + breakdown.get("Buffer", 0), pools["weights"])]
        if "cache_bytes" in case:
            cache = case["cache_bytes"]
            pairs += [(cache["kv_cache"] + cache["conv_state"] + cache["recurrent_state"],
                       pools.get("kv_cache", 0) + pools.get("recurrent_state", 0))]
        out.append({**row, "pairs": pairs})
    return record, out


def hybrid_section():
    """The hybrid families measured on small configs, serving and training, beside the estimate."""
    record, cases = hybrid_rows()
    mib = 2 ** 20
    train = [abs(r["error"]) for r in cases if " train " in r["label"]]
    serve = [abs(r["error"]) for r in cases if " infer " in r["label"]]
    worst_train = max((r for r in cases if " train " in r["label"]), key=lambda r: abs(r["error"]))["label"]
    lines = ["", "## Hybrid families (Mamba, gated DeltaNet, short convolution)", "",
             "`validation/measure_hybrid.py` runs `generate()` and one AdamW step, real tensors, on small configs of",
             "qwen3_next, granitemoehybrid, nemotron_h, falcon_h1, mamba2, jamba, lfm2 and qwen3_5_moe (the",
             "tests/configs/variants/synthetic-* files, a, and the same widened to hidden 512, b) with",
             "measure.py's set-up. transformers ran its reference torch scans, as it does wherever mamba_ssm,",
             "causal_conv1d or flash-linear-attention is not installed. Weights, the attention layers' KV cache",
             "and the convolution and recurrent states match to the allocator's 512-byte rounding. Training counts",
             "each scan layer's saved tensors by the per-layer formulas fitted to every saved tensor's shape",
             "(pycore/memory/scan_activations.py; the record's `mixer_fit`: within 2.2% of every Mamba-2, DeltaNet",
             "and short-convolution mixer measured, Mamba-1's within 3.1%): "
             f"training {100 * statistics.median(train):.1f}% median, {100 * max(train):.1f}% worst ({worst_train}).",
             "Mamba-1's reference scan (Jamba) holds four fp32 [b, d_inner, l, d_state] gradients in its backward",
             "(`scan_activations.backward_working`; 4.1-4.2 of them measured), counted as the layer's backward",
             "working set. The prefill working set of the reference chunked scans is Mamba-2's and DeltaNet's",
             "widest moment read off transformers' code and the live tensors of an H200's whole-model prefills",
             "(scan_activations.mamba2_chunk_scan, deltanet_chunk_rule), Mamba-1's a fit of these generate() cases:",
             f"serving {100 * statistics.median(serve):.1f}% median, {100 * max(serve):.1f}% worst.",
             " The fused kernels save far less (measure_hybrid.py's docstring; fla's gated DeltaNet is measured",
             "on a GPU below), so these are upper bounds for a GPU that has them.",
             f"Torch {record['torch']}, transformers {record['transformers']}.", "",
             "| case | measured MiB | estimate MiB | error | weights, cache: measured / estimated MiB |",
             "|---|---:|---:|---:|---|"]
    for r in cases:
        pairs = ", ".join(f"{m / mib:.2f} / {e / mib:.2f}" for m, e in r["pairs"])
        lines.append(f"| {r['label']} | {r['measured'] / mib:.1f} | {r['estimated'] / mib:.1f} | "
                     f"{100 * r['error']:+.1f}% | {pairs} |")
    return lines


LORA = ROOT / "validation" / "measured_lora.json"


def lora_inputs(case):
    """A LoRA case's inputs as the estimate reads them: the measured conditions, the attention as recorded (transformers
    5.24 hands SDPA grouped-query K/V unexpanded, as on CUDA), and lora_dropout where the schema has that key."""
    from pycore.inputs import schema
    inputs = {**MEASURED_CONDITIONS, **case["inputs"]}
    if "lora_dropout" in schema.BY_KEY:
        inputs["lora_dropout"] = str(case["lora_dropout"])
    return inputs


def lora_rows(path=LORA):
    """validation/measure_lora.py's cases: the peak, and the bytes a block saves per token (its blocks' mean, one
    forward without recompute) beside the estimate's per-layer activations (pycore.memory.activations.per_token)."""
    from pycore.inputs import schema
    from pycore.memory.activations import per_token
    from pycore.memory.setup import resolve
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        inputs = lora_inputs(case)
        estimated = estimate(inputs).peak_bytes
        tokens = int(case["inputs"]["batch"]) * int(case["inputs"]["seq"])
        saved = sum(case["saved_per_block"]) / len(case["saved_per_block"]) / tokens
        per_layer = per_token(resolve(schema.parse({**inputs, "recompute": "none"})))[0]
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": estimated,
                    "error": (estimated - case["peak_bytes"]) / case["peak_bytes"], "dropout": case["lora_dropout"],
                    "saved": saved, "saved_estimated": per_layer, "saved_error": (per_layer - saved) / saved})
    return record, out


VL = ROOT / "validation" / "measured_vl.json"
VL_GENERATE = ROOT / "validation" / "measured_vl_generate.json"


def vl_rows(path=VL):
    """validation/measure_vl.py's training steps with images, each beside the estimate of its config.json (written
    from the case's config_json): the peak, and what the vision tower saves for backward."""
    record, estimated = config_case_estimates(path)
    return record, [{**row, "tower": (case["tower_saved"], result.components.get("vision_activations", 0)),
                     "params_match": case["params"] == result.params_total, "phase": result.peak_phase}
                    for case, result, row in estimated]


def vl_generate_rows(path=VL_GENERATE):
    """validation/measure_vl.py --generate's generate() calls with images, each beside the estimate of its config.json:
    the peak, and whether the tower's forward is where the estimate puts it."""
    record, estimated = config_case_estimates(path)
    return record, [{**row, "params_match": case["params"] == result.params_total, "phase": result.peak_phase}
                    for case, result, row in estimated]


def vl_section():
    """Training steps of small vision-language models with images, beside the estimate."""
    record, cases = vl_rows()
    mib = 2 ** 20
    errors = [abs(r["error"]) for r in cases]
    towers = [abs(e - m) / m for m, e in (r["tower"] for r in cases) if m]      # a LoRA case's frozen tower keeps 0
    lines = ["", "## Vision-language training with images", "",
             "`validation/measure_vl.py` trains small Qwen2.5-VL, Qwen3.5, Qwen3-VL (dense and MoE), Gemma 3, Llama 4,",
             "LFM2-VL, LLaVA-1.5, LLaVA-NeXT and InternVL configs (InternViT-300M's and InternViT-6B's blocks: a 2-layer",
             "text decoder; a 4-block vision tower, and a 2-block",
             "tower twice as wide, -w; Qwen3-VL's with two deepstack mergers, whose features are added to the first two",
             "decoder layers' outputs at the image tokens; LLaVA-NeXT's over the whole image and its grid of 224-pixel",
             "crops, whose Conv2d keeps their pixels concatenated, a copy, without autocast) on",
             "sequences whose",
             "image placeholders the family's processor would write, with the markers around them (Qwen's vision",
             "start and end, Gemma 3's \"\\n\\n<boi>\" and \"<eoi>\\n\\n\"; Llama 4's tiles and global tile, LFM2-VL's",
             "tiles and thumbnail, each padded to 1,024 patches), real tensors, one warm-up step then one recorded AdamW",
             "step; `lora` cases put PEFT's adapters on the decoder's q and v only, the tower frozen. The vision",
             "tower's saved tensors are counted per patch by pycore/memory/vision_activations.py (the decoder's layer",
             "terms over the block's shape, with the differences read off the saved tensors at the narrow width),",
             "and the pixel values the step holds by pycore/model/vision.py:",
             f"the tower's saved bytes within {100 * statistics.median(towers):.1f}% median,",
             f"{100 * max(towers):.1f}% worst (autocast's weight copies, constants the CPU measurement counts with",
             f"them, are not per patch); the step's peak {100 * statistics.median(errors):.1f}% median, "
             f"{100 * max(errors):.1f}% worst.",
             "The LoRA cases put adapters on the decoder's q_proj and v_proj only: LFM2-VL's short-convolution layers",
             "have none, and their frozen convolution keeps no input (pycore said +13.5% before it counted so).",
             "LLaVA's CLIP tower runs a block past its feature layer (vision_feature_layer -2) whose output nothing",
             "uses: no gradient reaches it or the post-LayerNorm, so they get no optimizer state (before pycore",
             "counted so the wide case was +8.2%), and the tower saved is what is still held once the features are",
             "returned (that block frees its QuickGELU's sigmoid and fc2's input).",
             f"Torch {record['torch']}, transformers {record['transformers']}.", "",
             "| case | measured MiB | estimate MiB | error | tower saved: measured / estimated MiB |",
             "|---|---:|---:|---:|---|"]
    for r in cases:
        measured, estimated = r["tower"]
        lines.append(f"| {r['label']} | {r['measured'] / mib:.1f} | {r['estimated'] / mib:.1f} | "
                     f"{100 * r['error']:+.1f}% | {measured / mib:.2f} / {estimated / mib:.2f} |")
    return lines


def vl_generate_section():
    """generate() with images on the same small vision-language configs, beside the estimate."""
    record, cases = vl_generate_rows()
    mib = 2 ** 20
    errors = [abs(r["error"]) for r in cases]
    lines = ["", "## Vision-language generate() with images", "",
             "`validation/measure_vl.py --generate` calls `generate()` (four new tokens, after a warm-up call) on the",
             "same small configs with images: the vision tower runs once over the batch's images before the prefill,",
             "while the caller holds the pixel values. Its working set is pycore/memory/vision_activations.py's",
             "inference_per_patch: the widest moment of a block (Qwen's fp32 rotary, Llama 4's complex rotary,",
             "SigLIP's attention or MLP), read off the live tensors, times the patches. Before it was counted the",
             "larger images were 37% to 72% under; now the peak is within",
             f"{100 * statistics.median(errors):.1f}% median, {100 * max(errors):.1f}% worst. The cases 2-4% under have the",
             "smallest images, where the tower's working set is a few hundred KiB: the rest of their gap is not",
             "itemised yet. LLaVA and InternVL run their tower inside the prefill's forward and keep the tower's",
             "outputs and the projected features through it (LLaVA's cases were 6-12% under before they were counted);",
             "so do the Qwen towers: the last block's output, the merged features and their cat, and Qwen3-VL's two",
             "copies of each deepstack feature and, in its first decoder layers, a clone of the hidden states beside",
             "the layer's output (Qwen3-VL's two long-prompt cases were 11% and 13% under before). The text's ids",
             "are drawn from 1 up: a 0, the pad_token_id, made `generate()` hand SDPA a materialised padding mask",
             "(its additive copy and K/V expanded to every head) in those two cases, 5-8% more than a prompt without",
             "padding; the cases measured before were unchanged by that fix.",
             f"Torch {record['torch']}, transformers {record['transformers']}.", "",
             "| case | measured MiB | estimate MiB | error | estimated peak |",
             "|---|---:|---:|---:|---|"]
    for r in cases:
        lines.append(f"| {r['label']} | {r['measured'] / mib:.2f} | {r['estimated'] / mib:.2f} | "
                     f"{100 * r['error']:+.1f}% | {r['phase']} |")
    return lines


CUDA_FAMILIES = ROOT / "validation" / "measured_cuda_families.json"
CPU_RECORDS = {"hybrid": HYBRID, "fla": HYBRID, "vl": VL, "vl-generate": VL_GENERATE}


def cuda_families_rows(path=CUDA_FAMILIES):
    """validation/measure_cuda_families.py's cases on a real GPU, each beside the estimate of its config.json under the
    GPU's conditions (CUDA's grouped-query SDPA, the cuBLAS workspaces, the GPU it ran on; scan_kernels=fused for the
    fla cases), and beside the CPU record's MemTracker peak of the same case."""
    import tempfile
    record = json.loads(path.read_text())
    gpu = GPU_IDS[record["gpu"]]
    cpu = {kind: {c["label"]: c["peak_bytes"] for c in json.loads(p.read_text())["cases"]}
           for kind, p in CPU_RECORDS.items()}
    out = []
    with tempfile.TemporaryDirectory() as folder:
        config = Path(folder) / "config.json"
        for case in record["cases"]:
            config.write_text(json.dumps(case["config_json"]))
            kernels = {"scan_kernels": "fused"} if case["kind"] == "fla" else {}
            result = estimate({**cuda_inputs(case, gpu), "config": str(config), **kernels})
            same = case["label"].removeprefix("generate ").removesuffix(" fla")
            kind = "whole" if case["label"].endswith("(gpu)") else case["kind"]
            out.append({"label": case["label"], "kind": kind, "measured": case["peak_bytes"],
                        "estimated": result.peak_bytes, "cpu": cpu[case["kind"]].get(same) if kind != "whole" else None,
                        "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"],
                        "params_match": case["params"] == result.params_total})
    return record, out


CONV3D = ROOT / "validation" / "measured_conv3d.json"


def conv3d_copies(patches, channels, values, dtype):
    """What cuDNN 9.19 allocated beside its output on the H200 for the Qwen towers' patch embedding, an nn.Conv3d over
    3 channels whose kernel is its stride (``values`` = 3·t·p² a patch), as validation/probe_conv3d.py read it: one
    channels-last copy of the patches and the filters, (N + C)·values·4 bytes in fp32 and, in bf16 with the 3 input
    channels padded to 8, (N + C)·(8/3)·values·2 bytes when the embedding is 128 wide (16 bytes more each time);
    in bf16 nothing at the other widths probed (64, 96, 160 to 256, and every published Qwen tower's, 1,024 to
    1,280), in fp32 the copy at all of them."""
    if dtype == "float32":
        return (patches + channels) * values * 4 + 16
    return (patches + channels) * values * 8 // 3 * 2 + 16 if channels == 128 else 0


def conv3d_probe():
    """(the probe's record, its cases whose blocks beside the output differ from ``conv3d_copies``)."""
    record = json.loads(CONV3D.read_text())
    off = []
    for c in record["cases"]:
        values = 3 * c["kernel"][0] * c["kernel"][1] * c["kernel"][2]
        copies = conv3d_copies(c["patches"], c["channels"], values, c["dtype"])
        if sorted(c["blocks"]) != sorted([c["output_bytes"]] + ([copies] if copies else [])):
            off.append(c)
    return record, off


def patch_conv(case):
    """(patches, width, values a patch, dtype) of a Qwen vision-language generate() case's patch embedding, read off
    its label ("... b2 text64 1x320x320": batch 2, one 320x320 image each) and config; None for other towers."""
    vision = case["config_json"].get("vision_config", {})
    if case["config_json"]["model_type"] not in ("qwen2_5_vl", "qwen3_vl", "qwen3_vl_moe", "qwen3_5"):
        return None
    words = case["label"].split()
    batch = int(next(w for w in words if w.startswith("b") and w[1:].isdigit())[1:])
    images, width, height = (int(x) for x in words[-1].split("x"))
    p = vision["patch_size"]
    dtype = "float32" if "fp32" in words else "bfloat16"
    return batch * images * (width // p) * (height // p), vision["hidden_size"], 3 * 2 * p * p, dtype


CUDA_FAMILY_KINDS = {"hybrid": "hybrid, reference scans", "fla": "Qwen3-Next with fla (scan_kernels=fused)",
                     "vl": "vision-language training", "vl-generate": "vision-language generate()",
                     "whole": "whole models from their published config.json, labelled (gpu)"}


def cuda_families_section():
    """The hybrid and vision-language families' small configs on a real GPU, beside the estimate."""
    record, cases = cuda_families_rows()
    probe, off = conv3d_probe()
    cudnn = f"{probe['cudnn'] // 10000}.{probe['cudnn'] // 100 % 100}.{probe['cudnn'] % 100}"
    mib = 2 ** 20
    summary = []
    for kind, name in CUDA_FAMILY_KINDS.items():
        errors = [abs(r["error"]) for r in cases if r["kind"] == kind]
        summary.append(f"- {name}: {len(errors)} cases, {100 * statistics.median(errors):.1f}% median, "
                       f"{100 * max(errors):.1f}% worst;")
    lines = ["", "## Hybrid and vision-language families on a real GPU", "",
             "`validation/measure_cuda_families.py` ran the cases of the three sections above, and whole models, on an",
             f"{record['gpu']} (driver {record['driver']}, CUDA {record['cuda']}, torch {record['torch']}, transformers",
             f"{record['transformers']}), each in a process of its own, with the same models, batches and images",
             "built by the same code: a warm-up call, then `torch.cuda.max_memory_allocated()` of the measured",
             "training step or `generate()`. CUDA's own autocast, SDPA kernels, cuDNN and cuBLAS ran. The estimate",
             "is for the same GPU. Without mamba_ssm, causal_conv1d or flash-linear-attention installed transformers",
             "runs the same reference scans as on the CPU; the `fla` cases ran Qwen3-Next again with fla-core 0.6.0,",
             "so its gated DeltaNet ran fla's Triton `chunk_gated_delta_rule` (its convolution stayed torch's:",
             "causal_conv1d was not installed) and are compared with scan_kernels=fused. fla 0.6.0 refuses its",
             "gated backward kernel on Hopper with Triton below 3.7.1 (wrong results, its issue #640); the GPU had",
             "Triton 3.6, so the training cases ran with that check lifted: the buffers are allocated by fla's",
             "Python wrapper whatever Triton computes. The whole models are built on the GPU in bf16 from their",
             "config.json in tests/configs (random weights): Gemma 3 27B, Qwen2.5-VL-7B (`generate()` and LoRA",
             "training on its decoder's q and v with a 1,288x728 image), Qwen3.5-9B, LLaVA-1.5-7B, Nemotron-Nano-12B-v2,",
             "Granite 4.0-H-350M and Falcon-H1-0.5B; Qwen3-VL-4B (`generate()` with a 4,096-token prompt and a",
             "1,280x736 image, a full training step and LoRA training), Qwen3-VL-30B-A3B (`generate()`) and",
             "LLaVA-v1.6-Mistral-7B (`generate()` and LoRA training with a 1,280x720 image, five crops), and",
             "InternViT-6B (OpenGVLab's vit_6b_config) under a small decoder, `generate()` with two 896x672 images; and,",
             "with 16,384-token prompts, Qwen3.5-9B's text model and",
             "Qwen3-Next-80B's first four layers (three DeltaNet, one attention), and Jamba 1.5 Mini's first eight;",
             "and training steps of Qwen3.5-9B's first eight layers, Qwen3-Next-80B's first four and",
             "Nemotron-Nano-12B-v2's first eight at their full width (the scan layers' saved tensors, whose formulas",
             "were fitted on the small configs); and Qwen3-Next's 16,384-token prefill again with fla, where the",
             "peak is its MoE's: transformers' grouped experts hold the gathered inputs, the down projection's",
             "output, its routing-weighted product and that reordered, each top-k x hidden in bf16, since Qwen's",
             "routers cast their top-k weights to bf16 (+7.1% while they were taken as fp32, as GLM-4.5's are).", "",
             *summary, "",
             "Most cases are the CPU's MemTracker peak plus about 64 MiB in training and 32 MiB in `generate()`:",
             "cuBLAS's two 32 MiB workspaces (one in `generate()`), which pycore counts, and the allocator's",
             "rounding. The fla cases hold less than the reference scans (what fla saves for backward). The",
             "exceptions are Qwen2.5-VL's, Qwen3.5's and Qwen3-VL's `generate()` (6-13% under). At their peaks",
             "(`validation/measured_cuda_explain.txt`) what was live is the patch embedding's Conv3d (kernel =",
             "stride = 2x14x14 or 2x16x16 over 3 channels), whose cuDNN call held 2.7 to 4 times the pixel values",
             "for a moment. `validation/probe_conv3d.py` ran that convolution alone on the same GPU (cuDNN",
             f"{cudnn}) at {len(probe['cases'])} shapes: beside its output cuDNN allocates one block, a channels-last",
             "copy of the N patches and the C filters, (N + C)·K·4 bytes in fp32 and, with the 3 input channels",
             "padded to 8, (N + C)·(8/3)·K·2 bytes in bf16 (K = 3·t·p² values a patch), but in bf16 only when the",
             "embedding is 128 wide, as these configs' is: at 64, 96, 160 to 256 and the published towers' 1,024 to",
             f"1,280 it allocates nothing but its output ({len(probe['cases']) - len(off)} of "
             f"{len(probe['cases'])} shapes as that rule says, fp32 at the published widths too). pycore does not",
             "count the copy, which no published Qwen tower makes in bf16 (in fp32 it is the pixels' and filters'",
             "size, far under a block's working set); each of these cases falls short by less than it. The fp32",
             "case's peak is in the text prefill's SDPA (29.0 MiB in 9 blocks), 7.5",
             "MiB more than counted; that, and Qwen3-Next's and Qwen2.5-VL's training cases 5% under (their peak is",
             "in the backward, in blocks with no Python frame), are not itemised yet. Nemotron-Nano-12B-v2's and",
             "Falcon-H1's prefills were 3.4% and 6.6% under while Mamba-2's reference scan was a fit of the small",
             "configs at up to 8 chunks; the tensors live at their peaks gave its formula (2,823 MiB of them for",
             "Nemotron's 4,096 tokens, 32 chunks, beside the formula's 2,816); DeltaNet's fit, held at 16 chunks of",
             "64, counted 1.2 GiB of the 2.9 GiB of fp32 tensors Qwen3.5-9B's 16,384-token prefill held (the",
             "formula is now read off its code).", "",
             "| case | allocated MiB | estimate MiB | error | CPU MemTracker MiB | params match |",
             "|---|---:|---:|---:|---:|---|"]
    for r in cases:
        cpu = "-" if r["cpu"] is None else f"{r['cpu'] / mib:.2f}"
        lines.append(f"| {r['label']} | {r['measured'] / mib:.2f} | {r['estimated'] / mib:.2f} | "
                     f"{100 * r['error']:+.1f}% | {cpu} | {'yes' if r['params_match'] else 'no'} |")
    return lines


FAMILIES = ROOT / "validation" / "measured_families.json"


def families_rows(path=FAMILIES):
    """validation/measure_families.py's cases, each beside the estimate of its config: label, family, mode, measured,
    estimated, error, params_match."""
    record, estimated = config_case_estimates(path)
    return record, [{**row, "family": case["family"], "mode": case["inputs"]["mode"],
                     "params_match": case["params"] == result.params_total} for case, result, row in estimated]


def families_section():
    """The other 2025-2026 families on small configs, beside the estimate, gaps stated."""
    record, cases = families_rows()
    mib = 2 ** 20
    errors = [abs(r["error"]) for r in cases]
    lines = ["", "## Other 2025-2026 families: Apertus, OLMo 3, EXAONE 4, GLM-4.5, Llama 4", "",
             "`validation/measure_families.py` runs `generate()` and one AdamW step, real tensors, on small copies of",
             "each family's transformers default (4 layers of 256; GLM-4.5's and Llama 4's synthetic variants), with",
             "measure_hybrid.py's set-up. Their parameters are transformers' exactly. What these cases showed pycore",
             "did not count, and now does: transformers' Llama 4 MoE runs every routed expert on every token",
             "(Llama4TextMoe repeats the input once an expert, weighted by the router: generate() was -42%, training",
             "-19%); DynamicSlidingWindowLayer keeps the whole prompt's keys and values after the prefill (its window",
             "is a view of them) and SDPA gets a prompt² bool mask for the sliding or chunked layers (OLMo 3 -18%,",
             "EXAONE 4 -13%); Apertus's xIELU, run in Python without its CUDA package, keeps three more f-wide",
             "intermediates and a mask (-23% and -13%); a prefill keeps the embedding's output beside the residual,",
             "the block's sum and the norm's output (four hidden-wide tensors, not three: every generate() case here",
             "was 2-5% under); and a sliding or chunked layer's training step keeps SDPA's float copy of its mask",
             "(e·s a token: OLMo 3 -6.1% -> -2.8%, Llama 4 -5.8% -> -2.5%). Within",
             f"{100 * statistics.median(errors):.1f}% median, {100 * max(errors):.1f}% worst. Not itemised: GLM-4.5's routed "
             "experts as transformers 5.24's",
             "grouped_mm path runs them (the gathered inputs and the weighted outputs in fp32, k·h a token each, read",
             "off the live tensors of its generate() case), which a prefill's widest MLP happens to equal here.",
             f"Torch {record['torch']}, transformers {record['transformers']}.", "",
             "| case | measured MiB | estimate MiB | error |", "|---|---:|---:|---:|"]
    return lines + [f"| {r['label']} | {r['measured'] / mib:.2f} | {r['estimated'] / mib:.2f} | {100 * r['error']:+.1f}% |"
                    for r in cases]


def lora_section():
    """LoRA through PEFT on small Llama and Qwen2 configs, beside the estimate."""
    from pycore.inputs import schema
    record, cases = lora_rows()
    errors = [abs(r["error"]) for r in cases]
    plain = [abs(r["saved_error"]) for r in cases if not r["dropout"] and "dora" not in r["label"]]
    dropout = "lora_dropout" in schema.BY_KEY
    lines = ["", "## LoRA through PEFT", "",
             "`validation/measure_lora.py` wraps small Llama and Qwen2 configs with `peft.get_peft_model` as users",
             "call it (PEFT's defaults: fp32 adapters on a 16-bit base, `lora_alpha = 2r`), rank 8 to 64 on q/v,",
             "attention and all-linear targets, with and without `lora_dropout`, and measures one step after a",
             "warm-up as measure.py does (real tensors, CUDA's autocast rules and 1-byte dropout masks). PEFT's",
             "`lora.Linear.forward` (peft/tuners/lora/layer.py, lines 1088-1102) leaves the frozen base layer",
             "nothing to keep of its input; `_cast_input_dtype` gives each adapted layer its own fp32 copy of a",
             "16-bit input, which lora_A keeps (under autocast, lora_A's own 16-bit copy); dropout adds a 1-byte",
             "mask per adapted layer; lora_B keeps lora_A's r outputs. Frozen norm weights keep no normalised",
             "tensor, and the first block's input norm keeps nothing (nothing before it needs a gradient)",
             "(pycore/memory/finetune.py `adapter_saved`, pycore/memory/activations.py `_adapter_terms`).",
             "The saved column is what a block keeps for backward per token (saved_tensors_hooks over one forward,",
             "the blocks' mean) beside the estimate's per-layer activations: "
             f"{100 * statistics.median(plain):.1f}% median, {100 * max(plain):.1f}% worst without dropout.",
             "DoRA (`lora_variant=dora`, PEFT's use_dora) keeps the base layer's and lora_B's outputs per adapted",
             "layer (the record's dora_study: exactly 6·out bytes a token in bf16, 4·out under autocast) and builds",
             "the largest adapted weight's column norm in its forward, (in² + 4·in·out) values in the adapters'",
             "dtype (peft/tuners/lora/dora.py); the hooks also record those forward-only tensors, so the saved",
             "column of the DoRA rows is above what backward keeps, and they are left out of that figure.",
             ("Dropout is the case's `lora_dropout`." if dropout else
              "The schema has no `lora_dropout` input yet: the estimate assumes PEFT's default 0.0, so the dropout "
              "cases miss one byte per element of each adapted layer's input (the masks)."),
             f"Torch {record['torch']}, transformers {record['transformers']}, {record['about'].rsplit('; ', 1)[-1]}; "
             f"peak error over {len(cases)} cases: {100 * statistics.median(errors):.1f}% median, "
             f"{100 * max(errors):.1f}% worst.", "",
             "| case | measured MiB | estimate MiB | error | saved B/token/layer: measured / estimated |",
             "|---|---:|---:|---:|---|"]
    mib = 2 ** 20
    return lines + [f"| {r['label']} | {r['measured'] / mib:.1f} | {r['estimated'] / mib:.1f} | "
                    f"{100 * r['error']:+.1f}% | {r['saved']:,.0f} / {r['saved_estimated']:,.0f} "
                    f"({100 * r['saved_error']:+.1f}%) |" for r in cases]


DPO = ROOT / "validation" / "measured_dpo.json"


MIB = 2 ** 20


def _trl_summary(record, cases, phase_errors=None):
    """A post-training section's versions and errors: the peak's over its cases (median, worst) and, given them,
    every phase's."""
    errors = [abs(r["error"]) for r in cases]
    text = (f"TRL {record.get('trl', '?')}, PEFT {record.get('peft', '?')}, torch {record['torch']}, transformers "
            f"{record['transformers']}; error over {len(cases)} cases: {100 * statistics.median(errors):.1f}% median, "
            f"{100 * max(errors):.1f}% worst")
    if phase_errors is not None:
        text += (f"; every phase of every case: {100 * statistics.median(phase_errors):.1f}% median, "
                 f"{100 * max(phase_errors):.1f}% worst")
    return text


def _case_row(r, *middle):
    """A post-training section's table row: the case, its peak measured and estimated (MiB), the error, the
    ``middle`` cells, and each phase measured / estimated."""
    phases = "; ".join(f"{name} {m / MIB:.1f} / {e / MIB:.1f}" for name, (m, e) in r["phases"].items())
    return " | ".join([f"| {r['label']}", f"{r['measured'] / MIB:.1f}", f"{r['estimated'] / MIB:.1f}",
                       f"{100 * r['error']:+.1f}%", *middle, f"{phases} |"])


def dpo_inputs(case):
    """A DPO case's inputs as the estimate reads them. Unlike measure.py's cases (measured_inputs: flash-repeat), these
    ran transformers 5.24 on torch 2.13, whose CPU SDPA takes grouped K/V as they are (enable_gqa), as CUDA's does."""
    return {**MEASURED_CONDITIONS, **case["inputs"]}


def dpo_rows(path=DPO):
    """validation/measure_dpo.py's cases: the step's peak and each phase's, measured against estimated (the policy's
    forward against the forward-end moment, the backward against the largest backward moment)."""
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        result = estimate(dpo_inputs(case))
        moments = result.moments
        phases = {"policy forward": moments["forward end"], "reference forward": moments.get("reference forward"),
                  "loss": moments.get("log-prob metrics"),       # trl_head=full: TRL 1.14.2's metrics copy logits
                  "backward": max(v for k, v in moments.items() if k.startswith("backward")),
                  "optimizer step": moments["optimizer step"]}
        # the nearest plain fine-tuning estimate: the same policy and batch, no recipe
        plain = {k: v for k, v in dpo_inputs(case).items() if k not in ("ref_model", "trl_head")}
        plain["method"] = plain["method"].partition("-")[2] or "full"
        plain = estimate(plain).peak_bytes
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": result.peak_bytes,
                    "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"],
                    "plain_error": (plain - case["peak_bytes"]) / case["peak_bytes"],
                    "phase": result.peak_moment, "phases": {k: (v, phases[k]) for k, v in case["phase_peaks"].items()
                                                            if phases.get(k) is not None}})
    return record, out


def dpo_section():
    """One DPO step as TRL's DPOTrainer runs it, small Llama and Qwen2 configs, beside the estimate."""
    record, cases = dpo_rows()
    lines = ["", "## DPO (TRL's DPOTrainer)", "",
             "`validation/measure_dpo.py` runs TRL 1.16's own `DPOTrainer._compute_loss` (the policy's forward, the",
             "reference forward under no_grad, the sigmoid loss), then backward, AdamW and `zero_grad`, as the Trainer's",
             "step does, on small Llama and Qwen2 configs in bf16 and amp-bf16 (TRL's default for a model it loads: fp32",
             "weights, bf16 autocast) with real tensors and measure.py's set-up: chosen and",
             "rejected rows in one batch (batch counts pairs), a 32-token prompt masked out of the labels, TRL's fused",
             "log-prob head on both models (no logits), a frozen reference copy for a full policy, the base with its",
             "adapters disabled for a LoRA policy, none with `precompute_ref_log_probs` (ref_model=precomputed); `gc`",
             "cases checkpoint every layer, DPOConfig's default. The head's tile folds ran untracked, as Triton runs",
             "them on a GPU, and only the completion's tokens were gathered, as on a GPU. The estimate scores every",
             "token but each row's last, so it counts the prompt's share of the head's tile and per-token tensors too:",
             "most of its excess here, a few MiB that a full-size model does not notice. The wide-MLP cases make one",
             "layer's MLP, not the head, the reference forward's peak, as in full-size models. Not modelled: under",
             "checkpointing each layer's forward holds its working tensors for a moment (the wide LoRA case's policy",
             "forward), never the step's peak here. The plain column is the nearest plain fine-tuning estimate (the",
             "same policy, batch and sequence, method=full or lora): it misses the reference and the doubled batch",
             "and charges full logits.",
             _trl_summary(record, cases) + ".", "",
             "| case | measured MiB | estimate MiB | error | plain fine-tuning error | peak moment | phases, measured / "
             "estimated MiB |", "|---|---:|---:|---:|---:|---|---|"]
    return lines + [_case_row(r, f"{100 * r['plain_error']:+.1f}%", r["phase"]) for r in cases]


DPO_FULL = ROOT / "validation" / "measured_dpo_full.json"


def dpo_full_section():
    """One DPO step as TRL 1.14.2's DPOTrainer runs it (trl_head=full: the models' full logits), beside the estimate."""
    record, cases = dpo_rows(DPO_FULL)
    lines = ["", "## DPO before the fused head (TRL 1.14.2's DPOTrainer, trl_head=full)", "",
             "`validation/measure_dpo_full.py` runs TRL 1.14.2's own `DPOTrainer._compute_loss`, the last release before",
             "1.15.0 added the fused log-prob head: the policy's and the reference's own lm_head return their full logits",
             "[2 × pairs, T, V], fp32 under amp-bf16 (accelerate's `convert_outputs_to_fp32`, applied to both models as",
             "`prepare_model` does), scored by TRL 1.14.2's log-prob kernel (its Python wrapper's allocations as they",
             "are, its two Triton kernels replaced by untracked fills), then the loss's metrics, which copy the chosen",
             "rows' logits while both models' logits are alive (the `loss` phase, the estimate's `log-prob metrics`",
             "moment), backward, AdamW and `zero_grad`, with measure_dpo.py's set-up (batch counts pairs, a 32-token",
             "prompt out of the labels, a frozen reference copy for a full policy, the base with its adapters disabled",
             "for a LoRA one, none with `precompute_ref_log_probs`). The estimate counts the prompt's tokens in the",
             "metrics' copy (an upper bound). The plain column is the nearest plain fine-tuning estimate.",
             _trl_summary(record, cases) + ".", "",
             "| case | measured MiB | estimate MiB | error | plain fine-tuning error | peak moment | phases, measured / "
             "estimated MiB |", "|---|---:|---:|---:|---:|---|---|"]
    return lines + [_case_row(r, f"{100 * r['plain_error']:+.1f}%", r["phase"]) for r in cases]


KTO = ROOT / "validation" / "measured_kto.json"


def kto_rows(path=KTO):
    """validation/measure_kto.py's cases: the step's peak and each phase's, measured against estimated, as dpo_rows
    (the policy's no_grad forward on the KL rows against the KL-forward moment)."""
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        inputs = dpo_inputs(case)
        result = estimate(inputs)
        moments = result.moments
        phases = {"KL forward": moments["KL forward"], "policy forward": moments["forward end"],
                  "reference forward": moments.get("reference forward"),
                  "backward": max(v for k, v in moments.items() if k.startswith("backward")),
                  "optimizer step": moments["optimizer step"]}
        # the nearest DPO estimate: as many rows (batch / 2 pairs), no KL forward
        dpo = {**inputs, "method": inputs["method"].replace("kto", "dpo"), "batch": str(int(inputs["batch"]) // 2)}
        dpo = estimate(dpo).peak_bytes
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": result.peak_bytes,
                    "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"],
                    "dpo_error": (dpo - case["peak_bytes"]) / case["peak_bytes"],
                    "phase": result.peak_moment, "phases": {k: (v, phases[k]) for k, v in case["phase_peaks"].items()
                                                            if phases.get(k) is not None}})
    return record, out


def kto_section():
    """One KTO step as TRL's KTOTrainer runs it, small Llama and Qwen2 configs, beside the estimate."""
    record, cases = kto_rows()
    lines = ["", "## KTO (TRL's KTOTrainer)", "",
             "`validation/measure_kto.py` runs TRL 1.16's own `KTOTrainer._compute_loss` (loss_type `kto`, KTOConfig's",
             "default: the policy's forward on the KL rows under no_grad, its forward with grad on the batch, then the",
             "reference's forwards on the KL rows and on the batch under no_grad), backward, AdamW and `zero_grad`, with",
             "measure_dpo.py's set-up: batch unpaired rows labelled desirable and undesirable, a 32-token prompt masked",
             "out of the labels, each KL row the prompt with the previous row's completion, TRL's fused log-prob head on",
             "both models, a frozen reference copy for a full policy, the base with its adapters disabled for a LoRA",
             "policy, none with `precompute_ref_log_probs` (ref_model=precomputed). The KL forward is the estimate's own",
             "moment before the policy's forward: the weights, optimizer state and reference beside one no_grad pass;",
             "never the peak here, as it holds no activation. The LoRA cases' excess is the prompt's share of the head's",
             "tile, as in DPO's; as there, a layer's working tensors under checkpointing (the wide LoRA case's policy",
             "forward) are not modelled. The DPO column is the DPO estimate of as many rows (batch / 2 pairs), which has",
             "no KL forward: the same peak wherever the peak is not that moment.",
             _trl_summary(record, cases) + ".", "",
             "| case | measured MiB | estimate MiB | error | DPO of as many rows error | peak moment | phases, measured / "
             "estimated MiB |", "|---|---:|---:|---:|---:|---|---|"]
    return lines + [_case_row(r, f"{100 * r['dpo_error']:+.1f}%", r["phase"]) for r in cases]


GRPO = ROOT / "validation" / "measured_grpo.json"
LATER = ", later micro-batch"       # pycore.memory.accumulation.LATER
# validation/measure_grpo.py's phases, each against the largest of the estimate's moments in it
GRPO_PHASES = {"rollout": ("rollout, prefill", "rollout, decode"), "reference log-probs": ("reference log-probs",),
               "policy forward": ("forward end",), "backward": ("backward start", "backward, first layer",
                                                                "backward, last layer", "backward end"),
               "optimizer step": ("optimizer step",)}


def grpo_rows(path=GRPO):
    """validation/measure_grpo.py's cases: the step's peak and each phase's, measured against estimated; and the
    nearest plain fine-tuning estimate (the same policy over prompt + completion, no rollout, no reference)."""
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        inputs = dpo_inputs(case)
        result = estimate(inputs)
        # with gradient accumulation a phase's moments recur in a later micro-batch ("..., later micro-batch")
        phases = {name: max(v for m, v in result.moments.items() if m.removesuffix(LATER) in moments)
                  for name, moments in GRPO_PHASES.items() if any(m in result.moments for m in moments)}
        plain = {k: v for k, v in inputs.items()
                 if k not in ("num_generations", "max_completion_length", "beta", "trl_head")}
        plain["method"] = plain["method"].partition("-")[2] or "full"
        plain["seq"] = str(int(inputs["seq"]) + int(inputs["max_completion_length"]))
        plain = estimate(plain).peak_bytes
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": result.peak_bytes,
                    "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"],
                    "plain_error": (plain - case["peak_bytes"]) / case["peak_bytes"], "phase": result.peak_moment,
                    "measured_phase": max((k for k in case["phase_peaks"] if k in GRPO_PHASES),
                                          key=lambda k: case["phase_peaks"][k]),
                    "phases": {k: (v, phases[k]) for k, v in case["phase_peaks"].items() if k in phases}})
    return record, out


def grpo_section():
    """One GRPO step as TRL's GRPOTrainer runs it with generate(), small Llama and Qwen2 configs, beside the estimate."""
    record, cases = grpo_rows()
    def untracked(r, name):     # the phases of a LoRA policy under checkpointing the prose below sets apart
        if " lora " not in r["label"] or " gc " not in r["label"]:
            return False
        return name == "optimizer step" or (" ga" in r["label"] and name in ("policy forward", "backward"))
    phase_errors = [abs(e - m) / m for r in cases for name, (m, e) in r["phases"].items() if not untracked(r, name)]
    apart = [abs(e - m) / m for r in cases for name, (m, e) in r["phases"].items() if untracked(r, name)]
    lines = ["", "## GRPO (TRL's GRPOTrainer, rollout by generate())", "",
             "`validation/measure_grpo.py` runs one GRPO step as TRL 1.16's GRPOTrainer does with transformers",
             "`generate()` as the rollout: `generate()` under no_grad with checkpointing off, sampling",
             "`max_completion_length` tokens for each of the batch's rows (batch is `per_device_train_batch_size`, which",
             "counts completions; no EOS, so every completion runs to the limit); when beta > 0 the reference's",
             "log-probs under no_grad (a frozen copy of a full policy, the base with its adapters disabled for a LoRA",
             "one); then TRL's own `_compute_loss` (the policy over prompt + completion through the fused log-prob",
             "head, the DAPO loss, GRPOConfig's default), backward, AdamW and `zero_grad`, with measure_dpo.py's set-up",
             "(real tensors, CUDA's autocast lists, the fused head's CUDA path). amp-bf16 is TRL's default for a model",
             "it loads: accelerate's autocast wraps the full policy's forward, so it generates in bf16 with its weights",
             "cast per forward; a PEFT policy generates through the base model's own forward, in fp32. The estimate",
             "models each phase as a moment (pycore/memory/rollout.py, pycore/memory/posttraining.py); each phase's",
             "measured peak is set against the largest estimated moment in it. `ga` cases accumulate gradients over",
             "that many micro-batches, which GRPOConfig's steps_per_generation generates at once. Set apart: with a",
             "LoRA policy under checkpointing MemTracker's own bookkeeping keeps two to four [tokens, hidden] tensors of",
             "each micro-batch after its backward (the same step run untracked leaves none; the DPO LoRA cases with",
             "checkpointing show it too), so the optimizer step and, with accumulation, the later micro-batches measure",
             "more than the estimate; in the `ga8` case that residue lifts the backward above the rollout, the",
             "estimate's peak, measured within 2.4%. Not modelled: PEFT's fp32 copies of an adapted layer's input and",
             "output in the rollout's prefill (the all-linear case's rollout, 4% under). The plain column is the",
             "nearest plain fine-tuning estimate (the same policy over prompt + completion): it misses the rollout and",
             "the reference and charges full logits. rollout=vllm-colocate",
             "(a vLLM engine in the trainer's process at `vllm_gpu_memory_utilization`) is vLLM's start-up arithmetic",
             "as the serving section below reproduces it, not measured here (tests/test_grpo.py).",
             _trl_summary(record, cases, phase_errors) + " (the phases set apart above: up to "
             f"{100 * max(apart, default=0):.1f}% under).", "",
             "| case | measured MiB | estimate MiB | error | plain fine-tuning error | peak: measured / estimated | "
             "phases, measured / estimated MiB |", "|---|---:|---:|---:|---:|---|---|"]
    return lines + [_case_row(r, f"{100 * r['plain_error']:+.1f}%", f"{r['measured_phase']} / {r['phase']}")
                    for r in cases]


GRPO_FULL = ROOT / "validation" / "measured_grpo_full.json"


def grpo_full_section():
    """One GRPO step as TRL 1.14.2's GRPOTrainer runs it (trl_head=full: the models' full logits), beside the estimate."""
    record, cases = grpo_rows(GRPO_FULL)
    phase_errors = [abs(e - m) / m for r in cases for (m, e) in r["phases"].values()]
    lines = ["", "## GRPO before the fused head (TRL 1.14.2's GRPOTrainer, trl_head=full)", "",
             "`validation/measure_grpo_full.py` runs measure_grpo.py's step (the rollout by `generate()`, the",
             "reference's log-probs under no_grad when beta > 0, the update, AdamW and `zero_grad`) with TRL 1.14.2's",
             "own `_get_per_token_logps_and_entropies` and `_compute_loss`, the last release before 1.15.0 added the",
             "fused log-prob head: `_full_logits_logps` runs the model's own lm_head with `logits_to_keep` =",
             "completion + 1, so the policy's and the reference's logits are [batch, completion + 1, V], fp32 under",
             "amp-bf16 (accelerate's `convert_outputs_to_fp32` on both models, as `prepare_model` does), scored by",
             "TRL 1.14.2's log-prob kernel (its Python wrapper's allocations as they are, its two Triton kernels",
             "replaced by untracked fills, as measure_dpo_full.py does). The LoRA case under checkpointing measures",
             "its optimizer step above the estimate by MemTracker's residue, as in the section above. The plain column",
             "is the nearest plain fine-tuning estimate (the same policy over prompt + completion).",
             _trl_summary(record, cases, phase_errors) + ".", "",
             "| case | measured MiB | estimate MiB | error | plain fine-tuning error | peak: measured / estimated | "
             "phases, measured / estimated MiB |", "|---|---:|---:|---:|---:|---|---|"]
    return lines + [_case_row(r, f"{100 * r['plain_error']:+.1f}%", f"{r['measured_phase']} / {r['phase']}")
                    for r in cases]


def measured_section(heading, path, prose, extra=None):
    """A section for one measurement file: its cases, measured against estimated."""
    record, cases = fsdp_rows(path, extra)
    worst = max(abs(r["error"]) for r in cases)
    lines = ["", heading, "", *prose, f"Torch {record['torch']}, transformers {record['transformers']}; worst error "
             f"over {len(cases)} cases: {100 * worst:.1f}%.", "", "| case | measured GiB | estimate GiB | error |",
             "|---|---:|---:|---:|"]
    return lines + [f"| {r['label']} | {r['measured'] / 2**30:.3f} | {r['estimated'] / 2**30:.3f} | "
                    f"{100 * r['error']:+.1f}% |" for r in cases]


def published(heading, prose, column, runs):
    """A section comparing published per-GPU figures with the estimate for the same inputs."""
    lines = ["", heading, "", *prose, "", f"| {column} | their GiB | estimate GiB | inputs |", "|---|---:|---:|---|"]
    for label, query, theirs in runs:
        ours = estimate(dict(parse_qsl(query))).reserved_bytes / 2**30
        lines.append(f"| {label} | {theirs:.1f} | {ours:.1f} | `{query}` |")
    return lines


def main():
    record, table = rows()
    text = markdown(record, table)
    if "--check" in sys.argv:
        if DOC.read_text() != text:
            sys.exit("docs/validation.md is stale: run python validation/compare.py")
        return
    DOC.write_text(text)
    for r in table:
        print(f"{r['label']:48s} {r['measured'] / 2**30:9.3f} {r['estimated'] / 2**30:9.3f} {100 * r['error']:+7.1f}%"
              f" textbook {100 * r['textbook_error']:+7.1f}%  {r['phase']}")
    print({k: round(v, 4) if isinstance(v, float) else v for k, v in summary(table).items()})


REWARD = ROOT / "validation" / "measured_reward.json"


def reward_rows(path=REWARD):
    """validation/measure_reward.py's cases (TRL's RewardTrainer.compute_loss) beside the estimate, and the plain
    fine-tuning estimate of the same model with its LM head over as many sequences (what a user would otherwise
    type)."""
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        inputs = dpo_inputs(case)
        estimated = estimate(inputs).peak_bytes
        plain = {**inputs, "method": inputs["method"].partition("-")[2] or "full",
                 "batch": str(2 * int(inputs["batch"]))}
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": estimated,
                    "error": (estimated - case["peak_bytes"]) / case["peak_bytes"],
                    "plain_error": (estimate(plain).peak_bytes - case["peak_bytes"]) / case["peak_bytes"],
                    "params_match": estimate(inputs).params_total == case["params"] or "lora" in case["label"]})
    return record, out


def reward_section():
    """Reward-model training (TRL's RewardTrainer) on small Llama and Qwen2 configs, beside the estimate."""
    record, cases = reward_rows()
    errors = [abs(r["error"]) for r in cases]
    plain = [r["plain_error"] for r in cases]
    mib = 2 ** 20
    lines = ["", "## Reward models (TRL's RewardTrainer)", "",
             "`validation/measure_reward.py` runs TRL 1.16's own `RewardTrainer.compute_loss` on a one-label",
             "`AutoModelForSequenceClassification` (chosen and rejected rows in one batch, 2 × the pairs), then the",
             "backward, AdamW step and `zero_grad` as the Trainer does; real tensors, measure.py's CUDA-like set-up.",
             "The estimate (`method=reward`, `reward-lora`) is the decoder with a one-output score head in place of",
             "the LM head, over twice the batch, with RewardConfig's defaults (gradient checkpointing, bf16 autocast)",
             f"when left at auto: {100 * statistics.median(errors):.1f}% median, {100 * max(errors):.1f}% worst over "
             f"{len(cases)} cases. A plain fine-tuning estimate of the same rows with the LM head is off by "
             f"{100 * min(plain):+.0f}% to {100 * max(plain):+.0f}% (its logits over the vocabulary).",
             "With gradient checkpointing (gc) the estimate is over (up to +10% here): the first layer's backward,",
             "where the measured peak is, holds less of the rebuilt layer than the estimate counts.",
             f"Torch {record['torch']}, transformers {record['transformers']}.", "",
             "| case | measured MiB | estimate MiB | error | plain fine-tuning error |", "|---|---:|---:|---:|---:|"]
    return lines + [f"| {r['label']} | {r['measured'] / mib:.1f} | {r['estimated'] / mib:.1f} | "
                    f"{100 * r['error']:+.1f}% | {100 * r['plain_error']:+.1f}% |" for r in cases]


DISTILL = ROOT / "validation" / "measured_distill.json"
# validation/measure_distill.py's phases, each against the largest of the estimate's moments in it
DISTILL_PHASES = {"rollout": ("rollout, prefill", "rollout, decode"), "forward": ("forward end",),
                  "teacher forward": ("teacher forward",), "divergence": ("divergence",),
                  "backward": ("backward start", "backward, first layer", "backward, last layer", "backward end"),
                  "optimizer step": ("optimizer step",)}


def distill_inputs(case):
    """A distillation case's inputs as the estimate reads them: a teacher of its own is the config.json
    validation/measure_distill.py wrote for it (teacher= takes a path on the command line)."""
    inputs = dpo_inputs(case)
    if "teacher_config" in case:
        inputs["teacher"] = str(ROOT / case["teacher_config"])
    return inputs


def distill_rows(path=DISTILL):
    """validation/measure_distill.py's cases: the step's peak and each phase's, measured against estimated; and the
    nearest plain fine-tuning estimate (the student over prompt + completion, no rollout, no teacher)."""
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        inputs = distill_inputs(case)
        result = estimate(inputs)
        phases = {name: max(v for m, v in result.moments.items() if m.removesuffix(LATER) in moments)
                  for name, moments in DISTILL_PHASES.items() if any(m in result.moments for m in moments)}
        plain = {k: v for k, v in inputs.items() if k not in ("max_completion_length", "teacher")}
        plain["method"] = plain["method"].partition("-")[2] or "full"
        plain["seq"] = str(int(inputs["seq"]) + int(inputs["max_completion_length"]))
        plain = estimate(plain).peak_bytes
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": result.peak_bytes,
                    "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"],
                    "plain_error": (plain - case["peak_bytes"]) / case["peak_bytes"], "phase": result.peak_moment,
                    "measured_phase": max((k for k in case["phase_peaks"] if k in DISTILL_PHASES),
                                          key=lambda k: case["phase_peaks"][k]),
                    "phases": {k: (v, phases[k]) for k, v in case["phase_peaks"].items() if k in phases}})
    return record, out


def distill_section():
    """One on-policy distillation step as TRL's DistillationTrainer runs it, small Llama and Qwen2 configs."""
    if not DISTILL.exists():
        return []
    record, cases = distill_rows()
    phase_errors = [abs(e - m) / m for r in cases for (m, e) in r["phases"].values()]
    lines = ["", "## On-policy distillation (TRL's DistillationTrainer, rollout by generate())", "",
             *DISTILL_PROSE,
             _trl_summary(record, cases, phase_errors) + ".", "",
             "| case | measured MiB | estimate MiB | error | plain fine-tuning error | peak: measured / estimated | "
             "phases, measured / estimated MiB |", "|---|---:|---:|---:|---:|---|---|"]
    return lines + [_case_row(r, f"{100 * r['plain_error']:+.1f}%", f"{r['measured_phase']} / {r['phase']}")
                    for r in cases]


DISTILL_PROSE = [
    "`validation/measure_distill.py` runs one step as TRL 1.16's DistillationTrainer does with transformers",
    "`generate()` as the rollout: `generate()` under no_grad with checkpointing off for every micro-batch's",
    "prompts at once (batch is `per_device_train_batch_size` prompts, one completion each; no EOS, so every",
    "completion runs to `max_completion_length`), then for each micro-batch TRL's own `compute_loss`: the",
    "student's backbone over prompt + completion, the teacher's under no_grad, and `_chunked_divergence_loss`",
    "(both heads projected on two fp32 tiles of 4,096 × 32,768, the logits never whole; DistillationConfig's",
    "beta 1.0, reverse KL), then backward, AdamW and `zero_grad`, with measure_dpo.py's set-up (real tensors,",
    "CUDA's autocast lists; the divergence's CUDA path: the completion's positions gathered, the tile folds and",
    "fp32 products untracked as Triton and `mm(out_dtype=float32)` run them). The teacher loads in its",
    "checkpoint's dtype (bf16) whatever the student's; `teacher 4L` cases give it a larger config of its own",
    "(`validation/distill_teachers/`, passed as `teacher=` a config.json). amp-bf16 is TRL's default for a",
    "student it loads (fp32 weights, bf16=True): `compute_loss` reaches `_compute_loss` through",
    "`_forward_redirection`, which bypasses accelerate's autocast wrapper, so the update runs in fp32 and only",
    "a full student's `generate()` autocasts (a PEFT student generates through the base model's own forward, in",
    "fp32). The estimate models each phase as a moment (pycore/memory/distillation.py); each phase's measured",
    "peak is set against the largest estimated moment in it. `ga` cases accumulate over that many micro-batches,",
    "generated at once. The plain column is the nearest plain fine-tuning estimate (the student over prompt +",
    "completion): it misses the rollout and the teacher and charges full logits. Not modelled, never a step's",
    "peak here: with a LoRA student under checkpointing MemTracker's own bookkeeping keeps a few [tokens, hidden]",
    "tensors after each backward (as in the GRPO section), so its optimizer step and, with accumulation, its later",
    "micro-batches measure up to 6% more than the estimate; and PEFT's fp32 copies of an adapted layer's input",
    "and output while it computes (the all-linear case's forward, 5% more).",
]


PPO = ROOT / "validation" / "measured_ppo.json"
# validation/measure_ppo.py's phases, each against the largest of the estimate's moments in it
PPO_PHASES = {"rollout": (("rollout, generate", "rollout, logits padded"),
                          ("rollout, prefill", "rollout, generate", "rollout, logits padded")),
              "reference": (("reference log-probs",), ("reference log-probs",)),
              "value": (("value scores",), ("value scores",)), "reward": (("reward scores",), ("reward scores",)),
              "forward": (("update, forward",), ("forward end",)), "losses": (("update, loss",), ("losses",)),
              "backward": (("update, backward",), ("backward start", "backward, first layer", "backward, last layer",
                                                   "backward end")),
              "optimizer step": (("update, optimizer step",), ("optimizer step",)),
              "statistics": (("update, statistics",), ("entropy statistics",))}


def ppo_rows(path=PPO):
    """validation/measure_ppo.py's cases: the update's peak and each phase's, measured against estimated."""
    record = json.loads(path.read_text())
    out = []
    for case in record["cases"]:
        result = estimate(dpo_inputs(case))
        phases = {}
        for name, (measured, moments) in PPO_PHASES.items():
            seen = [case["phase_peaks"][m] for m in measured if m in case["phase_peaks"]]
            est = [v for m, v in result.moments.items() if m.removesuffix(LATER) in moments]
            if seen and est:
                phases[name] = (max(seen), max(est))
        measured_phase = max(phases, key=lambda k: phases[k][0])
        out.append({"label": case["label"], "measured": case["peak_bytes"], "estimated": result.peak_bytes,
                    "error": (result.peak_bytes - case["peak_bytes"]) / case["peak_bytes"], "phase": result.peak_moment,
                    "measured_phase": measured_phase, "phases": phases,
                    "params_match": result.params_total == case["params"] or "lora" in case["label"]})
    return record, out


def ppo_section():
    """One PPO update as TRL 0.25.1's PPOTrainer runs it, small Llama and Qwen2 configs, beside the estimate."""
    record, cases = ppo_rows()
    phase_errors = [abs(e - m) / m for r in cases for m, e in r["phases"].values()]
    lines = ["", "## PPO (TRL 0.25.1's PPOTrainer)", "",
             "`validation/measure_ppo.py` runs one update of TRL 0.25.1's `PPOTrainer.train` (TRL moved PPOTrainer to",
             "`trl.experimental` after 0.25.1 and removed it later; 1.16 has none) statement by statement with TRL's own",
             "helpers: `batch_generation` (generate() with `output_scores`, `local_rollout_forward_batch_size` rows at a",
             "time, every step's fp32 scores stacked and padded into one tensor that lives through the update and into",
             "the next rollout), then per chunk the reference's forward (a frozen copy of a full policy, the base with its",
             "adapters disabled for a LoRA one), the value and the reward model's `get_reward`, GAE, and one PPO epoch of",
             "`num_mini_batches` mini-batches of micro-batches: `PolicyAndValueWrapper`'s forward (the value backbone,",
             "then the policy with full logits and every hidden state), the clipped losses, backward, AdamW, `zero_grad`",
             "and the entropy statistics. The value and reward models are the policy's backbone with a one-output score",
             "head. Real tensors, measure_dpo.py's CUDA-like set-up; the third update is recorded, so what one update",
             "leaves the next is counted. amp-bf16 is OnPolicyConfig's bf16=True on fp32 weights (accelerate autocasts",
             "only the wrapper's forward: the rollout and scoring passes run in fp32). `gc` cases check the policy's",
             "gradient checkpointing as huggingface/trl#5245 makes it work (0.25.1 itself fails, #4954); `ga`",
             "accumulates over micro-batches, `mb` sets num_mini_batches, `chunk` local_rollout_forward_batch_size.",
             "Each phase's measured peak is set against the largest estimated moment in it (pycore/memory/ppo.py), a",
             "later micro-batch's included. Not independent of these cases: the logits' gradient (two [b, T, V] and",
             "two [b, R, V] tensors at once) and, under autocast, the previous micro-batch's outputs held through the",
             "next one's losses were read off them, the rest from TRL's code.",
             _trl_summary(record, cases, phase_errors) + ".", "",
             "| case | measured MiB | estimate MiB | error | peak: measured / estimated | phases, measured / estimated MiB |",
             "|---|---:|---:|---:|---|---|"]
    return lines + [_case_row(r, f"{r['measured_phase']} / {r['phase']}") for r in cases]


if __name__ == "__main__":
    main()
