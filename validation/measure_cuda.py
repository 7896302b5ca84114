"""Measure validation/measure.py's cases on a real GPU: the peak the CUDA caching allocator reports.

Dev-only: needs torch with CUDA, transformers (and peft for the LoRA cases), and a GPU. ``--device cpu``
runs the same code on the CPU with no memory figures, to try the script where there is no GPU.

Each case runs in its own Python process, so one case's cached blocks, CUDA context and fragmentation
never reach the next. In that process: build the model on the GPU (real tensors, the case's weight dtype),
run one warm-up training step (optimizer state then exists, as in steady state) or one warm-up
generate(), ``torch.cuda.synchronize()``, ``torch.cuda.reset_peak_memory_stats()``, run the measured
step, and read

- ``torch.cuda.max_memory_allocated()``: live tensor bytes at the peak, what pycore's ``peak_bytes``
  estimates (and what validation/measure.py's MemTracker reproduces on the CPU);
- ``torch.cuda.max_memory_reserved()``: the caching allocator's segments at their peak (``reserved_bytes``);
- the process's used memory as the driver reports it (pynvml, else ``nvidia-smi --query-compute-apps``),
  read right after the step: reserved memory plus the CUDA context and library workspaces
  (``device_bytes``). Read once after the step, it is a lower bound of that view's peak.

The cases are validation/measure.py's and validation/measure_accumulation.py's. A training step with
micro-batches is the Hugging Face Trainer's loop (as measure_accumulation.py runs it): for each micro-batch,
forward, ``loss / N``, ``backward()``; then the optimizer step and ``zero_grad(set_to_none=True)``.
The model, the batch, the optimizer (its optimizer_impl kernel), the precision policy and the recompute
setting come from validation/measure.py, so both scripts run the same code paths; the differences are
deliberate: CUDA's own autocast, dropout and SDPA kernels run instead of their CPU stand-ins (SDPA picks
flash or memory-efficient attention; attention dropout stays off in flash cases, as in measure.py, so
the two records describe the same model). Cases whose estimate does not fit the GPU are skipped and
listed. The record, validation/measured_cuda.json, names the GPU, the driver, CUDA and torch versions.

``--jobs N`` runs up to N cases at once, each in its own process (the allocator's statistics are a
process's own, so they do not mix), while the estimates of the running cases' reserved bytes, plus a CUDA
context each, stay within the GPU's memory; a case that runs out of memory beside others runs again alone.
The record is written after every case, so a run stopped part-way keeps what it measured; ``--deadline``
stops starting cases after that many seconds and lists the rest as not run.

Usage:
    python validation/measure_cuda.py --dry-run              # the plan: cases, estimates, what fits; no GPU
    python validation/measure_cuda.py                        # all cases -> validation/measured_cuda.json
    python validation/measure_cuda.py --only gpt2            # cases whose label contains 'gpt2', printed only
    python validation/measure_cuda.py --case "gpt2 fp32 adamw b8s1024"   # one case, JSON on stdout
    python validation/measure_cuda.py --jobs 6 --deadline 400 --out /tmp/measured_cuda.json
    python validation/measure_cuda.py --device cpu --only "small" --jobs 4 --out /tmp/try.json   # no GPU
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402
from pycore import estimate  # noqa: E402

OUT = ROOT / "validation" / "measured_cuda.json"
FIT_MARGIN = 0.95           # skip a case whose estimated peak exceeds this share of the GPU's memory
CONTEXT_BYTES = 2 * 2**30   # a process's CUDA context and library workspaces, for --jobs' memory budget


# Cases only a GPU measures: full-size generate() calls (the CPU's are small configs, run for real) and LoRA on
# whole models. Labelled "(gpu)".
GPU_CASES = [
    ("llama-3.2-1b infer bf16 b8 s2048+256 (gpu)", dict(model="llama-3.2-1b", mode="infer", precision="bf16",
                                                        batch="8", seq="2048", new_tokens="256")),
    ("llama-3.1-8b infer bf16 b1 s16384+64 (gpu)", dict(model="llama-3.1-8b", mode="infer", precision="bf16",
                                                        batch="1", seq="16384", new_tokens="64")),
    ("qwen2.5-7b infer bf16 b4 s4096+128 (gpu)", dict(model="qwen2.5-7b", mode="infer", precision="bf16", batch="4",
                                                      seq="4096", new_tokens="128")),
    ("mistral-7b infer bf16 b16 s1024+256 (gpu)", dict(model="mistral-7b-v0.1", mode="infer", precision="bf16",
                                                       batch="16", seq="1024", new_tokens="256")),
    # transformers 5.24 runs no SDPA for Gemma 2 (_supports_sdpa = False): eager, what attention=auto resolves to
    ("gemma-2-2b infer bf16 eager b4 s4096+64 (gpu)", dict(model="gemma-2-2b", mode="infer", precision="bf16",
                                                           attention="eager", batch="4", seq="4096", new_tokens="64")),
    ("qwen3-0.6b infer fp32 b4 s2048+64 (gpu)", dict(model="qwen3-0.6b", mode="infer", precision="fp32", batch="4",
                                                     seq="2048", new_tokens="64")),
    ("llama-3.2-1b lora all-linear bf16 b8s2048 (gpu)", dict(model="llama-3.2-1b", method="lora",
                                                             lora_targets="all-linear", precision="bf16", batch="8",
                                                             seq="2048")),
    ("qwen2.5-7b lora qv bf16 b2s2048 (gpu)", dict(model="qwen2.5-7b", method="lora", lora_targets="qv",
                                                   precision="bf16", batch="2", seq="2048")),
    ("qwen3-0.6b fp32 adamw b4s2048 (gpu)", dict(model="qwen3-0.6b", precision="fp32", batch="4", seq="2048")),
    # sliding layers past their window: SDPA gets a mask there (its float copy kept; in fp32 the masked layers run
    # the memory-efficient kernel, the full ones the math kernel)
    ("gemma-3-1b 6L fp32 b2s2048 sliding (gpu)", dict(model="gemma-3-1b", layers="6", precision="fp32", batch="2",
                                                      seq="2048")),
    ("mistral-7b 4L bf16 b1s8192 sliding (gpu)", dict(model="mistral-7b-v0.1", layers="4", precision="bf16",
                                                      batch="1", seq="8192")),
    ("mistral-7b 4L fp32 b1s8192 sliding (gpu)", dict(model="mistral-7b-v0.1", layers="4", precision="fp32",
                                                      batch="1", seq="8192")),
]


def cases():
    """validation/measure.py's and measure_accumulation.py's (label, inputs) lists, and GPU_CASES. Importing measure
    replaces F.dropout with its CPU stand-in; the original is put back, since on a GPU the real fused dropout runs."""
    import torch
    original = torch.nn.functional.dropout
    import measure
    import measure_accumulation
    torch.nn.functional.dropout = original
    return measure.CASES + measure_accumulation.CASES + GPU_CASES


def plan(case_list, gpu_bytes, gpu="h100-sxm-80gb"):
    """For each case: label, inputs, pycore's estimated peak and reserved bytes, and whether it runs.

    Args:
        case_list: (label, inputs) pairs, as in validation/measure.py.
        gpu_bytes: the GPU's total memory; cases whose estimate exceeds FIT_MARGIN of it are skipped.
        gpu: the GPU's id in presets/gpus.json, for the estimate.
    Returns:
        a list of dicts with label, inputs, estimated_peak_bytes, estimated_reserved_bytes, runs, why.
    """
    out = []
    for label, inputs in case_list:
        result = estimate(compare.cuda_inputs({"inputs": inputs}, gpu))
        fits = result.reserved_bytes <= FIT_MARGIN * gpu_bytes
        out.append({"label": label, "inputs": inputs, "estimated_peak_bytes": result.peak_bytes,
                    "estimated_reserved_bytes": result.reserved_bytes, "runs": fits,
                    "why": "" if fits else f"estimate {result.reserved_bytes / 2**30:.1f} GiB does not fit "
                                           f"{FIT_MARGIN:.0%} of {gpu_bytes / 2**30:.0f} GiB"})
    return out


def device_used_bytes(pid=None):
    """This process's GPU memory as the driver reports it: pynvml, else nvidia-smi; None if neither works."""
    pid = pid or os.getpid()
    try:
        import pynvml
        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(_device_index())
            for process in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if process.pid == pid and process.usedGpuMemory is not None:
                    return int(process.usedGpuMemory)
        finally:
            pynvml.nvmlShutdown()
    except Exception:       # pynvml missing, or a driver that hides per-process use (containers)
        pass
    if shutil.which("nvidia-smi"):
        text = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, check=False).stdout
        return parse_compute_apps(text, pid)
    return None


