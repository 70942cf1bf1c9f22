"""Resumption and 0-RTT, proven from the run's decrypted capture (as the QUIC interop runner checks them).

A resume/0rtt run captures the client side of the router (pcap) and the client's TLS secrets (keylog) whether or
not the sweep asked for evidence. tshark (in the router image) decrypts the capture with the key log; the check:
- two connections, each with a ClientHello (two handshakes);
- the second connection's handshake carries no Certificate, and its ServerHello a pre_shared_key: resumed;
- 0rtt: the client sent 0-RTT packets carrying STREAM frames (the request), and the server's EncryptedExtensions
  carry early_data: accepted. A 0rtt run whose early data was not sent or not accepted FAILS, with that reason
  (never a silent full handshake).
`analyze` is sans-IO (tshark's field rows in, a verdict out); `inspect` runs tshark in the router.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from lab.evidence import tshark

HS_CLIENT_HELLO, HS_SERVER_HELLO, HS_NEW_SESSION_TICKET, HS_ENCRYPTED_EXTENSIONS, HS_CERTIFICATE = 1, 2, 4, 8, 11
EXT_PRE_SHARED_KEY, EXT_EARLY_DATA = 41, 42
QUIC_0RTT = 1
FIELDS = ("ip.src", "quic.connection.number", "tcp.stream", "quic.long.packet_type", "tls.handshake.type",
          "tls.handshake.extension.type", "quic.stream.stream_id")


@dataclass
class Connection:
    client_hellos: int = 0
    certificate: bool = False
    psk: bool = False               # the ServerHello's pre_shared_key: the session was resumed
    zero_rtt_packets: int = 0       # client 0-RTT packets
    zero_rtt_stream: bool = False   # ... carrying STREAM frames (decrypted: the keys were in the key log)
    early_accepted: bool | None = None  # early_data in the server's EncryptedExtensions (None: no EE seen)


@dataclass
class SessionVerdict:
    connections: list[Connection] = field(default_factory=list)
    resumed: bool = False
    early_data: bool = False
    failure: str = ""
    checks: list[str] = field(default_factory=list)  # what was proven, for the run's record and the docs

    @property
    def handshakes(self) -> int:
        return sum(1 for c in self.connections if c.client_hellos)


def _ints(v: str) -> list[int]:
    return [int(x, 0) for x in v.split(",") if x.strip()]


def analyze(rows: list[list[str]], client_ip: str, early: bool) -> SessionVerdict:
    """tshark rows (FIELDS, tab-separated, multi-valued fields comma-joined) -> the verdict."""
    conns: dict[str, Connection] = {}
    for row in rows:
        row = (row + [""] * len(FIELDS))[:len(FIELDS)]
        src, qconn, tstream, ptypes, hs, exts, streams = row
        key = f"q{qconn}" if qconn else (f"t{tstream}" if tstream else "")
        if not key:
            continue
        c = conns.setdefault(key, Connection())
        types, ext = _ints(hs), _ints(exts)
        if src == client_ip:
            c.client_hellos += types.count(HS_CLIENT_HELLO)
            n0 = _ints(ptypes).count(QUIC_0RTT)
            c.zero_rtt_packets += n0
            c.zero_rtt_stream |= bool(n0 and streams.strip())
            continue
        if HS_CERTIFICATE in types:
            c.certificate = True
        if HS_SERVER_HELLO in types and EXT_PRE_SHARED_KEY in ext:
            c.psk = True
        if HS_ENCRYPTED_EXTENSIONS in types and HS_NEW_SESSION_TICKET not in types:
            c.early_accepted = bool(c.early_accepted) or EXT_EARLY_DATA in ext
    v = SessionVerdict(connections=[c for c in conns.values() if c.client_hellos])
    if len(v.connections) != 2:
        v.failure = f"the capture shows {len(v.connections)} handshakes, expected 2 (first, then resumed)"
        return v
    first, second = v.connections
    v.checks.append("2 handshakes")
    if not first.certificate:
        v.failure = "the first handshake carries no Certificate in the decrypted capture (were the keys logged?)"
        return v
    if second.certificate or not second.psk:
        v.failure = ("the session was not resumed: the second handshake carries a Certificate" if second.certificate
                     else "the session was not resumed: no pre_shared_key in the second ServerHello")
        return v
    v.resumed = True
    v.checks.append("no Certificate in the second handshake, pre_shared_key in its ServerHello")
    if not early:
        return v
    if not second.zero_rtt_packets:
        v.failure = "0-RTT was asked for but the client sent no 0-RTT packets"
    elif not second.zero_rtt_stream:
        v.failure = "the client's 0-RTT packets carry no request (no STREAM frame in the decrypted 0-RTT packets)"
    elif second.early_accepted is None:
        v.failure = "0-RTT: the server's EncryptedExtensions could not be read in the capture"
    elif not second.early_accepted:
        v.failure = "0-RTT refused by the server: no early_data in its EncryptedExtensions (a full 1-RTT request)"
    else:
        v.early_data = True
        v.checks.append(f"{second.zero_rtt_packets} 0-RTT packets with the request, early_data accepted")
    return v


def inspect(pcap: Path, keylog: Path | None, client_ip: str) -> list[list[str]]:
    """tshark's FIELDS rows of the decrypted capture (tshark runs in the router)."""
    out = tshark.run(pcap, keylog, ["-Y", f"ip.addr == {client_ip}", "-T", "fields", "-E", "separator=/t",
                                    *(x for f in FIELDS for x in ("-e", f))], timeout_s=120)
    return [line.split("\t") for line in out.splitlines() if line.strip()]
