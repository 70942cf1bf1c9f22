"""What a reader of a sweep's report wants first: one sentence per point and client/server pair, who was faster and
by how much, by the one comparison rule of `quiclab compare` and the atlas (lab/stats/verdict.py `judge_runs`:
TCP as A, HTTP/3 as B; the median of the per-pair HTTP/3 ÷ TCP time ratios with its sign-based CI where every run
has its partner over the same link seed, else the unpaired Hodges-Lehmann estimate, and says so).

A difference is stated only when the CI lies wholly outside the ±10 % band, equivalence only when it lies wholly
inside; otherwise the sentence says there is no verdict at this n, with the interval. Why a method was faster is
`quiclab explain`'s (docs/explain.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.report.summary import sig3
from lab.results.schema import RunRecord
from lab.stats.stats import group_records, protocol_label
from lab.stats.verdict import Bounded, Judged, Margins, fmt_bounded, fmt_ci, fmt_level, judge_runs

HEADLINE_NOTE = ("Per point and client/server pair, HTTP/3 against each TCP protocol by the rule `quiclab compare` "
                 "uses (docs/results.md \"Do two sweeps agree?\"): the median of the per-pair HTTP/3 \u00f7 TCP time "
                 "ratios (a pair: the same repeat over the same link seed) with its sign-based CI at the level it "
                 "has; faster or slower only where that CI lies wholly outside \u00b110 %, equivalent where it lies "
                 "wholly inside, else no verdict. Why a method was faster: `quiclab explain` (docs/explain.md).")


@dataclass(frozen=True)
class Cell:
    """HTTP/3 against one TCP protocol at one point and client/server pair."""

    point_label: str
    client: str
    server: str
    numerator: str  # h3
    denominator: str  # h1 or h2
    judged: Judged


def cells(records: Sequence[RunRecord], margins: Margins | None = None, numerator: str = "h3",
          denominators: Sequence[str] = ("h1", "h2")) -> list[Cell]:
    """Every HTTP/3-vs-TCP comparison of a sweep, in report order (as stats.ratios)."""
    by_cell: dict[tuple[int, str, str], dict[str, list[RunRecord]]] = {}
    for (point, client, server, protocol), rs in group_records(records).items():
        if all(r.status == "unsupported" for r in rs):
            continue  # a combination that cannot run has nothing to compare
        by_cell.setdefault((point, client, server), {})[protocol] = rs
    out = []
    for (_, client, server), groups in by_cell.items():
        if numerator not in groups:
            continue
        for den in denominators:
            if den in groups:
                out.append(Cell(groups[numerator][0].point_label, client, server, numerator, den,
                                judge_runs(groups[den], groups[numerator], margins)))
    return out


def _pct(ratio: Bounded, faster: bool) -> str:
    if ratio.bound or ratio.value is None:
        return ""
    pct = (1 - ratio.value if faster else ratio.value - 1) * 100
    return f"{pct:.0f} % " if pct >= 100 else f"{pct:.3g} % "  # 3 digits, never "1.41e+03 %" (a 15x slower run)


def sentence(c: Cell, margins: Margins | None = None) -> str:
    """One comparison as a sentence: "loss=5%, curl→nginx: HTTP/3 was 44 % faster than HTTP/1.1 (...)"."""
    m = (margins or Margins()).median
    j = c.judged
    head = f"{c.point_label}, {c.client}\u2192{c.server}: "
    h3, tcp = protocol_label(c.numerator), protocol_label(c.denominator)
    if j.ci is None and j.ratio.value is None:
        return head + f"no {h3} and {tcp} results to compare ({j.reason})"
    ratio = Bounded.of(j.ratio)
    n = f"{j.n_pairs} pairs" if j.design == "paired" else f"{j.pairing}"
    ci = f", CI {fmt_ci(j.ci)} ({fmt_level(j.ci)})" if j.ci else ", no CI"
    detail = f"time ratio {fmt_bounded(ratio)}{ci}, {n}"
    band = f"\u00b1{m * 100:.3g} % ({sig3(1 / (1 + m))}\u2013{sig3(1 + m)})"
    if j.verdict == "differs":
        faster = j.ci is not None and j.ci.hi.value is not None and j.ci.hi.value < 1
        word = "faster" if faster else "slower"
        return head + f"{h3} was {_pct(ratio, faster)}{word} than {tcp} ({detail}; CI wholly outside {band})"
    if j.verdict == "equivalent":
        return head + f"{h3} and {tcp} equivalent within {band} ({detail})"
    return head + f"no verdict between {h3} and {tcp} at this n ({detail}; {j.reason})"


def sentences(records: Sequence[RunRecord], margins: Margins | None = None) -> list[str]:
    return [sentence(c, margins) for c in cells(records, margins)]
