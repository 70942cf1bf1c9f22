"""The resumed connection of a resume/0rtt run, timed from its decrypted captures (`sessions.json` beside the run's
evidence): what 0-RTT sent early and what still waited a round trip (issue 37; docs/seeds.md, seed 004).

A resume or 0rtt run makes two QUIC connections; the second resumes the first's TLS session (and, for 0rtt, sends
its request as 0-RTT early data: lab/evidence/sessions.py proves both). Of that second connection, from tshark's rows
of the client-side capture (the router's clock; t0 = the client's first Initial of the connection):
- when the request left (its first STREAM bytes on a client-initiated bidirectional stream) and in which packets
  (0-RTT, or 1-RTT after the handshake);
- when the response's first STREAM bytes reached the client, and its last new byte;
- when the handshake completed: the client's TLS Finished left, the server's HANDSHAKE_DONE arrived;
- round trip by round trip (round k: arrivals within half an RTT of t0 + k x RTT, the link's configured RTT, or on a
  link without added delay the handshake's: t0 to the server's first datagram; at most MAX_ROUNDS rounds) the
  response bytes that arrived and the server's datagram bytes (its flight: the bytes in flight per round trip, how
  its congestion window grew);
- from the server-side capture: what the server sent before it received the client's first Handshake packet (which
  validates the client's address) against 3 x what it had received then: RFC 9000 section 8.1's anti-amplification
  limit. Datagram bytes are UDP payload bytes, as the RFC counts them.

Sans-IO: tshark's rows in (lab/explain/rows.py, the same rows `quiclab explain` reads), a SessionTimeline out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel

from lab.errors import UsageError
from lab.explain.rows import Row, client_of
from lab.explain.versus import Arrival, analyse
from lab.results.schema import RunRecord
from lab.workloads.spec import parse_workload

SESSIONS_JSON = "sessions.json"
CLIENT_HELLO, FINISHED = 1, 20
QUIC_0RTT, QUIC_HANDSHAKE = 1, 2
HANDSHAKE_DONE = 0x1E
UDP_HEADER = 8
#: RFC 9000 section 8.1: before validating the client's address a server sends at most 3x the bytes it received
AMPLIFICATION = 3
#: the smallest datagram payload a QUIC endpoint must be able to send (RFC 9000 section 14): a server with less room
#: than this under its limit could not send another full-sized datagram
MIN_DATAGRAM = 1200
#: the most round trips a timeline lists
MAX_ROUNDS = 60


class Round(BaseModel):
    """Round trip k: what reached the client within half an RTT of t0 + k x RTT."""

    k: int
    response_bytes: int  # the response's STREAM bytes that arrived in this round (each byte once)
    response_bytes_by: int  # ... in this round and before: by t0 + (k + 1/2) x RTT
    server_bytes: int  # the server's datagrams' UDP payload bytes that arrived in this round: its flight
    server_packets: int


class Amplification(BaseModel):
    """The server's sending before it validated the client's address (its server-side capture)."""

    validated_ms: float  # the client's first Handshake packet reached the server (ms after t0)
    received_bytes: int  # client datagram payload bytes the server had received before then
    sent_bytes: int  # server datagram payload bytes sent before then
    limit_bytes: int  # AMPLIFICATION x received_bytes
    response_bytes: int  # the response's STREAM bytes among them
    limited: bool  # sent_bytes > limit_bytes - MIN_DATAGRAM: the limit left no room for another datagram


class SessionTimeline(BaseModel):
    run_key: str
    protocol: str
    workload: str
    status: Literal["timed", "not timed"]
    why: str = ""
    rtt_ms: float | None = None  # the link's configured RTT (the run's record): the round trips' length (else the
    # handshake's, handshake_rtt_ms)
    connections: int = 0  # QUIC connections with a client ClientHello in the client-side capture
    connection: int | None = None  # tshark's index of the connection timed (the second one)
    early_data: bool = False  # the request left in 0-RTT packets
    request_packets: Literal["0-RTT", "1-RTT"] | None = None
    request_ms: float | None = None
    handshake_rtt_ms: float | None = None  # t0 to the server's first datagram reaching the client
    first_response_ms: float | None = None
    client_finished_ms: float | None = None
    handshake_done_ms: float | None = None  # the server's HANDSHAKE_DONE reached the client
    last_response_ms: float | None = None
    response_bytes: int = 0
    rounds: list[Round] = []
    amplification: Amplification | None = None  # None: no server-side capture (or no Handshake packet in it)

    def bytes_by_round(self, k: int) -> int | None:
        """The response's bytes by the end of round k (None: the timeline has no such round)."""
        if not self.rounds:
            return None
        done = [r.response_bytes_by for r in self.rounds if r.k <= k]
        return done[-1] if done else 0


def applies(record: RunRecord) -> bool:
    """A QUIC run of a resume or 0rtt workload: two connections, the second resuming."""
    if record.protocol != "h3" or not record.workload:
        return False
    try:
        return parse_workload(record.workload).sessions
    except UsageError:  # a workload string this version cannot read is not one of these
        return False


def _ms(t: float | None, t0: float) -> float | None:
    return None if t is None else round((t - t0) * 1000, 3)


def _payload(r: Row) -> int:
    return max(0, r.udp_len - UDP_HEADER)


def _response_ranges(r: Row) -> list[tuple[int, int, int]]:
    """The row's STREAM data on client-initiated bidirectional streams (the requests' and responses' streams)."""
    return [(sid, off, off + n) for sid, off, n in r.streams() if sid % 4 == 0 and n > 0]


def connections(rows: Sequence[Row], client: str) -> list[int]:
    """tshark's indices of the QUIC connections whose client sent a ClientHello, in the order they began."""
    out: list[int] = []
    for r in rows:
        if r.src == client and CLIENT_HELLO in r.hs_types and r.quic_conn is not None and r.quic_conn not in out:
            out.append(r.quic_conn)
    return out


