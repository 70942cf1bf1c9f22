"""The pcap reader and the interop-runner style goodput (lab/evidence/pcap.py), and --capture parsing."""

from __future__ import annotations

import struct

import pytest

from lab.errors import UsageError
from lab.evidence import pcap
from lab.evidence.capture import parse_kinds

SERVER, CLIENT = "10.71.2.10", "10.71.1.10"


def _ip(a: str) -> bytes:
    return bytes(int(x) for x in a.split("."))


def _frame(src: str, dst: str, sport: int, dport: int, payload: bytes, tcp: bool) -> bytes:
    if tcp:
        l4 = struct.pack("!HHIIBBHHH", sport, dport, 1, 1, 5 << 4, 0x18, 65535, 0, 0) + payload
    else:
        l4 = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(l4), 0, 0, 64, 6 if tcp else 17, 0, _ip(src), _ip(dst))
    return b"\x02" * 6 + b"\x04" * 6 + b"\x08\x00" + ip + l4


def _pcap(packets: list[tuple[float, bytes]], endian: str = "<", nano: bool = False) -> bytes:
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 65535, 1)
    for t, frame in packets:
        sec = int(t)
        frac = round((t - sec) * (1e9 if nano else 1e6))
        out += struct.pack(endian + "IIII", sec, frac, len(frame), len(frame)) + frame
    return out


def _quic_transfer() -> list[tuple[float, bytes]]:
    pkts = [
        (10.0, _frame(CLIENT, SERVER, 50000, 443, b"\xc0" + b"i" * 1199, tcp=False)),   # Initial
        (10.05, _frame(SERVER, CLIENT, 443, 50000, b"\xc0" + b"h" * 1199, tcp=False)),  # Initial+Handshake
    ]
    # 1-RTT data from 10.1 to 11.1 (101 packets), with client ACKs in between
    for i in range(101):
        t = 10.1 + i * 0.01
        pkts.append((t, _frame(SERVER, CLIENT, 443, 50000, b"\x41" + b"d" * 1199, tcp=False)))
        pkts.append((t + 0.001, _frame(CLIENT, SERVER, 50000, 443, b"\x41" + b"a" * 40, tcp=False)))
    return pkts


def test_quic_goodput_first_to_last_server_1rtt_packet():
    packets = pcap.read_pcap(_pcap(_quic_transfer()))
    g = pcap.goodput(packets, SERVER, 443, quic=True, payload_bytes=100_000)
    assert g is not None
    assert g.packets == 101
    assert g.duration_s == pytest.approx(1.0, abs=1e-6)
    assert g.goodput_bps == pytest.approx(800_000, rel=1e-4)
    assert g.server_bytes == 101 * 1200


def test_greased_fixed_bit_still_counts_as_1rtt():
    # RFC 9287: a peer that allows it may send 1-RTT packets with the fixed bit 0 (ngtcp2 does)
    pkts = [(1.0 + i * 0.1, _frame(SERVER, CLIENT, 443, 50000, bytes([0x01]) + b"d" * 1443, tcp=False))
            for i in range(11)]
    g = pcap.goodput(pcap.read_pcap(_pcap(pkts)), SERVER, 443, quic=True, payload_bytes=10_000)
    assert g is not None and g.packets == 11 and g.duration_s == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(("endian", "nano"), [("<", False), (">", False), ("<", True)])
def test_reader_handles_byte_order_and_nanoseconds(endian, nano):
    packets = pcap.read_pcap(_pcap(_quic_transfer(), endian, nano))
    assert len(packets) == 2 + 202
    assert packets[0].src == CLIENT and packets[0].dport == 443 and packets[0].proto == pcap.PROTO_UDP
    assert packets[1].time == pytest.approx(10.05, abs=1e-6)


def test_tcp_goodput_starts_after_the_clients_finished():
    pkts = [
        (0.0, _frame(CLIENT, SERVER, 40000, 443, b"", tcp=True)),             # SYN (no payload)
        (0.1, _frame(CLIENT, SERVER, 40000, 443, b"\x16" * 300, tcp=True)),   # ClientHello
        (0.2, _frame(SERVER, CLIENT, 443, 40000, b"\x16" * 1400, tcp=True)),  # ServerHello .. Finished
        (0.3, _frame(CLIENT, SERVER, 40000, 443, b"\x17" * 80, tcp=True)),    # client Finished (+ request)
    ]
    pkts += [(0.4 + i * 0.02, _frame(SERVER, CLIENT, 443, 40000, b"\x17" * 1400, tcp=True)) for i in range(51)]
    g = pcap.goodput(pcap.read_pcap(_pcap(pkts)), SERVER, 443, quic=False, payload_bytes=50_000)
    assert g is not None
    assert g.first_s == pytest.approx(0.4, abs=1e-6)
    assert g.last_s == pytest.approx(1.4, abs=1e-6)
    assert g.goodput_bps == pytest.approx(400_000, rel=1e-4)


def test_no_server_data_means_no_goodput():
    pkts = [(0.0, _frame(CLIENT, SERVER, 40000, 443, b"x" * 10, tcp=True))]
    assert pcap.goodput(pcap.read_pcap(_pcap(pkts)), SERVER, 443, quic=False, payload_bytes=1) is None
    assert pcap.goodput(pcap.read_pcap(_pcap(pkts)), SERVER, 443, quic=True, payload_bytes=1) is None


@pytest.mark.parametrize("data", [b"", b"\x0a\x0d\x0d\x0a" + b"\0" * 40, b"x" * 24])
def test_not_a_pcap_is_a_clear_error(data):
    with pytest.raises(pcap.PcapError):
        pcap.read_pcap(data)


def test_truncated_last_record_is_ignored():
    data = _pcap(_quic_transfer())
    assert len(pcap.read_pcap(data[:-10])) == 2 + 202 - 1


@pytest.mark.parametrize(("text", "kinds"), [
    (None, ()), ("none", ()), ("pcap", ("pcap",)), ("qlog, pcap", ("pcap", "qlog")),
    ("all", ("pcap", "keylog", "qlog")), ("KEYLOG", ("keylog",)),
])
def test_capture_kinds(text, kinds):
    assert parse_kinds(text) == kinds


def test_unknown_capture_kind_names_it():
    with pytest.raises(UsageError, match=r"invalid --capture 'pcapng': allowed are pcap, keylog, qlog"):
        parse_kinds("pcap,pcapng")
