"""How the sender responded to loss in one run, from its evidence (sans-IO: text and packets in, numbers out).

- TCP: the router's server-side capture sees every segment the server sent (before the link drops any) and every
  ACK the link delivered to it. Retransmitted bytes are payload bytes below the highest sequence number already
  sent; bytes in flight = highest sequence sent - highest cumulative ACK (as tshark's tcp.analysis does, SACK
  not counted).
- QUIC with the server's qlog (gtlsserver): every packet_sent's STREAM frames (retransmitted bytes: stream bytes
  below the highest offset already sent on that stream) and recovery:metrics_updated's congestion window and
  bytes in flight.
- QUIC without qlog but with the client's TLS key log: the server-side capture decrypted by tshark (fields in,
  see TSHARK_FIELDS); bytes in flight = bytes of the server's 1-RTT packets numbered above the client's largest
  acknowledgment (ACK ranges not counted).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from lab.evidence.pcap import PROTO_TCP, Packet

SOURCE_TCP = "pcap (TCP sequence numbers)"
SOURCE_QLOG = "server qlog"
SOURCE_TSHARK = "pcap decrypted with the key log (tshark)"
_SEQ_MOD = 1 << 32
_SYN, _ACK = 0x02, 0x10


@dataclass
class LossResponse:
    source: str
    data_packets: int = 0  # packets carrying data (TCP payload; QUIC STREAM frames) the sender sent
    data_bytes: int = 0  # their data bytes (TCP payload incl. TLS records; QUIC STREAM frame bytes)
    retx_packets: int = 0  # of those, packets that carried data sent before
    retx_bytes: int = 0  # data bytes sent again
    sent: list[tuple[float, float, bool]] = field(default_factory=list)  # (t s, data end offset, retransmission?)
    in_flight: list[tuple[float, float]] = field(default_factory=list)  # (t s, bytes in flight)
    cwnd: list[tuple[float, float]] = field(default_factory=list)  # (t s, congestion window) where known

    @property
    def retx_fraction(self) -> float | None:
        return self.retx_bytes / self.data_bytes if self.data_bytes else None

    def add(self, t: float, start: int, length: int, hi: int) -> int:
        """Account `length` data bytes at `start` sent at `t`, `hi` being the highest end sent before; returns the
        new highest end."""
        old = max(0, min(start + length, hi) - start)
        self.data_bytes += length
        self.retx_bytes += old
        self.sent.append((t, float(start + length), old > 0))
        return max(hi, start + length)


def tcp_response(packets: Sequence[Packet], server: str, port: int) -> LossResponse | None:
    """The server's sending on the (first) TCP connection from server:port in a server-side capture."""
    tcp = [p for p in packets if p.proto == PROTO_TCP]
    out_pkts = [p for p in tcp if p.src == server and p.sport == port]
    if not out_pkts:
        return None
    syn = next((p for p in out_pkts if p.flags & _SYN), None)
    first_data = next((p for p in out_pkts if p.payload_len > 0), None)
    if first_data is None:
        return None
    client, cport = first_data.dst, first_data.dport
    base = (syn.seq + 1) % _SEQ_MOD if syn else first_data.seq
    t0 = tcp[0].time
    r = LossResponse(SOURCE_TCP)
    hi = 0
    acked = 0
    for p in tcp:
        if p.src == server and p.sport == port and p.dst == client and p.dport == cport and p.payload_len > 0:
            start = (p.seq - base) % _SEQ_MOD
            before = r.retx_bytes
            hi = r.add(p.time - t0, start, p.payload_len, hi)
            r.data_packets += 1
            r.retx_packets += r.retx_bytes > before
            r.in_flight.append((p.time - t0, float(max(0, hi - acked))))
        elif p.src == client and p.sport == cport and p.dst == server and p.dport == port and p.flags & _ACK:
            ack = (p.ack - base) % _SEQ_MOD
            if ack <= hi + 1:  # ignore ACKs of the handshake (ack = base - 1 + 1 before any data)
                acked = max(acked, ack)
    return r


