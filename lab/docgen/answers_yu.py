"""Yu's open questions (seed 001), answered from committed folders (lab/docgen/answers.py assembles them).

3. **The loss + delay cell across sizes, per sender pair**: Yu's headline (lines 118-123) is that at 5 % loss and
   +200 ms every QUIC client clearly beats every TCP one, more so as the object grows. Per sender pair (QUIC's
   sender vs TCP's, read back from the runs) and size: QUIC/TCP time by the one rule and the lab's direction. The
   claim **holds** for a pair when the lab says QUIC faster at every size and the ratio does not rise from one size
   to the next larger (its point estimates); it holds **from** a size when that is so for that size and every larger
   one (at least the two largest), but not for the smaller ones; the folders: yu (today's defaults), yu-senders
   (curl -> nginx-sid, sender native or cubic) and yu-senders-quic (gtlsclient -> ngtcp2 against curl -> nginx-sid,
   both senders CUBIC or both BBR, and crossed).
4. **Reuse savings**: yu-reuse runs five requests on one connection (reuse) and on five connections (new). The
   saving per request is (new - reuse) / requests: the Hodges-Lehmann shift of the two time samples (the median of
   every pairwise difference) with its exact Mann-Whitney interval at its level (verdict.hodges_lehmann; the two
   workloads are different points, so different link seeds: unpaired), divided by the number of requests; censored
   runs enter at their own end as bounds.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from lab.docgen.answer_stats import (
    MARGINS,
    Pick,
    compare,
    direction,
    est_text,
    folder_ref,
    judged_cell,
    median_text,
    n_text,
    not_measured,
    runs_of,
    sender,
    times,
)
from lab.docgen.atlas import Renderer
from lab.report.summary import md_table
from lab.results.schema import RunRecord
from lab.sizes import format_size, parse_size
from lab.stats.fmt import EN
from lab.stats.stats import Est, Obs
from lab.stats.verdict import Bounded, Judged, RatioCI, hodges_lehmann

YU, SENDERS, SENDERS_QUIC, REUSE = "yu", "yu-senders", "yu-senders-quic", "yu-reuse"
#: Yu's cell (lines 118-123): 5 % loss, +200 ms, at the lab's sizes (1 kB stands for 0 B)
LOSS_PCT, RTT_S = 5.0, 0.2
SIZES = tuple(parse_size(s) for s in ("1kB", "100kB", "1MB", "10MB"))


@dataclass(frozen=True)
class SenderPair:
    quic: Pick
    tcp: Pick
    configured: tuple[str, str]  # the senders as configured (shown until the folder is committed)


def _sid(preset: str, protocol: str, cc: str) -> Pick:
    return Pick(preset, protocol, server="nginx-sid", tokens=(f"cc={cc}",))


def _ngtcp2(cc: str) -> Pick:
    return Pick(SENDERS_QUIC, "h3", "gtlsclient", "ngtcp2", (f"cc={cc}",))


PAIRS: tuple[SenderPair, ...] = (
    SenderPair(Pick(YU, "h3", "chromium"), Pick(YU, "h2", "chromium"), ("newreno", "bbr")),
    SenderPair(Pick(YU, "h3"), Pick(YU, "h2"), ("newreno", "bbr")),
    SenderPair(Pick(YU, "h3", "gtlsclient", "ngtcp2"), Pick(YU, "h2"), ("cubic", "bbr")),
    SenderPair(_sid(SENDERS, "h3", "native"), _sid(SENDERS, "h2", "native"), ("cubic", "bbr")),
    SenderPair(_sid(SENDERS, "h3", "native"), _sid(SENDERS, "h2", "cubic"), ("cubic", "cubic")),
    SenderPair(_ngtcp2("cubic"), _sid(SENDERS_QUIC, "h2", "cubic"), ("cubic", "cubic")),
    SenderPair(_ngtcp2("bbr"), _sid(SENDERS_QUIC, "h2", "bbr"), ("bbr", "bbr")),
    SenderPair(_ngtcp2("cubic"), _sid(SENDERS_QUIC, "h2", "bbr"), ("cubic", "bbr")),
    SenderPair(_ngtcp2("bbr"), _sid(SENDERS_QUIC, "h2", "cubic"), ("bbr", "cubic")),
)


def _where(p: Pick) -> str:
    return f"{p.method}{' ' + ' '.join(p.tokens) if p.tokens else ''}"


def pair_label(pair: SenderPair, quic: Sequence[RunRecord], tcp: Sequence[RunRecord]) -> str:
    q = sender(quic, pair.configured[0] + " (configured)")
    t = sender(tcp, pair.configured[1] + " (configured)")
    folders = ", ".join(dict.fromkeys(folder_ref(p.preset) for p in (pair.quic, pair.tcp)))
    return f"QUIC {q} ({_where(pair.quic)}) vs TCP {t} ({_where(pair.tcp)}), {folders}"


def holds(cells: Sequence[Judged | None]) -> bool:
    """"QUIC clearly better, more so with size": QUIC faster at every size, the ratio not rising with size."""
    if not cells or any(j is None or direction(j) != "QUIC faster" for j in cells):
        return False
    values = [j.ratio.value for j in cells if j is not None]
    if any(v is None for v in values):
        return False
    return all(b <= a for a, b in itertools.pairwise(values))  # type: ignore[operator]


def holds_from(cells: Sequence[Judged | None]) -> int | None:
    """The first size index from which the claim holds for every larger size too (0: at every size), at least the
    two largest sizes; None: not even there."""
    for i in range(max(len(cells) - 1, 0)):
        if holds(cells[i:]):
            return i
    return None


def sender_row(r: Renderer, pair: SenderPair) -> tuple[list[str], bool | None, int | None]:
    """The pair's row, whether the claim holds (None: a folder not committed yet) and from which size it holds."""
    cells: list[Judged | None] = []
    seen_q: list[RunRecord] = []
    seen_t: list[RunRecord] = []
    for size in SIZES:
        q = runs_of(r, pair.quic, size=size, rtt_s=RTT_S, loss_pct=LOSS_PCT)
        t = runs_of(r, pair.tcp, size=size, rtt_s=RTT_S, loss_pct=LOSS_PCT)
        if q is None or t is None:
            missing = pair.quic.preset if q is None else pair.tcp.preset
            return [pair_label(pair, [], []), *[not_measured(missing)] * len(SIZES), "-"], None, None
        seen_q += q
        seen_t += t
        cells.append(compare(q, t))
    ok, start = holds(cells), holds_from(cells)
    said = "yes" if ok else f"from {format_size(SIZES[start])}" if start is not None else "no"
    return [pair_label(pair, seen_q, seen_t), *(judged_cell(j) for j in cells), said], ok, start


