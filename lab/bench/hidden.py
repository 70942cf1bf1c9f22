"""The calibration benchmark's pure parts (`quiclab bench calibrate`; issue 35 item 3): the hidden links, drawn at
random from ranges and from the shared LTE traces; the score of one calibration (the held-out sender's throughput
and p50 RTT under load on the fitted link against the hidden one); the summary against the acceptance bounds; the
markdown table docs/benchmarks.md quotes (generated from the results JSON, never typed).

Ranges (each drawn independently, seeded): rate log-uniform 2-50 Mbit/s; RTT log-uniform 10-200 ms; queue
0.5-4 x the BDP (log-uniform, at least 2 packets); random loss 0 with probability 0.4, else log-uniform 0.01-1 %.
The recorded trace pairs come first, so that with at least as many links as pairs every pair is among them; a
trace link keeps its RTT drawn from the range and the lab's default queue. The uplink of a drawn link has the
downlink's rate (and the lab's default queue, no loss): a path's uplink is finite, and the user's upload
(lab/bench/calibration.py) measures it; unlimited, an upload would run as fast as the host can forward."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from lab.quantiles import median
from lab.stats.stats import Obs, median_ci

RATE_BPS = (2e6, 50e6)
RTT_S = (0.010, 0.200)
QUEUE_BDP = (0.5, 4.0)
LOSS = (1e-4, 1e-2)
P_NO_LOSS = 0.4
MTU = 1500
#: Acceptance (issue 35): the held-out sender's throughput within 10 % (median over links), no link beyond 25 %;
#: its p50 RTT under load within 10 % (median over links).
MEDIAN_BOUND = 0.10
WORST_BOUND = 0.25


@dataclass(frozen=True)
class HiddenLink:
    """A link the calibration never sees: `trace` names a recorded pair (then rate, queue and loss are unset)."""

    index: int
    rtt_s: float
    rate_bps: float | None = None
    queue_bytes: int | None = None
    loss: float = 0.0
    trace: str = ""
    #: the uplink's rate (None: unlimited; links drawn before the user's upload was measured had that)
    up_rate_bps: float | None = None

    def tables(self) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """Its scenario settings ([link], [link.down], [link.up]; lab/link/spec.py keys)."""
        common = {"rtt": f"{self.rtt_s * 1000:.3f}ms"}
        if self.trace:
            return {**common, "traces": self.trace}, {}, {}
        down = {"rate": f"{(self.rate_bps or 0) / 1e6:.4f}mbit", "queue": f"{self.queue_bytes}B"}
        if self.loss:
            down["loss"] = f"{self.loss * 100:.4f}%"
        return common, down, ({"rate": f"{self.up_rate_bps / 1e6:.4f}mbit"} if self.up_rate_bps else {})

    def describe(self) -> str:
        if self.trace:
            return f"trace {self.trace}, RTT {self.rtt_s * 1000:.1f} ms"
        if not self.up_rate_bps:
            ways = ""
        elif self.up_rate_bps == self.rate_bps:
            ways = " (both ways)"
        else:
            ways = f" (up {self.up_rate_bps / 1e6:.2f})"
        return (f"{(self.rate_bps or 0) / 1e6:.2f} Mbit/s{ways}, RTT {self.rtt_s * 1000:.1f} ms, queue "
                f"{self.queue_bytes} B, loss {self.loss:.3%}")


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def draw(n: int, seed: int, traces: Sequence[str]) -> list[HiddenLink]:
    """n hidden links: the trace pairs first (as many as fit), then links drawn from the ranges."""
    rng = random.Random(seed)
    out: list[HiddenLink] = []
    for i in range(n):
        rtt = round(_log_uniform(rng, *RTT_S), 4)
        if i < len(traces):
            out.append(HiddenLink(index=i, rtt_s=rtt, trace=traces[i]))
            continue
        rate = round(_log_uniform(rng, *RATE_BPS), -3)
        bdp = rate / 8 * rtt
        queue = max(2 * MTU, round(bdp * _log_uniform(rng, *QUEUE_BDP)))
        loss = 0.0 if rng.random() < P_NO_LOSS else round(_log_uniform(rng, *LOSS), 6)
        out.append(HiddenLink(index=i, rtt_s=rtt, rate_bps=rate, queue_bytes=queue, loss=loss, up_rate_bps=rate))
    return out


@dataclass(frozen=True)
class Score:
    """One hidden link calibrated: the held-out sender on the hidden link and on the fitted one; `fitted` is the
    fitted link's description, `error` the search's own error (its senders), `candidates` the links it measured.
    A calibration that failed has no fitted figures (`why`): it counts as beyond every bound."""

    link: HiddenLink
    hidden_tput_bps: float | None
    hidden_rtt_s: float | None
    fitted_tput_bps: float | None = None
    fitted_rtt_s: float | None = None
    fitted: str = ""
    error: float | None = None
    candidates: int = 0
    why: str = ""

    @property
    def tput_error(self) -> float:
        """|fitted / hidden - 1| of the held-out sender's throughput (inf when either is missing)."""
        return _rel(self.fitted_tput_bps, self.hidden_tput_bps)

    @property
    def rtt_error(self) -> float:
        return _rel(self.fitted_rtt_s, self.hidden_rtt_s)


