"""The sender's kernel state from ss's destroy events (lab/explain/ss.py): a line the lab's helper printed for a
1 MB HTTP/2 transfer from nginx (lab 5, 2026-11-24), parsed by hand."""

from __future__ import annotations

import pytest

from lab.explain import ss

TEXT = (
    "UNCONN 1      0      127.0.0.1:45710 127.0.0.1:443\n"
    "\t wscale:10,10 rto:204 rtt:0.051/0.037 mss:32768 cwnd:11 bytes_acked:2 bytes_received:1 app_limited "
    "minrtt:0.041\n"
    "UNCONN 0      0      10.71.52.10:443   10.71.51.10:48878\n"
    "\t wscale:10,10 rto:204 rtt:2.015/0.249 ato:40 mss:1448 pmtu:1500 rcvmss:1448 advmss:1448 cwnd:199 "
    "bytes_sent:1010192 bytes_retrans:5224 bytes_acked:1004969 bytes_received:1894 segs_out:724 segs_in:378 "
    "data_segs_out:720 data_segs_in:7 send 1144027792bps lastsnd:4 lastrcv:4 pacing_rate 3694260744bps "
    "delivery_rate 15696472bps delivered:718 busy:16ms rwnd_limited:8ms(50.0%) retrans:0/4 dsack_dups:4 "
    "reordering:10 reord_seen:3 rcv_rtt:2 rcv_space:14480 rcv_ssthresh:70952 minrtt:0.141 snd_wnd:1144832 "
    "rcv_wnd:71680\n")


def test_each_socket_is_its_address_line_and_its_info_line():
    socks = ss.parse(TEXT)
    assert [(s.local, s.peer) for s in socks] == [("127.0.0.1:45710", "127.0.0.1:443"),
                                                 ("10.71.52.10:443", "10.71.51.10:48878")]
    s = socks[1]
    assert (s.int("cwnd"), s.int("bytes_retrans"), s.retrans_total) == (199, 5224, 4)
    assert (s.ms("busy"), s.ms("rwnd_limited"), s.ms("sndbuf_limited")) == (16.0, 8.0, 0.0)
    assert s.bps("delivery_rate") == 15696472.0 and s.values["minrtt"] == "0.141"
    assert "app_limited" in socks[0].values  # a lone flag


def test_the_run_figures_come_from_the_client_connections():
    k = ss.kernel([s for s in ss.parse(TEXT) if s.peer.startswith("10.71.51.10")])
    assert k is not None and k.connections == 1
    assert (k.segments_retransmitted.value, k.bytes_retransmitted.value, k.cwnd.value) == (4, 5224, 199)
    assert k.ssthresh.value is None  # ss printed none: still in slow start
    assert k.busy_ms.value == 16.0 and k.rwnd_limited_share.value == pytest.approx(0.5)
    assert k.sndbuf_limited_share.value == 0.0 and k.min_rtt_ms.value == 0.141
    assert all(f.source == "ss" for f in (k.cwnd, k.busy_ms, k.rwnd_limited_share))


def test_no_sockets_no_figures():
    assert ss.kernel([]) is None
    assert ss.parse("") == []
