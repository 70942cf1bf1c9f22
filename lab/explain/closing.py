"""How a QUIC connection ended when it did not end well, from the client-side capture's rows (sans-IO).

Two questions a failed HTTP/3 run leaves, answered from the packets rather than from a client's exit code:
- **A handshake that never completed** (`stalled_handshake`): Initial packets are readable without the key log
  (their keys come from the client's first Destination Connection ID, RFC 9001 section 5.2), so the capture shows
  what the client sent of its ClientHello (how many CRYPTO frames, over how many datagrams, how often resent) and
  whether the server ever answered with CRYPTO data of its own (its ServerHello) or only acknowledged.
- **A connection closed with an error** (`error_close`): the first CONNECTION_CLOSE with a code other than
  NO_ERROR (0x0) or H3_NO_ERROR (0x100), who sent it and when after the request, named (lab/explain/closecodes.py),
  with the HTTP/3 frame types the client had sent before it: reserved ones (0x1f * N + 0x21, RFC 9114 section
  7.2.8) must be ignored by a receiver, so a close with H3_FRAME_UNEXPECTED after one points at the receiver."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.explain import closecodes
from lab.explain.rows import Row

INITIAL = 0  # QUIC long header packet type (RFC 9000 section 17.2)
HANDSHAKE = 2
CRYPTO_FRAME = 0x06
#: clean closes: NO_ERROR, H3_NO_ERROR, and application code 0 (not an HTTP/3 code: stacks that close their
#: application without one use it)
NO_ERRORS = {("transport", 0x0), ("application", 0x100), ("application", 0x0)}
#: HTTP/3 frame types (RFC 9114 section 7.2)
H3_FRAMES = {0x0: "DATA", 0x1: "HEADERS", 0x3: "CANCEL_PUSH", 0x4: "SETTINGS", 0x5: "PUSH_PROMISE", 0x7: "GOAWAY",
             0xD: "MAX_PUSH_ID"}


def h3_frame_name(t: int) -> str:
    """An HTTP/3 frame type's name; a reserved type (RFC 9114 section 7.2.8) says so."""
    if t in H3_FRAMES:
        return H3_FRAMES[t]
    if t >= 0x21 and (t - 0x21) % 0x1F == 0:
        return f"reserved 0x{t:x}"
    return f"unknown 0x{t:x}"


@dataclass(frozen=True)
class Close:
    side: str  # "client" or "server"
    kind: str  # "transport" or "application"
    code: int
    time: float
    reason: str = ""  # the frame's reason phrase, as its sender wrote it

    def text(self) -> str:
        named = closecodes.named(f"{self.kind} error 0x{self.code:x}")
        return f'{named}, reason "{self.reason}"' if self.reason else named


def closes(rows: Sequence[Row], client_ip: str) -> list[Close]:
    """Every CONNECTION_CLOSE the rows show, in capture order (tshark reads the 1-RTT ones only with the keys)."""
    out = []
    for r in rows:
        side = "client" if r.src == client_ip else "server"
        out += [Close(side, "transport", c, r.time, r.close_reason) for c in r.close_transport]
        out += [Close(side, "application", c, r.time, r.close_reason) for c in r.close_app]
    return out


def first_error(rows: Sequence[Row], client_ip: str) -> Close | None:
    """The first close with an error (None when every close was a clean one, or none was seen)."""
    return next((c for c in closes(rows, client_ip) if (c.kind, c.code) not in NO_ERRORS), None)


def error_close(rows: Sequence[Row], client_ip: str, request_time: float | None) -> str | None:
    """The first close with an error, said as a reason (None when every close was a clean one, or none was seen)."""
    bad = first_error(rows, client_ip)
    return None if bad is None else describe(bad, rows, client_ip, request_time)


