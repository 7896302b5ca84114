"""Writes CONTRACT.md: the JSON the page and ``--json`` read, generated from the Estimate record's types.

Usage: python tools/contract.py          (rewrites CONTRACT.md; tests/test_contract.py checks it is current)

Each record field's meaning is the comment beside it in pycore/memory/record.py, so the contract cannot
say something the code does not.
"""

import dataclasses
import functools
import inspect
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pycore.memory import record  # noqa: E402

# The page's entry points (pycore/output/web.py) and the keys each returns; tests/test_contract.py checks
# these against real payloads.
ENTRY_POINTS = {
    "web.run(query)": {
        "errors": "input key -> message, for every input that was refused (its default was used instead)",
        "fallbacks": "input key -> the value estimated with instead of the default, for a refused input that has "
                     "one that works (a sequence past a learned position table: the longest it embeds)",
        "query": "the normalised query string of the inputs in force",
        "warnings": "sentences about the estimate and the inputs ignored in this situation",
        "messages": "the same sentences as {kind, text}: kind \"warning\" for what the estimate cannot vouch for or the "
                    "run would refuse, \"note\" for what it assumes and the inputs ignored (report.message_kinds)",
        "result": "the Estimate record below; breakdown rows add `text` and `gb_text` (GiB and GB strings) and "
                  "`style`, the row's style index (as web.answers' `styles`)",
        "breakdown": "the same rows as result.breakdown",
        "summary": "sentences under the total: `peak`, `model`, `views`, `layout`",
        "parallel_heading": "the parallel section's summary line: `summary.layout` and the sharding in force "
                            "(\"2 GPUs: dp 2 · ZeRO-3\"), or \"Single GPU — open to shard across GPUs\"",
        "total": "{bytes, text, gb_text, unit_note}: the total per GPU as the page shows it",
        "gpus": "each GPU preset's fit for the total: {id, name, memory_bytes, headroom_bytes, status, ...}",
        "formulas": "every pool's formula row {name, key, formula, substituted, symbols, bytes, text, source, "
                    "live_at_peak} (left out by web.run(query, False))",
        "share": "{markdown, text}: the result to paste elsewhere (report.share): the model and total, the setup, "
                 "the framework defaults used, the breakdown in GiB with each row's share, and the fit; the page's "
                 "Copy results copies one of them, and `python -m pycore --markdown` prints the same markdown",
        "hub_offer": "{id, label} when the model given is a Hugging Face hub id no preset has (refused under "
                     "`errors.model`): the page's one click that fetches its config.json from the hub and imports it; "
                     "else null",
        "field_defaults": "input key -> {placeholder, text} for each input whose default is read from a catalog "
                          "(`price`: the chosen GPU's): the number an empty field stands for, and the line under the "
                          "field with the number in use and its source; `zero` -> {text}: the ZeRO stage an FSDP "
                          "strategy sets in the field's place (\"\" without one)",
    },
    "web.headline(query)": {
        "errors": "as web.run", "fallbacks": "as web.run", "result": "{total_bytes, peak_bytes}", "total": "{bytes, text, gb_text}",
        "gpus": "the chosen GPU's fit alone", "hub_offer": "as web.run",
    },
    "web.answers(query)": {
        "answers": "the searches' answers: fits, plan, gpus_needed, max_batch, max_seq, cost, how_to_fit, "
                   "charts, comparison, ...",
        "display": "the answers as labelled sentences [{key, label, text}]: what the page and the table show "
                   "(the page's rows add host RAM for offload)",
        "comparison": "answers.comparison as the page shows it, every cell a string: {what, message, negative, "
                      "labels, rows: [{key, label, this, baseline, difference}]} (components, total per GPU, GPUs "
                      "needed, training cost; a component row adds `this_percent` and `baseline_percent`, its share of "
                      "the larger total); null without a comparison",
        "styles": "pool key -> its style index, which site/palette.js draws as a colour (and a hatch past the ninth): "
                  "the breakdown's pools in order, then those only a chart or the comparison shows "
                  "(report.chart_styles); one per pool across the bar, the charts and the comparison",
        "formulas": "as web.run", "errors": "as web.run",
    },
    "web.launch(query)": {
        "blocks": "the launch settings of the setup, each {kind, title, follows, text}: `vllm` (a vllm serve line) "
                  "when serving with vLLM, `trainer` (TrainingArguments JSON) and `deepspeed` (a DeepSpeed config) "
                  "when training (pycore/output/export.py); `follows` names the framework version whose names it uses",
        "note": "why there is no block (serving with generate(), or no estimate); \"\" otherwise",
        "errors": "as web.run",
    },
    "web.launch_read(text)": {
        "set": "[[key, value]]: the inputs a pasted vllm serve line, TrainingArguments or DeepSpeed JSON sets "
               "(export.read), those the schema refuses left out",
        "message": "what was taken, what was refused and why, and the flags or keys no input takes",
        "error": "instead of both when the text is none of the three (or over 200,000 characters)",
    },
    "web.calibration(text, query)": {
        "display": "pycore.output.calibration.display: rows {label, measured, estimated, difference, calibrated, "
                   "override} as strings (GiB = 2^30 bytes), overrides, checks, notes, read, sources",
        "overrides": "[[key, value]]: the schema inputs that re-estimate to the measured figures",
        "apply_note": "what applying them sets, or why there is no override",
        "unit_note": "GiB = 2^30 bytes, and that the text went nowhere",
        "error": "instead of the others when no figure is recognised or the form's inputs give no estimate",
    },
}


