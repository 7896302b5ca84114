"""Presenting an estimate: the readable table and the CSV. Formatting only: every number comes from the
estimate's records (pycore.memory.pools), nothing is derived here."""

import csv
import io
import json
import re
from collections.abc import Callable
from typing import Any

from pycore.answers.fit import gpu_fits
from pycore.answers.rollout_answers import generations_text
from pycore.base.units import GIB, MIB, duration_text, format_bytes, format_count, plural, printable
from pycore.inputs import frameworks
from pycore.inputs.applies import applies
from pycore.inputs.schema import FIELDS, format_value
from pycore.memory.estimate import Estimate
from pycore.model.catalog import gpus as gpu_catalog
from pycore.model.catalog import models as model_catalog
from pycore.model.mixers import STATEFUL

UNIT_NOTE = "GiB = 2^30 bytes (TiB = 2^40); GPU vendors' GB = 10^9 bytes."


def result_json(result: Estimate, formulas: bool = True) -> "dict[str, Any]":
    """The estimate's JSON (``Estimate.as_dict``) with each breakdown row's size as display text beside its
    bytes: what ``--json`` prints and the page reads."""
    out = result.as_dict(formulas)
    out["breakdown"] = [{**row, **format_bytes(row["bytes"]), "style": i} for i, row in enumerate(out["breakdown"])]
    return out


def breakdown(result: Estimate) -> "list[dict[str, Any]]":
    """The records live at the peak plus the runtime overhead, as display rows; their bytes add up to
    ``total_bytes``. Each row's ``style`` is its place in the breakdown (``chart_styles``)."""
    return [{**row, **format_bytes(row["bytes"]), "style": i} for i, row in enumerate(result.as_dict()["breakdown"])]


KIND_WORDS = {"encoder": "encoder", "encoder-decoder": "encoder-decoder", "generic": "vision classifier"}


def model_what(entry: "dict[str, Any]") -> str:
    """What a preset is, in the words of the page's model picker: dense or MoE (routed experts), hybrid (layers
    that keep a state instead of a KV cache: pycore.model.mixers.STATEFUL), VL (a vision tower); an encoder,
    encoder-decoder or a generic vision classifier for the others."""
    if entry.get("kind") in KIND_WORDS:
        return KIND_WORDS[entry["kind"]]
    hybrid = bool(set(entry.get("layer_pattern", "")) & STATEFUL)
    words = ["hybrid"] if hybrid else []
    words += ["MoE"] if entry.get("experts") else [] if hybrid else ["dense"]
    if entry.get("vision_family"):
        words.append("VL")
    return " ".join(words)


def model_choices() -> "list[dict[str, Any]]":
    """The model picker's entries, one per preset (build.py writes them into the page): its id, hub ids and
    aliases, family (its transformers class without "For…"), what it is (``model_what``) and the line under
    its name (parameters, context length), and ``words``, the lower-case text typing filters on."""
    out = []
    for model_id, entry in model_catalog().items():
        family = re.sub(r"(For\w+|LMHeadModel)$", "", entry.get("hf_class", ""))
        what = model_what(entry)
        context = entry.get("max_positions")
        detail = [f"{format_count(entry['params'])} parameters"]
        if context:
            detail.append(f"context {context:,} tokens")
        hubs, aliases = list(entry.get("hub", ())), list(entry.get("aliases", ()))
        words = " ".join([model_id, *hubs, *aliases, family, what, format_count(entry["params"])])
        out.append({"id": model_id, "hub": hubs, "aliases": aliases, "family": family, "what": what,
                    "detail": " · ".join(detail), "words": words.lower()})
    return out


def import_choice(answer: "dict[str, Any]", label: str) -> "dict[str, str]":
    """A recent import as the model picker lists it (the page keeps the last few): ``label`` (the hub id or the
    config's name), what it is (``model_what`` of its closest preset with the import's overrides) and its
    parameters and context length, as ``model_choices`` words them."""
    pairs = dict(answer["query"])
    if answer.get("carried"):       # no preset describes it: its model_type, and a label that tells two such apart
        model_type = str(json.loads(pairs["config"]).get("model_type") or "config")[:40]
        shown = label if label != "imported config" else f"{model_type} config, {format_count(answer['params'])}"
        return {"label": shown, "what": f"imported {model_type} config, read from itself",
                "detail": f"{format_count(answer['params'])} parameters"}
    entry = dict(model_catalog().get(pairs.get("model", ""), {}))
    for key, value in pairs.items():
        entry[key] = int(value) if value.isdigit() else value
    context = entry.get("max_positions")
    detail = [f"{format_count(answer['params'])} parameters"] + ([f"context {context:,} tokens"] if context else [])
    return {"label": label, "what": f"imported, {model_what(entry)}", "detail": " · ".join(detail)}