def describe(bad: Close, rows: Sequence[Row], client_ip: str, request_time: float | None) -> str:
    """A close said as a reason: who, when after the request, the code named, the HTTP/3 frames sent before it."""
    when = (" before any request" if request_time is None
            else f" {(bad.time - request_time) * 1000:.1f} ms after the client's request" if bad.time >= request_time
            else f" {(request_time - bad.time) * 1000:.1f} ms before the client's request")
    text = f"the {bad.side} closed the connection{when}: {bad.text()}"
    sent = list(dict.fromkeys(t for r in rows if r.src == client_ip and r.time <= bad.time for t in r.h3_types))
    if sent:
        names = [h3_frame_name(t) for t in sent]
        text += f"; HTTP/3 frames the client had sent: {', '.join(names)}"
        unexpected = bad.side == "server" and bad.kind == "application" and bad.code == 0x105
        if unexpected and any(n.startswith("reserved") for n in names):
            text += " (a reserved type must be ignored by its receiver, RFC 9114 section 7.2.8)"
    return text


def _crypto(r: Row) -> list[tuple[int, int]]:
    if len(r.crypto_offsets) != len(r.crypto_lengths):
        return []
    return list(zip(r.crypto_offsets, r.crypto_lengths, strict=True))


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Byte intervals [start, end) -> the same bytes as merged intervals, sorted."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _first_flight(mine: Sequence[Row]) -> tuple[int, int, int]:
    """The ClientHello's size, and the datagrams and CRYPTO frames of its first flight: until every byte of it had
    been sent once."""
    hello = max(off + n for r in mine for off, n in _crypto(r))
    covered: list[tuple[int, int]] = []
    flight = pieces = 0
    for r in mine:
        flight += 1
        pieces += len(_crypto(r))
        covered = _merge([*covered, *((off, off + n) for off, n in _crypto(r))])
        if covered and covered[0] == (0, hello):
            break
    return hello, flight, pieces


def _client_initials(rows: Sequence[Row], client_ip: str) -> list[Row]:
    return [r for r in rows if r.src == client_ip and INITIAL in r.long_types and _crypto(r)]


def stalled_handshake(rows: Sequence[Row], client_ip: str) -> str | None:
    """Why no request appears, when the handshake never completed: the client's Initial flight against what the
    server sent back. None when the server sent CRYPTO data of its own (the handshake got past its first flight;
    a missing request is then another story) or nothing of the client's Initial flight is in the rows."""
    mine = _client_initials(rows, client_ip)
    theirs = [r for r in rows if r.src != client_ip]
    if not mine or any(_crypto(r) for r in theirs) or any(HANDSHAKE in r.long_types for r in theirs):
        return None
    hello, flight, pieces = _first_flight(mine)
    span = mine[-1].time - mine[0].time
    text = (f"the handshake did not complete: the client sent its ClientHello ({hello} bytes) in {pieces} "
            f"CRYPTO frames over {flight} Initial datagram{'s' if flight != 1 else ''}, and {len(mine)} Initial "
            f"datagrams with CRYPTO data in all over {span:.1f} s; ")
    if not theirs:
        return text + "nothing came back from the server"
    acks = sum(1 for r in theirs if INITIAL in r.long_types)
    return text + (f"the server sent {len(theirs)} datagram{'s' if len(theirs) != 1 else ''} ({acks} Initial), "
                   "none with CRYPTO data: no ServerHello, its TLS stack never got the whole ClientHello or "
                   "never answered it")


def hello_resent(rows: Sequence[Row], client_ip: str) -> str | None:
    """A handshake that completed late because the server answered only a resent ClientHello: how often the client
    had sent it, and how long after its first flight the server's first CRYPTO data came. None when the server
    answered the first flight (or the rows do not show the Initials)."""
    theirs = next((r for r in rows if r.src != client_ip and _crypto(r)), None)
    if theirs is None:
        return None
    mine = [r for r in _client_initials(rows, client_ip) if r.time < theirs.time]
    if not mine:
        return None
    hello, flight, pieces = _first_flight(mine)
    if len(mine) <= flight:
        return None
    return (f"the server answered the ClientHello ({hello} bytes, {pieces} CRYPTO frames in its first flight of "
            f"{flight} datagram{'s' if flight != 1 else ''}) only {(theirs.time - mine[0].time) * 1000:.0f} ms after "
            f"it was first sent, when the client had sent {len(mine)} Initial datagrams of it")
