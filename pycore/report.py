"""Presenting an estimate: the readable table and the CSV. Formatting only: every number comes from the
estimate's records (pycore.pools), nothing is derived here."""

import csv
import io

from .fit import gpu_fits
from .schema import FIELDS, format_value
from .units import GIB, format_bytes

UNIT_NOTE = "GiB = 2^30 bytes (TiB = 2^40); GPU vendors' GB = 10^9 bytes."


def breakdown(result: dict) -> "list[dict]":
    """The records live at the peak plus the runtime overhead; their bytes add up to ``total_bytes``."""
    return result["breakdown"]


def plural(count: int, noun: str) -> str:
    """"1 GPU", "2 GPUs"."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def duration_text(hours: "float | None") -> str:
    """Hours under two days, days beyond."""
    if hours is None:
        return ""
    return f"{hours:,.1f} hours" if hours < 48 else f"{hours / 24:,.1f} days"


def answer_rows(result: dict, answers: dict) -> "list[tuple]":
    """(key, value) rows of the answers, as the table and the CSV show them."""
    rows: "list[tuple]" = [("fits", answers["fits"])]
    for key in ("gpus_needed", "max_batch", "max_seq", "max_concurrency", "max_context", "kv_cache_tokens",
                "min_tp"):
        if key in answers:
            rows.append((key, "none" if answers[key] is None else answers[key]))
    plan = answers.get("plan") or []
    for i, option in enumerate(plan[:5], 1):
        rows.append((f"plan_{i}", f"{option['label']}: {plural(option['gpus'], 'GPU')}, {option['total_text']}"))
    for i, line in enumerate(answers.get("vllm_log") or (), 1):
        rows.append((f"vllm_log_{i}", line))
    cost = answers.get("cost")
    if cost:
        rows.append(("gpus_for_cost", cost["gpus"]))
        rows.append(("train_hours", "" if cost["hours"] is None else f"{cost['hours']:.1f}"))
        rows.append(("train_cost_usd", "" if cost["cost_usd"] is None else f"{cost['cost_usd']:.0f}"))
    for i, change in enumerate(answers.get("how_to_fit", []), 1):
        rows.append((f"how_to_fit_{i}", f"{change['change']}: {format_bytes(change['total_bytes'])['text']}"
                                        f"{' (fits)' if change['fits'] else ''}"))
    for stage in result.get("stages", ()):
        rows.append((f"stage_{stage['stage']}", f"{stage['layers']} layers, "
                                                 f"{format_bytes(stage['peak_bytes'])['text']} peak in "
                                                 f"{stage['peak_phase']}"))
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


def table(result: dict, answers: "dict | None" = None, gpu: str = "") -> str:
    """A readable text table in GiB (2**30 bytes)."""
    total = result["total_bytes"]
    lines = [f"Model: {result['model']['name']}  ({result['params']['total']:,} parameters)",
             f"Peak during: {result['peak_moment']} ({result['setup']['precision']})", "",
             f"{'component':46s} {'size':>14s} {'share':>7s}"]
    for row in breakdown(result):
        lines.append(f"{row['label'][:46]:46s} {row['text']:>14s} {row['percent']:6.1f}%")
    shown = format_bytes(total)
    lines += [f"{'total per GPU':46s} {shown['text']:>14s}   ({shown['gb_text']})", "", UNIT_NOTE]
    lines += [f"note: {w}" for w in result.get("warnings", ())]
    lines.append("")
    for fit in gpu_fits(total, gpu):
        lines.append(f"{fit['name']:38s} {fit['memory_bytes'] / GIB:9,.2f} GiB usable  {fit['status']:>5s}  "
                     f"headroom {fit['headroom_bytes'] / GIB:10,.2f} GiB")
    if answers:
        lines.append("")
        lines += [f"{key:24s} {value}" for key, value in answer_rows(result, answers)]
    return "\n".join(lines) + "\n"


def _cell(value: object) -> object:
    """A CSV cell that no spreadsheet runs as a formula (OWASP CSV injection: prefix =, +, -, @)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def to_csv(values: dict, result: dict, answers: dict) -> str:
    """The CSV the page downloads: one section of inputs, one of results, exact bytes."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")

    def write(*cells: object) -> None:
        writer.writerow([_cell(c) for c in cells])
    write("section", "key", "value", "bytes", "GiB")
    for field in FIELDS:
        value = values.get(field.key)
        write("input", field.key, "" if value is None else format_value(field, value), "", "")
    write("result", "params_total", result["params"]["total"], "", "")
    write("result", "params_active", result["params"]["active"], "", "")
    write("result", "peak_phase", result["peak_phase"], "", "")
    write("result", "peak_moment", result["peak_moment"], "", "")
    for row in breakdown(result):
        write("breakdown", row["key"], row["substituted"], row["bytes"], f"{row['bytes'] / GIB:.4f}")
    for key, size in result["components"].items():
        write("component", key, "", size, f"{size / GIB:.4f}")
    for key, size in result["phases"].items():
        write("phase", key, "", size, f"{size / GIB:.4f}")
    for key in ("peak_bytes", "overhead_bytes", "total_bytes"):
        write("result", key, "", result[key], f"{result[key] / GIB:.4f}")
    for fit in gpu_fits(result["total_bytes"], values.get("gpu", "")):
        write("gpu", fit["id"], fit["status"], fit["memory_bytes"], f"{fit['memory_bytes'] / GIB:.4f}")
    for key, value in answer_rows(result, answers):
        write("answer", key, value, "", "")
    for note in result.get("warnings", ()):
        write("warning", "", note, "", "")
    return out.getvalue()