def chart_styles(result: Estimate, answers: "dict[str, Any]") -> "dict[str, int]":
    """Pool key -> its style index on the page (site/palette.js turns an index into a colour and a hatch): a
    pool's place in the breakdown, then each pool that only a chart or the comparison shows in the order it
    first appears. One index per pool across the breakdown bar, both charts and the comparison, so no two pools
    drawn together share a colour and a pool keeps its colour from chart to chart."""
    styles = {row.key: i for i, row in enumerate(result.breakdown)}
    charts = answers.get("charts") or {}
    keys = [*(series["key"] for chart in charts.values() for series in chart["series"]),
            *(row["component"] for row in (answers.get("comparison") or {}).get("components", ()))]
    for key in keys:
        styles.setdefault(key, len(styles))
    return styles


def answer_rows(result: Estimate, answers: dict[str, Any]) -> "list[tuple[str, Any]]":
    """(key, value) rows of the answers, as the table and the CSV show them."""
    rows: "list[tuple[str, Any]]" = [("fits", answers["fits"])]
    for key in ("gpus_needed", "max_batch", "max_seq", "max_concurrency", "max_context", "kv_cache_tokens",
                "min_tp"):
        if key in answers:
            rows.append((key, "none" if answers[key] is None else answers[key]))
    plan = answers.get("plan") or []
    for i, option in enumerate(plan[:5], 1):
        rows.append((f"plan_{i}", f"{option['label']}: {plural(option['gpus'], 'GPU')}, {option['total_text']}"))
    rows += _grpo_rows(answers)
    for i, line in enumerate(answers.get("vllm_log") or (), 1):
        rows.append((f"vllm_log_{i}", line))
    cost = answers.get("cost")
    if cost:
        rows.append(("gpus_for_cost", cost["gpus"]))
        rows.append(("train_hours", "" if cost["hours"] is None else f"{cost['hours']:.1f}"))
        rows.append(("train_tokens", "" if cost.get("train_tokens") is None else cost["train_tokens"]))
        rows.append(("train_derived", cost.get("derived", "")))
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
    return rows + _comparison_rows(answers.get("comparison"))


def _grpo_rows(answers: dict[str, Any]) -> "list[tuple[str, Any]]":
    """GRPO's answers (pycore.answers.rollout_answers) as table and CSV rows; none for another method."""
    if "generations" not in answers:
        return []
    longest = answers["max_completion"]
    rows: "list[tuple[str, Any]]" = [("max_completion", "none" if longest is None else longest)]
    rows += [(f"max_generations_at_{row['completion']}", row["max_generations"] or "none")
             for row in answers["generations"]["rows"]]
    return rows + [(f"rollout_placement_{i}", f"{option['label']}: {option['text']}")
                   for i, option in enumerate(answers["placements"]["options"], 1)]


def _comparison_rows(comparison: "dict[str, Any] | None") -> "list[tuple[str, Any]]":
    if not comparison:
        return []
    rows: "list[tuple[str, Any]]" = [("baseline", "&".join(f"{k}={v}" for k, v in comparison["baseline_query"])),
                           ("baseline_total_bytes", comparison["baseline_total_bytes"]),
                           ("saving_percent", f"{100 * comparison['saving']:.1f}")]
    rows += [(f"difference_{row['component']}", row["difference_bytes"]) for row in comparison["components"]]
    return rows + [("baseline_gpus_needed", comparison["baseline_gpus_needed"])]


