"""The formulas behind an estimate (the page's "How this is computed"): each pool's own record, formatted.

Every row comes from a record the estimate made where it did the arithmetic (pycore.memory.pools), so the
formula, the substituted numbers and the bytes always agree.
"""

from pycore.base.units import format_bytes

OVERHEAD_KEYS = ("overhead", "allocator_cache", "cuda_context", "nccl_buffers")


def _row(record: dict, live: bool) -> dict:
    return {"name": record["label"], "key": record["key"], "formula": record["formula"],
            "substituted": record["substituted"], "symbols": record.get("symbols", ""), "bytes": record["bytes"],
            "source": record["source"], "live_at_peak": live, **format_bytes(record["bytes"])}


def formulas(result: dict) -> "list[dict]":
    """Every pool of the estimate (those live at the peak first), the activation terms, the overhead and
    the peak, as {name, formula, substituted, bytes, text, source} rows."""
    at_peak = {row["key"] for row in result["breakdown"]}
    rows = [_row(p, True) for p in result["pools"] if p["key"] in at_peak and p["bytes"]
            and p["key"] not in OVERHEAD_KEYS]
    for term in result.get("activation_terms", ()):
        rows.append({"name": "  · " + term["name"], "key": "activation_term", "formula": term["symbols"],
                     "substituted": term["substituted"], "symbols": "b = " + term["formula"] + "; t = tensor-parallel "
                     "degree; T = tokens; Ls = layers", "bytes": term["bytes"], "source": term["source"],
                     "live_at_peak": True, **format_bytes(term["bytes"])})
    rows += [_row(p, False) for p in result["pools"] if p["key"] not in at_peak and p["bytes"]]
    rows += [_row(p, False) for p in result.get("host_pools", ()) if p["bytes"]]
    rows += [_row(r, True) for r in result["breakdown"] if r["key"] in OVERHEAD_KEYS]
    moments = result["moments"]
    many = len(moments) > 1
    rows.append({"name": "Peak", "key": "peak",
                 "formula": ("max(" + ", ".join(moments) + ")") if many else next(iter(moments)),
                 "substituted": ("max(" + ", ".join(f"{v:,}" for v in moments.values()) + ")") if many
                 else f"{result['peak_bytes']:,}",
                 "symbols": "each moment: the sum of the pools live in it", "bytes": result["peak_bytes"],
                 "source": f"the peak is at {result['peak_moment']}", "live_at_peak": True,
                 **format_bytes(result["peak_bytes"])})
    return rows
