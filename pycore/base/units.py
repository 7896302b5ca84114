"""Parsing and formatting of byte sizes and counts.

Bytes are exact integers everywhere inside pycore. GiB (2**30) is the display unit; GB (10**9) is what
GPU vendors print on the box, so both are offered.
"""

import math
import re
from typing import TypedDict

MIB = 2**20
GIB = 2**30
TIB = 2**40
GB = 10**9
TIB_FROM_BYTES = 1024 * GIB     # format_bytes shows TiB from here up (the page reads it from Python)

_BYTE_UNITS = {
    "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": MIB, "gib": GIB, "tib": TIB,
}
_COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
# ASCII digits only: Python's \d, int() and float() also read other scripts' digits ("٣", "१०२४"), which
# would be estimated as numbers while the field kept showing them.
_NUMBER = r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?"


def _finite_number(text: str) -> float:
    match = re.fullmatch(_NUMBER, text)
    if not match:
        raise ValueError(text)
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(text)
    return value


def parse_number(text: str) -> float:
    """A finite decimal number written with the ASCII digits 0-9 ('0.4', '-1.5', '2e3'); ValueError on
    anything else, other scripts' digits, '1_000', 'nan' and 'inf' included."""
    text = text.strip()
    sign, body = (-1.0, text[1:]) if text.startswith("-") else (1.0, text.removeprefix("+"))
    return sign * _finite_number(body)


def parse_whole(text: str) -> int:
    """A whole number written with the ASCII digits 0-9 only ('42'); ValueError on anything else."""
    if not (text.isascii() and text.isdigit()):
        raise ValueError(text)
    return int(text)


def foreign_digits(text: str) -> bool:
    """Whether ``text`` holds digits other than the ASCII 0-9 (Arabic-Indic, Devanagari, full-width...)."""
    return any(c.isdigit() and not c.isascii() for c in text)


def printable(text: str, limit: "int | None" = None) -> str:
    """User text made safe to echo (a terminal, the page, a CSV cell): at most ``limit`` characters, each one
    that does not print as itself shown as '?' — control characters (a carriage return, an escape
    sequence), bidirectional and other format controls (U+202E, which reverses the rest of a line; U+200B),
    line separators, unassigned and private-use code points (str.isprintable: categories C and Z but the
    space)."""
    text = text[:limit]
    return text if text.isprintable() else "".join(c if c.isprintable() else "?" for c in text)


def parse_size(text: str) -> int:
    """Parse '2GiB', '512 MiB', '1.5e9', '0.215GiB' into an exact number of bytes.

    A bare number is bytes. Raises ValueError on anything else.
    """
    match = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([A-Za-z]*)\s*", text)
    if not match:
        raise ValueError(text)
    number, unit = match.group(1).lower(), match.group(2).lower() or "b"
    if unit not in _BYTE_UNITS:
        raise ValueError(text)
    return round(_finite_number(number) * _BYTE_UNITS[unit])


def parse_count(text: str) -> int:
    """Parse '7B', '350M', '7e9', '7000000000', '1.5k' into an integer count."""
    match = re.fullmatch(r"\s*([0-9.eE+-]+?)\s*([kKmMbBtT]?)\s*", text)
    if not match:
        raise ValueError(text)
    return round(_finite_number(match.group(1).lower()) * _COUNT_SUFFIXES[match.group(2).lower()])


def gib(num_bytes: float) -> float:
    """Bytes as GiB (2**30), a float for display only."""
    return num_bytes / GIB


def format_gib(num_bytes: float, digits: int = 2) -> str:
    return f"{num_bytes / GIB:,.{digits}f} GiB"


def format_count(count: float) -> str:
    """A parameter count in the short form people write: 8.03B, 124.4M."""
    for suffix, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if abs(count) >= scale:
            return f"{count / scale:.3g}{suffix}" if count / scale < 100 else f"{count / scale:.4g}{suffix}"
    return str(count)


class ByteTexts(TypedDict):
    text: str           # GiB, or TiB from TIB_FROM_BYTES up
    gb_text: str        # the vendors' GB


def format_bytes(num_bytes: float) -> ByteTexts:
    """The one display form of a byte count: GiB with separators (TiB above 1,024 GiB), and the vendors'
    GB beside it (always GB, the unit on the box)."""
    binary = f"{num_bytes / TIB:,.2f} TiB" if abs(num_bytes) >= TIB_FROM_BYTES else f"{num_bytes / GIB:,.2f} GiB"
    decimal = f"{num_bytes / GB:,.2f} GB"
    return {"text": binary, "gb_text": decimal}


def plural(count: int, noun: str) -> str:
    """"1 GPU", "2 GPUs"."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def duration_text(hours: "float | None") -> str:
    """Hours under two days, days beyond."""
    if hours is None:
        return ""
    return f"{hours:,.1f} hours" if hours < 48 else f"{hours / 24:,.1f} days"
