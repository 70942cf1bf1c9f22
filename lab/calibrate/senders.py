"""The measured senders of a measurement folder, as the search compares them (lab/calibrate/search.py): per
congestion control, its throughput and p50 RTT under load on the real path, and what the lab must run to measure the
same sender on a candidate link (lab/run/calibration.py). One rule for both sides (`observed`): a flow read from the
user's iperf3 JSON and a flow read from the lab's iperf3 JSON are reduced the same way.

- throughput: the payload delivered after the flow's start-up over that time (estimate.steady's intervals,
  weighted by their length), bit/s. Not their median: iperf3 counts a receiver's interval in whole reads (128 KiB
  by default), so at 2 Mbit/s its 1 s intervals are multiples of 1.05 Mbit/s, zeros among them, and a median of
  eight moves in those steps (the lab's own runs read 16 KiB: lab/run/calibration.py download_argv);
- p50 RTT under load: the median of its RTT samples after its start-up (all of them when none is later);
- retransmission rate: the sender's retransmitted segments after its start-up over the data segments then (as the
  throughput: a slow start's overshoot, hundreds of retransmissions in one event, would swamp the steady state's
  few; estimate.steady_retransmissions), with both counts, which the search weighs the rate's term by; over the
  whole run when the input does not time them (None when it does not count them);
- a sender: a download (the search fits the downlink) whose input says its congestion control and carries RTT
  samples (iperf3's sender-side JSON of a -R run, i.e. the server's; a capture does not say the server's congestion
  control). Several flows of one congestion control (repeated runs over the same path): one sender, its figures
  pooled (`pooled`: the mean throughput, the median of every RTT sample, the retransmissions and segments summed),
  which the lab measures with one run as long as the longest. One 10 s run of a loss-based sender meets only a
  handful of random losses on a path of 0.05-0.15 % (a 0.136 % link at 93.8 ms: 6 after start-up where ~10 were
  expected, and the fit took 0.058 %: results/reference/calibrate-20261126-3, link 2); three runs pooled count
  three times as many, and their throughput's noise falls by about sqrt(3).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.calibrate.estimate import STARTUP_S, steady, steady_retransmissions
from lab.calibrate.measurements import Flow, Measurements, Way
from lab.calibrate.search import Observed, Result
from lab.errors import UsageError
from lab.quantiles import median

MIN_SENDERS = 2
#: The lab's run of a sender lasts as long as the user's did, within these bounds (s).
MIN_SECONDS, MAX_SECONDS = 5, 60


@dataclass(frozen=True)
class Sender:
    """What the lab runs to measure one sender on a candidate link: iperf3 with this congestion control, in this
    direction (down: the server's container sends to the client's), for this long."""

    cc: str
    direction: Way
    seconds: int


@dataclass(frozen=True)
class _Run:
    """One flow reduced by the module's rule: its throughput, its RTT samples after start-up, its counts."""

    throughput_bps: float
    rtts: list[float]
    counts: tuple[int, float] | None


def _run(flow: Flow) -> _Run | None:
    if not steady(flow) or not flow.rtt:
        return None
    skip = min(STARTUP_S, flow.duration_s / 4)
    rtts = [r for t, r in flow.rtt if t >= skip] or [r for _, r in flow.rtt]
    steady_rate = steady(flow)
    seconds = sum(b - a for a, b, _ in steady_rate)
    tput = sum((b - a) * r for a, b, r in steady_rate) / seconds if seconds > 0 else 0.0
    counts: tuple[int, float] | None = steady_retransmissions(flow)
    if counts is None and flow.retransmits is not None:
        counts = flow.retransmits, float(flow.segments or max(1, round(flow.bytes / 1448)))
    return _Run(tput, rtts, counts) if tput > 0 else None


def pooled(flows: Sequence[Flow]) -> Observed | None:
    """Runs of one sender over one path as one observation (the module's rule): the mean of their throughputs,
    the median of all their RTT samples, and their retransmissions and segments summed (when every run counts
    them); None when no run has rate and RTT samples."""
    runs = [r for f in flows if (r := _run(f)) is not None]
    if not runs:
        return None
    tput = sum(r.throughput_bps for r in runs) / len(runs)
    p50 = median([x for r in runs for x in r.rtts])
    if any(r.counts is None for r in runs):
        return Observed(throughput_bps=tput, p50_rtt_s=p50)
    n = sum(r.counts[0] for r in runs if r.counts is not None)
    segments = sum(r.counts[1] for r in runs if r.counts is not None)
    return Observed(throughput_bps=tput, p50_rtt_s=p50, retransmit_rate=n / segments, retransmits=n,
                    segments=round(segments, 1))


def observed(flow: Flow) -> Observed | None:
    """The flow's throughput and p50 RTT under load (the module's rule), or None without rate or RTT samples."""
    return pooled([flow])


def measured_senders(m: Measurements, where: str) -> tuple[dict[str, Sender], Result]:
    """Per sender (named by its congestion control): what the lab runs and what the real path showed. Fewer than
    MIN_SENDERS is a UsageError naming what the search needs."""
    chosen: dict[str, list[Flow]] = {}
    for f in m.flows:
        if f.direction == "down" and f.cc and _run(f) is not None:
            chosen.setdefault(f.cc, []).append(f)
    if len(chosen) < MIN_SENDERS:
        have = f"only {', '.join(sorted(chosen))}" if chosen else "none"
        raise UsageError(f"{where}: the lab search needs {MIN_SENDERS} or more measured senders of different "
                         f"congestion controls, each a download with its RTT under load (the sending server's "
                         f"iperf3 --json of -R runs, or the client's -R --json --get-server-output against a server "
                         f"started with --json, e.g. with -C cubic and -C bbr); this folder has {have}")
    senders = {cc: Sender(cc=cc, direction="down",
                          seconds=max(MIN_SECONDS, min(MAX_SECONDS, round(max(f.duration_s for f in fs)))))
               for cc, fs in sorted(chosen.items())}
    real = {cc: o for cc, fs in sorted(chosen.items()) if (o := pooled(fs)) is not None}
    return senders, real
