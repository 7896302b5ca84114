"""Presenting an estimate: the readable table and the CSV. Formatting only: every number comes from the
estimate's records (pycore.memory.pools), nothing is derived here."""

import csv
import io
from typing import Any

from pycore.answers.fit import gpu_fits
from pycore.base.units import GIB, format_bytes, plural
from pycore.inputs.schema import FIELDS, format_value
from pycore.memory.estimate import Estimate

UNIT_NOTE = "GiB = 2^30 bytes (TiB = 2^40); GPU vendors' GB = 10^9 bytes."


def result_json(result: Estimate, formulas: bool = True) -> "dict[str, Any]":
    """The estimate's JSON (``Estimate.as_dict``) with each breakdown row's size as display text beside its
    bytes: what ``--json`` prints and the page reads."""
    out = result.as_dict(formulas)
    out["breakdown"] = [{**row, **format_bytes(row["bytes"])} for row in out["breakdown"]]
    return out


def breakdown(result: Estimate) -> "list[dict[str, Any]]":
    """The records live at the peak plus the runtime overhead, as display rows; their bytes add up to
    ``total_bytes``."""
    return [{**row, **format_bytes(row["bytes"])} for row in result.as_dict()["breakdown"]]


def answer_rows(result: Estimate, answers: dict) -> "list[tuple]":
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
    for stage in result.stages:
        rows.append((f"stage_{stage['stage']}", f"{stage['layers']} layers, "
                                                 f"{format_bytes(stage['peak_bytes'])['text']} peak in "
                                                 f"{stage['peak_phase']}"))
    if result.host_bytes:
        rows.append(("host_ram_bytes", result.host_bytes))
    comparison = answers.get("comparison")
    if comparison:
        rows.append(("baseline", "&".join(f"{k}={v}" for k, v in comparison["baseline_query"])))
        rows.append(("baseline_total_bytes", comparison["baseline_total_bytes"]))
        rows.append(("saving_percent", f"{100 * comparison['saving']:.1f}"))
        for row in comparison["components"]:
            rows.append((f"difference_{row['component']}", row["difference_bytes"]))
        rows.append(("baseline_gpus_needed", comparison["baseline_gpus_needed"]))
    return rows


def summary(result: Estimate) -> dict:
    """The sentences under the total, the same on the page and in the table."""
    peak, overhead = format_bytes(result.peak_bytes)["text"], format_bytes(result.overhead_bytes)["text"]
    setup = result.setup
    how = ", ".join(f"{k} {v}" for k, v in (("precision", setup.precision),
                                            ("optimizer kernel", setup.optimizer_impl),
                                            ("engine", setup.engine)) if v)
    nccl = any(pool.key == "nccl_buffers" for pool in result.breakdown)
    return {"peak": f"Peak tensors {peak} (moment: {result.peak_moment}), plus {overhead} the GPU shows beyond "
                    f"them (allocator cache, CUDA context{', NCCL' if nccl else ''}).",
            "model": f"{result.model.name}: {result.params_total:,} parameters; {how}.",
            "views": f"max_memory_allocated {peak}; max_memory_reserved "
                     f"{format_bytes(result.reserved_bytes)['text']}; nvidia-smi "
                     f"{format_bytes(result.total_bytes)['text']}.",
            "layout": layout_text(result)}


def layout_text(result: Estimate) -> str:
    """The GPUs the estimate spans and how they split: "16 GPUs: dp 8 × tp 2, experts split 8 ways within
    dp". Read from the layout estimated, never from the inputs typed (a refused tp is not the layout)."""
    lay = result.layout
    ways = [f"{key} {n}" for key, n in (("dp", lay.dp), ("tp", lay.tp), ("pp", lay.pp), ("cp", lay.cp)) if n > 1]
    text = plural(lay.gpus, "GPU") + (": " + " × ".join(ways) if ways else "")
    return text + (f", experts split {lay.ep} ways within dp × cp" if lay.ep > 1 else "")


