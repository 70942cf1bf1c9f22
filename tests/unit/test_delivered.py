"""Delivered bytes over time from a client-side capture (runs.csv `delivered`): the server's data packets only,
binned from the link's application, retransmissions counted, packets before it set aside; the run's start (its
first packet to the server) kept; the cell reads back, an older cell without the start too."""

from __future__ import annotations

from lab.evidence.delivered import Delivered, bin_width, delivered, parse
from lab.evidence.pcap import Packet

SERVER, CLIENT, ZERO = "10.0.2.2", "10.0.1.2", 1_700_000_000.0


def pkt(t: float, n: int, src: str = SERVER, sport: int = 443, proto: int = 6, dport: int = 443) -> Packet:
    dst, dport = (CLIENT, 50000) if src == SERVER else (SERVER, dport)
    return Packet(time=ZERO + t, src=src, dst=dst, proto=proto, sport=sport, dport=dport, payload=b"",
                  payload_len=n)


def test_only_the_servers_data_counts_binned_from_the_links_application() -> None:
    packets = [pkt(0.05, 1000), pkt(0.15, 1448), pkt(0.15, 1448),  # a retransmission is delivered bytes too
               pkt(0.16, 0),  # a bare ACK from the server: no payload
               pkt(0.17, 500, src=CLIENT, sport=50000),  # the request
               pkt(0.18, 900, sport=8443),  # another server port (a competing flow)
               pkt(0.35, 1200, proto=17)]  # UDP from the same address and port (QUIC) counts as well
    d = delivered(packets, SERVER, 443, ZERO)
    assert d == Delivered(bin_s=0.1, bytes=(1000, 2896, 0, 1200), start_s=0.17)
    assert d.cumulative() == [(0.0, 0), (0.1, 1000), (0.2, 3896), (0.3, 3896), (0.4, 5096)]


def test_packets_before_the_link_was_applied_are_counted_apart() -> None:
    d = delivered([pkt(-0.5, 100), pkt(0.01, 10)], SERVER, 443, ZERO)
    assert d is not None and d.bytes == (10,) and d.before == 1 and d.start_s is None  # the client sent nothing
    assert delivered([pkt(0.1, 5, src=CLIENT, sport=50000)], SERVER, 443, ZERO) is None


def test_long_runs_get_wider_bins_never_more_than_300() -> None:
    assert bin_width(5.0) == 0.1 and bin_width(30.0) == 0.1 and bin_width(30.5) == 0.2 and bin_width(95) == 0.4
    d = delivered([pkt(t / 10, 1) for t in range(0, 951)], SERVER, 443, ZERO)
    assert d is not None and d.bin_s == 0.4 and len(d.bytes) <= 300 and sum(d.bytes) == 951


def test_the_cell_reads_back_and_a_foreign_one_is_none() -> None:
    d = Delivered(bin_s=0.2, bytes=(1, 2, 3), before=2)
    assert parse(d.to_json()) == d
    assert parse(Delivered(bin_s=0.1, bytes=(5,)).to_json()) == Delivered(bin_s=0.1, bytes=(5,))
    assert parse("") is None and parse('{"bins": 3}') is None and parse("not json") is None


def test_the_runs_start_is_its_first_packet_to_the_server_after_the_link_was_applied() -> None:
    """The run's own start on the trace (lab/report/trace_plots.py draws its capacity from there): the client's
    first packet to the server's address and port, a SYN without payload included; not a packet to another port,
    not one from before the link's application."""
    packets = [pkt(-0.2, 0, src=CLIENT, sport=50000),  # before the link's application: not this run's start
               pkt(0.6, 0, src=CLIENT, sport=50001, dport=8443),  # to another port of the server
               pkt(0.84, 0, src=CLIENT, sport=50000),  # the SYN
               pkt(0.9, 0),  # the SYN-ACK
               pkt(0.92, 300, src=CLIENT, sport=50000),  # the request
               pkt(1.01, 1448)]
    d = delivered(packets, SERVER, 443, ZERO)
    assert d is not None and d.start_s == 0.84 and d.bytes == (0,) * 10 + (1448,)
    assert parse(d.to_json()) == d and '"start_s":0.84' in d.to_json()


def test_a_cell_written_before_the_start_was_kept_reads_without_it() -> None:
    old = '{"zero":"link applied","bin_s":0.1,"bytes":[0,5]}'
    assert parse(old) == Delivered(bin_s=0.1, bytes=(0, 5), start_s=None)
