"""Head-of-line blocking per stream (multi-object runs), from the router's captures (sans-IO: tshark rows in, a
HeadOfLine record out). docs/explain.md, "Head-of-line".

What the client's side of the emulator saw (the client-side capture), arrival by arrival:
- a *hole*: bytes received above bytes not yet received, in the unit the receiver delivers in order — the TCP byte
  stream (HTTP/1.1, HTTP/2: one ordered stream for every HTTP/2 stream of the connection), or one QUIC stream
  (HTTP/3: a hole in one stream holds only that stream);
- *held* bytes: received above a hole, so not deliverable until it fills; each held byte waits from its arrival to
  the arrival that fills every hole below it (its *hole-fill delay*).

Which HTTP/2 stream a TCP byte belongs to is read from the server-side capture, where the server's data are still
in order: tshark dissects an HTTP/2 frame in the segment that completes it (TLS records and HTTP/2 frames span
segments), so a new-data segment is charged to the HTTP/2 streams (HEADERS or DATA frames) completed by the first
segment at or after it that completes any. Held TCP bytes are charged to every stream with data in them. Without
the server-side capture the TCP side is not measured (the client side cannot be dissected behind a hole).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field

from lab.explain.model import Figure, HeadOfLine, StreamHol
from lab.explain.rows import Row

#: HTTP/2 frame types that carry a stream's response bytes (RFC 9113: DATA 0, HEADERS 1, CONTINUATION 9)
H2_STREAM_FRAMES = (0, 1, 9)


@dataclass
class _Order:
    """One in-order receiver: what has arrived, what is deliverable, and the held intervals with arrival times."""

    contig: int = 0
    held: list[tuple[int, int, float]] = field(default_factory=list)  # (start, end, arrival) above a hole

    def add(self, a: int, b: int, t: float) -> list[tuple[int, int, float]]:
        """Receive [a, b) at t; the held intervals released (delivered) by it, with their arrival times."""
        if b <= self.contig:
            return []
        if a > self.contig:
            new = [(a, b)]
            for s, e, _ in self.held:  # bytes already held are held since their first arrival
                new = [(x, y) for p, q in new for x, y in ((p, min(q, s)), (max(p, e), q)) if x < y]
            self.held += [(x, y, t) for x, y in new]
            self.held.sort()
            return []
        self.contig = max(self.contig, b)
        released = []
        while self.held and self.held[0][0] <= self.contig:  # every held interval it joins is delivered now
            s, e, at = self.held.pop(0)
            released.append((s, e, at))
            self.contig = max(self.contig, e)
        return released

    @property
    def open(self) -> bool:
        return bool(self.held)


@dataclass
class _Charge:
    bytes_held: int = 0
    longest_s: float = 0.0
    byte_s: float = 0.0  # held bytes x their wait, for the mean
    holes: int = 0
    last_hole: int = -1
    response_bytes: int = 0


class _StreamMap:
    """TCP offset ranges -> the HTTP/2 streams with data in them."""

    def __init__(self, ranges: Sequence[tuple[int, int, frozenset[int]]]) -> None:
        self.ranges = sorted(ranges)
        self.starts = [a for a, _, _ in self.ranges]

    def overlaps(self, a: int, b: int) -> list[tuple[int, int]]:
        """(stream, overlapping bytes) for [a, b): every stream of every range overlapping it."""
        out: dict[int, int] = {}
        i = max(0, bisect.bisect_right(self.starts, a) - 1)
        while i < len(self.ranges) and self.ranges[i][0] < b:
            s, e, streams = self.ranges[i]
            n = min(b, e) - max(a, s)
            if n > 0:
                for sid in streams:
                    out[sid] = out.get(sid, 0) + n
            i += 1
        return sorted(out.items())


def h2_stream_map(server_rows: Sequence[Row], client_ip: str) -> _StreamMap | None:
    """The TCP byte stream's HTTP/2 streams, from the server-side capture (None: no HTTP/2 frame dissected)."""
    pending: list[tuple[int, int]] = []
    ranges: list[tuple[int, int, frozenset[int]]] = []
    highest = 0
    for r in server_rows:
        if r.src == client_ip:
            continue
        if r.tcp_len > 0:
            a, b = r.tcp_seq - 1, r.tcp_seq - 1 + r.tcp_len
            if b > highest:  # new data (a retransmission of earlier bytes is dissected at their first copy)
                pending.append((max(a, highest), b))
                highest = b
        streams = frozenset(sid for typ, sid in zip(r.h2_types, r.h2_stream_ids, strict=False)
                            if typ in H2_STREAM_FRAMES and sid > 0)
        if streams and pending:
            ranges += [(a, b, streams) for a, b in pending]
            pending = []
    return _StreamMap(ranges) if ranges else None


