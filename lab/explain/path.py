"""Path truth from the router's two captures (sans-IO: packets in, numbers out).

The router captures on both of its lab interfaces: `server-side.pcap` sees what the server sent before the
emulator (and what the emulator delivered to it), `client-side.pcap` the same at the client's side. A packet sent
toward the client is matched, in order, with an identical packet (addresses, ports, TCP sequence/ack/flags,
transport payload) leaving the emulator on the other side; one without a match was dropped by the emulator.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from lab.evidence.pcap import Packet

#: Counted drops and the emulator's counters may differ by at most this share (of the larger) before the run
#: is flagged invalid.
AGREEMENT = 0.01

Key = tuple[str, str, int, int, int, int, int, int, bytes]


def key(p: Packet) -> Key:
    return (p.src, p.dst, p.proto, p.sport, p.dport, p.seq, p.ack, p.flags, p.payload)


@dataclass
class Matched:
    """One direction: per packet on the sending side, the arrival time on the other side (None: dropped)."""

    sent: list[Packet]
    arrival: list[float | None] = field(default_factory=list)
    unmatched_arrivals: int = 0  # packets leaving the emulator that never entered it (should be 0)

    @property
    def dropped(self) -> int:
        return sum(1 for a in self.arrival if a is None)

    @property
    def delivered(self) -> int:
        return len(self.sent) - self.dropped


def match(sent: Sequence[Packet], received: Sequence[Packet]) -> Matched:
    """Match `sent` (the sender's side of the emulator) with `received` (its other side), in capture order."""
    waiting: dict[Key, deque[float]] = defaultdict(deque)
    for p in received:
        waiting[key(p)].append(p.time)
    m = Matched(sent=list(sent))
    for p in sent:
        q = waiting.get(key(p))
        m.arrival.append(q.popleft() if q else None)
    m.unmatched_arrivals = sum(len(q) for q in waiting.values())
    return m


def directions(client_side: Sequence[Packet], server_side: Sequence[Packet],
               client_ip: str) -> tuple[Matched, Matched]:
    """(down: server -> client, up: client -> server)."""
    down = match([p for p in server_side if p.dst == client_ip], [p for p in client_side if p.dst == client_ip])
    up = match([p for p in client_side if p.src == client_ip], [p for p in server_side if p.src == client_ip])
    return down, up


def agree(counted: int, counter: int) -> bool:
    """Counted drops against the emulator's: within AGREEMENT of the larger (both 0 agrees)."""
    return abs(counted - counter) <= AGREEMENT * max(counted, counter)
