"""What fits on my GPUs: every preset under one workload on a number of GPUs of one kind.

Each preset gets the layout a user would pick for that many GPUs: for training, FSDP FULL_SHARD (ZeRO-3)
over all of them; for serving, the largest tensor-parallel degree inside a node that divides the heads,
then pipeline stages for the rest. One estimate each (totals only).
"""

from typing import TYPE_CHECKING, Any

from pycore.answers.answer import NODE, _valid_tp
from pycore.answers.fit import fit_status, sizes_itself
from pycore.base.errors import FieldError
from pycore.base.units import format_bytes
from pycore.memory.estimate import totals_only
from pycore.model.catalog import architecture, gpus, models

if TYPE_CHECKING:
    from pycore.model.architecture import Architecture


def layout_for(values: dict[str, Any], arch: "Architecture", count: int) -> dict[str, Any]:
    """The inputs that spread one model over ``count`` GPUs."""
    if count <= 1:
        return {}
    if values["mode"] == "train":
        return {"fsdp": "FULL_SHARD", "dp": count}
    tp = max(t for t in _valid_tp(values, arch.heads, arch.kv_heads) if t <= min(count, NODE) and count % t == 0)
    pp = count // tp
    return {"tp": tp, "pp": pp} if 1 < pp <= arch.layers else {"tp": tp}


def what_fits(values: dict[str, Any], count: int) -> "list[dict[str, Any]]":
    """Every preset with its total per GPU on ``count`` GPUs of ``values['gpu']``, most headroom first.

    Args:
        values: parsed inputs (the workload: mode, batch, seq, precision, ...); the model is replaced.
        count: GPUs available.
    Returns:
        rows of id, params, layout (the inputs it used), total_bytes, headroom_bytes, status, query.
    """
    usable = gpus()[values["gpu"]]["usable_bytes"]
    rows = []
    for model_id, entry in models().items():
        arch = architecture(model_id)
        if arch.kind == "generic" and values["mode"] == "infer":
            continue
        layout = layout_for(values, arch, count) if arch.kind != "generic" or values["mode"] == "train" else {}
        try:
            # a checkpoint's bytes (weight_bytes) are its own model's: every other preset is estimated from its parameters
            result = totals_only({**values, "model": model_id, "config": None, "params": None, "weight_bytes": 0,
                                  "weight_files": None, **layout})
        except FieldError as error:
            rows.append({"id": model_id, "params": entry["params"], "layout": layout, "total_bytes": None,
                         "error": str(error), "status": "no", "headroom_bytes": None})
            continue
        total = result.total_bytes
        status = fit_status(total, usable, sizes_itself(values))
        length = values["seq"] + (values["new_tokens"] if values["mode"] == "infer" else 0)
        note = f"beyond its {arch.max_positions:,} positions" if arch.max_positions and length > arch.max_positions \
            else ""
        if result.refused:
            status, note = "no", result.refused
        rows.append({"id": model_id, "note": note, "params": entry["params"], "layout": layout, "total_bytes": total,
                     "total_text": format_bytes(total)["text"], "headroom_bytes": usable - total,
                     "status": status, "query": [["model", model_id]] + [[k, str(v)] for k, v in layout.items()]})
    rows.sort(key=lambda r: (r["headroom_bytes"] is None, -(r["headroom_bytes"] or 0)))
    return rows
