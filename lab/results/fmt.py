"""How the reports print a statistic: three significant digits, and a censored estimate as the bound it has."""

from __future__ import annotations

import math
from collections.abc import Callable

from lab.results.stats import CI, Est

NA = "-"  # a missing value
EN = "\u2013"  # en dash between the ends of a range


def sig3(v: float | None) -> str:
    """Three significant digits without exponent notation: 18.6, 0.0123, 4.30, 1234."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return NA
    if v == 0 or math.isinf(v):
        return f"{v:g}"
    decimals = max(0, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{decimals}f}"


def fmt_est(e: Est | None, scale: float = 1.0, show: Callable[[float], str] = sig3) -> str:
    """An estimate, or the bound censoring leaves of it: "18.6", ">120" (above 120), "<0.667", ">?" (bound unknown),
    "?" (not determinable). `show` prints the number (default: three significant digits)."""
    if e is None:
        return NA
    if e.bound == "?":
        return "?"
    shown = "?" if e.value is None else show(e.value * scale)
    return f"{e.bound}{shown}"


def fmt_ci(ci: CI | None, scale: float = 1.0, show: Callable[[float], str] = sig3) -> str:
    """A CI's two ends, each as fmt_est prints it: "1.00\u2013>60.0", "<0.31\u201311.45"."""
    return f"{fmt_est(ci.lo, scale, show)}{EN}{fmt_est(ci.hi, scale, show)}" if ci else NA


def fmt_level(ci: CI | None) -> str:
    """The coverage a CI actually has: "93.8 %", "96.9 %"."""
    return f"{ci.level * 100:.1f} %" if ci else NA