def senders_answer(r: Renderer) -> list[str]:
    rows = [sender_row(r, p) for p in PAIRS]
    measured = [(row, ok, start) for row, ok, start in rows if ok is not None]
    held = [row[0] for row, ok, _ in measured if ok]
    larger = [f"{row[0]} (from {format_size(SIZES[start])})" for row, ok, start in measured
              if not ok and start is not None]
    waiting = sorted({s.preset for (_, ok, _), p in zip(rows, PAIRS, strict=True) if ok is None
                      for s in (p.quic, p.tcp) if r.folder(s.preset) is None})
    lead = (f"At {LOSS_PCT:g} % loss and +{RTT_S * 1000:g} ms (Yu's lines 118-123), per sender pair and size: "
            f"QUIC/TCP time by the one rule. \"QUIC clearly better, more so with size\" holds ")
    lead += ("under " + "; ".join(held) + "." if held else f"under none of the {len(measured)} measured sender "
             "pairs.")
    if larger:
        lead += " It holds for the larger objects only under " + "; ".join(larger) + "."
    if waiting:
        lead += " Not yet measured: " + ", ".join(f"{folder_ref(w)} (`bash scripts/atlas.sh {w}`)"
                                                  for w in waiting) + "."
    cols = ["sender pair (read back), folders", *(format_size(s) for s in SIZES), "holds?"]
    return [lead, "", md_table((cols, [row for row, _, _ in rows])), ""]


# ---------------------------------------------------------------------------------------------------------------
# Reuse savings

#: Yu's "~50 ms" (line 78) was over a real path; 35 ms is the lab's stand-in for its base RTT (yu-reuse, yu-rtt35)
REUSE_RTT_S = 0.035
REUSE_SIZES = ("1kB", "100kB")
_COUNT = re.compile(r"^[a-z]+:(\d+)x")


def requests(workload: str) -> int | None:
    m = _COUNT.match(workload)
    return int(m.group(1)) if m else None


def _exp_shifted(obs: Sequence[Obs], base: float) -> list[Obs]:
    return [Obs(None if o.value is None else math.exp(o.value - base), o.rank) for o in obs]


