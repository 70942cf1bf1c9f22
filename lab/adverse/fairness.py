"""Per-flow throughput from a capture of what the bottleneck delivered to the client, and Jain's fairness index.

Sans-IO: packets in (lab/evidence/pcap.py reads the capture), numbers out. A flow is every packet toward the client
from one server address and port (the measured transfer, an iperf3 server's port, the background QUIC server);
its bytes are transport payload bytes as delivered (retransmissions included: what the flow took of the link).

Jain's index over n flows with throughputs x_i: J = (sum x_i)^2 / (n * sum x_i^2); 1 when all are equal, 1/n when
one flow takes everything. It is computed over the shared interval: from the last flow's first data packet to
the first flow's last data packet (every flow active throughout).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lab.evidence.pcap import Packet

#: Per-interval series have at most this many bins (the bin width grows with the run: at least MIN_BIN_S).
MAX_BINS = 120
MIN_BIN_S = 0.1


@dataclass
class FlowSeries:
    name: str
    first_s: float | None = None   # first data packet, seconds from the transfer's start
    last_s: float | None = None
    bytes: int = 0
    times: list[float] = field(default_factory=list)   # per data packet: time from the start
    sizes: list[int] = field(default_factory=list)

    def bytes_between(self, a: float, b: float) -> int:
        return sum(s for t, s in zip(self.times, self.sizes, strict=True) if a <= t <= b)


#: A flow's first and last data packet are those of its connections that carry at least this share of its bytes
#: (iperf3's control connection, a few hundred bytes on the same server port, does not start the flow).
MAJOR_CONNECTION = 0.01


def split_flows(packets: Iterable[Packet], names: dict[tuple[str, int], str],
                zero_unix: float) -> dict[str, FlowSeries]:
    """Group data packets (payload > 0) by (source address, source port) into the named flows; others are ignored."""
    out = {name: FlowSeries(name) for name in dict.fromkeys(names.values())}
    conns: dict[tuple[str, tuple[str, int, str, int]], list[float]] = {}  # (flow, 4-tuple) -> [bytes, first, last]
    for p in packets:
        name = names.get((p.src, p.sport))
        if name is None or p.payload_len <= 0:
            continue
        f = out[name]
        t = p.time - zero_unix
        f.times.append(t)
        f.sizes.append(p.payload_len)
        f.bytes += p.payload_len
        c = conns.setdefault((name, (p.src, p.sport, p.dst, p.dport)), [0.0, t, t])
        c[0] += p.payload_len
        c[1], c[2] = min(c[1], t), max(c[2], t)
    for (name, _), (nbytes, first, last) in conns.items():
        f = out[name]
        if nbytes >= MAJOR_CONNECTION * f.bytes:
            f.first_s = first if f.first_s is None else min(f.first_s, first)
            f.last_s = last if f.last_s is None else max(f.last_s, last)
    return out


def shared_interval(flows: Sequence[FlowSeries]) -> tuple[float, float] | None:
    """[latest first packet, earliest last packet] when every flow has data and they overlap, else None."""
    if not flows or any(f.first_s is None or f.last_s is None for f in flows):
        return None
    a = max(f.first_s for f in flows if f.first_s is not None)
    b = min(f.last_s for f in flows if f.last_s is not None)
    return (a, b) if b > a else None


def jain(xs: Sequence[float]) -> float | None:
    if not xs or any(x < 0 for x in xs):
        return None
    sq = sum(x * x for x in xs)
    if sq == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def bin_width(duration_s: float) -> float:
    return max(MIN_BIN_S, math.ceil(duration_s / MAX_BINS * 10) / 10)


def intervals_mbit(f: FlowSeries, end_s: float, width_s: float) -> list[float]:
    """Throughput per interval [k*w, (k+1)*w) from the transfer's start, Mbit/s."""
    n = max(1, math.ceil(end_s / width_s))
    acc = [0] * n
    for t, s in zip(f.times, f.sizes, strict=True):
        k = int(t // width_s)
        if 0 <= k < n:
            acc[k] += s
    return [round(b * 8 / width_s / 1e6, 3) for b in acc]


@dataclass(frozen=True)
class Fairness:
    interval: tuple[float, float] | None
    mbit: dict[str, float]        # per flow: mean throughput over the shared interval
    share: dict[str, float]       # per flow: its part of all flows' bytes in the shared interval
    jain: float | None


def fairness(flows: Sequence[FlowSeries]) -> Fairness:
    iv = shared_interval(flows)
    if iv is None:
        return Fairness(None, {}, {}, None)
    a, b = iv
    got = {f.name: f.bytes_between(a, b) for f in flows}
    total = sum(got.values())
    mbit = {k: v * 8 / (b - a) / 1e6 for k, v in got.items()}
    share = {k: (v / total if total else 0.0) for k, v in got.items()}
    return Fairness(iv, mbit, share, jain(list(mbit.values())))
