"""What a reader of a sweep's report wants first: one sentence per point and client/server pair, who was faster and
by how much, from the paired ratios the report's table shows (lab/results/stats.py `ratios`: the median of the
per-pair HTTP/3 ÷ TCP time ratios, with its order-statistic CI and the level it has).

A difference is stated only when the CI lies wholly on one side of 1; otherwise the sentence says that none is
shown at this n, with the interval. Why a method was faster is `quiclab explain`'s (docs/explain.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.results.schema import RunRecord
from lab.results.stats import RatioStats, protocol_label, ratios
from lab.results.summary import fmt_ci, fmt_est, fmt_level

HEADLINE_NOTE = ("Per point and client/server pair, from the paired time ratios of the \"HTTP/3 vs TCP\" table below: "
                 "a difference is stated only where the CI of the ratio lies wholly on one side of 1; why a method "
                 "was faster: `quiclab explain` (docs/explain.md).")


def sentence(r: RatioStats) -> str:
    """One comparison as a sentence: "loss=5%, curl→nginx: HTTP/3 was 4.4 % faster than HTTP/1.1 (...)"."""
    head = f"{r.point_label}, {r.client}\u2192{r.server}: "
    h3, tcp = protocol_label(r.numerator), protocol_label(r.denominator)
    ratio, ci = r.time_ratio, r.time_ci
    if ratio is None or r.n_pairs == 0:
        return head + f"no pair of {h3} and {tcp} results to compare"
    detail = (f"time ratio {fmt_est(ratio)}, CI {fmt_ci(ci)} ({fmt_level(ci)}), {r.n_pairs} pairs" if ci
              else f"time ratio {fmt_est(ratio)}, {r.n_pairs} pair{'s' if r.n_pairs != 1 else ''}: no CI")
    lo = ci.lo.value if ci and ci.lo.bound in ("", ">") else None
    hi = ci.hi.value if ci and ci.hi.bound in ("", "<") else None
    if hi is not None and hi < 1 and ratio.value is not None:
        return head + f"{h3} was {(1 - ratio.value) * 100:.3g} % faster than {tcp} ({detail})"
    if lo is not None and lo > 1 and ratio.value is not None:
        return head + f"{h3} was {(ratio.value - 1) * 100:.3g} % slower than {tcp} ({detail})"
    return head + f"no difference between {h3} and {tcp} shown at this n ({detail})"


def sentences(records: Sequence[RunRecord]) -> list[str]:
    return [sentence(r) for r in ratios(records)]
