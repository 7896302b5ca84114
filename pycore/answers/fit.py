"""Which GPUs an estimate fits on: computed once, after the estimate, from its total bytes."""

from functools import lru_cache
from typing import Any

from pycore.base.units import format_bytes
from pycore.model.catalog import gpus as gpu_catalog

TIGHT = 0.9     # above 90% of a GPU's memory the fit is "tight": fragmentation can tip it over


@lru_cache(maxsize=None)
def _usable_text(usable: int) -> str:
    """A catalog GPU's usable memory as text (the same for every keystroke)."""
    return format_bytes(usable)["text"]


WORDS = {"fits": "fits", "tight": "tight", "no": "does not fit"}


def gpu_fit(total_bytes: int, gpu_id: str, chosen: str, refused: str = "") -> dict[str, Any]:
    """One catalog GPU's status and headroom for a total per GPU. ``refused``: why the chosen GPU's engine
    would not start (vLLM's start-up check), which makes it not fit whatever its bytes."""
    gpu = gpu_catalog()[gpu_id]
    usable = gpu["usable_bytes"]
    status = "fits" if total_bytes <= TIGHT * usable else "tight" if total_bytes <= usable else "no"
    why = refused if gpu_id == chosen else ""
    if why:
        status = "no"
    headroom = usable - total_bytes
    verdict = "vLLM would refuse to start" if why else WORDS[status]
    return {"id": gpu_id, "name": gpu["name"], "memory_bytes": usable, "fits": status != "no",
            "status": status, "headroom_bytes": headroom, "chosen": gpu_id == chosen, "why": why,
            "verdict": f"{verdict} on {gpu['name']}",
            "memory_text": _usable_text(usable),
            "headroom_text": f"{format_bytes(abs(headroom))['text']} {'free' if headroom >= 0 else 'short'}"}


def gpu_fits(total_bytes: int, chosen: str, refused: str = "") -> "list[dict[str, Any]]":
    """Every catalog GPU with its status and headroom: the chosen one first, then by headroom."""
    rows = [gpu_fit(total_bytes, gpu_id, chosen, refused) for gpu_id in gpu_catalog()]
    rows.sort(key=lambda r: (not r["chosen"], -r["headroom_bytes"]))
    return rows