def parse_compute_apps(text, pid):
    """Bytes used by pid in `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`
    output (MiB per line), or None when pid is not listed."""
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) == 2 and fields[0] == str(pid) and fields[1].isdigit():
            return int(fields[1]) * 2**20
    return None


def _device_index():
    import torch
    return torch.cuda.current_device()


def environment():
    """GPU name, driver, CUDA and torch versions, for the record."""
    import torch
    import transformers
    driver = None
    if shutil.which("nvidia-smi"):
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                capture_output=True, text=True, check=False).stdout.strip().splitlines()[:1]
        driver = driver[0] if driver else None
    properties = torch.cuda.get_device_properties(0)
    return {"gpu": properties.name, "gpu_total_bytes": properties.total_memory, "driver": driver,
            "cuda": torch.version.cuda, "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(),
            "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}


def run_one(label, inputs, device_name="cuda", explain=None):
    """Measure one case in this process (which must be fresh). Returns the case's record; on the CPU
    (device_name "cpu", a trial of the script) its memory figures are None. explain: a folder to write, for
    the measured call, what is live at its peak (validation/cuda_peak.py)."""
    import torch
    original = torch.nn.functional.dropout
    import measure
    torch.nn.functional.dropout = original      # CUDA's fused dropout, not measure.py's CPU stand-in

    torch.manual_seed(0)
    started = time.time()
    device = torch.device(device_name)
    cuda = device.type == "cuda"
    explain = explain if cuda else None
    with device:
        values, arch, model = measure.build(inputs)
    params = sum(p.numel() for p in model.parameters())
    dtype = measure.DTYPES.get(values["precision"][4:]) if values["precision"].startswith("amp-") else None
    if values["mode"] == "infer":
        model.eval()
        model.config.use_cache = True
        model.generation_config.use_cache = True
        model.generation_config.pad_token_id = 0
        ids = torch.randint(1, arch.vocab, (values["batch"], values["seq"]), device=device)
        kwargs = dict(max_new_tokens=values["new_tokens"], min_new_tokens=values["new_tokens"], do_sample=False)
        with torch.no_grad():
            model.generate(ids, **kwargs)
            start = _reset_peak(cuda, explain)
            model.generate(ids, **kwargs)
    else:
        if values["method"] == "lora":
            with device:
                model = measure.with_lora(model, values)
        model.train()
        if values["recompute"] == "full":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        elif values["recompute"] == "selective":
            measure.selective_recompute(model)
        impl = measure.optimizer_impl(inputs)
        masters = None
        if values["precision"].endswith("-master"):
            masters = [p.detach().float().requires_grad_(True) for p in model.parameters()]
            optimizer = measure.make_optimizer(masters, values["optimizer"], impl)
        else:
            optimizer = measure.make_optimizer([p for p in model.parameters() if p.requires_grad],
                                               values["optimizer"], impl)
        batches = [{k: v.to(device) for k, v in measure.make_batch(values, arch).items()}
                   for _ in range(values["microbatches"])]

        def step():
            for batch in batches:           # the Trainer's accumulation loop; one batch without accumulation
                if dtype is not None:
                    with torch.autocast(device.type, dtype=dtype):
                        loss = model(**batch).loss / len(batches)
                else:
                    loss = model(**batch).loss / len(batches)
                loss.backward()
                del loss
            if masters is not None:
                for param, master in zip(model.parameters(), masters):
                    master.grad = param.grad.float()
                    param.grad = None
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if masters is not None:
                with torch.no_grad():
                    for param, master in zip(model.parameters(), masters):
                        param.copy_(master)

        step()                                      # warm-up: optimizer state exists from here on
        start = _reset_peak(cuda, explain)
        step()
    figures = peak_figures(label, cuda, start, explain)
    return {"label": label, "inputs": inputs, "tensor_mode": device.type, "params": params,
            "optimizer_impl": measure.optimizer_impl(inputs), **figures, "seconds": round(time.time() - started, 1)}


def peak_figures(label, cuda, start, explain=None):
    """The measured call's max_memory_allocated, max_memory_reserved and the driver's figure (None each on the CPU);
    with explain, what was live at its peak written to that folder (validation/cuda_peak.py)."""
    if not cuda:
        return {"peak_bytes": None, "reserved_bytes": None, "device_bytes_after": None}
    import torch
    torch.cuda.synchronize()
    if explain:
        import cuda_peak
        text = cuda_peak.summary(torch.cuda.memory._snapshot(), start, torch.cuda.max_memory_allocated())
        Path(explain, "".join(c if c.isalnum() else "_" for c in label) + ".txt").write_text(f"{label}\n{text}\n")
    return {"peak_bytes": torch.cuda.max_memory_allocated(), "reserved_bytes": torch.cuda.max_memory_reserved(),
            "device_bytes_after": device_used_bytes()}


def _reset_peak(cuda, explain=None):
    """Start the measured call's peak here: what the warm-up left allocated counts, its own peak does not.
    Returns the bytes allocated now (0 on the CPU); with explain, the allocator's history starts here."""
    if not cuda:
        return 0
    import torch
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    if explain:
        torch.cuda.memory._record_memory_history(stacks="python", max_entries=2_000_000)
    return torch.cuda.memory_allocated()


def schedule(steps, budget_bytes, jobs, launch, poll, deadline=None, clock=time.time):
    """Run the steps that fit, up to `jobs` at once, while the running steps' estimated reserved bytes plus a
    CUDA context each stay within budget_bytes; largest first, so the long cases do not trail. A step that
    runs out of memory beside others is run again alone, at the end.

    Args:
        steps: plan() entries; those with runs False are not started.
        budget_bytes: the GPU memory the running cases may claim together.
        jobs: at most this many at once.
        launch: step -> handle (starts the case).
        poll: handle -> None while it runs, else (record or None, error text).
        deadline: stop starting cases once clock() passes it; the rest come back as not run.
    Yields:
        (step, record or None, error text) as each case ends, then (step, None, "not run: ...") for each left.
    """
    def claim(step):
        return step["estimated_reserved_bytes"] + CONTEXT_BYTES

    queue = sorted((s for s in steps if s["runs"]), key=claim, reverse=True)
    retry, running = [], []
    while queue or retry or running:
        late = deadline is not None and clock() > deadline
        if late:
            for step in queue + retry:
                yield step, None, "not run: the run's deadline passed"
            queue, retry = [], []
        in_use = sum(claim(step) for step, _ in running)
        for step in list(queue):
            if len(running) >= jobs:
                break
            if not running or in_use + claim(step) <= budget_bytes:
                queue.remove(step)
                running.append((step, launch(step)))
                in_use += claim(step)
        if not queue and not running and retry:
            step = retry.pop(0)
            step["alone"] = True
            running.append((step, launch(step)))
        for entry in list(running):
            step, handle = entry
            outcome = poll(handle)
            if outcome is None:
                continue
            running.remove(entry)
            record, error = outcome
            if record is None and "out of memory" in error.lower() and not step.get("alone") and len(running):
                retry.append(step)
                continue
            yield step, record, error
        if running:
            time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="print the plan (no GPU needed), run nothing")
    parser.add_argument("--gpu-gib", type=float, help="GPU memory for the fit check without a GPU (default 80)")
    parser.add_argument("--only", help="run only cases whose label contains this text")
    parser.add_argument("--case", help="measure this one case in this process and print its record as JSON")
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                        help="cpu: try the script without a GPU (no memory figures)")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once, each in its own process")
    parser.add_argument("--deadline", type=float, help="seconds after which no case is started")
    parser.add_argument("--out", type=Path, help=f"the record's path (default {OUT.relative_to(ROOT)}; "
                                                 "with --only, printed only unless --out is given)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds one case may take")
    parser.add_argument("--explain", type=Path, help="write what is live at each case's peak to this folder")
    parser.add_argument("--merge", action="store_true", help="keep the cases already in --out that this run does not "
                                                             "measure again")
    args = parser.parse_args()
    case_list = cases()
    if args.case:
        inputs = dict(case_list)[args.case]
        print(json.dumps(run_one(args.case, inputs, args.device, args.explain)))
        return
    if args.dry_run or args.device == "cpu":
        gpu_bytes = int((args.gpu_gib or 80) * 2**30)
    else:
        import torch
        if not torch.cuda.is_available():
            sys.exit("no CUDA device: use --dry-run to see the plan")
        gpu_bytes = torch.cuda.get_device_properties(0).total_memory
        gpu = compare.GPU_IDS.get(torch.cuda.get_device_name(0), "h100-sxm-80gb")
    selected = [(label, inputs) for label, inputs in case_list if not args.only or args.only in label]
    steps = plan(selected, gpu_bytes, gpu if args.device == "cuda" and not args.dry_run else "h100-sxm-80gb")
    if args.dry_run:
        for s in steps:
            print(f"{s['label']:56s} est. peak {s['estimated_peak_bytes'] / 2**30:8.2f} GiB  "
                  f"{'runs' if s['runs'] else 'skipped: ' + s['why']}")
        return
    out = args.out or (None if args.only else OUT)
    started = time.time()

    def launch(step):
        return launch_case(__file__, step["label"], args.device, args.explain)

    def poll(handle):
        return poll_case(handle, args.timeout)

    results, skipped = [], [{"label": s["label"], "why": s["why"]} for s in steps if not s["runs"]]
    if args.merge and out is not None and out.exists():     # the record's cases, less those this run measures anew
        kept = json.loads(out.read_text())
        results = kept["cases"]
        skipped += [c for c in kept["skipped"] if c["label"] not in {s["label"] for s in steps}]
    estimates = {s["label"]: s for s in steps}
    deadline = started + args.deadline if args.deadline else None
    for step, record, error in schedule(steps, int(FIT_MARGIN * gpu_bytes), args.jobs, launch, poll, deadline):
        if record is None and any(r["label"] == step["label"] for r in results):
            print(f"{step['label']:56s} {error}; the record's earlier measurement kept", flush=True)
        elif record is None:
            skipped.append({"label": step["label"], "why": error})
            print(f"{step['label']:56s} {error}", flush=True)
        else:
            results = [r for r in results if r["label"] != record["label"]] + [record]
            figures = "" if record["peak_bytes"] is None else (
                f"allocated {record['peak_bytes'] / 2**30:8.3f} GiB  reserved {record['reserved_bytes'] / 2**30:8.3f} GiB  ")
            print(f"{step['label']:56s} {figures}estimate {estimates[step['label']]['estimated_peak_bytes'] / 2**30:8.3f}"
                  f" GiB  {record['seconds']:6.1f}s  [{time.time() - started:5.0f}s]", flush=True)
        if out is not None:
            order = {label: i for i, (label, _) in enumerate(case_list)}
            write(out, sorted(results, key=lambda r: order[r["label"]]), skipped, args.device)
    if out is not None:
        print(f"wrote {out} ({len(results)} cases, {len(skipped)} skipped)")


