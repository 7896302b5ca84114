"""Calibration in words (issue 30): the table of measured against estimated that ``python -m pycore --calibrate``
prints, its notes and checks, made from pycore.answers.calibrate's numbers. ``display`` is every string (for the
command line now, for the page later); ``text`` lays it out. Sizes in GiB (2^30 bytes)."""

from typing import Any

from pycore.answers.calibrate import SOURCES, Calibration, Row
from pycore.base.units import GIB, printable

LABELS = {
    "total_gpu_memory": "GPU memory (vLLM's total_gpu_memory)", "gpu_util": "gpu_memory_utilization",
    "requested": "vLLM's budget (total x utilization)", "weights": "Weights",
    "non_torch": "Memory outside PyTorch (non_torch_memory)", "activation_peak": "Activation peak (profiling run)",
    "kv_cache": "KV cache", "kv_blocks": "KV cache blocks", "kv_tokens": "KV cache tokens",
    "max_model_len": "max_model_len (tokens a request)", "concurrency": "Maximum concurrency",
    "cuda_graphs": "CUDA graphs", "allocated": "Allocated now (memory_allocated)",
    "reserved": "Reserved now (memory_reserved)", "peak_allocated": "Peak allocated (max_memory_allocated)",
    "peak_reserved": "Peak reserved (max_memory_reserved)", "allocator_cache": "Allocator cache (reserved - allocated)",
    "context": "CUDA context and NCCL (nvidia-smi - reserved)",
    "outside": "Outside vLLM's budget (context, graphs, NCCL)", "smi_used": "GPU memory used (nvidia-smi)",
    "smi_total": "GPU memory in all (nvidia-smi)",
}
NO_OVERRIDE = "No override: no difference found has a key in the schema yet (see the override column)."
COUNTS = frozenset({"kv_blocks", "kv_tokens", "max_model_len"})
RATIOS = frozenset({"gpu_util", "concurrency"})
NOTES = {
    "not_vllm": "The text has vLLM's figures but the setup is not mode=infer engine=vllm: add them to compare "
                "vLLM's figures.",
    "max_model_len": "The log's max_model_len is {log:,} tokens, the setup's context (prompt + new tokens + the "
                     "images' tokens) {setup:,}: give seq and new_tokens that add up to it, or the KV cache figures "
                     "are for another length.",
    "no_budget": "nvidia-smi's reading came without vLLM's budget (total_gpu_memory x gpu_memory_utilization, or "
                 "its four parts): what lies outside the budget cannot be told, so no overhead is set.",
    "negative": "{label} comes out negative ({gib}): the readings are not of one run, or not of one GPU; no "
                "override is made from them.",
    "activations_not_attributable": "The measured peak ({gib}) is not reached by changing the activations alone "
                                    "(the rest of the estimate is over it, or the activations are not live at the "
                                    "peak): the difference is not put in any key.",
    "per_sample_rounding": "act_per_sample is whole bytes a sample: over a batch of {batch} the peak lands {bytes:,} "
                           "bytes under the measured one.",
    "no_split": "nvidia-smi's or max_memory_reserved's reading alone cannot be split between live tensors and the "
                "runtime's overhead: add max_memory_allocated (or torch.cuda.memory_summary()) of the same run.",
    "per_sample_seq": "act_per_sample holds for this sequence length ({seq:,} tokens): it scales with the batch, "
                      "not with the length; at another length, calibrate from a run of that length.",
    "reserved_only": "Without nvidia-smi's reading, overhead is the measured allocator cache plus the estimated CUDA "
                     "context ({gib}); the estimate's reserved view then counts that context too.",
}


def _value(figure: str, value: "float | None", signed: bool = False) -> str:
    if value is None:
        return "-"
    sign = "+" if signed else ""
    if figure in RATIOS:
        return f"{value:{sign}.2f}" + ("x" if figure == "concurrency" else "")
    if figure in COUNTS:
        return f"{value:{sign},.0f}"
    return f"{value / GIB:{sign},.2f} GiB"