def _rel(got: float | None, real: float | None) -> float:
    if got is None or real is None or real <= 0:
        return math.inf
    return abs(got / real - 1)


@dataclass(frozen=True)
class Summary:
    links: int
    tput_median: float
    tput_worst: float
    rtt_median: float
    passed: bool
    why: str  # which bound failed ("" when passed)


def summarize(scores: Sequence[Score]) -> Summary:
    """Medians over the links (a failed calibration counts as infinite error: censored, never dropped)."""
    if not scores:
        raise ValueError("no scores")
    t = [s.tput_error for s in scores]
    r = [s.rtt_error for s in scores]
    tm, tw, rm = median(t), max(t), median(r)
    failed = [w for w, bad in ((f"throughput median {tm:.1%} > {MEDIAN_BOUND:.0%}", tm > MEDIAN_BOUND),
                               (f"worst throughput {tw:.1%} > {WORST_BOUND:.0%}", tw > WORST_BOUND),
                               (f"p50 RTT median {rm:.1%} > {MEDIAN_BOUND:.0%}", rm > MEDIAN_BOUND)) if bad]
    return Summary(links=len(scores), tput_median=tm, tput_worst=tw, rtt_median=rm, passed=not failed,
                   why="; ".join(failed))


def to_doc(scores: Sequence[Score], meta: dict[str, Any]) -> dict[str, Any]:
    return {**meta, "scores": [asdict(s) for s in scores]}


def from_doc(doc: dict[str, Any]) -> list[Score]:
    return [Score(**{**s, "link": HiddenLink(**s["link"])}) for s in doc["scores"]]


def _pct(x: float) -> str:
    return "-" if math.isinf(x) else f"{x:.1%}"


def _mbit(x: float | None) -> str:
    return "-" if x is None else f"{x / 1e6:.2f}"


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1000:.1f}"


@dataclass(frozen=True)
class RatioInterval:
    """fitted / hidden of the held-out sender's median throughput, as an interval: each side's order-statistic
    interval of its median (lab.stats.stats.median_ci, at the level it has at its n), the ratio's ends the far ends
    (fitted's low over hidden's high, fitted's high over hidden's low). The two sides' runs are independent, so
    both intervals hold at once with the product of their levels, and then so does this one: `level` is that
    product, a lower bound of its coverage."""

    lo: float
    hi: float
    level: float

    def verdict(self, bound: float = WORST_BOUND) -> str:
        """'within' (the whole interval inside +-bound), 'beyond' (wholly outside) or 'undetermined'."""
        if 1 - bound <= self.lo and self.hi <= 1 + bound:
            return "within"
        if self.lo > 1 + bound or self.hi < 1 - bound:
            return "beyond"
        return "undetermined"


#: A side's runs: each run's throughput (None: the run failed, censored below every measured one).
Runs = Sequence[float | None]


def ratio_interval(hidden: Runs, fitted: Runs) -> RatioInterval | None:
    """The interval of fitted / hidden (RatioInterval); None when a side has fewer than 2 runs or an end of its
    interval is a failed run's (its value unknown)."""
    def ci(runs: Runs) -> tuple[float, float, float] | None:
        c = median_ci([Obs(None, -1) if r is None else Obs(r) for r in runs])
        if c is None or c.lo.value is None or c.hi.value is None or not (c.lo.exact and c.hi.exact):
            return None
        return c.lo.value, c.hi.value, c.level

    h, f = ci(hidden), ci(fitted)
    if h is None or f is None or h[0] <= 0:
        return None
    return RatioInterval(lo=f[0] / h[1], hi=f[1] / h[0], level=h[2] * f[2])


def _signed(x: float) -> str:
    return f"{x - 1:+.1%}" if abs(x - 1) < 0.095 else f"{x - 1:+.0%}"


def _verdicts(got: Sequence[RatioInterval | None]) -> dict[str, int]:
    """How many links each interval verdict has (links without an interval not counted)."""
    return {v: sum(1 for ri in got if ri is not None and ri.verdict() == v)
            for v in ("within", "beyond", "undetermined")}


