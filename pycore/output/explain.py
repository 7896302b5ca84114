"""The formulas behind an estimate (the page's "How this is computed"): each pool's own record, formatted.

Every row comes from a record the estimate made where it did the arithmetic (pycore.memory.pools), so the
formula, the substituted numbers and the bytes always agree.
"""

from typing import Any

from pycore.base.units import format_bytes
from pycore.memory.estimate import Estimate
from pycore.memory.pools import Pool

OVERHEAD_KEYS = ("overhead", "allocator_cache", "cuda_context", "nccl_buffers")
Row = dict[str, Any]


def _row(pool: Pool, live: bool) -> Row:
    return {"name": pool.label, "key": pool.key, "formula": pool.formula, "substituted": pool.substituted,
            "symbols": pool.symbols, "bytes": pool.bytes, "source": pool.source, "live_at_peak": live,
            **format_bytes(pool.bytes)}


def _term_row(term: Row) -> Row:
    return {"name": "  · " + term["name"], "key": "activation_term", "formula": term["symbols"],
            "substituted": term["substituted"], "symbols": "b = " + term["formula"] + "; t = tensor-parallel "
            "degree; T = tokens; Ls = layers", "bytes": term["bytes"], "source": term["source"],
            "live_at_peak": True, **format_bytes(term["bytes"])}


def _peak_row(result: Estimate) -> Row:
    moments = result.moments
    many = len(moments) > 1
    return {"name": "Peak", "key": "peak",
            "formula": ("max(" + ", ".join(moments) + ")") if many else next(iter(moments)),
            "substituted": ("max(" + ", ".join(f"{v:,}" for v in moments.values()) + ")") if many
            else f"{result.peak_bytes:,}",
            "symbols": "each moment: the sum of the pools live in it", "bytes": result.peak_bytes,
            "source": f"the peak is at {result.peak_moment}", "live_at_peak": True,
            **format_bytes(result.peak_bytes)}


def formulas(result: Estimate) -> "list[Row]":
    """Every pool of the estimate (those live at the peak first, the activation terms under the activations), the
    overhead and the peak, as {name, formula, substituted, bytes, text, source} rows."""
    at_peak = {pool.key for pool in result.breakdown}
    live = [p for p in result.pools if p.key in at_peak and p.bytes and p.key not in OVERHEAD_KEYS]
    rows = [_row(p, True) for p in live]
    # the activation terms right under the activations' own row (the pool they make up), else after the live pools
    after = next((i + 1 for i, p in enumerate(live) if p.key == "activations"), len(rows))
    rows[after:after] = [_term_row(term) for term in result.activation_terms]
    rows += [_row(p, False) for p in result.pools if p.key not in at_peak and p.bytes]
    rows += [_row(p, False) for p in result.host_pools if p.bytes]
    rows += [_row(p, True) for p in result.breakdown if p.key in OVERHEAD_KEYS]
    return rows + [_peak_row(result)]