FOLLOWS = {"kv_cache": "follows the other parts of vLLM's budget", "kv_tokens": "follows the KV cache",
           "kv_blocks": "follows the KV cache", "concurrency": "follows the KV cache",
           "requested": "follows the GPU's memory", "smi_used": "follows the parts above",
           "peak_allocated": "no key (no input explains the difference)", "cuda_graphs": "in the overhead"}


def _override(row: Row) -> str:
    if row.key == "overhead" and row.calibrated is None:
        return "overhead (the allocator cache and the CUDA context as one figure: not re-estimated apart)"
    if row.key:
        return f"{row.key}" + (f" (still off: would take {row.proposed})" if row.proposed else "")
    if row.proposed == "weight_bytes":
        return "weight_bytes, from the checkpoint's headers (exact, for the whole model)"
    if row.proposed:
        return f"no key (would take {row.proposed})"
    return FOLLOWS.get(row.figure, "no key") if row.off else ""


def _note(what: str, data: "dict[str, Any]") -> str:
    shown = dict(data)
    for name in ("peak", "context", "bytes"):
        if name in data and what != "per_sample_rounding":
            shown["gib"] = f"{data[name] / GIB:,.2f} GiB"
    if "figure" in data:
        shown["label"] = LABELS.get(data["figure"], data["figure"])
    return NOTES.get(what, what).format(**shown)


def display(cal: Calibration) -> "dict[str, Any]":
    """Every string of the calibration: its rows, the overrides as KEY=VALUE words, the checks, notes, sources."""
    rows = [{"label": LABELS.get(r.figure, r.figure), "measured": _value(r.figure, r.measured),
             "estimated": _value(r.figure, r.estimated),
             "difference": _value(r.figure, None if r.estimated is None else r.measured - r.estimated, True),
             "calibrated": _value(r.figure, r.calibrated), "override": _override(r)} for r in cal.rows]
    checks = [f"{LABELS.get(c.figure, c.figure)}: measured {_value(c.figure, c.measured)}, re-estimated "
              f"{_value(c.figure, c.calibrated)}" + (" (equal)" if c.measured == c.calibrated else
                                                      f" ({c.calibrated - c.measured:+,.0f} bytes)")
              for c in cal.checks]
    read = [f"line {r.line}: {LABELS.get(r.figure, r.figure)} = {_value(r.figure, r.value)}" for r in cal.readings]
    return {"rows": rows, "overrides": " ".join(f"{key}={value}" for key, value in cal.overrides),
            "checks": checks, "notes": [_note(what, data) for what, data in cal.notes], "read": read,
            "sources": [f"{key}: {SOURCES[key]}" for key in sorted({r.source for r in cal.readings})]}


def text(shown: "dict[str, Any]", setup_words: str = "") -> str:
    """``display``'s strings as the command line prints them."""
    lines = [f"Calibration: {len(shown['read'])} figures read from the text (GiB = 2^30 bytes; the text was read "
             "here and sent nowhere)", "",
             f"{'':46s} {'measured':>14s} {'estimated':>14s} {'difference':>14s} {'calibrated':>14s}  override"]
    lines += [f"{row['label'][:46]:46s} {row['measured']:>14s} {row['estimated']:>14s} {row['difference']:>14s} "
              f"{row['calibrated']:>14s}  {row['override']}" for row in shown["rows"]]
    if shown["overrides"]:
        lines += ["", "Overrides (add them to the setup's own KEY=VALUE words):",
                  "  " + " ".join(part for part in ("python -m pycore", printable(setup_words), shown["overrides"])
                                  if part)]
        lines += ["", "Re-estimated with them:"] + [f"  {check}" for check in shown["checks"]]
    else:
        lines += ["", NO_OVERRIDE]
    if shown["notes"]:
        lines += ["", "Notes:"] + [f"  - {note}" for note in shown["notes"]]
    lines += ["", "Read:"] + [f"  {line}" for line in shown["read"]]
    lines += ["", "Patterns (the code that prints each figure):"] + [f"  {source}" for source in shown["sources"]]
    return "\n".join(lines) + "\n"