def display_answers(result: Estimate, answers: dict) -> "list[dict]":
    """The answers as labelled sentences (key, label, text): what the page and the table show."""
    rows = []

    def add(key: str, label: str, text: str) -> None:
        rows.append({"key": key, "label": label, "text": text})
    plan = answers.get("plan") or []
    if answers.get("gpus_needed"):
        best = plan[0] if plan else {}
        add("gpus_needed", "GPUs needed", plural(answers["gpus_needed"], "GPU")
            + (f" ({best['label']})" if best.get("label") and best["label"] != "as given" else ""))
    elif "gpus_needed" in answers:
        add("gpus_needed", "GPUs needed", "no layout tried fits: see the changes below")
    if answers.get("min_tp"):
        add("min_tp", "Smallest tensor-parallel degree", f"tp={answers['min_tp']}")
    if "kv_cache_tokens" in answers and answers["kv_cache_tokens"] is not None:
        add("kv_cache_tokens", "KV cache capacity (vLLM)", f"{answers['kv_cache_tokens']:,} tokens")
    if answers.get("max_batch") is not None:
        add("max_batch", "Largest micro-batch" if "cost" in answers else "Most sequences at once",
            plural(answers["max_batch"], "sequence"))
    if answers.get("max_concurrency") is not None and answers.get("kv_cache_tokens") is not None:
        add("max_concurrency", "Maximum concurrency (vLLM)", f"{answers['max_concurrency']:.2f}× at "
            f"{answers['vllm_context']:,} tokens per request" if answers.get("vllm_context") else
            f"{answers['max_concurrency']:.2f}×")
    if answers.get("max_seq") is not None:
        add("max_seq", "Longest sequence", f"{answers['max_seq']:,} tokens at this batch")
    if answers.get("max_context") is not None:
        add("max_context", "Longest context", f"{answers['max_context']:,} tokens at this batch")
    cost = answers.get("cost")
    if cost:
        if cost["hours"] is not None:
            text = f"{cost['duration_text']} on {plural(cost['gpus'], 'GPU')}"
            if cost["cost_usd"] is not None:
                text += f", ${cost['cost_usd']:,.0f}"
            add("cost", "Time and cost", text)
        else:
            add("cost", "Time and cost", cost.get("why_not", ""))
    for note in answers.get("notes", ()):
        add("note", "Note", note)
    return rows


def table(result: Estimate, answers: "dict | None" = None, gpu: str = "") -> str:
    """A readable text table in GiB (2**30 bytes)."""
    total = result.total_bytes
    lines = [f"Model: {result.model.name}  ({result.params_total:,} parameters)",
             f"Peak during: {result.peak_moment} ({result.setup.precision})", "",
             f"{'component':46s} {'size':>14s} {'share':>7s}"]
    for row in breakdown(result):
        lines.append(f"{row['label'][:46]:46s} {row['text']:>14s} {row['percent']:6.1f}%")
    shown = format_bytes(total)
    lines += [f"{'total per GPU':46s} {shown['text']:>14s}   ({shown['gb_text']})", ""]
    lines += list(summary(result).values()) + [UNIT_NOTE]
    lines += [f"note: {w}" for w in result.warnings]
    lines.append("")
    for fit in gpu_fits(total, gpu):
        lines.append(f"{fit['name']:38s} {fit['memory_bytes'] / GIB:9,.2f} GiB usable  {fit['status']:>5s}  "
                     f"headroom {fit['headroom_bytes'] / GIB:10,.2f} GiB")
    if answers:
        lines.append("")
        lines += [f"{row['label']:32s} {row['text']}" for row in display_answers(result, answers)]
        lines += [f"{'Layout that fits':32s} {option['label']}: {plural(option['gpus'], 'GPU')}, {option['total_text']}"
                  for option in (answers.get("plan") or [])[:5]]
        lines += [f"{'vLLM would log':32s} {line}" for line in answers.get("vllm_log") or ()]
        lines += [f"{'How to fit':32s} {fix['change']}: {fix['total_text']}{' (fits)' if fix['fits'] else ''}"
                  for fix in answers.get("how_to_fit", ())[:8]]
    return "\n".join(lines) + "\n"


def _cell(value: object) -> object:
    """A CSV cell that no spreadsheet runs as a formula (OWASP CSV injection: prefix =, +, -, @)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def to_csv(values: dict, result: Estimate, answers: dict) -> str:
    """The CSV the page downloads: one section of inputs, one of results, exact bytes."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")

    def write(*cells: object) -> None:
        writer.writerow([_cell(c) for c in cells])
    write("section", "key", "value", "bytes", "GiB")
    for field in FIELDS:
        value = values.get(field.key)
        write("input", field.key, "" if value is None else format_value(field, value), "", "")
    write("result", "params_total", result.params_total, "", "")
    write("result", "params_active", result.params_active, "", "")
    write("result", "peak_phase", result.peak_phase, "", "")
    write("result", "peak_moment", result.peak_moment, "", "")
    for row in breakdown(result):
        write("breakdown", row["key"], row["substituted"], row["bytes"], f"{row['bytes'] / GIB:.4f}")
    for key, size in result.components.items():
        write("component", key, "", size, f"{size / GIB:.4f}")
    for key, size in result.phases.items():
        write("phase", key, "", size, f"{size / GIB:.4f}")
    for key, size in (("peak_bytes", result.peak_bytes), ("overhead_bytes", result.overhead_bytes),
                      ("total_bytes", result.total_bytes)):
        write("result", key, "", size, f"{size / GIB:.4f}")
    for fit in gpu_fits(result.total_bytes, values.get("gpu", "")):
        write("gpu", fit["id"], fit["status"], fit["memory_bytes"], f"{fit['memory_bytes'] / GIB:.4f}")
    for key, value in answer_rows(result, answers):
        write("answer", key, value, "", "")
    for note in result.warnings:
        write("warning", "", note, "", "")
    return out.getvalue()
