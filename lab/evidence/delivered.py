"""Delivered bytes over time, from a run's client-side capture (runs.csv `delivered`; issue 35's trace plots).

What the link delivered to the client from the server's address and port: every packet's transport payload (TCP
payload, UDP payload: QUIC packets whole), retransmissions included, binned by the capture's time since the link
was applied (a mahimahi trace starts then: lab/link/linkem.py), and when the run's first packet to the server left
the client on that clock (`start_s`: the run's own start on the trace, where what the trace could deliver to it
begins; lab/report/trace_plots.py). Sans-IO: packets in, a series out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass

from lab.evidence.pcap import Packet

#: A series has at most this many bins: the bin width grows with the run (at least MIN_BIN_S, in 0.1 s steps).
MAX_BINS = 300
MIN_BIN_S = 0.1


@dataclass(frozen=True)
class Delivered:
    """Payload bytes per bin [k * bin_s, (k + 1) * bin_s) from the link's application, up to the last data packet;
    `before` counts packets captured before it (none in a sound run); `start_s` is when the client's first packet
    to the server was captured, s since the link's application (None: not seen, or a record from before it was kept)."""

    bin_s: float
    bytes: tuple[int, ...]
    before: int = 0
    start_s: float | None = None

    def cumulative(self) -> list[tuple[float, int]]:
        """(time at the end of each bin, bytes delivered by then), starting at (0, 0)."""
        out, total = [(0.0, 0)], 0
        for k, b in enumerate(self.bytes):
            total += b
            out.append((round((k + 1) * self.bin_s, 6), total))
        return out

    def to_json(self) -> str:
        doc: dict[str, object] = {"zero": "link applied", "bin_s": self.bin_s, "bytes": list(self.bytes)}
        if self.before:
            doc["before"] = self.before
        if self.start_s is not None:
            doc["start_s"] = self.start_s
        return json.dumps(doc, separators=(",", ":"))


def bin_width(duration_s: float) -> float:
    return max(MIN_BIN_S, math.ceil(duration_s / MAX_BINS * 10) / 10)


def delivered(packets: Iterable[Packet], server: str, port: int, zero_unix: float) -> Delivered | None:
    """The series of the data packets from `server`:`port` (None when the capture holds none), with the time of the
    client's first packet to `server`:`port` (a SYN or a QUIC Initial: any packet, payload or not) at or after zero."""
    times: list[tuple[float, int]] = []
    before = 0
    start: float | None = None
    for p in packets:
        t = p.time - zero_unix
        if p.dst == server and p.dport == port and t >= 0 and (start is None or t < start):
            start = t
        if p.src != server or p.sport != port or p.payload_len <= 0:
            continue
        if t < 0:
            before += 1
        else:
            times.append((t, p.payload_len))
    if not times:
        return None
    width = bin_width(max(t for t, _ in times))
    acc = [0] * (int(max(t for t, _ in times) // width) + 1)
    for t, n in times:
        acc[int(t // width)] += n
    return Delivered(bin_s=width, bytes=tuple(acc), before=before,
                     start_s=None if start is None else round(start, 6))


def parse(text: str) -> Delivered | None:
    """A runs.csv `delivered` cell back (None when empty or not a series: written by another version)."""
    if not text:
        return None
    try:
        doc = json.loads(text)
        start = doc.get("start_s")
        return Delivered(bin_s=float(doc["bin_s"]), bytes=tuple(int(b) for b in doc["bytes"]),
                         before=int(doc.get("before", 0)), start_s=None if start is None else float(start))
    except (ValueError, KeyError, TypeError):
        return None
