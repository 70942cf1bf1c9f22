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
  control). Two flows of one congestion control: the longer one.
"""

from __future__ import annotations

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


def observed(flow: Flow) -> Observed | None:
    """The flow's throughput and p50 RTT under load (the module's rule), or None without rate or RTT samples."""
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
    if tput <= 0:
        return None
    if counts is None:
        return Observed(throughput_bps=tput, p50_rtt_s=median(rtts))
    return Observed(throughput_bps=tput, p50_rtt_s=median(rtts), retransmit_rate=counts[0] / counts[1],
                    retransmits=counts[0], segments=round(counts[1], 1))


def measured_senders(m: Measurements, where: str) -> tuple[dict[str, Sender], Result]:
    """Per sender (named by its congestion control): what the lab runs and what the real path showed. Fewer than
    MIN_SENDERS is a UsageError naming what the search needs."""
    chosen: dict[str, Flow] = {}
    for f in m.flows:
        if f.direction != "down" or not f.cc or observed(f) is None:
            continue
        if f.cc not in chosen or f.duration_s > chosen[f.cc].duration_s:
            chosen[f.cc] = f
    if len(chosen) < MIN_SENDERS:
        have = f"only {', '.join(sorted(chosen))}" if chosen else "none"
        raise UsageError(f"{where}: the lab search needs {MIN_SENDERS} or more measured senders of different "
                         f"congestion controls, each a download with its RTT under load (the sending server's "
                         f"iperf3 --json of -R runs, or the client's -R --json --get-server-output against a server "
                         f"started with --json, e.g. with -C cubic and -C bbr); this folder has {have}")
    senders = {cc: Sender(cc=cc, direction=f.direction,
                          seconds=max(MIN_SECONDS, min(MAX_SECONDS, round(f.duration_s))))
               for cc, f in sorted(chosen.items())}
    real = {cc: o for cc, f in sorted(chosen.items()) if (o := observed(f)) is not None}
    return senders, real
