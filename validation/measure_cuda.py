"""Measure validation/measure.py's cases on a real GPU: the peak the CUDA caching allocator reports.

Dev-only: needs torch with CUDA, transformers (and peft for the LoRA cases), and a GPU. NOT RUN YET: it
was written on a machine without a GPU; only ``--dry-run`` (the case plan, which needs torch on the CPU
and pycore) has been exercised, by tests/test_measure_cuda.py.

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

The model, the batch, the optimizer (its optimizer_impl kernel), the precision policy and the recompute
setting come from validation/measure.py, so both scripts run the same code paths; the differences are
deliberate: CUDA's own autocast, dropout and SDPA kernels run instead of their CPU stand-ins (SDPA picks
flash or memory-efficient attention; attention dropout stays off in flash cases, as in measure.py, so
the two records describe the same model). Cases whose estimate does not fit the GPU are skipped and
listed. The record, validation/measured_cuda.json, names the GPU, the driver, CUDA and torch versions.

Usage:
    python validation/measure_cuda.py --dry-run              # the plan: cases, estimates, what fits; no GPU
    python validation/measure_cuda.py                        # all cases -> validation/measured_cuda.json
    python validation/measure_cuda.py --only gpt2            # cases whose label contains 'gpt2', printed only
    python validation/measure_cuda.py --case "gpt2 fp32 adamw b8s1024"   # one case, JSON on stdout
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))
import compare  # noqa: E402
from pycore import estimate  # noqa: E402

OUT = ROOT / "validation" / "measured_cuda.json"
FIT_MARGIN = 0.95           # skip a case whose estimated peak exceeds this share of the GPU's memory


def cases():
    """validation/measure.py's (label, inputs) list. Importing measure replaces F.dropout with its CPU
    stand-in; the original is put back, since on a GPU the real fused dropout runs."""
    import torch
    original = torch.nn.functional.dropout
    import measure
    torch.nn.functional.dropout = original
    return measure.CASES


def plan(case_list, gpu_bytes):
    """For each case: label, inputs, pycore's estimated peak and reserved bytes, and whether it runs.

    Args:
        case_list: (label, inputs) pairs, as in validation/measure.py.
        gpu_bytes: the GPU's total memory; cases whose estimate exceeds FIT_MARGIN of it are skipped.
    Returns:
        a list of dicts with label, inputs, estimated_peak_bytes, estimated_reserved_bytes, runs, why.
    """
    out = []
    for label, inputs in case_list:
        result = estimate(compare.measured_inputs(inputs))
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


def run_one(label, inputs):
    """Measure one case in this process (which must be fresh). Returns the case's record."""
    import torch
    original = torch.nn.functional.dropout
    import measure
    torch.nn.functional.dropout = original      # CUDA's fused dropout, not measure.py's CPU stand-in

    torch.manual_seed(0)
    started = time.time()
    device = torch.device("cuda")
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
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
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
        batch = {k: v.to(device) for k, v in measure.make_batch(values, arch).items()}

        def step():
            if dtype is not None:
                with torch.autocast("cuda", dtype=dtype):
                    loss = model(**batch).loss
            else:
                loss = model(**batch).loss
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
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        step()
    torch.cuda.synchronize()
    return {"label": label, "inputs": inputs, "tensor_mode": "cuda", "params": params,
            "optimizer_impl": measure.optimizer_impl(inputs),
            "peak_bytes": torch.cuda.max_memory_allocated(), "reserved_bytes": torch.cuda.max_memory_reserved(),
            "device_bytes_after": device_used_bytes(), "seconds": round(time.time() - started, 1)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true", help="print the plan (no GPU needed), run nothing")
    parser.add_argument("--gpu-gib", type=float, help="GPU memory for --dry-run's fit check (default 80)")
    parser.add_argument("--only", help="run only cases whose label contains this text; print, do not save")
    parser.add_argument("--case", help="measure this one case in this process and print its record as JSON")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds one case may take")
    args = parser.parse_args()
    case_list = cases()
    if args.case:
        inputs = dict(case_list)[args.case]
        print(json.dumps(run_one(args.case, inputs)))
        return
    if args.dry_run:
        gpu_bytes = int((args.gpu_gib or 80) * 2**30)
    else:
        import torch
        if not torch.cuda.is_available():
            sys.exit("no CUDA device: use --dry-run to see the plan")
        gpu_bytes = torch.cuda.get_device_properties(0).total_memory
    selected = [(label, inputs) for label, inputs in case_list if not args.only or args.only in label]
    steps = plan(selected, gpu_bytes)
    if args.dry_run:
        for s in steps:
            print(f"{s['label']:56s} est. peak {s['estimated_peak_bytes'] / 2**30:8.2f} GiB  "
                  f"{'runs' if s['runs'] else 'skipped: ' + s['why']}")
        return
    results, skipped = [], [{"label": s["label"], "why": s["why"]} for s in steps if not s["runs"]]
    for s in steps:
        if not s["runs"]:
            continue
        done = subprocess.run([sys.executable, __file__, "--case", s["label"]], capture_output=True, text=True,
                              timeout=args.timeout, check=False)
        if done.returncode != 0:
            skipped.append({"label": s["label"], "why": "failed: " + done.stderr.strip().splitlines()[-1][:300]
                            if done.stderr.strip() else f"exit {done.returncode}"})
            print(f"{s['label']:56s} FAILED", flush=True)
            continue
        record = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(record)
        print(f"{s['label']:56s} allocated {record['peak_bytes'] / 2**30:8.3f} GiB  reserved "
              f"{record['reserved_bytes'] / 2**30:8.3f} GiB  estimate {s['estimated_peak_bytes'] / 2**30:8.3f} GiB",
              flush=True)
    if args.only:
        return
    OUT.write_text(json.dumps({"about": "Peak GPU memory of validation/measure.py's cases on a real GPU, recorded "
                                        "by validation/measure_cuda.py", **environment(),
                               "cases": results, "skipped": skipped}, indent=1) + "\n")
    print(f"wrote {OUT.relative_to(ROOT)} ({len(results)} cases, {len(skipped)} skipped)")


if __name__ == "__main__":
    main()
