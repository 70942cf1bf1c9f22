"""The first estimates of a link from a measurement folder: pure functions, no lab.

- base RTT: the lowest RTT sample of any kind (without load, else under load: too high if the queue never emptied).
  With jitter the link's `rtt` is base + 2 x jitter: the lab's uniform jitter (delay +- jitter per direction) then
  reaches down to the base.
- jitter: from the RTT series without load (ping, irtt, flent's idle pings; at least MIN_JITTER_SAMPLES): the lower
  half's spread p50 - p5 of a sum of two uniform delays of +-J is 1.3675 J (the distribution is triangular on +-2J,
  symmetric). Not the p5..p95 spread, nor the interquartile range: a path's idle RTT has a tail of late replies that
  is not jitter (a host that did not schedule the reply at once, only ever later), and the lab's jitter, put on every
  packet of every candidate and not searched, must not stand for it. On the benchmark's hidden links, none with
  jitter, 50 pings spread up to 20 ms between p5 and p95 (results/reference/calibrate-20261126: the p5..p95 rule gave
  8 of 10 links 1.1-19.5 ms), and on a host busy with two labs more than a quarter of them came late (a 0.136 % loss
  link at 93.8 ms: p25 93.9, p50 94.2, p75 96.6 ms: 2.3 ms by the interquartile range); the lower half holds (0.3 ms
  there). Below MIN_JITTER_S (1 ms: the floor of what such pings tell) it is left out (0). Not on a
  link whose delivery rate varies (a download's variation >= TRACE_CV, or a recorded trace): there the RTT without
  load spreads because packets wait for a link that stalls (a cellular scheduler, an outage: pings of 53 ms to 2.2 s
  on ATT's LTE trace), which the rate's variation stands for; the lab's jitter (an independent delay on every
  packet, as much under load as without) would add it a second time and to every packet.
- downlink rate: per download, the median of its delivery-rate intervals after its start-up (the first
  min(STARTUP_S, a quarter of it)), in IP bytes (x 1500/1448, WIRE_FACTOR); the link's rate is the highest of these
  medians (a download that did not fill the link says less). A recorded trace (probe input) is the rate as given.
- rate trace (mahimahi): from the download with the highest rate when its delivery rate varies (coefficient of
  variation of the intervals after start-up >= TRACE_CV, at least TRACE_MIN_S long), or when asked; see trace.py.
  The 1 s intervals of a 10 s run do not tell a varying link from a constant one reliably (the TMobile recording's
  BBR download varied by 0.13-0.20, constant links' downloads by 0.00-0.20 in the committed benchmarks): with
  `auto` the estimate keeps both shapes (down_median_bps, down_delivery_ms) and the lab search measures both.
  The whole download, start-up included: the trace begins where the download began, and a sender on a candidate
  link meets it from its beginning, as the user's sender did. (From after the start-up, the trace of the ATT
  recording's link began 2 s into it: past the first seconds' high rate and an outage of the uplink, which set how
  far a loss-based sender's window falls.)
- uplink: likewise from the uploads (the receiver's delivery rate: iperf3's server side), a trace when it varies;
  a recorded up trace as given; unmeasured, unlimited. On a cellular path the uplink stalls as the downlink does,
  and a download's ACKs wait with it: the ATT recording's uplink is down 0.5-1.5 s and 3-5.25 s into it, where a
  download's sender gets no ACK for two seconds (results/reference/calibrate-20261126-2, link 0: cubic 2.1 Mbit/s
  and BBR 2.8 on that path; on the fit's lossless candidates, uplink unlimited, cubic got about as much as BBR,
  2.6-3.9).
- queue: the bytes queued under load, per RTT sample its rise above the base times the delivery rate at that time;
  the highest of the downloads' p95 (a full queue holds the same bytes at any rate, not the same delay), repeated
  runs of one congestion control pooled as one download.
- random loss: a retransmission counts as queue overflow when the queue held at least OVERFLOW_SHARE of its p95
  bytes in the window (2 RTT, at least OVERFLOW_WINDOW_MIN_S) before it; the rest, over the data segments, is
  random loss. With a delay rise under MIN_QUEUE_DELAY_S overflow and random loss look the same: no estimate, and the
  retransmission rate is given as an upper bound. Without delay samples beside the retransmissions, likewise.
- random loss's bounds from the counts (`loss_bounds`): every segment random loss drops is sent again, so each
  download's retransmissions after its start-up (n of its N data segments then) are at least its random losses; a
  Poisson upper bound of n at 1 - LOSS_ALPHA / k for each of k downloads, and the lowest of them, bounds random loss
  at 1 - LOSS_ALPHA (`down_loss_max`); that download's n / N is the point (`down_loss_steady`). Repeated runs of
  one congestion control count as one download (their n and N summed: a tighter bound than any of them).
  Start-up is left out as for the rate: a slow start's overshoot is one event of hundreds of retransmissions.
  On the benchmark's lossy hidden links the split above gave 0.028 % (true 0.098 %), 0.195 % (0.053 %) and 0.38 %
  (0.136 %).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from lab.calibrate.measurements import Flow, Measurements
from lab.calibrate.trace import from_capture, from_rates, mean_rate
from lab.errors import UsageError
from lab.quantiles import median

STARTUP_S = 2.0
TRACE_CV = 0.25
TRACE_MIN_S = 10.0
MIN_JITTER_SAMPLES = 10
MIN_JITTER_S = 0.001
UNIFORM_SUM_P5_P50 = 2 * (1 - math.sqrt(0.1))  # (p50 - p5) of U(-J, J) + U(-J, J), in J: 1.3675
MIN_QUEUE_DELAY_S = 0.002
OVERFLOW_SHARE = 0.5
OVERFLOW_WINDOW_MIN_S = 0.2
LOSS_ALPHA = 0.05
MTU = 1500
#: A flow's rate is what it delivered (payload); the link's rate counts whole IP packets: a full segment carries
#: 1448 payload bytes in 1500 (IP and TCP headers with timestamps).
WIRE_FACTOR = 1500 / 1448

RateMode = Literal["auto", "constant", "trace"]


class Estimate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    base_rtt_s: float
    #: the base is the lowest RTT without load (a packet that met an empty queue), not one under load
    base_idle: bool = False
    rtt_s: float                         # the link's rtt setting (base + 2 x jitter)
    jitter_s: float = 0.0
    down_rate_bps: float | None = None   # mean rate of the trace when there is one
    down_rate_cv: float | None = None
    down_trace_ms: list[int] | None = None
    #: (--rate auto, a download of TRACE_MIN_S or more) its median rate after start-up and its whole delivery rate as
    #: a trace, whichever shape the estimate took: the lab search tries the other one too (fit.shapes)
    down_median_bps: float | None = None
    down_delivery_ms: list[int] | None = None
    down_queue_bytes: int | None = None
    queue_delay_s: float | None = None
    down_loss: float | None = None       # random loss outside overflow episodes
    down_loss_upper: float | None = None  # when it cannot be told apart: every retransmission's rate
    down_loss_steady: float | None = None  # the retransmission rate after start-up of the least retransmitting download
    down_loss_max: float | None = None   # the upper bound of random loss at 1 - LOSS_ALPHA (loss_bounds)
    up_rate_bps: float | None = None
    up_trace_ms: list[int] | None = None
    #: what each estimate came from, and what it could not use (sentences)
    notes: list[str] = []


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (q in 0..100) of a non-empty list."""
    s = sorted(values)
    pos = (len(s) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def steady(flow: Flow) -> list[tuple[float, float, float]]:
    """The flow's rate intervals after its start-up (all of them when nothing would be left)."""
    skip = min(STARTUP_S, flow.duration_s / 4)
    rest = [r for r in flow.rate if r[0] >= skip]
    return rest or list(flow.rate)


def flow_rate(flow: Flow) -> float:
    """The link rate a flow shows: the median of its delivery rate after start-up, in IP bytes (WIRE_FACTOR)."""
    return median(r for _, _, r in steady(flow)) * WIRE_FACTOR if flow.rate else 0.0


def variation(flow: Flow) -> float:
    rates = [r for _, _, r in steady(flow)]
    mean = statistics.fmean(rates) if rates else 0.0
    return statistics.pstdev(rates) / mean if len(rates) > 1 and mean > 0 else 0.0


def jitter(series: Sequence[float]) -> float:
    if len(series) < MIN_JITTER_SAMPLES:
        return 0.0
    j = (percentile(series, 50) - percentile(series, 5)) / UNIFORM_SUM_P5_P50
    return j if j >= MIN_JITTER_S else 0.0


def base_rtt(m: Measurements, where: str) -> tuple[float, str]:
    idle = m.idle_rtts()
    if idle:
        return min(idle), "the lowest RTT without load"
    loaded = [r for f in m.flows for _, r in f.rtt]
    if loaded:
        return min(loaded), "the lowest RTT under load (no sample without load: too high if the queue never emptied)"
    raise UsageError(f"{where}: no RTT sample at all: nothing to set the link's RTT from (add ping or irtt output, or "
                     "a capture with the TCP handshake)")


def rate_at(flow: Flow, t: float) -> float:
    """The flow's delivery rate (IP bytes) in the interval holding t (the nearest one when none does)."""
    if not flow.rate:
        return 0.0
    inside = next((r for a, b, r in flow.rate if a <= t < b), None)
    if inside is None:
        inside = min(flow.rate, key=lambda x: min(abs(x[0] - t), abs(x[1] - t)))[2]
    return inside * WIRE_FACTOR


def queued(flow: Flow, base: float) -> list[tuple[float, float]]:
    """(t, bytes queued) per RTT sample after start-up: the delay above the base times the rate at that time (a
    full queue holds the same bytes at any rate, not the same delay)."""
    skip = min(STARTUP_S, flow.duration_s / 4)
    samples = [(t, r) for t, r in flow.rtt if t >= skip] or list(flow.rtt)
    return [(t, max(0.0, r - base) * rate_at(flow, t) / 8) for t, r in samples]


def by_sender(flows: Sequence[Flow]) -> list[list[Flow]]:
    """The flows grouped by sender: repeated runs of one congestion control together, a flow that does not say its
    congestion control alone (the rule the queue and the loss bounds read repeated runs by)."""
    groups: dict[str | int, list[Flow]] = {}
    for k, f in enumerate(flows):
        groups.setdefault(f.cc or k, []).append(f)
    return list(groups.values())


def queue_size(flows: Sequence[Flow], base: float) -> tuple[float, float] | None:
    """(bytes, seconds) the queue held at its p95, for the sender that filled it most; None without samples.
    Repeated runs of one congestion control are one sender, their samples pooled: the highest of each run's p95
    took the one run whose stalls on a varying link read as queue (ATT's recording: BBR's three runs 90, 343 and
    85 kB, and the fitted queue of 343 kB gave Reno 3.2 times the hidden link's p50 RTT)."""
    best: tuple[float, float] | None = None
    for group in by_sender(flows):
        q = [b for f in group for _, b in queued(f, base)]
        if q:
            size = percentile(q, 95)
            delay = percentile([max(0.0, r - base) for f in group for _, r in f.rtt], 95)
            best = max(best or (size, delay), (size, delay))
    return best


def split_loss(flow: Flow, base: float) -> tuple[int, int] | None:
    """(overflow retransmissions, random ones) of a flow with timed retransmissions and RTT samples; None when the
    two cannot be told apart (no such data, or a delay rise under MIN_QUEUE_DELAY_S). A retransmission is an
    overflow when the queue held at least OVERFLOW_SHARE of its p95 bytes in the window before it."""
    if flow.retransmit_times_s is None or not flow.rtt or not flow.rate:
        return None
    rtts = [r for _, r in flow.rtt]
    peak_rtt = percentile(rtts, 95)
    if peak_rtt - base < MIN_QUEUE_DELAY_S:
        return None
    q = queued(flow, base)
    high = OVERFLOW_SHARE * percentile([b for _, b in q], 95)
    window = max(OVERFLOW_WINDOW_MIN_S, 2 * peak_rtt)
    overflow = 0
    for t in flow.retransmit_times_s:
        near = [b for s, b in q if t - window <= s <= t] or [min(q, key=lambda x: abs(x[0] - t))[1]]
        overflow += max(near) >= high
    return overflow, len(flow.retransmit_times_s) - overflow


def poisson_upper(n: int, alpha: float) -> float:
    """The exact one-sided upper bound of a Poisson mean from a count n: the mu with P(X <= n; mu) = alpha."""
    if n < 0 or not 0 < alpha < 1:
        raise ValueError("a count >= 0 and 0 < alpha < 1")

    def cdf(mu: float) -> float:
        term = total = math.exp(-mu)
        for k in range(1, n + 1):
            term *= mu / k
            total += term
        return total

    lo, hi = 0.0, n + 10 + 10 * math.sqrt(n + 1)
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) > alpha else (lo, mid)
    return hi


