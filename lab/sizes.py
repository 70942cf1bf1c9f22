"""Object sizes: '10kB' = 10 000 bytes, '1MiB' = 1 048 576 bytes, '123' = 123 bytes."""

from __future__ import annotations

import re

from lab.errors import UsageError

_UNITS = {
    "": 1, "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9,
    "kib": 2**10, "mib": 2**20, "gib": 2**30,
}
MAX_SIZE = 4 * 2**30
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_ALLOWED = "a byte count with an optional unit: B, kB, MB, GB (powers of 10) or KiB, MiB, GiB (powers of 2)"


def parse_size(text: str, minimum: int = 1) -> int:
    """Parse a size such as '10MB' into bytes (at least `minimum`); raises UsageError naming the value otherwise."""
    m = _PATTERN.match(text)
    unit = m.group(2).lower() if m else ""
    if not m or unit not in _UNITS:
        raise UsageError(f"invalid size {text!r}: expected {_ALLOWED}, e.g. 10kB, 1MB, 10MiB")
    value = float(m.group(1)) * _UNITS[unit]
    if value != int(value):
        raise UsageError(f"invalid size {text!r}: it is not a whole number of bytes")
    if value < minimum:
        raise UsageError(f"invalid size {text!r}: at least {minimum} byte{'s' if minimum != 1 else ''} is allowed")
    if value > MAX_SIZE:
        raise UsageError(f"invalid size {text!r}: at most {format_size(MAX_SIZE)} is allowed")
    return int(value)


def format_size(n: int) -> str:
    """Human-readable size with decimal units (the lab's objects are named in decimal units)."""
    for unit, factor in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= factor:
            v = n / factor
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n} B"
