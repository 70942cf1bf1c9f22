"""What limited the sender, as shares of its sending time (sans-IO: the server-side capture's rows in, three shares
out). docs/explain.md, "Window".

The sending time runs from the server's first to its last data packet, seen in the server-side capture (what the
sender did, before the emulator). Walking that capture in order, every moment is charged to the sender's state
after the last packet seen:
- *receiver-limited* (flow control): TCP: the bytes in flight (highest sequence sent - highest acknowledged) plus
  one full segment exceed the client's latest advertised window (or tshark flagged the last segment
  window-full); QUIC: the server said it is blocked (DATA_BLOCKED / STREAM_DATA_BLOCKED) and the client has not
  raised a limit since (MAX_DATA / MAX_STREAM_DATA);
- *application-limited*: nothing in flight (TCP: every byte acknowledged; QUIC: every ack-eliciting packet): the
  sender had nothing to send (in a page load also the wait for the next request);
- *sender-limited*: otherwise — data in flight and the receiver's window open: the congestion window, the pacer
  or loss recovery held it (a capture cannot tell these apart).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lab.explain.rows import Row

#: QUIC frame types (RFC 9000 19.x) that do not elicit an acknowledgment: PADDING, ACK, CONNECTION_CLOSE
NOT_ACK_ELICITING = frozenset({0x00, 0x02, 0x03, 0x1C, 0x1D})
BLOCKED = frozenset({0x14, 0x15})  # DATA_BLOCKED, STREAM_DATA_BLOCKED
RAISED = frozenset({0x10, 0x11})  # MAX_DATA, MAX_STREAM_DATA
STATES = ("receiver", "application", "sender")


@dataclass(frozen=True)
class Shares:
    receiver: float
    application: float
    sender: float
    seconds: float  # the sending time they divide


class _Clock:
    """Charges the time between events to the state in force, within [first data send, last data send]."""

    def __init__(self, first: float, last: float) -> None:
        self.first, self.last = first, last
        self.acc = dict.fromkeys(STATES, 0.0)
        self.t: float | None = None
        self.state = "sender"

    def at(self, t: float, state: str) -> None:
        if self.t is not None:
            a, b = max(self.t, self.first), min(t, self.last)
            if b > a:
                self.acc[self.state] += b - a
        self.t, self.state = t, state

    def shares(self) -> Shares | None:
        total = self.last - self.first
        if total <= 0:
            return None
        return Shares(self.acc["receiver"] / total, self.acc["application"] / total, self.acc["sender"] / total,
                      total)


def _span(times: Sequence[float], start: float | None) -> tuple[float, float] | None:
    """From the first data packet (at or after the request's arrival, when known) to the last."""
    times = [t for t in times if start is None or t >= start]
    return (times[0], times[-1]) if len(times) >= 2 and times[-1] > times[0] else None


def tcp(server_rows: Sequence[Row], client_ip: str, start: float | None = None) -> Shares | None:
    """`start`: when the request reached the server (the handshake's data before it are not the transfer's)."""
    data = [r for r in server_rows if r.src != client_ip and r.tcp_len > 0]
    span = _span([r.time for r in data], start)
    if span is None:
        return None
    mss = max(r.tcp_len for r in data)
    clock = _Clock(*span)
    nxt = una = 0
    rwnd: int | None = None
    full = False
    for r in server_rows:
        if r.src == client_ip:
            if r.tcp_ack is not None:
                una = max(una, r.tcp_ack)
            if r.tcp_window is not None:
                rwnd = r.tcp_window
        elif r.tcp_len > 0:
            nxt = max(nxt, r.tcp_seq + r.tcp_len)
            full = r.window_full
        else:
            continue
        flight = max(0, nxt - una)
        if full or (rwnd is not None and flight + mss > rwnd):
            state = "receiver"
        else:
            state = "application" if flight == 0 else "sender"
        clock.at(r.time, state)
    clock.at(span[1], clock.state)
    return clock.shares()


def quic(server_rows: Sequence[Row], client_ip: str, start: float | None = None) -> Shares | None:
    span = _span([r.time for r in server_rows if r.src != client_ip and r.short and r.streams()], start)
    if span is None:
        return None
    clock = _Clock(*span)
    unacked: set[int] = set()
    largest = -1
    blocked = False
    for r in server_rows:
        if not r.short or r.long_types:
            continue
        frames = set(r.quic_frame_types)
        if r.src == client_ip:
            largest = max([largest, *r.acked])
            unacked = {pn for pn in unacked if pn > largest}
            blocked = blocked and not frames & RAISED
        else:
            blocked = blocked or bool(frames & BLOCKED)
            if r.pns and frames - NOT_ACK_ELICITING:
                unacked.add(r.pns[-1])
        state = "receiver" if blocked else ("application" if not unacked else "sender")
        clock.at(r.time, state)
    clock.at(span[1], clock.state)
    return clock.shares()
