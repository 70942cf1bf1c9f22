"""Units for link parameters: rates in bit/s, times in seconds, percentages. Errors name the value."""

from __future__ import annotations

import re

from lab.errors import UsageError

_NUM = r"(\d+(?:\.\d*)?|\.\d+)"
_RATE = re.compile(rf"^{_NUM}\s*([kmgt]?)(bit|bps|b)?(/s)?$", re.IGNORECASE)
_TIME = re.compile(rf"^{_NUM}\s*(us|µs|ms|s|min)?$", re.IGNORECASE)
_PCT = re.compile(rf"^{_NUM}\s*(%)?$")
_RATE_PREFIX = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_TIME_UNIT = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0, None: 1e-3}


def parse_rate(text: str, what: str = "rate") -> int:
    """'10mbit', '10Mbit/s', '500kbit', '1gbit', '2000000' (bit/s) -> bit/s. Must be > 0."""
    m = _RATE.match(text.strip())
    if not m:
        raise UsageError(f"invalid {what} {text!r}: expected a rate such as 500kbit, 10mbit, 1gbit (bit/s)")
    value = float(m.group(1)) * _RATE_PREFIX[m.group(2).lower()]
    if value < 1:
        raise UsageError(f"invalid {what} {text!r}: must be more than 0 bit/s")
    if value > 10**12:
        raise UsageError(f"invalid {what} {text!r}: at most 1000gbit is allowed")
    return round(value)


def parse_duration(text: str, what: str = "time") -> float:
    """'80ms', '1.5s', '500us', '20' (ms) -> seconds. Must be >= 0."""
    t = text.strip()
    if t.startswith("-"):
        raise UsageError(f"invalid {what} {text!r}: must not be negative")
    m = _TIME.match(t)
    if not m:
        raise UsageError(f"invalid {what} {text!r}: expected a time such as 500us, 20ms, 1.5s (plain numbers are ms)")
    unit = m.group(2).lower() if m.group(2) else None
    seconds = float(m.group(1)) * _TIME_UNIT[unit]
    if seconds > 60:
        raise UsageError(f"invalid {what} {text!r}: at most 60 s is allowed")
    return seconds


def parse_percent(text: str, what: str = "loss") -> float:
    """'1%', '0.1%', '5' (percent) -> probability in [0, 1]."""
    t = text.strip()
    if t.startswith("-"):
        raise UsageError(f"invalid {what} {text!r}: must be between 0% and 100%")
    m = _PCT.match(t)
    if not m:
        raise UsageError(f"invalid {what} {text!r}: expected a percentage such as 0.1%, 1%, 5%")
    pct = float(m.group(1))
    if pct > 100:
        raise UsageError(f"invalid {what} {text!r}: must be between 0% and 100%")
    return pct / 100


def format_rate(bps: float | None) -> str:
    if bps is None:
        return "unlimited"
    for unit, f in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bps >= f:
            return f"{bps / f:g} {unit}"
    return f"{bps:g} bit/s"


def format_duration(s: float) -> str:
    if s == 0:
        return "0"
    if s < 1e-3:
        return f"{s * 1e6:g} µs"
    if s < 1:
        return f"{s * 1e3:g} ms"
    return f"{s:g} s"