def steady_retransmissions(flow: Flow) -> tuple[int, float] | None:
    """(retransmissions after start-up, data segments after start-up) of a flow with timed retransmissions; None
    without them or without delivery after start-up. The segments: the payload delivered then over a full segment."""
    if flow.retransmit_times_s is None or not flow.rate:
        return None
    rest = steady(flow)
    delivered = sum((b - a) * r for a, b, r in rest) / 8
    if delivered <= 0:
        return None
    since = rest[0][0]  # the intervals' own start: iperf3 times a retransmission at its interval's midpoint
    return sum(1 for t in flow.retransmit_times_s if t >= since), delivered / 1448


def loss_bounds(flows: Sequence[Flow]) -> tuple[float, float] | None:
    """(point, upper bound at 1 - LOSS_ALPHA) of random loss from the flows' retransmissions after start-up (the
    module's rule); None when no flow has timed retransmissions."""
    groups = [[c for f in g if (c := steady_retransmissions(f)) is not None] for g in by_sender(flows)]
    counted = [(sum(n for n, _ in g), sum(s for _, s in g)) for g in groups if g]
    if not counted:
        return None
    level = LOSS_ALPHA / len(counted)
    n, segments = min(counted, key=lambda c: poisson_upper(c[0], level) / c[1])
    return n / segments, min(1.0, poisson_upper(n, level) / segments)