def shift(a: Sequence[Obs], b: Sequence[Obs]) -> tuple[Est, RatioCI | None]:
    """b - a: the Hodges-Lehmann shift (median of every pairwise difference) and its exact Mann-Whitney interval at
    its level. verdict.hodges_lehmann works on log ratios; given exp(x - base) it returns exp(b - a) for each pair,
    so the same ranks give the shift and its interval (censored values keep their side)."""
    values = [o.value for o in (*a, *b) if o.value is not None]
    base = min(values) if values else 0.0
    est, ci = hodges_lehmann(_exp_shifted(a, base), _exp_shifted(b, base), MARGINS.alpha)
    return _log(est), (None if ci is None else ci.model_copy(update={"lo": _log_b(ci.lo), "hi": _log_b(ci.hi)}))


def _log(e: Est) -> Est:
    return Est(math.log(e.value) if e.value else None, e.bound)


def _log_b(b: Bounded) -> Bounded:
    return Bounded.of(_log(b.est()))


def per_request(e: Est, n: int) -> Est:
    return Est(e.value / n if e.value is not None else None, e.bound)


@dataclass(frozen=True)
class Saving:
    protocol: str
    size: str
    new: list[RunRecord]
    reuse: list[RunRecord]
    requests: int | None
    est: Est
    ci: RatioCI | None

    def text(self, per: int | None = None) -> str:
        """The saving divided by `per` (default: the requests) in ms with its interval and level, e.g. "32.4 ms
        [28.0-40.1, 90.5 %]"."""
        n = self.requests if per is None else per
        if not n:
            return "-"
        lo, hi = (est_text(per_request(e.est(), n), 1e3) for e in (self.ci.lo, self.ci.hi)) if self.ci else ("", "")
        ci = f" [{lo}{EN}{hi}, {self.ci.level * 100:.1f} %]" if self.ci else ""
        return f"{est_text(per_request(self.est, n), 1e3)} ms{ci}"


def saving(r: Renderer, protocol: str, size: str) -> Saving | None:
    new = runs_of(r, Pick(REUSE, protocol, tokens=(f"workload=new:5x{size}",)), rtt_s=REUSE_RTT_S, loss_pct=0.0)
    reuse = runs_of(r, Pick(REUSE, protocol, tokens=(f"workload=reuse:5x{size}",)), rtt_s=REUSE_RTT_S,
                    loss_pct=0.0)
    if new is None or reuse is None or not new or not reuse:
        return None
    n = {requests(x.workload) for x in (*new, *reuse)}
    est, ci = shift(times(reuse), times(new))
    return Saving(protocol, size, new, reuse, n.pop() if len(n) == 1 else None, est, ci)


def reuse_answer(r: Renderer) -> list[str]:
    if r.folder(REUSE) is None:
        return [f"{folder_ref(REUSE)}: {not_measured(REUSE)}.", ""]
    rows, firsts = [], {}
    for size in REUSE_SIZES:
        for protocol in ("h3", "h2"):
            s = saving(r, protocol, size)
            if s is None:
                continue
            firsts.setdefault(size, []).append(s)
            rows.append([f"{'HTTP/3' if protocol == 'h3' else 'HTTP/2'} curl→nginx", f"{s.requests or '?'} x {size}",
                         f"{median_text(times(s.new), unit='s')}, n {n_text(s.new)}",
                         f"{median_text(times(s.reuse), unit='s')}, n {n_text(s.reuse)}",
                         judged_cell(compare(s.reuse, s.new), ("reuse", "new")), s.text(),
                         s.text(s.requests - 1) if s.requests else "-"])
    seed = firsts.get(REUSE_SIZES[0], [])
    if not seed:
        return [f"{folder_ref(REUSE)}: no runs at {REUSE_RTT_S * 1000:g} ms RTT without loss.", ""]
    lead = (f"From {folder_ref(REUSE)} at {REUSE_RTT_S * 1000:g} ms RTT, no loss (Yu's \"~50 ms\", line 78, was "
            f"for small objects), {format_size(parse_size(REUSE_SIZES[0]))} objects: reuse saves " + " and ".join(
                f"{s.text()} per request over {'HTTP/3' if s.protocol == 'h3' else 'HTTP/2'} (reuse/new time "
                f"{judged_cell(compare(s.reuse, s.new), ('reuse', 'new'))})" for s in seed)
            + " ((new - reuse) / requests: the Hodges-Lehmann shift of the two samples with its exact interval, "
            "unpaired: the two workloads ran over different link seeds).")
    cols = ["method", "requests", "new connections: median [CI], n", "one connection: median [CI], n",
            "reuse/new time [CI]: lab says", "saving per request [CI, level]",
            "saving per handshake avoided (/ (requests - 1))"]
    return [lead, "", md_table((cols, rows)), ""]
