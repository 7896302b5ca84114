"""Quantities that carry their own formula: a value, the formula in symbols, and the same formula with the
user's numbers substituted, built by the same arithmetic so the three cannot disagree.

    >>> p = sym("P", 8_030_261_248); b = num(2)
    >>> q = p * b
    >>> q.value, q.symbols, q.numbers
    (16060522496, 'P × 2', '8,030,261,248 × 2')

Substituted formulas use ×, /, +, −, parentheses and the functions ceil, floor, round and max; integers are
written with thousands separators (digit,digit without a space) and arguments are separated by ", ".
"""

import math
from typing import Callable, Union

Number = Union[int, float]

_ADD, _MUL, _ATOM = 1, 2, 3


def fmt_number(value: Number) -> str:
    """An exact, readable rendering: 1,234,567 for integers, the shortest round-trip form for floats."""
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 2**53):
        return f"{int(value):,}"
    return repr(float(value))


class Q:
    """A quantity: ``value`` now, its formula in ``symbols`` and in ``numbers`` when asked (built lazily,
    so the searches that only need totals pay for arithmetic alone)."""

    __slots__ = ("value", "level", "_symbol", "_op", "_args")

    def __init__(self, value: Number, symbol: "str | None" = None, op: str = "", args: "tuple[Q, ...]" = (),
                 level: int = _ATOM) -> None:
        self.value = value
        self.level = level
        self._symbol = symbol       # a leaf's symbol (None: the number is its own symbol)
        self._op = op               # "+", "−", "×", "/" or a function name for an inner node
        self._args = args

    def _text(self, numbers: bool) -> str:
        if not self._op:
            return fmt_number(self.value) if numbers or self._symbol is None else self._symbol
        parts = [a._text(numbers) for a in self._args]
        if self.level == _ATOM:
            return f"{self._op}({', '.join(parts)})"
        left, right = self._args
        # Left to right as written: a compound right operand keeps its parentheses, so evaluating the
        # text repeats the very float operations that made ``value``.
        ls = f"({parts[0]})" if left.level < self.level else parts[0]
        rs = f"({parts[1]})" if right.level <= self.level else parts[1]
        return f"{ls} {self._op} {rs}"

    @property
    def symbols(self) -> str:
        return self._text(False)

    @property
    def numbers(self) -> str:
        return self._text(True)

    def _bin(self, other: "Q", sign: str, level: int, value: Number) -> "Q":
        return Q(value, None, sign, (self, other), level)

    def __add__(self, other: "Q | Number") -> "Q":
        other = as_q(other)
        return self._bin(other, "+", _ADD, self.value + other.value)

    def __sub__(self, other: "Q | Number") -> "Q":
        other = as_q(other)
        return self._bin(other, "−", _ADD, self.value - other.value)

    def __mul__(self, other: "Q | Number") -> "Q":
        other = as_q(other)
        return self._bin(other, "×", _MUL, self.value * other.value)

    def __truediv__(self, other: "Q | Number") -> "Q":
        other = as_q(other)
        return self._bin(other, "/", _MUL, self.value / other.value)

    def __repr__(self) -> str:
        return f"Q({self.value!r}, {self.symbols!r}, {self.numbers!r})"


def as_q(value: "Q | Number") -> Q:
    return value if isinstance(value, Q) else num(value)


def num(value: Number) -> Q:
    """A plain number (its own symbol); 4.0 counts as the integer 4."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    return Q(value)


def sym(symbol: str, value: Number) -> Q:
    """A named quantity: ``symbol`` in the formula, its value in the substituted one."""
    return Q(value, symbol)


def _call(name: str, args: "tuple[Q, ...]", value: Number) -> Q:
    return Q(value, None, name, args, _ATOM)


def ceil(q: Q) -> Q:
    return q if isinstance(q.value, int) else _call("ceil", (q,), math.ceil(q.value))


def floor(q: Q) -> Q:
    """Integer division's result, written floor(...)."""
    return q if isinstance(q.value, int) else _call("floor", (q,), math.floor(q.value))


def rnd(q: Q) -> Q:
    """Python's round() (half to even), written round(...)."""
    return q if isinstance(q.value, int) else _call("round", (q,), round(q.value))


def maximum(*qs: "Q | Number") -> Q:
    items = tuple(as_q(q) for q in qs)
    if len(items) == 1:
        return items[0]
    return _call("max", items, max(q.value for q in items))


def split(q: Q, symbol: str, ways: int, rounding: "Callable[[Q], Q] | None" = ceil) -> Q:
    """``q`` divided ``ways`` ways (rounded up unless told; None keeps the fraction), written only when it
    divides at all."""
    if ways == 1:
        return q
    return rounding(q / sym(symbol, ways)) if rounding else q / sym(symbol, ways)