def _segments(f: Flow) -> int:
    return f.segments or max(1, round(f.bytes / 1448))


def estimate(m: Measurements, where: str, mode: RateMode = "auto") -> Estimate:
    base, base_from = base_rtt(m, where)
    j = jitter(m.idle_rtts(series_only=True))
    e = Estimate(base_rtt_s=base, base_idle=bool(m.idle_rtts()), rtt_s=base, notes=[f"base RTT: {base_from}"])
    down = [f for f in m.flows if f.direction == "down" and f.rate]
    _down_rate(m, down, e, mode, where)
    if j and (e.down_trace_ms or (e.down_rate_cv or 0.0) >= TRACE_CV):
        e.notes.append(f"jitter: none; the RTT without load spreads ({j * 1000:.1f} ms as uniform jitter) on a link "
                       "whose rate varies: that is waiting for the link, which the rate's variation stands for")
    elif j:
        e.jitter_s, e.rtt_s = j, base + 2 * j
        e.notes.append("jitter: from the lower half's spread (p5..p50) of the RTT without load, as the lab's uniform "
                       "jitter")
    _queue(down, e)
    _loss(down, e)
    up = [f for f in m.flows if f.direction == "up" and f.rate]
    up_trace = next((t for t in m.traces if t.direction == "up"), None)
    if up_trace is not None:
        e.up_trace_ms = up_trace.trace_ms
        e.up_rate_bps = mean_rate(up_trace.trace_ms)
    elif up:
        best = max(up, key=flow_rate)
        e.up_rate_bps = flow_rate(best)
        if _as_trace(best, mode):
            e.up_trace_ms = trace_of(best)
            e.up_rate_bps = mean_rate(e.up_trace_ms)
            e.notes.append(f"uplink rate: a trace of the delivery rate of {best.label} ({best.source}) "
                           f"(variation {variation(best):.2f})")
        else:
            e.notes.append(f"uplink rate: the median delivery rate of {best.label} ({best.source}) after its start-up")
    else:
        e.notes.append("uplink: not measured, left unlimited")
    return e