def markdown(scores: Sequence[Score], held_out: str, runs: dict[int, tuple[Runs, Runs]] | None = None) -> str:
    """Every hidden link with its true and fitted parameters and the held-out sender's figures on both, then the
    summary against the acceptance bounds. With each link's runs (`runs`: index -> (hidden, fitted) throughputs)
    also the interval of fitted / hidden - 1 (RatioInterval) and how many links it places within the worst-link
    bound, beyond it, or neither at that n."""
    intervals = {i: ratio_interval(*r) for i, r in (runs or {}).items()}
    shown = any(v is not None for v in intervals.values())
    extra = (" fitted / hidden - 1 [interval] |", "---|") if shown else ("", "")
    lines = [f"| link | hidden (true) | fitted | {held_out} Mbit/s hidden / fitted | error |{extra[0]} {held_out} p50 "
             "RTT ms hidden / fitted | error | candidates |", f"|---|---|---|---|---|{extra[1]}---|---|---|"]
    for s in scores:
        ri = intervals.get(s.link.index)
        cell = ""
        if shown:
            ratio = (s.fitted_tput_bps or 0) / (s.hidden_tput_bps or 1)
            point = "-" if math.isinf(s.tput_error) else f"{ratio - 1:+.1%}"
            cell = f" {point} [{_signed(ri.lo)}, {_signed(ri.hi)}] |" if ri else f" {point} [-] |"
        lines.append(f"| {s.link.index} | {s.link.describe()} | {s.fitted or s.why or '-'} | "
                     f"{_mbit(s.hidden_tput_bps)} / {_mbit(s.fitted_tput_bps)} | {_pct(s.tput_error)} |{cell} "
                     f"{_ms(s.hidden_rtt_s)} / {_ms(s.fitted_rtt_s)} | {_pct(s.rtt_error)} | {s.candidates} |")
    m = summarize(scores)
    verdict = "passes" if m.passed else f"does not pass ({m.why})"
    lines += ["", f"Over {m.links} hidden links: {held_out}'s throughput error median {_pct(m.tput_median)}, worst "
                  f"{_pct(m.tput_worst)}; p50 RTT error median {_pct(m.rtt_median)}: {verdict} the acceptance "
                  f"bounds (median {MEDIAN_BOUND:.0%}, no link beyond {WORST_BOUND:.0%}; RTT median "
                  f"{MEDIAN_BOUND:.0%})."]
    if shown:
        got = [intervals.get(s.link.index) for s in scores]
        levels = sorted({f"{ri.level:.1%}" for ri in got if ri is not None})
        count = _verdicts(got)
        lines += ["", f"The interval of {held_out}'s fitted / hidden median throughput (each side's order-statistic "
                      f"interval of its median, the ratio's far ends; level at least {' / '.join(levels)}) lies within "
                      f"±{WORST_BOUND:.0%} on {count['within']} links, wholly beyond it on {count['beyond']}, and "
                      f"spans the bound on {count['undetermined']}"
                      + (f"; {n} without one" if (n := sum(1 for ri in got if ri is None)) else "")
                      + ": those the runs do not place on either side of it."]
    return "\n".join(lines) + "\n"


def markdown_doc(doc: dict[str, Any], runs: dict[int, tuple[Runs, Runs]] | None = None) -> str:
    """docs/benchmarks.md's block from a committed calibrate.json: how it was run, the table and the summary, and
    the links not scored (a benchmark published before it finished says so)."""
    scores = from_doc(doc)
    labs = doc.get("labs")
    how = (f"Seed {doc.get('seed')}, {doc.get('links', len(scores))} hidden links, budget {doc.get('budget')} "
           f"candidates per search, measured senders {', '.join(doc.get('measured', []))}, held out "
           f"{doc.get('held_out', '?')}"
           + (f" (the median of {doc['held_out_runs']} runs on each side)" if doc.get("held_out_runs", 1) > 1 else "")
           + (f"; each measured sender run {doc['measured_runs']} times on the hidden link, pooled"
              if doc.get("measured_runs", 1) > 1 else "")
           + (f"; labs {', '.join(map(str, labs))}" if isinstance(labs, list) else "")
           + (f"; commit {str(git.get('commit', '?'))[:7]}{' (uncommitted changes)' if git.get('dirty') else ''}"
              if isinstance(git := doc.get("git"), dict) else "") + ".")
    left = doc.get("not_done") or []
    missing = f"\n\nNot scored (not finished): links {', '.join(map(str, left))}.\n" if left else ""
    body = markdown(scores, str(doc.get("held_out", "?")), runs) if scores else "No link scored.\n"
    return f"{how}\n\n{body}" + missing


def sentence(doc: dict[str, Any], runs: dict[int, tuple[Runs, Runs]] | None, src: str) -> str:
    """The README's line on a committed calibration benchmark: its summary against the bounds and, with the kept
    runs, how many links the interval places within the worst-link bound."""
    scores = from_doc(doc)
    if not scores:
        return f"Calibration benchmark `{src}`: no link scored.\n"
    m = summarize(scores)
    held = str(doc.get("held_out", "?"))
    git = doc.get("git") if isinstance(doc.get("git"), dict) else {}
    verdict = "passes" if m.passed else f"does not pass ({m.why})"
    text = (f"Calibration to hidden links (`{src}`, commit {str(git.get('commit', '?'))[:7]}): on {m.links} links "
            f"the held-out {held}'s throughput on the fitted link is {_pct(m.tput_median)} from the hidden link's "
            f"(median; worst {_pct(m.tput_worst)}) and its p50 RTT under load {_pct(m.rtt_median)} (median): "
            f"{verdict} the bounds (median {MEDIAN_BOUND:.0%}, no link beyond {WORST_BOUND:.0%})")
    got = [ratio_interval(*r) for r in (runs or {}).values()]
    if any(ri is not None for ri in got):
        count = _verdicts(got)
        text += (f"; the runs' interval places {count['within']} links within ±{WORST_BOUND:.0%} and leaves "
                 f"{count['undetermined']} undetermined")
    return text + ".\n"