def _figure(value: float | int | None, unit: str, note: str = "") -> Figure:
    if isinstance(value, float):
        value = round(value, 3)
    return Figure(value=value, unit=unit, source="pcap", note=note)


def _record(level: str, charges: dict[int, _Charge], holes: int, note: str) -> HeadOfLine:
    streams = [StreamHol(stream_id=sid, response_bytes=c.response_bytes, bytes_held=c.bytes_held,
                         hole_fill_delay_ms=round(c.longest_s * 1000, 3),
                         mean_wait_ms=round(c.byte_s / c.bytes_held * 1000, 3) if c.bytes_held else 0.0,
                         holes=c.holes)
               for sid, c in sorted(charges.items())]
    held = [s for s in streams if s.bytes_held]
    return HeadOfLine(
        level=level,  # type: ignore[arg-type]
        holes=_figure(holes, "holes", "intervals in which bytes were received above bytes not yet received"),
        streams=_figure(len(streams), "streams", "response streams with data in the capture"),
        streams_held=_figure(len(held), "streams", "streams with bytes held behind a hole"),
        bytes_held=_figure(sum(s.bytes_held for s in held), "bytes",
                           "held bytes summed over streams (TCP: charged to every stream with data in them)"),
        longest_hole_fill_delay_ms=_figure(max((s.hole_fill_delay_ms for s in held), default=0.0), "ms",
                                           "the longest a stream's byte waited behind a hole"),
        per_stream=streams, note=note)


def tcp_hol(client_rows: Sequence[Row], server_rows: Sequence[Row], client_ip: str) -> HeadOfLine | None:
    """HTTP/2: holes in the TCP byte stream (client-side arrivals) charged to the HTTP/2 streams with data in the
    held bytes. None when fewer than two streams carried a response (not a multi-object run) or no map exists."""
    smap = h2_stream_map(server_rows, client_ip)
    if smap is None:
        return None
    charges: dict[int, _Charge] = {}
    for a, b, streams in smap.ranges:
        for sid in streams:
            charges.setdefault(sid, _Charge()).response_bytes += b - a
    if len(charges) < 2:
        return None
    order, holes, was_open = _Order(), 0, False
    for r in client_rows:
        if r.src == client_ip or r.tcp_len <= 0:
            continue
        a = r.tcp_seq - 1
        for s, e, at in order.add(a, a + r.tcp_len, r.time):
            for sid, n in smap.overlaps(s, e):
                _charge(charges[sid], n, r.time - at, holes)
        if order.open and not was_open:
            holes += 1
        was_open = order.open
    return _record("tcp byte stream", charges, holes, (
        "HTTP/2 over one TCP connection: a hole holds every stream's bytes above it; a stream is charged for held "
        "bytes its frames occupy (the server-side capture maps offsets to streams)"))


def _charge(c: _Charge, n: int, wait_s: float, hole: int) -> None:
    c.bytes_held += n
    c.byte_s += n * wait_s
    c.longest_s = max(c.longest_s, wait_s)
    if c.last_hole != hole:
        c.holes += 1
        c.last_hole = hole


def quic_hol(client_rows: Sequence[Row], client_ip: str) -> HeadOfLine | None:
    """HTTP/3: holes per QUIC request stream (client-initiated bidirectional, id % 4 == 0): a stream's hole holds
    only that stream. None when fewer than two request streams carried a response."""
    orders: dict[int, _Order] = {}
    charges: dict[int, _Charge] = {}
    hole_no: dict[int, int] = {}
    holes = 0
    for r in client_rows:
        if r.src == client_ip:
            continue
        for sid, off, n in r.streams():
            if sid % 4 != 0 or n <= 0:
                continue
            o = orders.setdefault(sid, _Order())
            c = charges.setdefault(sid, _Charge())
            c.response_bytes = max(c.response_bytes, off + n)
            was_open = o.open
            for s, e, at in o.add(off, off + n, r.time):
                _charge(c, e - s, r.time - at, hole_no.get(sid, 0))
            if o.open and not was_open:
                holes += 1
                hole_no[sid] = holes
    if len(charges) < 2:
        return None
    return _record("quic stream", charges, holes, (
        "HTTP/3: a hole in one QUIC stream holds only that stream's later bytes (STREAM frame offsets, client-side "
        "capture)"))


def head_of_line(protocol: str, client_rows: Sequence[Row], server_rows: Sequence[Row],
                 client_ip: str) -> tuple[HeadOfLine | None, str]:
    """The run's head-of-line record, or None and why not ("" when it is simply a one-object run)."""
    if protocol == "h3":
        return quic_hol(client_rows, client_ip), ""
    if protocol == "h2":
        if not server_rows:
            return None, "HTTP/2 head-of-line needs the server-side capture (to map TCP bytes to streams)"
        return tcp_hol(client_rows, server_rows, client_ip), ""
    return None, ""