def amplification(server_rows: Sequence[Row], client: str, t0: float) -> Amplification | None:
    """The second connection's sending before address validation, from the server-side capture's rows."""
    conns = connections(server_rows, client)
    if len(conns) < 2:
        return None
    rows = [r for r in server_rows if r.quic_conn == conns[1]]
    received = sent = response = 0
    for r in rows:
        if r.src == client:
            if QUIC_HANDSHAKE in r.long_types:
                limit = AMPLIFICATION * received
                return Amplification(validated_ms=round((r.time - t0) * 1000, 3), received_bytes=received,
                                     sent_bytes=sent, limit_bytes=limit, response_bytes=response,
                                     limited=sent > limit - MIN_DATAGRAM)
            received += _payload(r)
        else:
            sent += _payload(r)
            response += sum(b - a for _, a, b in _response_ranges(r))
    return None


def _rounds(arrivals: list[tuple[float, int, int]], rtt: float, end: float) -> list[Round]:
    """(time from t0, response bytes new, server payload bytes) per server datagram -> the rounds up to `end`."""
    last = min(MAX_ROUNDS, max(1, math.floor(end / rtt + 0.5)))
    out: list[Round] = []
    by = 0
    for k in range(1, last + 1):
        lo, hi = (k - 0.5) * rtt if k > 1 else -math.inf, (k + 0.5) * rtt
        inside = [a for a in arrivals if lo <= a[0] < hi]
        got = sum(a[1] for a in inside)
        by += got
        out.append(Round(k=k, response_bytes=got, response_bytes_by=by, server_bytes=sum(a[2] for a in inside),
                         server_packets=len(inside)))
    return out


def timeline(record: RunRecord, client_rows: Sequence[Row], server_rows: Sequence[Row]) -> SessionTimeline:
    """The second connection's timeline from tshark's rows of the run's client-side (and server-side) capture."""
    out = SessionTimeline(run_key=record.run_key, protocol=record.protocol, workload=record.workload or "",
                          status="not timed", rtt_ms=None if record.rtt_s is None else round(record.rtt_s * 1000, 3))
    client = client_of(client_rows)
    if client is None:
        out.why = "the client-side capture has no packets"
        return out
    conns = connections(client_rows, client)
    out.connections = len(conns)
    if len(conns) < 2:
        out.why = (f"the client-side capture shows {len(conns)} QUIC connection(s) with a ClientHello, expected 2 "
                   "(the first, then the resumed one)")
        return out
    out.connection = conns[1]
    rows = [r for r in client_rows if r.quic_conn == conns[1]]
    t0 = next(r.time for r in rows if r.src == client)
    from_client = [r for r in rows if r.src == client]
    from_server = [r for r in rows if r.src != client]
    req = next((r for r in from_client if _response_ranges(r)), None)
    if req is None:
        out.why = ("no request in the resumed connection: no STREAM data from the client (was the capture decrypted? "
                   "keys.log must hold the connection's secrets)")
        return out
    out.request_ms = _ms(req.time, t0)
    out.early_data = QUIC_0RTT in req.long_types
    out.request_packets = "0-RTT" if out.early_data else "1-RTT"
    out.handshake_rtt_ms = _ms(from_server[0].time if from_server else None, t0)
    out.client_finished_ms = _ms(next((r.time for r in from_client if FINISHED in r.hs_types), None), t0)
    out.handshake_done_ms = _ms(next((r.time for r in from_server if HANDSHAKE_DONE in r.quic_frame_types), None), t0)
    # each response byte once (a re-sent byte is not new), per server datagram: (time, new bytes, payload bytes)
    arrivals = [Arrival(r.time - t0, _response_ranges(r), _payload(r)) for r in from_server]
    received = iter(analyse(arrivals, None).curve.received)  # one point per arrival with STREAM data
    new: list[tuple[float, int, int]] = []
    before = 0
    for a in arrivals:
        got = next(received) if a.ranges else before
        new.append((a.t, got - before, a.wire_bytes))
        before = got
    out.response_bytes = before
    first = next((t for t, n, _ in new if n > 0), None)
    last = next((t for t, n, _ in reversed(new) if n > 0), None)
    if first is None or last is None:
        out.why = "the server sent no response STREAM data in the resumed connection"
        return out
    out.first_response_ms, out.last_response_ms = _ms(first + t0, t0), _ms(last + t0, t0)
    rtt = record.rtt_s if record.rtt_s else (out.handshake_rtt_ms or 0) / 1000
    if rtt > 0:
        out.rounds = _rounds(new, rtt, last)
    out.amplification = amplification(server_rows, client, t0)
    out.status = "timed"
    return out


def summary(t: SessionTimeline) -> str:
    """One line of the timeline, for `quiclab explain`."""
    if t.status != "timed":
        return f"{t.run_key}: resumed connection not timed: {t.why}"
    a = t.amplification
    amp = ("" if a is None else f"; before address validation ({a.validated_ms:.0f} ms) the server sent {a.sent_bytes} "
           f"of its {a.limit_bytes}-byte limit{' (at the limit)' if a.limited else ''}")
    return (f"{t.run_key}: resumed connection: request at {t.request_ms:.0f} ms ({t.request_packets}), first response "
            f"byte at {t.first_response_ms:.0f} ms, HANDSHAKE_DONE at "
            f"{'-' if t.handshake_done_ms is None else f'{t.handshake_done_ms:.0f}'} ms, {t.bytes_by_round(1)} "
            f"response bytes by 1 RTT, the last at {t.last_response_ms:.0f} ms"
            f" (round {t.rounds[-1].k if t.rounds else '-'}){amp}")