def summary(result: Estimate) -> dict[str, Any]:
    """The sentences under the total, the same on the page and in the table."""
    peak, overhead = format_bytes(result.peak_bytes)["text"], format_bytes(result.overhead_bytes)["text"]
    setup = result.setup
    how = ", ".join(f"{k} {v}" for k, v in (("method", setup.method), ("precision", setup.precision),
                                            ("optimizer kernel", setup.optimizer_impl),
                                            ("engine", setup.engine)) if v)
    nccl = any(pool.key == "nccl_buffers" for pool in result.breakdown)
    read = ", ".join(f"{count:,} {kind}" for kind, count in result.model.layers_read)
    return {"peak": f"Peak tensors {peak} (moment: {result.peak_moment}), plus {overhead} the GPU shows beyond "
                    f"them (allocator cache, CUDA context{', NCCL' if nccl else ''}).",
            "model": f"{result.model.name}: {result.params_total:,} parameters; {how}."
                     + (f" Closest preset: {result.model.preset}." if result.model.preset else "")
                     + (f" Layers read as {read}." if read else ""),
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


SINGLE_GPU = "Single GPU — open to shard across GPUs"


def parallel_heading(result: Estimate, values: dict[str, Any]) -> str:
    """The parallel section's summary line on the page: the layout estimated (``layout_text``) and the
    sharding in force, "2 GPUs: dp 2 · ZeRO-3"; SINGLE_GPU for one GPU with nothing sharded."""
    values = {**values, "kind": result.model.kind}
    sharding = []
    if applies("zero", values) and str(values.get("zero", "0")) != "0":
        sharding.append(f"ZeRO-{values['zero']}")
    if applies("fsdp", values) and values.get("fsdp", "none") != "none":
        sharding.append(f"FSDP {values['fsdp']}")
    if result.layout.gpus == 1 and not sharding:
        return SINGLE_GPU
    return " · ".join([layout_text(result), *sharding])


def _gpus_needed_text(answers: dict[str, Any]) -> str:
    if not answers.get("gpus_needed"):
        return "no layout tried fits: see the changes below"
    best = (answers.get("plan") or [{}])[0]
    label = best.get("label")
    return plural(answers["gpus_needed"], "GPU") + (f" ({label})" if label and label != "as given" else "")


def _concurrency_text(answers: dict[str, Any]) -> str:
    if answers.get("vllm_context"):
        return (f"{answers['max_concurrency']:.2f}× at {answers['vllm_context']:,} tokens per request (max_model_len: "
                "the prompt and the new tokens)")
    return f"{answers['max_concurrency']:.2f}×"


def _hold(count: int) -> str:
    return "holds" if count == 1 else "hold"


def request_cache_text(request: dict[str, Any]) -> str:
    """A hybrid's cache per request under vLLM by layer kind: "12 blocks, 38.25 MiB (a block is a page of 272 tokens,
    278,528 bytes, in each of 12 layers: 3,342,336 bytes): 9 hold the 12 attention layers' keys and values for 2,304
    tokens (12,288 bytes a token), 3 the 36 state layers' convolution and recurrent state (9.42 MiB, padded to whole
    blocks); vLLM's "GPU KV cache size" is the tokens of one of its 4 layer groups, which share the blocks"."""
    size = request["block_bytes"]
    attention, state = request["attention_blocks"], request["state_blocks"]
    blocks = attention + state
    page = (f"a page of {request['block_tokens']:,} tokens, " if request["block_tokens"] else "a page, ")
    text = (f"{plural(blocks, 'block')}, {blocks * size / MIB:,.2f} MiB (a block is {page}{request['page_bytes']:,} "
            f"bytes, in each of {plural(request['group_size'], 'layer')}: {size:,} bytes): ")
    if request["attention_layers"]:
        text += (f"{attention:,} {_hold(attention)} the {plural(request['attention_layers'], 'attention layer')}' keys and values "
                 f"for {request['context']:,} tokens ({request['kv_bytes_per_token']:,} bytes a token), {state:,} ")
    else:
        text += f"{state:,} {_hold(state)} "
    text += (f"the {plural(request['state_layers'], 'state layer')}' convolution and recurrent state "
             f"({request['state_bytes_per_request'] / MIB:,.2f} MiB, padded to whole blocks)")
    if request["attention_layers"] and request["groups"] > 1:
        text += (f"; vLLM's \"GPU KV cache size\" is the tokens of one of its {request['groups']:,} layer groups, "
                 "which share the blocks")
    return text


def _cost_text(cost: dict[str, Any]) -> str:
    """The time and cost, saying which of train_tokens and train_hours was given and which derived from it:
    "22.0 days on 64 GPUs, $101,156 (train_tokens 1T given; the time derived from the throughput)"."""
    if cost["hours"] is None:
        return str(cost.get("why_not", ""))
    text = f"{cost['duration_text']} on {plural(cost['gpus'], 'GPU')}"
    text += f", ${cost['cost_usd']:,.0f}" if cost["cost_usd"] is not None else ", no price for the cost: set one"
    if cost.get("given") != "train_hours":
        return text + f" (train_tokens {format_count(cost['train_tokens'])} given; the time derived from the throughput)"
    given = f"train_hours {cost['hours']:,g} given"
    if cost.get("train_tokens") is None:
        return text + f" ({given}; the tokens not derived: {cost.get('why_not') or 'no throughput'})"
    return f"{format_count(cost['train_tokens'])} tokens in {text} ({given}; the tokens derived from the throughput)"


def _dollars_per_hour(price: float) -> str:
    """"$2.99", "$4.20", "$1.006": cents, or every digit the catalog gives."""
    return f"${price:,.2f}" if round(price, 2) == price else f"${price:,g}"


# The estimate's messages that say what it assumes, which it stands by (information, not something wrong), by how
# each producer opens them: a recipe's batch and rollout (pycore.memory.rollout, posttraining, ppo, distillation notes), what a
# hybrid's scans save (memory.estimate._hybrid_notes), the tokens images add. Any other message - a refusal, a
# count left out, positions past the model's - is a warning: one not listed here is never played down.
NOTE_OPENINGS = ("GRPO: batch counts ", "KTO: batch counts ", "PPO: batch counts ", "Distillation: batch counts ",
                 "Distillation under autocast: ", "this hybrid's ", "the images of each sequence add ",
                 "vLLM profiles the vision encoder at start-up ", "vLLM skips its start-up profiling ",
                 "images is ignored: ", "mm_profiling is ignored: ", "attention: transformers' SDPA meets ")


def message_kinds(warnings: "list[str]", ignored: "list[str]") -> "list[dict[str, str]]":
    """The estimate's ``warnings`` and the ``ignored`` keys' messages as {kind, text}: kind "warning" for what the
    estimate cannot vouch for or the run would refuse, "note" for what it assumes and inputs it does not read."""
    return [{"kind": "note" if text.startswith(NOTE_OPENINGS) else "warning", "text": text} for text in warnings] + \
        [{"kind": "note", "text": text} for text in ignored]


# Inputs whose default is read from a catalog for the inputs in force: the page shows the number an empty field
# stands for and where it comes from (``field_defaults``), never the words "preset value".
CATALOG_DEFAULTS = ("price",)


def field_defaults(values: dict[str, Any]) -> "dict[str, dict[str, str]]":
    """Input key -> {placeholder, text}: for each of CATALOG_DEFAULTS, the number an empty field stands for (the
    chosen GPU's price per hour from presets/gpus.json) and the line under the field: the price the cost uses
    and its source, or that a price was given, or that the catalog has none. ``zero`` -> {text}: the stage an
    FSDP strategy sets in its place ("" without one)."""
    shown = {"zero": {"text": zero_set_by_fsdp(values)}}
    gpu = gpu_catalog().get(values.get("gpu", ""))
    if gpu is None:
        return shown
    listed, source, name = gpu.get("price_usd_per_gpu_hour"), gpu.get("price_source", ""), gpu["name"]
    catalog = f"the catalog price of the {name} ({source}; presets/gpus.json)"
    given = values.get("price")
    if given is not None:
        said = f"{_dollars_per_hour(listed)} is {catalog}" if listed is not None else \
            f"no catalog price for the {name} ({source})"
        text = f"{_dollars_per_hour(given)} per GPU-hour, as given; {said}."
    elif listed is not None:
        text = f"{_dollars_per_hour(listed)} per GPU-hour: {catalog}. Type your own to change it."
    else:
        text = f"No catalog price for the {name} ({source}): type one for the cost."
    return {**shown, "price": {"placeholder": f"{listed:g}" if listed is not None else "no catalog price",
                               "text": text}}


# What each FSDP strategy shards, as the ZeRO stage it stands for (pycore.memory.parallel.FSDP_STAGES)
FSDP_SHARDS = {"NO_SHARD": "0: nothing sharded, every GPU holds a whole replica",
               "SHARD_GRAD_OP": "2: gradients and optimizer state sharded over dp × cp, the weights whole",
               "FULL_SHARD": "3: weights, gradients and optimizer state sharded over dp × cp",
               "HYBRID_SHARD": "3 within shard_group: weights, gradients and optimizer state sharded over its GPUs, "
                               "replicated across groups"}


def zero_set_by_fsdp(values: "dict[str, Any]") -> str:
    """The line under the ZeRO field when an FSDP strategy is set: the stage it sets (the estimate reads that, not
    the field: pycore.memory.parallel.layout); "" without one."""
    strategy = values.get("fsdp", "none")
    if strategy not in FSDP_SHARDS:
        return ""
    return f"fsdp={strategy} sets the ZeRO stage to {FSDP_SHARDS[strategy]}; this field is not read while fsdp is set."


def _batch_text(answers: dict[str, Any]) -> str:
    """"12 sequences", or under DPO "12 preference pairs (24 sequences)": what the batch counts."""
    unit, count = answers.get("batch_unit", "sequence"), answers["max_batch"]
    shown = plural(count, unit)
    return f"{shown} ({plural(2 * count, 'sequence')})" if unit == "preference pair" else shown


def display_answers(result: Estimate, answers: dict[str, Any], host: bool = False) -> "list[dict[str, Any]]":
    """The answers as labelled sentences (key, label, text): what the page and the table show. ``host``
    adds the host RAM offload needs (the page's row; the table has its own line for it)."""
    def known(key: str) -> bool:
        return answers.get(key) is not None
    rows: "list[tuple[str, str, bool, Callable[[], str]]]" = [
        ("gpus_needed", "GPUs needed", "gpus_needed" in answers, lambda: _gpus_needed_text(answers)),
        ("min_tp", "Smallest tensor-parallel degree", bool(answers.get("min_tp")), lambda: f"tp={answers['min_tp']}"),
        ("kv_cache_tokens", "KV cache capacity (vLLM)", known("kv_cache_tokens"),
         lambda: f"{answers['kv_cache_tokens']:,} tokens"),
        ("max_batch", "Largest micro-batch" if "cost" in answers else "Most sequences at once",
         known("max_batch") or known("max_batch_unbounded"),
         lambda: answers.get("max_batch_unbounded") or _batch_text(answers)),
        ("max_concurrency", "Maximum concurrency (vLLM)", known("max_concurrency") and "vllm_context" in answers,
         lambda: _concurrency_text(answers)),
        ("vllm_request", "Cache per request (vLLM)", "vllm_request" in answers,
         lambda: request_cache_text(answers["vllm_request"])),
        ("max_seq", "Longest prompt" if "generations" in answers else "Longest sequence", known("max_seq"),
         lambda: f"{answers['max_seq']:,} tokens at this batch"),
        ("max_context", "Longest context", known("max_context"),
         lambda: f"{answers['max_context']:,} tokens at this batch"),
        ("max_completion", "Longest completion", "generations" in answers,
         lambda: "none fits at this batch" if answers["max_completion"] is None else
         f"{plural(answers['max_completion'], 'token')} at this batch (max_completion_length)"
         + ("" if answers["generations"]["layout"] == "the layout as given" else f", {answers['generations']['layout']}")),
        ("generations", "Most generations per prompt", "generations" in answers,
         lambda: generations_text(answers["generations"])),
        ("cost", "Time and cost", bool(answers.get("cost")), lambda: _cost_text(answers["cost"])),
    ]
    shown = [{"key": key, "label": label, "text": text()} for key, label, wanted, text in rows if wanted]
    shown += [{"key": "note", "label": "Note", "text": note} for note in answers.get("notes", ())]
    if host and result.host_bytes:
        shown.append({"key": "host_bytes", "label": "Host RAM for offload",
                      "text": f"{format_bytes(result.host_bytes)['text']} per GPU"})
    return shown


def fit_size_text(row: dict[str, Any]) -> str:
    """A what-fits row's size cell: "15.20 GiB · 62.80 GiB free" (or "over"), or why it has no size."""
    if row.get("total_bytes") is None:
        return str(row.get("error") or "—")
    headroom = row["headroom_bytes"]
    return f"{row['total_text']} · {format_bytes(abs(headroom))['text']} {'free' if headroom >= 0 else 'over'}"


COMPARED_WITH = {"serving": "the same model, the other workload", "baseline": "fp32 with no memory savers"}


def _signed(num_bytes: int) -> str:
    """"+1.50 GiB", "−1.50 GiB" (a minus sign, not a hyphen), "0.00 GiB"."""
    sign = "+" if num_bytes > 0 else "−" if num_bytes < 0 else ""
    return sign + format_bytes(abs(num_bytes))["text"]


def _dollars(value: "float | None") -> str:
    return "—" if value is None else f"${round(value):,}"


def display_comparison(comparison: "dict[str, Any] | None") -> "dict[str, Any] | None":
    """The comparison as the page shows it, every cell a string: ``what`` it is compared with, the
    ``message``, whether the saving is ``negative``, the column ``labels`` and the ``rows`` {key, label,
    this, baseline, difference}: each component, the total per GPU, GPUs needed and, when known, the
    training cost. Component rows add their share of the larger total (``this_percent``, ``baseline_percent``:
    the page's two bars, drawn to one scale)."""
    if not comparison:
        return None
    c = comparison
    text = {key: format_bytes(c[key])["text"] for key in ("total_bytes", "baseline_total_bytes")}
    # Each component's share of the larger total, so the page draws both columns as bars to one scale.
    scale = max(c["total_bytes"], c["baseline_total_bytes"], 1) / 100
    rows = [{"key": row["component"], "label": row.get("label") or row["component"].replace("_", " "),
             "this": format_bytes(row["bytes"])["text"], "baseline": format_bytes(row["baseline_bytes"])["text"],
             "difference": _signed(row["difference_bytes"]),
             "this_percent": row["bytes"] / scale, "baseline_percent": row["baseline_bytes"] / scale}
            for row in c["components"]]
    rows.append({"key": "total", "label": "Total per GPU", "this": text["total_bytes"],
                 "baseline": text["baseline_total_bytes"], "difference": _signed(c["difference_bytes"])})
    needed = ["none fit" if n is None else f"{n:,}" for n in (c["gpus_needed"], c["baseline_gpus_needed"])]
    rows.append({"key": "gpus_needed", "label": "GPUs needed", "this": needed[0], "baseline": needed[1],
                 "difference": ""})
    rows += _comparison_cost_rows(c)
    peaks = (f" Each column is the memory live at its own peak (this: {c['peak_moment']}; baseline: "
             f"{c['baseline_peak_moment']}) and adds up to its total." if c.get("peak_moment") else "")
    return {"what": COMPARED_WITH.get(c["mode"], COMPARED_WITH["baseline"]),
            "message": f"{c['message']} Baseline: {text['baseline_total_bytes']}, this: {text['total_bytes']}."
                       + peaks + _rate_note(c),
            "negative": c["saving"] < 0, "labels": c["labels"], "rows": rows}


def _comparison_cost_rows(c: "dict[str, Any]") -> "list[dict[str, str]]":
    """Training time and cost, each column at its own precision's matmul rate (answers.compare.column_cost);
    a column that cannot be timed says why."""
    this, base = c.get("cost") or {}, c.get("baseline_cost") or {}
    if this.get("hours") is None and base.get("hours") is None:
        return []
    def time(cost: "dict[str, Any]") -> str:
        return duration_text(cost["hours"]) if cost.get("hours") is not None else str(cost.get("why_not") or "—")
    def tokens(cost: "dict[str, Any]") -> str:
        return format_count(cost["train_tokens"]) if cost.get("train_tokens") else str(cost.get("why_not") or "—")
    # train_hours given: each column trains for those hours, the tokens it gets through are what differs.
    trained = [{"key": "train_tokens", "label": "Tokens in that time", "this": tokens(this), "baseline": tokens(base),
                "difference": ""}] if this.get("given") == "train_hours" else []
    return trained + [
        {"key": "train_hours", "label": "Training time", "this": time(this), "baseline": time(base), "difference": ""},
        {"key": "cost_usd", "label": "Training cost", "this": _dollars(this.get("cost_usd")),
         "baseline": _dollars(base.get("cost_usd")), "difference": ""}]


def _rate_note(c: "dict[str, Any]") -> str:
    """How each column is timed: its matmul rate in dense TFLOPS, and why fp32 is not timed on tensor cores."""
    costs = [(name, c.get(key) or {}) for name, key in (("this", "cost"), ("baseline", "baseline_cost"))]
    if not any(cost.get("hours") is not None for _, cost in costs):
        return ""
    parts = [f"{name} at {cost['rate']} {cost['tflops']:g} TFLOPS" if cost.get("tflops") else
             f"{name}: no {cost.get('rate', '')} figure" for name, cost in costs]
    fp32 = any(cost.get("rate") == "fp32" for _, cost in costs)
    return (" Time and cost: " + ", ".join(parts) + " dense" +
            (" (PyTorch keeps torch.backends.cuda.matmul.allow_tf32 False by default since 1.12: fp32 matmuls "
             "run at the fp32 rate, not on tensor cores)" if fp32 else "") + ".")


def gpu_roles(fits: "list[dict[str, Any]]") -> "dict[str, list[str]]":
    """GPU id -> what it is to the reader: the chosen GPU, the smallest GPU that fits (a tight fit counts;
    the chosen one on a tie) and the largest that does not; a GPU can be more than one. Where vLLM would
    refuse to start on the chosen GPU (``why``), none is called the smallest that fits."""
    roles: "dict[str, list[str]]" = {}
    chosen = [row for row in fits if row["chosen"]]
    # vLLM's start-up check is judged on the chosen GPU alone (answers.fit.gpu_fit): where it would refuse,
    # no other GPU is called the smallest that fits from its bytes.
    fitting = [] if chosen and chosen[0]["why"] else [row for row in fits if row["fits"]]
    short = [row for row in fits if not row["fits"]]
    picks = [("chosen", chosen[:1]),
             ("smallest that fits", [min(fitting, key=lambda r: (r["memory_bytes"], not r["chosen"]))] if fitting else []),
             ("largest that does not fit", [max(short, key=lambda r: (r["memory_bytes"], r["chosen"]))] if short else [])]
    for role, rows in picks:
        for row in rows:
            roles.setdefault(row["id"], []).append(role)
    return roles


def gpu_lines(fits: "list[dict[str, Any]]", every: bool = False) -> "list[str]":
    """The GPU rows of the text table: the chosen GPU, the smallest that fits and the largest that does not
    (``gpu_roles``), each saying which it is, and how many more ``--gpus all`` lists; ``every``: all of them."""
    roles = gpu_roles(fits)
    shown = fits if every else [row for row in fits if row["id"] in roles]
    width = max([38, *(len(row["name"]) for row in shown)])     # the columns stay put for a long GPU name
    # a GPU whose bytes would hold the estimate but where vLLM would not start says so (its verdict's reason)
    lines = [f"{row['name']:{width}s} {row['memory_bytes'] / GIB:9,.2f} GiB usable  {row['status']:>5s}  "
             f"headroom {row['headroom_bytes'] / GIB:10,.2f} GiB" + (f"  ({', '.join(roles[row['id']])})"
                                                                    if row["id"] in roles else "")
             + (f"  {row['short_why']}" if row.get("why") else "")
             for row in shown]
    hidden = len(fits) - len(shown)
    return lines + ([f"{plural(hidden, 'more GPU')}: --gpus all lists every one."] if hidden else [])


def table(result: Estimate, answers: "dict[str, Any] | None" = None, gpu: str = "", every_gpu: bool = False,
          values: "dict[str, Any] | None" = None) -> str:
    """A readable text table in GiB (2**30 bytes); ``every_gpu``: every catalog GPU's fit, not three."""
    total = result.total_bytes
    rows = breakdown(result)
    width = max(46, *(len(row["label"]) for row in rows))     # every label in full, never cut
    lines = [f"Model: {result.model.name}  ({result.params_total:,} parameters)",
             f"Peak during: {result.peak_moment} ({result.setup.precision})", "",
             f"{'component':{width}s} {'size':>14s} {'share':>7s}"]
    for row in rows:
        lines.append(f"{row['label']:{width}s} {row['text']:>14s} {row['percent']:6.1f}%")
    shown = format_bytes(total)
    lines += [f"{'total per GPU':{width}s} {shown['text']:>14s}   ({shown['gb_text']})", ""]
    lines += list(summary(result).values()) + [UNIT_NOTE]
    lines += [f"note: {w}" for w in result.warnings]
    lines.append("")
    lines += gpu_lines(gpu_fits(total, gpu, result.refused, values), every_gpu)
    if answers:
        lines.append("")
        lines += [f"{row['label']:32s} {row['text']}" for row in display_answers(result, answers)]
        lines += [f"{'Layout that fits':32s} {option['label']}: {plural(option['gpus'], 'GPU')}, {option['total_text']}"
                  for option in (answers.get("plan") or [])[:5]]
        lines += [f"{'Rollout placement':32s} {option['label']}: {option['text']}"
                  for option in (answers.get("placements") or {}).get("options", ())]
        lines += [f"{'vLLM would log':32s} {line}" for line in answers.get("vllm_log") or ()]
        lines += [f"{'How to fit':32s} {fix['change']}: {fix.get('text') or fix['total_text']}"
                  for fix in answers.get("how_to_fit", ())[:8]]
    return "\n".join(lines) + "\n"


def _cell(value: object) -> object:
    """A CSV cell that no spreadsheet runs as a formula (OWASP CSV injection: prefix =, +, -, @) and that
    holds no character a reader could take for a line break or that reorders the line: csv.writer with
    lineterminator="\n" quotes a cell holding \n but not one holding \r, so a config path "./\r=1+1.json"
    would start a row with a formula. Such characters (control and format characters, U+202E, line
    separators) are written as '?' (``printable``), as everywhere the user's text is echoed."""
    if not isinstance(value, str):
        return value
    value = printable(value)
    return "'" + value if value[:1] in ("=", "+", "-", "@") else value


def to_csv(values: dict[str, Any], result: Estimate, answers: dict[str, Any]) -> str:
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
    for fit in gpu_fits(result.total_bytes, values.get("gpu", ""), result.refused, values):
        write("gpu", fit["id"], fit["status"], fit["memory_bytes"], f"{fit['memory_bytes'] / GIB:.4f}")
    for key, value in answer_rows(result, answers):
        write("answer", key, value, "", "")
    for note in result.warnings:
        write("warning", "", note, "", "")
    return out.getvalue()


# Copy and share (issue 28): the result as people paste it into an issue, a chat or a document. The page's
# "Copy results" button copies these very strings (web.run's ``share``); python -m pycore --markdown prints
# the Markdown, so the two are the same for the same inputs.
MARKDOWN_SPECIAL = "\\`*_[]<>|~#"
_MARKDOWN_ESCAPES = str.maketrans({**{c: "\\" + c for c in MARKDOWN_SPECIAL}, "&": "&amp;"})


def _md(text: str) -> str:
    """Text made literal in Markdown: what could start emphasis, a link, HTML or a table cell escaped."""
    return printable(text).translate(_MARKDOWN_ESCAPES)


# The attention kernels auto can resolve to besides the framework's own, in words (pycore/memory/setup.py _attention)
KERNELS = {"flash-math": "flash-math (SDPA's math kernel: grouped-query heads in fp32 on CUDA, or before sm_80)",
           "eager": "eager (the model has no SDPA path in transformers)"}


def framework_line(values: dict[str, Any], result: Estimate) -> str:
    """Which inputs took the framework's defaults, and what they became: "Framework defaults used (Hugging
    Face Trainer 5.23.0): precision=bf16, optimizer_impl=fused, ..."; the inputs given are not listed."""
    framework = frameworks.FRAMEWORKS[frameworks.framework_name(values)]
    resolved = frameworks.apply(values)
    situation = {**values, "kind": result.model.kind}
    pairs = [f"precision={result.setup.precision}"] if values.get("precision") == "auto" else []
    resolved["attention"] = KERNELS.get(result.setup.attention, result.setup.attention)   # as transformers picks it
    pairs += [f"{key}={resolved[key]}" for key, unset in frameworks.FOLLOWS.items()
              if values.get(key, unset) == unset and applies(key, situation)]
    if not pairs:
        return f"Framework defaults used: none (every input {framework.name} would set was given)."
    return f"Framework defaults used ({framework.name} {framework.version}): {', '.join(pairs)}."


def setup_line(values: dict[str, Any], result: Estimate) -> str:
    """The inputs that shape the estimate in one line: model, what is run, batch and lengths, precision,
    optimizer, the layout and the GPU."""
    serving = values.get("mode") == "infer"
    what = f"serving ({'vLLM' if result.setup.engine == 'vllm' else 'transformers generate()'})" if serving \
        else "training" + {"lora": " with LoRA", "qlora": " with QLoRA"}.get(values.get("method", "full"), "")
    lengths = f"prompt {values['seq']:,} + {values['new_tokens']:,} new tokens" if serving \
        else f"sequence {values['seq']:,} tokens"
    optimizer = "" if serving else f", optimizer {values['optimizer']} ({result.setup.optimizer_impl})"
    gpu = gpu_catalog()[values["gpu"]]["name"]
    return (f"{result.model.name} ({result.params_total:,} parameters), {what}, batch {values['batch']:,}, "
            f"{lengths}, precision {result.setup.precision}{optimizer}; {layout_text(result)} of {gpu}.")


def fit_line(fits: "list[dict[str, Any]]") -> str:
    """The chosen GPU's verdict with its headroom, then the smallest GPU that fits and the largest that
    does not (``gpu_roles``)."""
    roles = gpu_roles(fits)
    def said(row: "dict[str, Any]") -> str:
        return f"{row['name']} ({row['memory_text']} usable, {row['headroom_text']})"
    chosen = next(row for row in fits if row["chosen"])
    parts = [f"{chosen['verdict']} ({chosen['memory_text']} usable, {chosen['headroom_text']})."]
    for role, words in (("smallest that fits", "Smallest GPU that fits"),
                        ("largest that does not fit", "Largest that does not")):
        row = next((row for row in fits if role in roles.get(row["id"], ())), None)
        none = "not judged (vLLM's start-up check is made for the chosen GPU)" if chosen["why"] else "none"
        parts.append(f"{words}: {said(row) if row else none}.")
    return " ".join(parts)


def _share_parts(values: dict[str, Any], result: Estimate) -> "dict[str, Any]":
    total = format_bytes(result.total_bytes)
    return {"title": f"{result.model.name}: {total['text']} per GPU ({total['gb_text']})",
            "lines": [f"Setup: {setup_line(values, result)}", framework_line(values, result)],
            "rows": [(row["label"], f"{row['bytes'] / GIB:,.2f}", f"{row['percent']:.1f}%")
                     for row in result.as_dict(formulas=False)["breakdown"]],
            "total": f"{result.total_bytes / GIB:,.2f}",
            "after": [f"Fit: {fit_line(gpu_fits(result.total_bytes, values['gpu'], result.refused, values))}",
                      *(f"Note: {warning}" for warning in result.warnings),
                      f"Peak moment: {result.peak_moment}. {UNIT_NOTE}"]}


def share(values: dict[str, Any], result: Estimate) -> "dict[str, str]":
    """The result to paste elsewhere, as ``markdown`` (a table GitHub renders) and as plain ``text``: the
    model and total, the setup line, the framework defaults used, the breakdown in GiB with each row's
    share of the total, and the fit."""
    parts = _share_parts(values, result)
    md = [f"**{_md(parts['title'])}**", "", *(f"- {_md(line)}" for line in parts["lines"]), "",
          "| Component | GiB | Share |", "|---|--:|--:|"]
    md += [f"| {_md(label)} | {gib_text} | {percent} |" for label, gib_text, percent in parts["rows"]]
    md += [f"| **Total per GPU** | **{parts['total']}** | 100% |", ""] + [f"- {_md(line)}" for line in parts["after"]]
    width = max(len("Total per GPU"), *(len(label) for label, _, _ in parts["rows"]))
    text = [printable(parts["title"]), "", *map(printable, parts["lines"]), "",
            f"{'Component':{width}s} {'GiB':>10s} {'Share':>7s}"]
    text += [f"{printable(label):{width}s} {gib_text:>10s} {percent:>7s}" for label, gib_text, percent in parts["rows"]]
    text += [f"{'Total per GPU':{width}s} {parts['total']:>10s} {'100%':>7s}", ""] + [printable(line) for line in parts["after"]]
    return {"markdown": "\n".join(md) + "\n", "text": "\n".join(text) + "\n"}
