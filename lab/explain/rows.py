"""tshark's field rows of a run's capture (decrypted with its key log), parsed (sans-IO: text in, rows out).

tshark runs with `-T fields -E separator=/t -E occurrence=a -E aggregator=;` and FIELDS in this order; one line
per frame. Multi-valued fields (coalesced QUIC packets, several frames in one packet) are `;`-joined.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

FIELDS = ("frame.number", "frame.time_epoch", "ip.src", "tcp.len", "tcp.seq", "tcp.analysis.retransmission",
          "tcp.analysis.fast_retransmission", "tcp.analysis.spurious_retransmission",
          "tcp.analysis.window_full", "tcp.analysis.zero_window", "tcp.analysis.bytes_in_flight",
          "tcp.analysis.ack_rtt", "tls.handshake.type", "http2.type", "http.request", "http.response",
          "udp.length", "quic.header_form", "quic.long.packet_type", "quic.packet_number", "quic.stream.stream_id",
          "quic.stream.offset", "quic.stream.length", "quic.ack.largest_acknowledged", "http3.frame_type",
          # (added later: a capture's output without them reads as empty)
          "http2.streamid", "tcp.stream", "tcp.window_size", "quic.frame_type", "tcp.ack", "quic.connection.number",
          "quic.crypto.offset", "quic.crypto.length", "quic.cc.error_code", "quic.cc.error_code.app",
          "quic.cc.reason_phrase")
#: the columns every row must have (the first FIELDS); later ones may be missing in older output
BASE_FIELDS = 25
HS_FINISHED = 20
H2_HEADERS = 1
H3_HEADERS = 1
QUIC_RETRY = 3
#: QUIC's STREAM frame types (RFC 9000 section 19.8): 0x08-0x0f, the 0x04 bit set when the frame carries an offset
STREAM_FRAMES, STREAM_OFF_BIT = range(0x08, 0x10), 0x04


def _ints(v: str) -> list[int]:
    out = []
    for x in v.split(";"):
        x = x.strip()
        if x:
            try:
                out.append(int(x, 0))
            except ValueError:
                continue
    return out


def _float(v: str) -> float | None:
    try:
        return float(v.split(";")[0]) if v else None
    except ValueError:
        return None


@dataclass
class Row:
    number: int
    time: float  # epoch seconds (the router's clock, as in the pcap)
    src: str
    tcp_len: int = 0
    tcp_seq: int = 0  # relative (tshark)
    retransmission: bool = False
    fast_retransmission: bool = False
    spurious: bool = False
    window_full: bool = False
    zero_window: bool = False
    bytes_in_flight: int | None = None
    ack_rtt: float | None = None
    hs_types: list[int] = field(default_factory=list)
    h2_types: list[int] = field(default_factory=list)
    http_request: bool = False
    http_response: bool = False
    udp_len: int = 0
    long_types: list[int] = field(default_factory=list)  # QUIC long header packet types of the datagram
    short: bool = False  # the datagram holds a 1-RTT (short header) packet
    pns: list[int] = field(default_factory=list)
    stream_ids: list[int] = field(default_factory=list)
    stream_offsets: list[int] = field(default_factory=list)
    stream_lengths: list[int] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)  # largest acknowledged of each ACK frame
    h3_types: list[int] = field(default_factory=list)
    h2_stream_ids: list[int] = field(default_factory=list)  # per HTTP/2 frame, beside h2_types
    tcp_stream: int | None = None  # tshark's connection index
    tcp_window: int | None = None  # the advertised receive window, scaled (bytes)
    quic_frame_types: list[int] = field(default_factory=list)
    tcp_ack: int | None = None  # relative (tshark): the next byte the sender of this segment expects
    quic_conn: int | None = None  # tshark's QUIC connection index (a capture of several connections)
    crypto_offsets: list[int] = field(default_factory=list)  # per CRYPTO frame of the datagram's packets
    crypto_lengths: list[int] = field(default_factory=list)
    close_transport: list[int] = field(default_factory=list)  # CONNECTION_CLOSE (0x1c): transport error codes
    close_app: list[int] = field(default_factory=list)  # CONNECTION_CLOSE (0x1d): application error codes
    close_reason: str = ""  # the CONNECTION_CLOSE's reason phrase (its sender's words; often empty)

    def streams(self) -> list[tuple[int, int, int]]:
        """(stream id, offset, length) of its STREAM frames. tshark leaves absent offsets out (a frame without the
        OFF bit starts at 0), so a partial offset list is lined up by the STREAM frames' types (quic.frame_type, in
        the same order: the OFF bit says which frames carry one); without the types, offsets read as 0 only when
        every frame lacks one."""
        ids, offs, lens = self.stream_ids, self.stream_offsets, self.stream_lengths
        if not ids or len(lens) != len(ids):
            return []
        if len(offs) != len(ids):
            kinds = [t for t in self.quic_frame_types if t in STREAM_FRAMES]
            if len(kinds) == len(ids) and sum(1 for t in kinds if t & STREAM_OFF_BIT) == len(offs):
                given = iter(offs)
                offs = [next(given) if t & STREAM_OFF_BIT else 0 for t in kinds]
            elif not offs:
                offs = [0] * len(ids)
            else:
                return []
        return list(zip(ids, offs, lens, strict=True))


def parse(text: str) -> list[Row]:
    """tshark's output (FIELDS columns) -> rows; lines that are not rows are skipped."""
    rows = []
    for line in text.splitlines():
        c = line.split("\t")
        if len(c) < BASE_FIELDS:
            continue
        c += [""] * (len(FIELDS) - len(c))
        num, t = c[0], _float(c[1])
        if not num.isdigit() or t is None:
            continue
        forms = [x for x in c[17].split(";") if x]
        rows.append(Row(
            number=int(num), time=t, src=c[2].split(";")[0], tcp_len=(_ints(c[3]) or [0])[0],
            tcp_seq=(_ints(c[4]) or [0])[0], retransmission=bool(c[5]), fast_retransmission=bool(c[6]),
            spurious=bool(c[7]), window_full=bool(c[8]), zero_window=bool(c[9]),
            bytes_in_flight=(_ints(c[10]) or [None])[0], ack_rtt=_float(c[11]), hs_types=_ints(c[12]),
            h2_types=_ints(c[13]), http_request=bool(c[14]), http_response=bool(c[15]),
            udp_len=(_ints(c[16]) or [0])[0], long_types=_ints(c[18]),
            short=any(f in ("0", "False") for f in forms), pns=_ints(c[19]), stream_ids=_ints(c[20]),
            stream_offsets=_ints(c[21]), stream_lengths=_ints(c[22]), acked=_ints(c[23]), h3_types=_ints(c[24]),
            h2_stream_ids=_ints(c[25]), tcp_stream=(_ints(c[26]) or [None])[0],
            tcp_window=(_ints(c[27]) or [None])[0], quic_frame_types=_ints(c[28]),
            tcp_ack=(_ints(c[29]) or [None])[0], quic_conn=(_ints(c[30]) or [None])[0],
            crypto_offsets=_ints(c[31]), crypto_lengths=_ints(c[32]), close_transport=_ints(c[33]),
            close_app=_ints(c[34]), close_reason=c[35].strip()))
    return rows


CLIENT_HELLO = 1


def client_of(rows: Sequence[Row]) -> str | None:
    """The client's address: the sender of the first TLS ClientHello (TCP's, or the one in QUIC's Initial, which
    tshark decrypts without the key log), else the first row's sender. A capture may begin with stray packets of
    the previous run's server (its tail toward a client that had left): the first row is not always the client."""
    hello = next((r.src for r in rows if CLIENT_HELLO in r.hs_types), None)
    return hello if hello is not None else (rows[0].src if rows else None)
