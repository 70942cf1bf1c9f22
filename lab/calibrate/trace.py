"""A delivery-rate time series as a mahimahi trace (the format lab/link/spec.py reads and linkem replays: one whole
millisecond per line, one line per 1500-byte delivery opportunity, never decreasing, looping with the last one as
its period; ../shared/traces/README.mahimahi).

Each interval (start, end, bit/s) gives rate x length / 12000 opportunities, the fractions carried to the next
interval so that none is lost to rounding, spread evenly over the interval, the last at its end (times from the first
interval's start, rounded up to whole milliseconds: 12 Mbit/s for 1 s is 1, 2, ..., 1000, as mahimahi's own
constant-rate traces). An interval with no delivery gives none: the link is down there."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from lab.errors import UsageError
from lab.quantiles import median

OPPORTUNITY_BITS = 1500 * 8


def from_rates(rate: Sequence[tuple[float, float, float]]) -> list[int]:
    if not rate:
        raise ValueError("no rate intervals")
    t0 = rate[0][0]
    carry = 0.0
    out: list[int] = []
    for start, end, bps in rate:
        n = max(0.0, bps) * (end - start) / OPPORTUNITY_BITS + carry
        k = int(n)
        carry = n - k
        for j in range(k):
            ms = math.ceil((start - t0 + (j + 1) * (end - start) / k) * 1000 - 1e-6)
            out.append(max(ms, out[-1] if out else 0))
    if not out or out[-1] <= 0:
        raise ValueError("the rate intervals deliver less than one 1500-byte packet")
    return out


def write(path: Path, trace_ms: Sequence[int]) -> None:
    try:
        path.write_text("".join(f"{t}\n" for t in trace_ms), encoding="ascii")
    except OSError as e:
        raise UsageError(f"cannot write the trace {str(path)!r}: {e.strerror}") from None


def mean_rate(trace_ms: Sequence[int]) -> float:
    """A trace's mean rate (bit/s): its opportunities over its period."""
    return len(trace_ms) * OPPORTUNITY_BITS / (trace_ms[-1] / 1000)


def from_capture(arrivals: Sequence[tuple[float, int]], unseen: Sequence[tuple[float, float]] = ()) -> list[int]:
    """A captured download's trace: its packets (from_packets), and in each stretch the capture could not see the
    link's rate in (the queue empty, nothing arriving: tcpflows `unseen`), the download's median rate over the 0.1
    s bins wholly outside them, spread evenly (an assumption: the capture says nothing there; on the ATT recording
    its uplink stalls hold BBR's ACKs up, and the gaps in its delivery would otherwise be stalls of the downlink that
    the fitted uplink's own stalls then double)."""
    out = from_packets(arrivals)
    if not unseen:
        return out
    bins: dict[int, int] = {}
    for t, size in arrivals:
        bins[int(t / SEEN_BIN_S)] = bins.get(int(t / SEEN_BIN_S), 0) + size
    last = int(arrivals[-1][0] / SEEN_BIN_S)
    seen = [bins.get(i, 0) * 8 / SEEN_BIN_S for i in range(last)  # (the last bin is partial)
            if not any(a < (i + 1) * SEEN_BIN_S and b > i * SEEN_BIN_S for a, b in unseen)]
    if not seen:
        return out
    fill = median(seen)
    if fill * sum(b - a for a, b in unseen) < OPPORTUNITY_BITS:
        return out
    added = from_rates([(0.0, unseen[0][0], 0.0), *((a, b, fill) for a, b in unseen)])  # times from the flow's start
    return sorted([*out, *added])


SEEN_BIN_S = 0.1


def from_packets(arrivals: Sequence[tuple[float, int]]) -> list[int]:
    """What a link delivered, packet by packet ((t_s, IP bytes) from its first packet), as a trace at the
    millisecond: one opportunity per 1500 bytes delivered (fractions carried, as from_rates does), at the
    millisecond the packet that completed it arrived (at least 1). A saturating download's arrivals are the link's
    delivery opportunities: mahimahi's Saturator records its traces so. Where the sender left the link idle the
    trace shows less than the link had."""
    carry = 0.0
    out: list[int] = []
    for t, size in arrivals:
        carry += size / (OPPORTUNITY_BITS / 8)
        ms = max(1, math.ceil(t * 1000 - 1e-6), out[-1] if out else 0)
        while carry >= 1:
            out.append(ms)
            carry -= 1
    if not out:
        raise ValueError("the packets deliver less than one 1500-byte opportunity")
    return out


def scaled(trace_ms: Sequence[int], factor: float) -> list[int]:
    """The trace with its mean rate times `factor`, the same pattern and period: of round(n x factor) opportunities
    the k-th comes when the trace's ceil(k / factor)-th did (a burst stays a burst, a stall a stall, at the
    trace's own resolution: a trace from a capture's packets keeps what happens inside a tenth of a second, which
    a cellular link's senders answer: on the TMobile recording, 0.1 s averages gave BBR 19.4 Mbit/s and 700
    retransmissions for 24 and 1900; 10 ms ones 24 and 1900; 1 s ones gave Reno 21 Mbit/s for 12). The lab
    search's rate for a link with a rate trace."""
    if not trace_ms or factor <= 0:
        raise ValueError("an empty trace or a factor not above 0")
    n = len(trace_ms)
    out = [trace_ms[min(n, max(1, math.ceil(k / factor - 1e-9))) - 1] for k in range(1, max(1, round(n * factor)) + 1)]
    if out[-1] < trace_ms[-1]:  # the last line is the period: kept (one opportunity more at most)
        out.append(trace_ms[-1])
    return out
