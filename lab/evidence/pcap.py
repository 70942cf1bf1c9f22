"""Reading the router's captures: a small pcap reader (Ethernet or Linux cooked, IPv4, TCP and UDP) and the
pcap-based goodput, computed the way the quic-interop-runner computes it: payload bits over the time from the
first to the last data packet the server sent, handshake excluded.

- HTTP/3 (QUIC): the first and last 1-RTT (short header) packet from the server, as the interop runner does.
- HTTP/1.1 and HTTP/2 (TCP + TLS 1.3): the first server segment carrying payload after the client's second
  payload-bearing flight (its Finished, with or followed by the request), to the last server segment carrying
  payload. TLS 1.3 encrypts everything after the ServerHello, so this is the closest cleartext analogue of "after
  the handshake".

Sans-IO: bytes in, numbers out (lab/evidence/capture.py does the capturing).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

LINKTYPE_ETHERNET = 1
LINKTYPE_LINUX_SLL = 113
PROTO_TCP = 6
PROTO_UDP = 17


class PcapError(ValueError):
    pass


@dataclass(frozen=True)
class Packet:
    time: float     # seconds (capture clock)
    src: str
    dst: str
    proto: int      # 6 TCP, 17 UDP
    sport: int
    dport: int
    payload: bytes  # transport payload (as captured: may be cut by the snap length)
    payload_len: int  # transport payload length on the wire (from the IP header)
    seq: int = 0      # TCP: sequence number, acknowledgment number and flags (0 for UDP)
    ack: int = 0
    flags: int = 0


def _ip(b: bytes) -> str:
    return ".".join(str(x) for x in b)


def read_pcap(data: bytes) -> list[Packet]:
    """Every IPv4 TCP/UDP packet of a classic pcap file (micro- or nanosecond, either byte order)."""
    if len(data) < 24:
        raise PcapError("not a pcap file: shorter than its 24-byte header")
    magic_le = struct.unpack("<I", data[:4])[0]
    if magic_le in (0xA1B2C3D4, 0xA1B23C4D):
        endian = "<"
    elif struct.unpack(">I", data[:4])[0] in (0xA1B2C3D4, 0xA1B23C4D):
        endian = ">"
    else:
        raise PcapError(f"not a pcap file (magic {data[:4].hex()}; pcapng is not read here)")
    magic = struct.unpack(endian + "I", data[:4])[0]
    scale = 1e-9 if magic == 0xA1B23C4D else 1e-6
    linktype = struct.unpack(endian + "I", data[20:24])[0]
    if linktype == LINKTYPE_ETHERNET:
        l2, type_at = 14, 12
    elif linktype == LINKTYPE_LINUX_SLL:
        l2, type_at = 16, 14
    else:
        raise PcapError(f"unsupported pcap link type {linktype} (Ethernet and Linux cooked are read)")
    out: list[Packet] = []
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _orig = struct.unpack(endian + "IIII", data[off:off + 16])
        if off + 16 + incl > len(data):
            break  # a record cut short (the capture was stopped while writing it)
        frame = data[off + 16:off + 16 + incl]
        off += 16 + incl
        pkt = _packet(frame, l2, type_at, sec + frac * scale)
        if pkt is not None:
            out.append(pkt)
    return out


def _packet(frame: bytes, l2: int, type_at: int, t: float) -> Packet | None:
    if len(frame) < l2 + 20 or frame[type_at:type_at + 2] != b"\x08\x00":
        return None
    ip = frame[l2:]
    if ip[0] >> 4 != 4:
        return None
    ihl = (ip[0] & 0x0F) * 4
    total_len = struct.unpack("!H", ip[2:4])[0]
    proto = ip[9]
    src, dst = _ip(ip[12:16]), _ip(ip[16:20])
    l4 = ip[ihl:]
    if proto == PROTO_UDP and len(l4) >= 8:
        sport, dport = struct.unpack("!HH", l4[:4])
        return Packet(t, src, dst, proto, sport, dport, l4[8:], max(0, total_len - ihl - 8))
    if proto == PROTO_TCP and len(l4) >= 20:
        sport, dport = struct.unpack("!HH", l4[:4])
        seq, ack = struct.unpack("!II", l4[4:12])
        doff = (l4[12] >> 4) * 4
        return Packet(t, src, dst, proto, sport, dport, l4[doff:], max(0, total_len - ihl - doff), seq, ack, l4[13])
    return None


@dataclass(frozen=True)
class PcapGoodput:
    first_s: float   # capture time of the first server data packet counted
    last_s: float    # ... and of the last
    packets: int     # server data packets in between (inclusive)
    server_bytes: int  # their transport payload bytes (wire view: includes TLS/QUIC framing, retransmissions)
    payload_bytes: int  # the object's size: what the goodput counts

    @property
    def duration_s(self) -> float:
        return self.last_s - self.first_s

    @property
    def goodput_bps(self) -> float | None:
        return self.payload_bytes * 8 / self.duration_s if self.duration_s > 0 else None


def _short_header(payload: bytes) -> bool:
    """A QUIC 1-RTT packet: header form bit 0 (RFC 9000 17.3). The fixed bit is not checked: stacks that grease
    it (RFC 9287; ngtcp2 does) send 1-RTT packets with it 0."""
    return bool(payload) and payload[0] & 0x80 == 0


def goodput(packets: list[Packet], server: str, port: int, quic: bool, payload_bytes: int) -> PcapGoodput | None:
    """Goodput of one transfer from `server`:`port` in a capture (None if the capture holds no such data)."""
    from_server = [p for p in packets if p.src == server and p.sport == port and p.payload_len > 0]
    if quic:
        data = [p for p in from_server if p.proto == PROTO_UDP and _short_header(p.payload)]
    else:
        data = _tcp_after_handshake(packets, from_server, server, port)
    if not data:
        return None
    return PcapGoodput(first_s=data[0].time, last_s=data[-1].time, packets=len(data),
                       server_bytes=sum(p.payload_len for p in data), payload_bytes=payload_bytes)


def _tcp_after_handshake(packets: list[Packet], from_server: list[Packet], server: str, port: int) -> list[Packet]:
    tcp_server = [p for p in from_server if p.proto == PROTO_TCP]
    if not tcp_server:
        return []
    to_server = [p for p in packets if p.proto == PROTO_TCP and p.dst == server and p.dport == port
                 and p.payload_len > 0]
    # The client's flights: ClientHello first; its next payload after the server's first flight carries its
    # Finished (and often the request). Server data after that is the response (and session tickets).
    first_server = tcp_server[0].time
    later = [p for p in to_server if p.time > first_server]
    if not later:
        return []
    finished = later[0].time
    return [p for p in tcp_server if p.time > finished]
