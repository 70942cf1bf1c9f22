"""A small packet-level path for the calibration's tests: one Reno-like TCP download through a FIFO bottleneck (rate,
base RTT, queue in packets, random loss), seen from the client, written as a pcap or pcapng with dpkt.

The sender is ACK-clocked (slow start, then +1/cwnd per ACK; on a loss detected three packets later it retransmits
and halves once per window); the client ACKs every packet at once with its own TCP timestamp and the sender echoes
the newest one it received. All the one-way delay is before the bottleneck. Frames are written without their
payload bytes (a snap length of 0 payload, as `tcpdump -s 96` would), the IP length saying how long they were."""

from __future__ import annotations

import heapq
import io
import random
import struct
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field

import dpkt

MSS = 1448
WIRE = 1500  # IP bytes of a full segment (payload + 20 IP + 20 TCP + 12 timestamps)
CLIENT = ("10.1.0.2", 40000)
SERVER = ("10.2.0.2", 443)


@dataclass
class Path:
    rate_bps: float | Callable[[float], float]
    rtt_s: float
    queue_packets: int
    loss: float = 0.0
    seed: int = 1

    def rate_at(self, t: float) -> float:
        return self.rate_bps(t) if callable(self.rate_bps) else self.rate_bps


@dataclass(order=True)
class _Event:
    t: float
    order: int
    kind: str = field(compare=False)
    seq: int = field(compare=False, default=0)      # packet number (data) / packets acknowledged (ack)
    ts: int = field(compare=False, default=0)       # data: the echoed client TSval; ack: the client's TSval
    send: int = field(compare=False, default=0)     # which transmission (a retransmission is a new one)


@dataclass(frozen=True)
class Record:
    """One captured segment (client side)."""

    t: float
    from_server: bool
    seq: int
    ack: int
    flags: int
    payload: int
    tsval: int
    tsecr: int


def download(path: Path, duration_s: float, start_s: float = 1.0) -> list[Record]:
    """The client-side capture of one download lasting about `duration_s` after its handshake at `start_s`."""
    rnd = random.Random(path.seed)
    half = path.rtt_s / 2
    events: list[_Event] = []
    counter = iter(range(10**9))
    isn_c, isn_s = 1000, 5000
    out: list[Record] = []

    def push(t: float, kind: str, seq: int = 0, ts: int = 0, send: int = 0) -> None:
        heapq.heappush(events, _Event(t, next(counter), kind, seq, ts, send))

    def cts(t: float) -> int:
        return 7_000_000 + int(t * 1000)

    def sts(t: float) -> int:
        return 3_000_000 + int(t * 1000)

    t0 = start_s
    out.append(Record(t0, False, isn_c, 0, 0x02, 0, cts(t0), 0))
    out.append(Record(t0 + path.rtt_s, True, isn_s, isn_c + 1, 0x12, 0, sts(t0 + half), cts(t0)))
    t1 = t0 + path.rtt_s
    out.append(Record(t1, False, isn_c + 1, isn_s + 1, 0x10, 0, cts(t1), sts(t0 + half)))
    out.append(Record(t1, False, isn_c + 1, isn_s + 1, 0x18, 100, cts(t1), sts(t0 + half)))
    end = t1 + half + duration_s
    cwnd, ssthresh = 10.0, 1e9
    outstanding: OrderedDict[int, int] = OrderedDict()  # send index -> packet, oldest first
    retx_queue: deque[int] = deque()
    sends, next_pkt, recovery_until, cum = 0, 0, -1, 0
    echo = cts(t1)
    departures: deque[float] = deque()
    last_dep = 0.0
    received: set[int] = set()

    def send(t: float) -> None:
        nonlocal next_pkt, sends
        while len(outstanding) < int(cwnd) and (retx_queue or t < end):
            pkt = retx_queue.popleft() if retx_queue else next_pkt
            if pkt == next_pkt:
                next_pkt += 1
            outstanding[sends] = pkt
            push(t + half, "bottleneck", pkt, echo, sends)
            sends += 1

    send(t1 + half)
    while events:
        ev = heapq.heappop(events)
        t = ev.t
        if ev.kind == "bottleneck":
            while departures and departures[0] <= t:
                departures.popleft()
            if rnd.random() < path.loss or len(departures) >= path.queue_packets:
                continue
            last_dep = max(t, last_dep) + WIRE * 8 / path.rate_at(t)
            departures.append(last_dep)
            push(last_dep, "client", ev.seq, ev.ts, ev.send)
        elif ev.kind == "client":
            out.append(Record(t, True, isn_s + 1 + ev.seq * MSS, isn_c + 101, 0x10, MSS, sts(t - half), ev.ts))
            received.add(ev.seq)
            while cum in received:
                cum += 1
            out.append(Record(t, False, isn_c + 101, isn_s + 1 + cum * MSS, 0x10, 0, cts(t), sts(t - half)))
            push(t + half, "ack", ev.seq, cts(t), ev.send)
        elif ev.kind == "ack":
            echo = ev.ts
            outstanding.pop(ev.send, None)
            while outstanding and next(iter(outstanding)) < ev.send - 2:
                _, pkt = outstanding.popitem(last=False)
                retx_queue.append(pkt)
                if pkt > recovery_until:
                    ssthresh = cwnd = max(2.0, cwnd / 2)
                    recovery_until = next_pkt
            cwnd += 1.0 if cwnd < ssthresh else 1.0 / cwnd
            send(t)
    out.sort(key=lambda r: r.t)
    return out


def _frame(r: Record, client: tuple[str, int], server: tuple[str, int], timestamps: bool) -> bytes:
    """Ethernet + IPv4 + TCP headers (checksums left 0: nothing here checks them), no payload bytes."""
    src, dst = (server, client) if r.from_server else (client, server)
    opts = b""
    if r.flags & 0x02:
        opts += b"\x02\x04" + (1460).to_bytes(2, "big")
    if timestamps:
        opts += b"\x01\x01\x08\x0a" + struct.pack("!II", r.tsval, r.tsecr)
    tcp = struct.pack("!HHIIBBHHH", src[1], dst[1], r.seq % 2**32, r.ack % 2**32, (5 + len(opts) // 4) << 4,
                      r.flags, 65535, 0, 0) + opts
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp) + r.payload, 0, 0, 64, 6, 0, _ip(src[0]), _ip(dst[0]))
    return b"\x04" * 6 + b"\x02" * 6 + b"\x08\x00" + ip + tcp


def _ip(text: str) -> bytes:
    return bytes(int(x) for x in text.split("."))


def capture(records: list[Record], timestamps: bool = True, pcapng: bool = False,
            client: tuple[str, int] = CLIENT, server: tuple[str, int] = SERVER) -> bytes:
    buf = io.BytesIO()
    writer = dpkt.pcapng.Writer(buf) if pcapng else dpkt.pcap.Writer(buf, snaplen=128)
    for r in records:
        writer.writepkt(_frame(r, client, server, timestamps), ts=r.t)
    return buf.getvalue()


def empty_capture() -> bytes:
    buf = io.BytesIO()
    dpkt.pcap.Writer(buf)
    return buf.getvalue()