def _as_trace(flow: Flow, mode: RateMode) -> bool:
    """Whether a flow's delivery rate is given as a trace: asked, or (auto) it varies over a long enough run."""
    return mode == "trace" or (mode == "auto" and variation(flow) >= TRACE_CV and flow.duration_s >= TRACE_MIN_S)


def trace_of(flow: Flow) -> list[int]:
    """The flow's whole delivery as a trace from its beginning (the module's rule: the trace begins where the flow
    began): its captured packets at the millisecond when it has them (trace.from_capture: where the capture could
    not see the link, the download's median rate), else its rate intervals in IP bytes (WIRE_FACTOR)."""
    if flow.arrivals:
        return from_capture(flow.arrivals, flow.unseen or ())
    return from_rates([(a, b, r * WIRE_FACTOR) for a, b, r in flow.rate])


def _finest(flows: list[Flow], best: Flow) -> Flow:
    """The download a rate trace is made from: the fastest of those captured packet by packet (a capture's
    arrivals hold what the link did inside each of iperf3's intervals), else the fastest."""
    return max((f for f in flows if f.arrivals), key=flow_rate, default=best)


def _down_rate(m: Measurements, down: list[Flow], e: Estimate, mode: RateMode, where: str) -> None:
    recorded = next((t for t in m.traces if t.direction == "down"), None)
    if recorded is not None:
        e.down_trace_ms = recorded.trace_ms
        e.down_rate_bps = mean_rate(recorded.trace_ms)
        e.notes.append(f"downlink rate: the recorded trace {recorded.file}")
        return
    if not down:
        raise UsageError(f"{where}: no download in these measurements: nothing to set the downlink's rate from")
    best = max(down, key=flow_rate)
    e.down_rate_bps = flow_rate(best)
    e.down_rate_cv = variation(best)
    traced = _finest(down, best)
    if mode == "auto" and best.duration_s >= TRACE_MIN_S:
        e.down_median_bps, e.down_delivery_ms = e.down_rate_bps, trace_of(traced)
    if _as_trace(best, mode):
        e.down_trace_ms = e.down_delivery_ms or trace_of(traced)
        e.down_rate_bps = mean_rate(e.down_trace_ms)
        finest = "its captured packets" if traced.arrivals else "its delivery rate"
        e.notes.append(f"downlink rate: a trace of {traced.label} ({traced.source}) from {finest}, its start-up "
                       f"included (the fastest download's variation after it {e.down_rate_cv:.2f})")
    else:
        e.notes.append(f"downlink rate: the median delivery rate of {best.label} ({best.source}) after its start-up "
                       f"(variation {e.down_rate_cv:.2f}, constant below {TRACE_CV} or under {TRACE_MIN_S:g} s)")


