"""Memory pools as records: each pool knows its bytes, its formula, its source and the moments it is live.

A moment's total is the sum of the pools live in it, so the breakdown at the peak adds up by
construction. ``report`` and ``explain`` only format these records.
"""

from dataclasses import dataclass

from .expr import Q, rnd


@dataclass(frozen=True)
class Pool:
    """One memory pool of one GPU."""

    key: str                    # stable id: weights, gradients, kv_cache, ...
    label: str                  # what people call it
    bytes: int                  # per GPU, exact
    quantity: Q                 # the arithmetic that made ``bytes``: its formula in symbols and in numbers
    symbols: str                # what each symbol stands for, "P = parameters on this GPU; ..."
    source: str                 # where the rule comes from
    moments: tuple[str, ...]    # the moments of the step in which it is live
    group: str = ""             # the component it belongs to (CSV "component" rows); its key by default

    @property
    def formula(self) -> str:
        return self.quantity.symbols

    @property
    def substituted(self) -> str:
        return self.quantity.numbers

    def as_dict(self) -> dict:
        return {"key": self.key, "label": self.label, "bytes": self.bytes, "formula": self.formula,
                "substituted": self.substituted, "symbols": self.symbols, "source": self.source,
                "moments": list(self.moments), "group": self.group or self.key}


def make(key: str, label: str, q: Q, moments: "tuple[str, ...]", source: str, symbols: str = "",
         group: str = "") -> Pool:
    """A Pool from a quantity; the bytes are its rounded value."""
    q = rnd(q)
    return Pool(key, label, int(q.value), q, symbols, source, tuple(moments), group or key)


def moment_totals(pools: "list[Pool]", moments: "tuple[str, ...]") -> dict:
    """Bytes live in each moment: the sum of the pools live in it."""
    return {m: sum(p.bytes for p in pools if m in p.moments) for m in moments}


def live(pools: "list[Pool]", moment: str) -> "list[Pool]":
    """The pools live at ``moment`` with any bytes, in the order they were made."""
    return [p for p in pools if moment in p.moments and p.bytes]


def components(pools: "list[Pool]", moments: "tuple[str, ...]") -> dict:
    """Each group's largest live size over the moments (the size of that component at its largest)."""
    out: dict = {}
    for p in pools:
        out.setdefault(p.group, 0)
    for group in out:
        members = [p for p in pools if p.group == group]
        out[group] = max((sum(p.bytes for p in members if m in p.moments) for m in moments), default=0)
    return out