def _qlog_records(text: str) -> Iterable[dict[str, object]]:
    for chunk in text.split("\x1e"):
        chunk = chunk.strip()
        if not chunk:
            continue
        try:
            doc = json.loads(chunk)
        except json.JSONDecodeError:
            continue  # a record cut short when the process was stopped
        if isinstance(doc, dict):
            yield doc


def qlog_response(text: str) -> LossResponse | None:
    """The sender's view from its qlog (JSON-SEQ, qlog 0.3 as ngtcp2 writes it; times in ms)."""
    r = LossResponse(SOURCE_QLOG)
    hi: dict[object, int] = {}
    seen = False
    for ev in _qlog_records(text):
        name, data = ev.get("name"), ev.get("data")
        if not isinstance(data, dict):
            continue
        t = float(ev.get("time", 0) or 0) / 1000  # type: ignore[arg-type]
        if name == "transport:packet_sent":
            frames = [f for f in data.get("frames", []) or []
                      if isinstance(f, dict) and f.get("frame_type") == "stream"]
            if not frames:
                continue
            seen = True
            before = r.retx_bytes
            for f in frames:
                sid = f.get("stream_id")
                hi[sid] = r.add(t, int(f.get("offset", 0) or 0), int(f.get("length", 0) or 0), hi.get(sid, 0))
            r.data_packets += 1
            r.retx_packets += r.retx_bytes > before
        elif name == "recovery:metrics_updated":
            if "bytes_in_flight" in data:
                r.in_flight.append((t, float(data["bytes_in_flight"])))
            if "congestion_window" in data:
                r.cwnd.append((t, float(data["congestion_window"])))
    return r if seen else None


#: tshark -T fields columns the QUIC-from-pcap reader takes, in this order (-E occurrence=a -E aggregator=';').
TSHARK_FIELDS = ("frame.time_relative", "ip.src", "udp.length", "quic.header_form", "quic.packet_number",
                 "quic.stream.stream_id", "quic.stream.offset", "quic.stream.length", "quic.ack.largest_acknowledged")


def tshark_quic_response(text: str, server: str) -> LossResponse | None:
    """The server's sending from tshark's decrypted fields (TSHARK_FIELDS, tab-separated, one line per datagram)."""
    r = LossResponse(SOURCE_TSHARK)
    hi: dict[str, int] = {}
    unacked: deque[tuple[int, int]] = deque()  # (1-RTT packet number, datagram bytes) the server sent, in order
    in_flight = 0
    largest_acked = -1
    seen = False
    for line in text.splitlines():
        cols = line.split("\t")
        if len(cols) < len(TSHARK_FIELDS):
            continue
        t_s, src, udp_len, forms, pns, sids, offs, lens, acks = cols[:len(TSHARK_FIELDS)]
        try:
            t = float(t_s)
        except ValueError:
            continue
        split = [x.split(";") if x else [] for x in (sids, offs, lens)]
        kinds = forms.split(";")
        if src != server:
            if any(f not in ("0", "False") for f in kinds):
                continue  # acknowledgments of the Initial/Handshake packet number spaces, not of 1-RTT data
            for a in acks.split(";") if acks else []:
                if a.isdigit():
                    largest_acked = max(largest_acked, int(a))
            while unacked and unacked[0][0] <= largest_acked:
                in_flight -= unacked.popleft()[1]
            continue
        short = [i for i, f in enumerate(kinds) if f in ("0", "False")]
        numbers = pns.split(";")
        if short and short[-1] < len(numbers) and numbers[short[-1]].isdigit() and udp_len.isdigit():
            unacked.append((int(numbers[short[-1]]), int(udp_len)))
            in_flight += int(udp_len)
        if not split[0] or len({len(x) for x in split}) != 1:
            continue  # no STREAM frame, or fields that do not line up (a frame tshark could not decode)
        seen = True
        before = r.retx_bytes
        for sid, off, length in zip(*split, strict=True):
            hi[sid] = r.add(t, int(off or 0), int(length or 0), hi.get(sid, 0))
        r.data_packets += 1
        r.retx_packets += r.retx_bytes > before
        r.in_flight.append((t, float(in_flight)))
    return r if seen else None