def _queue(down: list[Flow], e: Estimate) -> None:
    size = queue_size(down, e.base_rtt_s)
    if size is None:
        e.notes.append("queue: no RTT samples under load, left at the lab's default (one BDP)")
        return
    e.down_queue_bytes = max(MTU, round(size[0]))
    e.queue_delay_s = size[1]
    e.notes.append(f"queue: the p95 of the bytes queued under load (the RTT's rise above the base times the "
                   f"delivery rate then; a rise of {size[1] * 1000:.1f} ms at p95)")


def _loss(down: list[Flow], e: Estimate) -> None:
    bounds = loss_bounds(down)
    if bounds is not None:
        e.down_loss_steady, e.down_loss_max = bounds
        e.notes.append(f"random loss at most {bounds[1]:.3%} ({1 - LOSS_ALPHA:.0%} upper bound; the retransmissions "
                       f"after start-up of the download with the fewest: {bounds[0]:.3%})")
    split = [(f, s) for f in down if (s := split_loss(f, e.base_rtt_s)) is not None]
    counted = [f for f in down if f.retransmits is not None]
    if split:
        random = sum(s[1] for _, s in split)
        overflow = sum(s[0] for _, s in split)
        e.down_loss = random / sum(_segments(f) for f, _ in split)
        e.notes.append(f"random loss: {random} retransmission(s) outside overflow episodes of "
                       f"{random + overflow} ({overflow} while the queue was near full)")
    elif counted:
        e.down_loss_upper = sum(f.retransmits or 0 for f in counted) / sum(_segments(f) for f in counted)
        e.notes.append(f"random loss: not told apart from queue overflow (no RTT beside the retransmissions, or the "
                       f"RTT hardly rose); every retransmission together is {e.down_loss_upper:.3%}, an upper bound; "
                       "the link gets no random loss")
    else:
        e.notes.append("random loss: no retransmission counts in these measurements; the link gets none")
