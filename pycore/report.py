"""Presenting an estimate: the readable table, the CSV, and the order components are shown in."""

import csv
import io

from .schema import FIELDS, format_value
from .units import GB, GIB

COMPONENT_LABELS = {
    "weights": "Weights",
    "master_weights": "Master weights (fp32)",
    "gradients": "Gradients",
    "optimizer": "Optimizer state",
    "activations": "Activations (saved for backward)",
    "logits_and_loss": "Logits and loss buffers",
    "autocast_weight_copies": "Autocast 16-bit weight copies",
    "backward_working": "Backward working tensors",
    "optimizer_step_temporaries": "Optimizer step temporaries",
    "kv_cache": "KV cache",
    "prefill_working": "Prefill working set",
}


def breakdown(result):
    """Components live at the peak phase, in bytes, as (key, label, bytes) rows that add up to the peak.

    The components dict holds each pool at its full size; at the peak only some are alive (gradients do
    not exist during the forward pass, activations are gone by the optimizer step). This splits the peak
    into the pools alive at that moment, so a stacked bar adds up to the number reported.
    """
    c, phase = result["components"], result["peak_phase"]
    static = ["weights", "master_weights", "optimizer"]
    if phase == "optimizer":
        keys = static + ["gradients", "optimizer_step_temporaries"]
    elif phase == "forward":
        keys = static + ["autocast_weight_copies", "activations", "logits_and_loss"]
    elif phase == "backward":
        # The peak is either the start of backward (activations and loss gradients alive) or its end
        # (gradients): list whichever fits inside the peak, the remainder goes to the last row.
        keys = static + ["autocast_weight_copies", "activations", "logits_and_loss"]
        if sum(c[k] for k in keys) > result["peak_bytes"]:
            keys = static + ["gradients"]
    elif phase == "prefill":
        keys = ["weights", "prefill_working"]          # the rest is the prompt's part of the KV cache
    else:
        keys = ["weights", "kv_cache"]
    rows = [(k, COMPONENT_LABELS[k], c[k]) for k in keys if c.get(k)]
    rest = result["peak_bytes"] - sum(r[2] for r in rows)
    if rest:
        label = {"decode": "Cache append copy", "prefill": "KV cache of the prompt"}.get(
            phase, "Loss buffers and working tensors at the peak")
        rows.append(("other", label, rest))
    return rows


def answer_rows(result, answers):
    """(key, value) rows of the answers, as the table and the CSV show them."""
    rows = [("fits", answers["fits"])]
    for key in ("gpus_needed", "max_batch", "max_seq", "max_concurrency", "max_context"):
        if key in answers:
            rows.append((key, "none fits" if answers[key] is None else answers[key]))
    cost = answers.get("cost")
    if cost:
        rows.append(("gpus_for_cost", cost["gpus"]))
        rows.append(("train_hours", "" if cost["hours"] is None else f"{cost['hours']:.1f}"))
        rows.append(("train_cost_usd", "" if cost["cost_usd"] is None else f"{cost['cost_usd']:.0f}"))
    for i, change in enumerate(answers["how_to_fit"], 1):
        rows.append((f"how_to_fit_{i}", f"{change['change']}: {change['total_bytes'] / GIB:.2f} GiB"
                                        f"{' (fits)' if change['fits'] else ''}"))
    for stage in result.get("stages", ()):
        rows.append((f"stage_{stage['stage']}", f"{stage['layers']} layers, {stage['peak_bytes'] / GIB:.2f} GiB "
                                                 f"peak in {stage['peak_phase']}"))
    if result.get("host_bytes"):
        rows.append(("host_ram_bytes", result["host_bytes"]))
    comparison = answers.get("comparison")
    if comparison:
        rows.append(("baseline", "&".join(f"{k}={v}" for k, v in comparison["baseline_query"])))
        rows.append(("baseline_total_bytes", comparison["baseline_total_bytes"]))
        rows.append(("saving_percent", f"{100 * comparison['saving']:.1f}"))
        for row in comparison["components"]:
            rows.append((f"difference_{row['component']}", row["difference_bytes"]))
        rows.append(("baseline_gpus_needed", comparison["baseline_gpus_needed"]))
    return rows


def table(result, answers=None):
    """A readable text table in GiB (2**30 bytes)."""
    peak = result["peak_bytes"]
    lines = [f"Model: {result['model']['name']}  ({result['params']['total']:,} parameters)",
             f"Peak during: {result['peak_phase']}", "",
             f"{'component':40s} {'GiB':>10s} {'share':>7s}"]
    for _, label, size in breakdown(result):
        lines.append(f"{label:40s} {size / GIB:10.2f} {100 * size / peak:6.1f}%")
    lines += [f"{'peak tensors':40s} {peak / GIB:10.2f}",
              f"{'runtime overhead':40s} {result['overhead_bytes'] / GIB:10.2f}",
              f"{'total per GPU':40s} {result['total_bytes'] / GIB:10.2f}   "
              f"({result['total_bytes'] / GB:.2f} GB)", "",
              "GiB = 2^30 bytes; vendors' GB = 10^9 bytes.", ""]
    for gpu in result["gpus"]:
        lines.append(f"{gpu['name']:38s} {gpu['memory_bytes'] / GIB:7.2f} GiB usable  {gpu['status']:>5s}  "
                     f"headroom {gpu['headroom_bytes'] / GIB:8.2f} GiB")
    if answers:
        lines.append("")
        lines += [f"{key:24s} {value}" for key, value in answer_rows(result, answers)]
    return "\n".join(lines) + "\n"


def to_csv(values, result, answers):
    """The CSV the page downloads: one section of inputs, one of results, exact bytes."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["section", "key", "value", "bytes", "GiB"])
    for field in FIELDS:
        value = values.get(field.key)
        writer.writerow(["input", field.key, "" if value is None else format_value(field, value), "", ""])
    writer.writerow(["result", "params_total", result["params"]["total"], "", ""])
    writer.writerow(["result", "params_active", result["params"]["active"], "", ""])
    writer.writerow(["result", "peak_phase", result["peak_phase"], "", ""])
    for key, size in result["components"].items():
        writer.writerow(["component", key, "", size, f"{size / GIB:.4f}"])
    for key, size in result["phases"].items():
        writer.writerow(["phase", key, "", size, f"{size / GIB:.4f}"])
    for key in ("peak_bytes", "overhead_bytes", "total_bytes"):
        writer.writerow(["result", key, "", result[key], f"{result[key] / GIB:.4f}"])
    for gpu in result["gpus"]:
        writer.writerow(["gpu", gpu["id"], gpu["status"], gpu["memory_bytes"], f"{gpu['memory_bytes'] / GIB:.4f}"])
    for key, value in answer_rows(result, answers):
        writer.writerow(["answer", key, value, "", ""])
    return out.getvalue()