def launch_case(script, label, device_name, explain=None, env=None):
    """Start ``script --case label`` in a process of its own: (process, its stderr file, start time)."""
    log = tempfile.TemporaryFile(mode="w+")
    command = [sys.executable, str(script), "--case", label, "--device", device_name]
    process = subprocess.Popen(command + (["--explain", str(explain)] if explain else []),
                               stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    return process, log, time.time()


def poll_case(handle, timeout):
    """None while a launch_case process runs (killed past ``timeout`` seconds), then (record or None, error text)."""
    process, log, began = handle
    if process.poll() is None:
        if time.time() - began < timeout:
            return None
        process.kill()
        process.wait()
    stdout = process.stdout.read()
    log.seek(0)
    stderr = log.read().strip()
    if process.returncode == 0:
        return json.loads(stdout.strip().splitlines()[-1]), ""
    return None, "failed: " + (stderr.splitlines()[-1][:300] if stderr else f"exit {process.returncode}")


def write(out, results, skipped, device_name, about="Peak GPU memory of validation/measure.py's and "
          "measure_accumulation.py's cases on a real GPU, recorded by validation/measure_cuda.py"):
    context = environment() if device_name == "cuda" else {"device": device_name}
    out.write_text(json.dumps({"about": about, **context, "cases": results, "skipped": skipped}, indent=1) + "\n")


if __name__ == "__main__":
    main()
