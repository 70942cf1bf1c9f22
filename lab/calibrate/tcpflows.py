"""The bulk TCP transfers of a capture, as flows of the measurement folder: per transfer its delivery rate over
time, its RTT samples under load and its retransmissions.

- Connection: the segments of one 4-tuple. The data sender is the end that sent more payload; a transfer counts as
  bulk from MIN_BULK_BYTES. Its direction is "down" when the capture's own host (the vantage) received the data.
- Vantage: from the handshake, the end whose own packet waited a round trip for the answer (client-side: SYN ->
  SYN/ACK is the long gap; server-side: SYN/ACK -> ACK). Without a handshake in the capture: the data receiver, as
  for the client-side capture the issue asks for. The handshake's long gap is one RTT sample without load.
- Delivery rate: the bytes that advanced the highest sequence number seen, per BIN_S bin (the receiver's in-order
  view; a hole's bytes count when the hole opens, not when it is filled).
- RTT under load, from TCP timestamps (RFC 7323): a TSval the vantage sent first at t1 and the other end echoed
  first at t2 gives t2 - t1 (at most one timestamp clock tick, 1 ms on Linux, long). A capture without timestamps
  gives no RTT under load; that is said in the folder.
- Retransmissions: data segments that start below the highest sequence number seen (full or partial repeats and
  the fills of holes: from the receiver's side a reordered segment looks the same).
- Arrivals: every data segment's time and IP bytes, retransmissions included: at the receiver's side, what the
  link delivered packet by packet (a saturating download's arrivals are the link's delivery opportunities, as
  mahimahi's Saturator records them); the rate trace's finest record (lab/calibrate/estimate.py).
- Unseen stretches: a gap of at least UNSEEN_MIN_S between two arrivals is either the link down (the sender's
  packets waited in its queue: the first after the gap arrives late by about the gap) or the sender idle (nothing
  queued: it arrives at the path's base delay, sent when the gap was nearly over; e.g. its ACKs held up on a
  stalled uplink). The data segments' TCP timestamps tell which: a segment's one-way delay is its arrival less its
  TSval (the sender's clock, its rate taken from the flow's own first and last segments) up to a constant, and
  its queueing delay that less the flow's lowest. From the gap's start to the first segment's arrival less its
  queueing delay the queue was empty: what the link could have delivered there is not in the capture.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from lab.calibrate.measurements import Flow
from lab.calibrate.pcapfile import ACK, SYN, Segment

BIN_S = 0.1
MIN_BULK_BYTES = 500_000
DEFAULT_MSS = 1448
TS_OPTION_BYTES = 12

Endpoint = tuple[str, int]


@dataclass(frozen=True)
class CaptureFlows:
    flows: list[Flow]
    handshake_rtts_s: list[float]
    connections: int           # TCP connections in the capture
    largest_bytes: int         # the most payload one of them carried one way


def bulk_flows(segments: list[Segment], source: str) -> CaptureFlows:
    by_conn: dict[frozenset[Endpoint], list[Segment]] = defaultdict(list)
    for s in segments:
        by_conn[frozenset((s.src, s.dst))].append(s)
    flows: list[Flow] = []
    handshakes: list[float] = []
    largest = 0
    for segs in by_conn.values():
        segs.sort(key=lambda s: s.t)
        sent: dict[Endpoint, int] = defaultdict(int)
        for s in segs:
            sent[s.src] += s.payload
        sender = max(sent, key=lambda e: sent[e])
        largest = max(largest, sent[sender])
        receiver = next((s.dst for s in segs if s.src == sender), sender)
        vantage, handshake = _vantage(segs)
        if handshake is not None:
            handshakes.append(handshake)
        if sent[sender] >= MIN_BULK_BYTES:
            flows.append(_flow(segs, sender, receiver, vantage or receiver, source))
    flows.sort(key=lambda f: f.label)
    return CaptureFlows(flows, handshakes, len(by_conn), largest)


def _vantage(segs: list[Segment]) -> tuple[Endpoint | None, float | None]:
    """(the capture's own end, the handshake's RTT sample), or (None, None) without a whole handshake."""
    syn = next((s for s in segs if s.flags & SYN and not s.flags & ACK), None)
    if syn is None:
        return None, None
    synack = next((s for s in segs if s.src == syn.dst and s.flags & SYN and s.flags & ACK and s.t >= syn.t), None)
    if synack is None:
        return None, None
    third = next((s for s in segs if s.src == syn.src and s.t >= synack.t and not s.flags & SYN), None)
    if third is None:
        return None, None
    there, back = synack.t - syn.t, third.t - synack.t
    return (syn.src, there) if there >= back else (syn.dst, back)


def _mss(segs: list[Segment], receiver: Endpoint) -> int:
    """The sender's segment size: the receiver's MSS option, less the timestamps option when they are in use."""
    syn = next((s for s in segs if s.src == receiver and s.flags & SYN and s.mss), None)
    if syn is None or syn.mss is None:
        return DEFAULT_MSS
    return syn.mss - (TS_OPTION_BYTES if syn.tsval is not None else 0)


def _unwrap(seq: int, near: int) -> int:
    """`seq` (32 bits) as the 64-bit sequence number nearest to `near`."""
    base = near - (near % 2**32)
    candidates = (base - 2**32 + seq, base + seq, base + 2**32 + seq)
    return min(candidates, key=lambda c: abs(c - near))


def _flow(segs: list[Segment], sender: Endpoint, receiver: Endpoint, vantage: Endpoint, source: str) -> Flow:
    data = [s for s in segs if s.src == sender and s.payload > 0]
    t0, t_end = data[0].t, data[-1].t
    highest = data[0].seq
    retx_times: list[float] = []
    advances: list[tuple[float, int]] = []
    for s in data:
        start = _unwrap(s.seq, highest)
        end = start + s.payload
        if start < highest:
            retx_times.append(round(s.t - t0, 6))
        if end > highest:
            advances.append((s.t - t0, end - highest))
            highest = end
    delivered = sum(n for _, n in advances)
    mss = _mss(segs, receiver)
    return Flow(
        source=source, label=f"tcp {_name(sender)} > {_name(receiver)}",
        direction="down" if receiver == vantage else "up",
        duration_s=round(t_end - t0, 6), bytes=delivered, rate=_bins(advances, t_end - t0),
        rtt=_ts_rtts(segs, vantage, t0, t_end), retransmits=len(retx_times), retransmit_times_s=retx_times,
        segments=max(1, math.ceil(delivered / mss)), ports=(sender[1], receiver[1]),
        arrivals=[(round(s.t - t0, 6), s.wire) for s in data] if receiver == vantage else None,
        unseen=_unseen(data) if receiver == vantage else None)


UNSEEN_MIN_S = 0.1


#: The rates TCP timestamp clocks tick at (Linux and the BSDs 1000 Hz; RFC 7323 allows 1 Hz to 1 kHz, some stacks
#: count microseconds). The rate measured over a flow is off by its last segment's queueing delay over its length
#: (0.2 s in 10 s: 2 %, which would tilt every one-way delay by up to 0.2 s): the nearest of these within 10 % is it.
TS_CLOCKS_HZ = (1.0, 10.0, 100.0, 250.0, 1000.0, 1e6)


def _clock_rate(measured: float) -> float:
    near = min(TS_CLOCKS_HZ, key=lambda c: abs(math.log(c / measured)) if measured > 0 else math.inf)
    return near if measured > 0 and abs(measured / near - 1) <= 0.1 else measured


def _unseen(data: list[Segment]) -> list[tuple[float, float]] | None:
    """The stretches (from the first data segment) with the queue empty and nothing arriving (module doc); None
    without TCP timestamps."""
    stamped = [s for s in data if s.tsval is not None]
    if len(stamped) < 2 or len(stamped) < len(data) or stamped[-1].t <= stamped[0].t:
        return None
    ticks = (stamped[-1].tsval - stamped[0].tsval) % 2**32  # type: ignore[operator]
    hz = _clock_rate(ticks / (stamped[-1].t - stamped[0].t))
    if hz <= 0:
        return None
    t0 = data[0].t
    owd = [s.t - ((s.tsval - stamped[0].tsval) % 2**32) / hz for s in data]  # type: ignore[operator]
    base = min(owd)
    out: list[tuple[float, float]] = []
    for prev, nxt, d in zip(data, data[1:], owd[1:], strict=False):
        end = nxt.t - (d - base)
        if nxt.t - prev.t >= UNSEEN_MIN_S and end - prev.t >= UNSEEN_MIN_S:
            out.append((round(prev.t - t0, 6), round(end - t0, 6)))
    return out


def _name(e: Endpoint) -> str:
    host, port = e
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _bins(advances: list[tuple[float, int]], duration: float) -> list[tuple[float, float, float]]:
    """(start, end, bit/s) per BIN_S bin; the last bin ends at the last data segment (left out when under a tenth
    of a bin: its rate would be noise)."""
    n = max(1, math.ceil(duration / BIN_S))
    counts = [0] * n
    for t, b in advances:
        counts[min(n - 1, int(t / BIN_S))] += b
    out: list[tuple[float, float, float]] = []
    for i, b in enumerate(counts):
        start, end = i * BIN_S, min((i + 1) * BIN_S, duration)
        if end - start >= BIN_S / 10:
            out.append((round(start, 6), round(end, 6), b * 8 / (end - start)))
    return out


def _ts_rtts(segs: list[Segment], vantage: Endpoint, t0: float, t_end: float) -> list[tuple[float, float]]:
    first_sent: dict[int, float] = {}
    echoed: set[int] = set()
    out: list[tuple[float, float]] = []
    for s in segs:
        if s.src == vantage:
            if s.tsval is not None and s.tsval not in first_sent:
                first_sent[s.tsval] = s.t
        elif s.tsecr is not None and s.tsecr in first_sent and s.tsecr not in echoed:
            echoed.add(s.tsecr)
            sent = first_sent[s.tsecr]
            if t0 <= sent <= t_end:
                out.append((round(sent - t0, 6), round(s.t - sent, 6)))
    return out
