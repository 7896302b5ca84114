"""Which GPUs an estimate fits on: computed once, after the estimate, from its total bytes."""

from .catalog import gpus as gpu_catalog
from .units import format_bytes

TIGHT = 0.9     # above 90% of a GPU's memory the fit is "tight": fragmentation can tip it over


def gpu_fits(total_bytes: int, chosen: str) -> "list[dict]":
    """Every catalog GPU with its status and headroom: the chosen one first, then by headroom."""
    rows = []
    for gpu_id, gpu in gpu_catalog().items():
        usable = gpu["usable_bytes"]
        status = "fits" if total_bytes <= TIGHT * usable else "tight" if total_bytes <= usable else "no"
        headroom = usable - total_bytes
        rows.append({"id": gpu_id, "name": gpu["name"], "memory_bytes": usable, "fits": total_bytes <= usable,
                     "status": status, "headroom_bytes": headroom, "chosen": gpu_id == chosen,
                     "memory_text": format_bytes(usable)["text"], "headroom_text": format_bytes(headroom)["text"]})
    rows.sort(key=lambda r: (not r["chosen"], -r["headroom_bytes"]))
    return rows
