"""Path truth from the router's two captures (sans-IO: packets in, numbers out).

The router captures on both of its lab interfaces: `server-side.pcap` sees what the server sent before the
emulator (and what the emulator delivered to it), `client-side.pcap` the same at the client's side. A packet sent
toward the client is matched, in order, with an identical packet (addresses, ports, TCP sequence/ack/flags,
transport payload, and the IP ID and TCP options read from the raw records: a TCP retransmission can repeat
every other field of the copy it replaces) leaving the emulator on the other side; one without a match was dropped
by the emulator.
"""

from __future__ import annotations

import struct
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from lab.evidence.pcap import Packet

#: Counted drops and the emulator's counters may differ by at most this share (of the larger) before the run
#: is flagged invalid.
AGREEMENT = 0.01

Key = tuple[str, str, int, int, int, int, int, int, bytes, bytes]


def key(p: Packet, extra: bytes = b"") -> Key:
    return (p.src, p.dst, p.proto, p.sport, p.dport, p.seq, p.ack, p.flags, p.payload, extra)


def header_extras(data: bytes) -> list[bytes]:
    """Per record of a classic pcap (Ethernet or Linux cooked, IPv4): its IP ID and, for TCP, the TCP options
    (timestamps): what tells a retransmission from the copy it repeats. Empty bytes for records that are not."""
    endian = "<" if data[:4] in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    l2 = 16 if struct.unpack(endian + "I", data[20:24])[0] == 113 else 14
    out, off = [], 24
    while off + 16 <= len(data):
        incl = struct.unpack(endian + "I", data[off + 8:off + 12])[0]
        ip = data[off + 16 + l2:off + 16 + incl]
        off += 16 + incl
        if len(ip) < 20 or ip[0] >> 4 != 4:
            out.append(b"")
            continue
        ihl = (ip[0] & 0x0F) * 4
        l4 = ip[ihl:]
        opts = l4[20:(l4[12] >> 4) * 4] if ip[9] == 6 and len(l4) >= 20 else b""
        out.append(ip[4:6] + opts)
    return out


@dataclass
class Matched:
    """One direction: per packet on the sending side, the arrival time on the other side (None: dropped)."""

    sent: list[Packet]
    arrival: list[float | None] = field(default_factory=list)
    unmatched_arrivals: int = 0  # packets leaving the emulator that never entered it (should be 0)
    #: sent too close to the end of the other side's capture to know whether they arrived (the capture stopped
    #: before they could: e.g. a FIN sent as the client exits); neither dropped nor delivered
    unjudged: int = 0
    #: dropped packets sent in the run's last moments (`directions`' horizon), after the emulator's counters may
    #: have been read: the counters can miss them, so the agreement allows them
    tail_dropped: int = 0

    @property
    def dropped(self) -> int:
        return sum(1 for a in self.arrival if a is None) - self.unjudged

    @property
    def delivered(self) -> int:
        return sum(1 for a in self.arrival if a is not None)


Tagged = Sequence[tuple[Packet, bytes]]


def match(sent: Tagged, received: Tagged, tail_from: float | None = None) -> Matched:
    """Match `sent` (the sender's side of the emulator) with `received` (its other side), in capture order;
    each packet comes with its header extras (`header_extras`). An unmatched packet sent after the last one that
    arrived is unjudged, not dropped: the other side's capture may have ended before it could arrive (e.g. the
    server's FIN as the client exits); one sent before a packet that arrived was dropped (the emulator keeps a
    direction's order; with reordering jitter a late packet can only make this count lower)."""
    waiting: dict[Key, deque[float]] = defaultdict(deque)
    for p, x in received:
        waiting[key(p, x)].append(p.time)
    m = Matched(sent=[p for p, _ in sent])
    for p, x in sent:
        q = waiting.get(key(p, x))
        m.arrival.append(q.popleft() if q else None)
    last = max((i for i, a in enumerate(m.arrival) if a is not None), default=-1)
    m.unjudged = sum(1 for a in m.arrival[last + 1:] if a is None)
    if tail_from is not None:
        m.tail_dropped = sum(1 for p, a in zip(m.sent[:last + 1], m.arrival[:last + 1], strict=True)
                             if a is None and p.time >= tail_from)
    m.unmatched_arrivals = sum(len(q) for q in waiting.values())
    return m


def directions(client_side: Sequence[Packet], server_side: Sequence[Packet], client_ip: str,
               client_extras: Sequence[bytes] = (), server_extras: Sequence[bytes] = (),
               horizon_s: float | None = None) -> tuple[Matched, Matched]:
    """(down: server -> client, up: client -> server). Extras (one per packet) are used only when both captures
    have them for every packet. `horizon_s`: drops of packets sent within it of the sending capture's end are
    counted in `tail_dropped` too (see Matched)."""
    both = len(client_extras) == len(client_side) and len(server_extras) == len(server_side)
    c = list(zip(client_side, client_extras if both else [b""] * len(client_side), strict=True))
    s = list(zip(server_side, server_extras if both else [b""] * len(server_side), strict=True))
    def tail(side: Sequence[Packet]) -> float | None:
        return max(p.time for p in side) - horizon_s if horizon_s is not None and side else None

    down = match([x for x in s if x[0].dst == client_ip], [x for x in c if x[0].dst == client_ip], tail(server_side))
    up = match([x for x in c if x[0].src == client_ip], [x for x in s if x[0].src == client_ip], tail(client_side))
    return down, up


def agree(counted: int, counter: int, slack: int = 0, shared: bool = False) -> bool:
    """Counted drops against the emulator's: within AGREEMENT of the larger (both 0 agrees), or within `slack`
    packets whose fate the two windows may count differently (unjudged ones, drops in the run's last moments).
    `shared`: competing flows crossed the same emulator (lab/adverse/competing.py), whose counters hold their drops
    too, while the captures may hold only the measured flow's: then the captures' count must not exceed the
    counters' (by more than that margin)."""
    margin = max(AGREEMENT * max(counted, counter), slack)
    return counted - counter <= margin if shared else abs(counted - counter) <= margin
