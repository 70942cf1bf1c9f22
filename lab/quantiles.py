"""The lab's one median and percentile rule, for every module that summarizes plain numbers (censored results go
through lab/stats/stats.py's `quantile`, which places and interpolates by the same two functions below).

The q-quantile (0 <= q <= 1; the p-th percentile is q = p/100) of n values sorted x[0] <= ... <= x[n-1] lies at
position h = (n - 1) q: x[j] + (h - j) (x[j+1] - x[j]) with j = floor(h), linear interpolation between the two
order statistics around it (Hyndman & Fan's type 7: numpy's default, R's default, Python's
`statistics.quantiles(method="inclusive")`). The median is the 0.5 quantile: the middle value for odd n, the mean of
the two middle values for even n. The interpolation is computed in numpy's form, so a quantile equals
`numpy.quantile`'s to the last bit; between infinite values it takes the limit (a median of (x, inf) is inf, of
(-inf, inf) nan, as numpy.median gives). No quantile of no values: ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")


def position(n: int, q: float) -> tuple[int, float]:
    """(j, w): the q-quantile of n sorted values lies at x[j] + w (x[j+1] - x[j]), 0 <= w < 1."""
    if n < 1 or not 0.0 <= q <= 1.0:
        raise ValueError(f"no {q}-quantile of {n} values (needs n >= 1 and 0 <= q <= 1)")
    h = (n - 1) * q
    j = math.floor(h)
    return j, h - j


def lerp(a: float, b: float, w: float) -> float:
    """a + w (b - a), in numpy's form (exact at both ends); the limit when a or b is infinite."""
    if w == 0 or a == b:
        return a
    if math.isinf(a) or math.isinf(b):
        return a + b
    return a + (b - a) * w if w < 0.5 else b - (b - a) * (1 - w)


def quantile(values: Iterable[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) of the values by the rule above."""
    xs = sorted(float(v) for v in values)
    j, w = position(len(xs), q)
    return xs[j] if j + 1 >= len(xs) else lerp(xs[j], xs[j + 1], w)


def quantiles(values: Iterable[float], qs: Iterable[float]) -> list[float]:
    """Several quantiles of the same values (sorted once)."""
    xs = sorted(float(v) for v in values)
    return [quantile(xs, q) for q in qs]


def median(values: Iterable[float]) -> float:
    """The 0.5 quantile: the middle value, or the mean of the two middle ones."""
    return quantile(values, 0.5)


def middle(items: Sequence[T]) -> T:
    """The item at the median's rank in an already ordered sequence (the lower of the two middle ones for even n):
    a run that shows the median, where a statistic would be between two runs."""
    if not items:
        raise ValueError("no middle of nothing")
    return items[(len(items) - 1) // 2]
