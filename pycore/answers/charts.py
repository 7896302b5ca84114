"""Memory against micro-batch and against sequence length (context when serving), stacked by the pools
live at each point's peak: the data the page draws once typing pauses. Each point is one estimate."""

from typing import Any

from pycore.base.errors import FieldError
from pycore.base.steps import Steps
from pycore.memory.estimate import Estimate, totals_only
from pycore.memory.setup import image_tokens

POINTS = 9


def _series(values: dict[str, Any], key: str, xs: "list[int]") -> "Steps[dict[str, Any]]":
    rows = []
    for x in xs:
        yield                            # a step: each point is an estimate (pycore/base/steps.py)
        try:
            result = totals_only({**values, key: x})
        except FieldError:
            continue
        parts = {p.key: (p.label, p.bytes) for p in result.breakdown}
        rows.append((x, parts, result.total_bytes))
    keys: dict[str, Any] = {}
    for _, parts, _ in rows:
        for k, (label, _) in parts.items():
            keys.setdefault(k, label)
    return {"x": [x for x, _, _ in rows], "total_bytes": [t for _, _, t in rows],
            "series": [{"key": k, "label": label, "bytes": [parts.get(k, ("", 0))[1] for _, parts, _ in rows]}
                       for k, label in keys.items()]}


def _doubling(start: int, top: int) -> "list[int]":
    """Powers of two from ``start`` up to ``top`` (at most POINTS of them, the last one ``top``)."""
    xs: "list[int]" = []
    x = max(1, start)
    while x < top and len(xs) < POINTS - 1:
        xs.append(x)
        x *= 2
    xs.append(max(top, 1))
    return sorted(set(xs))


def charts(values: dict[str, Any], result: Estimate, answers: dict[str, Any], usable: int) -> "Steps[dict[str, Any]]":
    """{"batch": {...}, "seq": {...}}: x values, one series of bytes per component, the GPU's usable
    bytes and the largest value that fits (from the answers); in steps (pycore/base/steps.py)."""
    if values["mode"] == "infer" and values.get("engine") == "vllm":
        return {}                       # vLLM pre-allocates: its memory does not follow batch or context
    out = {}
    largest_batch = answers.get("max_batch") or 0
    batch_top = max(8, min(4096, 2 * largest_batch), values["batch"])
    unit = answers.get("batch_unit", "sequence")        # what the batch counts: sequences, completions, pairs
    out["batch"] = {**(yield from _series(values, "batch", _doubling(1, batch_top))), "usable_bytes": usable,
                    "largest_fitting": answers.get("max_batch"), "unit_one": unit, "unit_many": unit + "s",
                    "label": "concurrent sequences" if values["mode"] == "infer" else "micro-batch per GPU"}
    if result.model.kind != "generic":
        # the text's positions: the model's less those its images take
        limit = result.model.max_positions - image_tokens(values) if result.model.max_positions else 1 << 20
        seq_top = min(limit, max(4 * values["seq"], 2 * (answers.get("max_seq") or 0), 4096))
        start = max(128, seq_top >> (POINTS - 1))
        out["seq"] = {**(yield from _series(values, "seq", _doubling(start, seq_top))), "usable_bytes": usable,
                      "largest_fitting": answers.get("max_seq"), "unit_one": "token", "unit_many": "tokens",
                      "label": "prompt tokens" if values["mode"] == "infer" else "sequence length (tokens)"}
    return out