def _type_name(hint: object) -> str:
    return hint.strip('"') if isinstance(hint, str) else getattr(hint, "__name__", str(hint))


def _fields(cls: type) -> "list[tuple[str, str, str]]":
    """(name, type, meaning) of a record's fields (and computed properties), each meaning read from the
    comment beside the field or the property's docstring."""
    source = Path(record.__file__).read_text(encoding="utf-8")
    body = source[source.index(f"class {cls.__name__}:"):]
    body = body[:body.find("\nclass ", 1) if "\nclass " in body[1:] else len(body)]
    comments = dict(re.findall(r"^    (\w+): .*?#\s*(.+)$", body, flags=re.M))
    rows = [(f.name, _type_name(cls.__annotations__[f.name]), comments.get(f.name, ""))
            for f in dataclasses.fields(cls)]
    for name, member in vars(cls).items():
        if isinstance(member, functools.cached_property):
            hint = str(member.func.__annotations__["return"]).strip('"')
            rows.append((name, hint, (member.__doc__ or "").split("(")[0].strip()))
    return rows


def markdown() -> str:
    lines = ["# The JSON contract", "",
             "Generated by `python tools/contract.py` from `pycore/memory/record.py` and the entry points of",
             "`pycore/output/web.py`; `tests/test_contract.py` fails when it is out of date. Bytes are exact",
             "integers; sizes shown to people are GiB (2^30 bytes), with GB (10^9) beside them.", ""]
    for entry, keys in ENTRY_POINTS.items():
        lines += [f"## `{entry}`", "", "| key | what it holds |", "| --- | --- |"]
        lines += [f"| `{key}` | {what} |" for key, what in keys.items()]
        lines.append("")
    lines += ["## The Estimate record (`result`, and `--json`)", "",
              "`Estimate.as_dict()`; nested records are objects with the same field names. `params` is",
              "`{total, active}` from `params_total` and `params_active`.", ""]
    for cls in (record.Estimate, record.ModelInfo, record.SetupInfo, record.LayoutInfo):
        lines += [f"### {cls.__name__}", "", " ".join(inspect.cleandoc(cls.__doc__ or "").split()), "",
                  "| field | type | meaning |", "| --- | --- | --- |"]
        lines += [f"| `{name}` | `{hint}` | {meaning} |" for name, hint, meaning in _fields(cls)]
        lines.append("")
    lines += ["### Pool (each row of `pools`, `breakdown`, `host_pools`)", "",
              "`{key, label, bytes, formula, substituted, symbols, source, moments, group}` "
              "(pycore/memory/pools.py); breakdown rows add `percent` of the total.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    (ROOT / "CONTRACT.md").write_text(markdown(), encoding="utf-8")
    print("wrote CONTRACT.md")
