"""lab/explain on two small captures made by the lab (tests/data/explain/sweep: curl -> nginx, 60 kB, 10 Mbit/s,
40 ms RTT, 5 % loss, seed 3; router pcaps on both sides of the emulator and the client's key log), with tshark's
field output committed beside them (`<side>.tsv` decrypted, `<side>.nokeys.tsv` without the key log), so no lab,
docker or tshark is needed here.

The expected values were counted by hand with tshark in the router, independently of lab/explain (which matches
packets by payload): e.g. drops as the `diff` of (ip.id, tcp.seq, tcp.len) resp. (ip.id, udp.length,
quic.packet_number) listed on both captures; retransmissions with `-Y "ip.src==10.71.52.10 &&
tcp.analysis.retransmission"`; times with `-T fields -e frame.time_epoch` of the frames named below.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from lab.evidence.pcap import Packet
from lab.explain import path as pathmod
from lab.explain.analyze import episodes
from lab.explain.folder import cut_short, evidence_dir, explain_run
from lab.explain.model import Explanation
from lab.explain.rows import parse
from lab.report.report import load_sweep
from lab.results.schema import RunRecord

SWEEP = Path(__file__).parents[1] / "data" / "explain" / "sweep"


def fixture_tshark(pcap: Path, keylog: Path | None) -> str:
    return pcap.with_suffix(".tsv").read_text(encoding="utf-8")


def nokeys_tshark(pcap: Path, keylog: Path | None) -> str:
    return pcap.with_suffix(".nokeys.tsv").read_text(encoding="utf-8")


def record(protocol: str) -> RunRecord:
    records, _ = load_sweep(SWEEP)
    return next(r for r in records if r.protocol == protocol)


def copy_run(tmp_path: Path, protocol: str) -> tuple[RunRecord, Path]:
    r = record(protocol)
    src = evidence_dir(SWEEP, r)
    assert src is not None
    dest = tmp_path / src.name
    shutil.copytree(src, dest)
    return r, dest


def explained(protocol: str) -> Explanation:
    r = record(protocol)
    d = evidence_dir(SWEEP, r)
    assert d is not None
    return explain_run(r, d, fixture_tshark)


def test_h2_run_every_figure_against_the_hand_count():
    e = explained("h2")
    assert e.status == "explained" and e.transport == "tcp", e.why
    hs = e.handshake
    assert hs is not None
    # SYN at client-side frame 1 (t=0), SYN/ACK 40.3 ms, client Finished frame 12, request HEADERS frame 13
    assert hs.round_trips.value == 2 and hs.expected_round_trips == 2
    assert hs.handshake_ms.value == pytest.approx(87.477, abs=0.002)  # frame 12: 1795507228.088725 - .001248
    assert hs.ttfb_ms.value == pytest.approx(128.915, abs=0.002)  # frame 17: the response's HEADERS
    assert hs.extra_reasons == []
    pt = e.path
    assert pt is not None and pt.down is not None and pt.up is not None
    assert 40.0 <= (pt.min_rtt_ms.value or 0) <= 40.287  # never above the SYN -> SYN/ACK time
    assert pt.configured_rtt_ms.value == 40.0 and pt.configured_rtt_ms.source == "runs.csv"
    # 53 packets toward the client on the server side, 52 on the client side: seq 57773 (ip.id 0xff0d) missing
    assert (pt.down.sent.value, pt.down.delivered.value, pt.down.dropped.value) == (53, 52, 1)
    assert (pt.up.sent.value, pt.up.dropped.value) == (37, 2)  # ip.id 0x2984 and 0x298b (pure ACKs) missing
    assert pt.down.emulator_dropped.value == 1 and pt.down.emulator_dropped.source == "emulator counters"
    assert pt.down.agree and pt.up.agree
    lr = e.loss
    assert lr is not None
    assert lr.data_packets.value == 48  # -Y "ip.src==10.71.52.10 && tcp.len>0"
    assert lr.data_packets_lost.value == 1
    assert (lr.retransmissions.value, lr.bytes_retransmitted.value) == (1, 1448)  # frame 81, seq 57773, len 1448
    assert lr.spurious_retransmissions.value == 0
    assert lr.timeouts.value == 0  # frame 81 is flagged tcp.analysis.fast_retransmission
    assert lr.first_loss_offset.value == 57772  # relative seq 57773 - 1 (the SYN's)
    assert lr.first_loss_ms.value == pytest.approx(196.827, abs=0.002)  # server-side frame 64 at .198075
    # its retransmission (server-side frame 81) reached the client side at .265213: 67.138 ms after frame 64
    assert lr.first_loss_repair_ms.value == pytest.approx(67.138, abs=0.002)
    w = e.window
    assert w is not None and w.loss_episodes.value == 1
    assert (w.window_full.value, w.zero_window.value) == (0, 0)
    assert e.reasons and "1 of 48 server data packets dropped" in e.reasons[0].text


def test_h3_run_every_figure_against_the_hand_count():
    e = explained("h3")
    assert e.status == "explained" and e.transport == "quic", e.why
    hs = e.handshake
    assert hs is not None
    assert hs.round_trips.value == 1 and hs.expected_round_trips == 1
    assert hs.handshake_ms.value == pytest.approx(46.241, abs=0.002)  # client Handshake Finished, frame 7
    assert hs.ttfb_ms.value == pytest.approx(89.632, abs=0.002)  # server HTTP/3 HEADERS, frame 15
    pt = e.path
    assert pt is not None and pt.down is not None and pt.up is not None
    assert 40.0 <= (pt.min_rtt_ms.value or 0) <= 44.985  # never above the first Initial -> server answer time
    assert (pt.down.sent.value, pt.down.dropped.value) == (59, 1)  # 1-RTT packet number 43
    assert (pt.up.sent.value, pt.up.dropped.value) == (36, 2)  # client packet numbers 14 and 21
    assert pt.down.agree and pt.up.agree
    lr = e.loss
    assert lr is not None
    assert lr.data_packets.value == 54  # -Y "ip.src==10.71.52.10 && quic.stream.length > 0"
    assert lr.data_packets_lost.value == 1
    # packet 43 carried stream 0 offset 48100 (1174 bytes); packet 54 (server-side frame 87) sent them again
    assert (lr.retransmissions.value, lr.bytes_retransmitted.value) == (1, 1174)
    # no probe timeout: the re-send (server-side frame 87, 130.94 ms) left 0.1 ms after the client's ACK (frame 86)
    # and the server's longest silence with bytes in flight was below the 40 ms minimum RTT
    assert lr.timeouts.value == 0
    assert lr.first_loss_offset.value == 48100 and lr.first_loss_offset.note == "stream 0"
    assert lr.first_loss_ms.value == pytest.approx(69.016, abs=0.002)  # .885718 - .816702
    assert lr.first_loss_repair_ms.value == pytest.approx(104.007, abs=0.002)  # reached the client at .989725
    assert e.window is not None and e.window.loss_episodes.value == 1
    # the one episode was detected when the server re-sent the lost bytes (server-side frame 87): 152.079 ms from
    # the client's first packet (the reference of every *_ms figure), 83.063 ms after the lost packet left at 69.016
    assert e.window.slow_start_exit_ms is not None
    assert e.window.slow_start_exit_ms.value == pytest.approx(152.079, abs=0.002)
    assert e.window.window_full.value is None  # TCP only


def test_a_capture_tcpdump_says_is_incomplete_is_not_explainable(tmp_path):
    """tcpdump's own word (its kernel drops, kept as capture-problems.txt by lab/evidence/capture.py): the drops the
    captures would count include packets the capture missed, so the run is not explained at all."""
    r, d = copy_run(tmp_path, "h3")
    (d / "capture-problems.txt").write_text(
        "server-side.pcap: tcpdump says the kernel dropped 5810 packets (the capture is incomplete)\n")
    e = explain_run(r, d, fixture_tshark)
    assert e.status == "not explainable" and e.path is None
    assert "the capture is incomplete: server-side.pcap: tcpdump says the kernel dropped 5810 packets" in e.why


def test_a_truncated_capture_is_not_explainable_with_its_reason(tmp_path):
    r, d = copy_run(tmp_path, "h2")
    pcap = d / "client-side.pcap"
    pcap.write_bytes(pcap.read_bytes()[:-700])
    e = explain_run(r, d, fixture_tshark)
    assert e.status == "not explainable"
    assert "client-side.pcap is cut short in the middle of packet" in e.why
    assert e.handshake is None and e.loss is None


def test_a_capture_without_its_key_log_is_not_explainable(tmp_path):
    r, d = copy_run(tmp_path, "h3")
    (d / "keys.log").unlink()
    e = explain_run(r, d, fixture_tshark)
    assert e.status == "not explainable" and "no TLS key log" in e.why


@pytest.mark.parametrize("protocol", ["h2", "h3"])
def test_a_capture_that_does_not_decrypt_is_not_explainable(protocol):
    r = record(protocol)
    d = evidence_dir(SWEEP, r)
    assert d is not None
    e = explain_run(r, d, nokeys_tshark)  # what tshark gives without (or with the wrong) keys
    assert e.status == "not explainable" and "could not be decrypted" in e.why


def test_drops_that_disagree_with_the_emulator_flag_the_run_invalid():
    r = replace(record("h2"), link_down_loss_drops=3)
    d = evidence_dir(SWEEP, r)
    assert d is not None
    e = explain_run(r, d, fixture_tshark)
    assert e.status == "invalid" and "down: 1 drops counted from the captures, the emulator counted 3" in e.why
    assert e.loss is None  # not explained


def test_competing_flows_drops_in_the_emulators_counters_do_not_flag_the_run_invalid():
    """A cross-traffic run (runs.csv `competing`): the emulator's counters hold the competing TCP flow's drops too,
    so more drops there than in the captures is no disagreement; fewer still is (the captures cannot drop more)."""
    competing = '[{"flow": "measured", "share": 0.4}, {"flow": "tcp-cubic", "share": 0.6}]'
    more = explain_run(replace(record("h2"), link_down_loss_drops=300, competing=competing),
                       evidence_dir(SWEEP, record("h2")), fixture_tshark)
    assert more.status == "explained" and more.path.down is not None and more.path.down.agree is True
    assert more.path.down.emulator_dropped.value == 300 and "competing flows" in more.path.down.emulator_dropped.note
    fewer = explain_run(replace(record("h2"), link_down_loss_drops=0, competing=competing),
                        evidence_dir(SWEEP, record("h2")), fixture_tshark)
    assert fewer.status == "invalid" and "down: 1 drops counted from the captures, the emulator counted 0" in fewer.why
    assert pathmod.agree(1, 300, shared=True) and not pathmod.agree(1, 300) and not pathmod.agree(3, 1, shared=True)


def test_only_the_client_side_capture_says_so_instead_of_counting_drops(tmp_path):
    r, d = copy_run(tmp_path, "h2")
    (d / "server-side.pcap").unlink()
    e = explain_run(r, d, fixture_tshark)
    assert e.status == "explained" and e.path is not None
    assert e.path.down is None and "only the client-side capture" in e.path.note
    assert e.loss is None and e.handshake is not None and e.handshake.round_trips.value == 2


def test_no_counters_recorded_is_not_a_disagreement():
    r = replace(record("h3"), link_down_loss_drops=None, link_down_queue_drops=None)
    d = evidence_dir(SWEEP, r)
    assert d is not None
    e = explain_run(r, d, fixture_tshark)
    assert e.status == "explained" and e.path is not None and e.path.down is not None
    assert e.path.down.agree is None and e.path.down.emulator_dropped.value is None


def _pkt(t: float, seq: int, payload: bytes = b"x" * 10) -> Packet:
    return Packet(t, "10.0.0.2", "10.0.0.1", 6, 443, 5000, payload, len(payload), seq, 1, 0x10)


def test_a_retransmission_identical_but_for_its_ip_id_is_not_taken_for_the_original():
    original, again = _pkt(1.0, 100), _pkt(1.2, 100)
    m = pathmod.match([(original, b"\x00\x01"), (again, b"\x00\x02")], [(_pkt(1.22, 100), b"\x00\x02")])
    assert m.arrival == [None, 1.22] and m.dropped == 1 and m.unmatched_arrivals == 0


def test_drop_agreement_is_within_one_percent():
    assert pathmod.agree(0, 0) and pathmod.agree(100, 101) and not pathmod.agree(100, 102)
    assert not pathmod.agree(1, 2)


def test_one_window_reduction_per_round_of_loss():
    # losses (sent, detected): two in the same flight are one episode; one sent after the first detection another
    assert episodes([(1.0, 1.5), (1.1, 1.55), (1.6, 2.0), (1.2, 1.52)]) == [1.5, 2.0]
    assert episodes([]) == []


def test_cut_short_names_the_cut():
    whole = (SWEEP / "evidence" / "0_h2_curl_nginx_0" / "client-side.pcap").read_bytes()
    assert cut_short(whole) is None
    assert cut_short(whole[:10]) == "shorter than its 24-byte header"
    assert (cut_short(whole[:24 + 8]) or "").startswith("cut short in a record header after 0 whole packets")


def test_rows_read_hex_and_multi_valued_fields():
    line = "\t".join(["15", "1795507224.906334", "10.71.52.10", "", "", "", "", "", "", "", "", "", "", "", "",
                      "", "1206", "0", "", "2", "0;4", "0;1170", "1170;4", "3", "0x0000000000000001"])
    (r,) = parse(line + "\nnot a row\n")
    assert r.short and r.pns == [2] and r.h3_types == [1] and r.udp_len == 1206
    assert r.streams() == [(0, 0, 1170), (4, 1170, 4)]


def test_a_retransmission_after_a_silent_rtt_is_a_timeout_one_inside_recovery_is_not():
    from lab.explain.analyze import RunInputs, _timeouts
    from lab.explain.rows import Row

    s, c = "10.71.52.10", "10.71.51.10"
    rows = [Row(1, 0.000, s, tcp_len=1448), Row(2, 0.010, c),
            Row(3, 0.012, s, tcp_len=1448, retransmission=True, fast_retransmission=True),
            Row(4, 0.013, s, tcp_len=1448, retransmission=True),  # inside SACK recovery: 1 ms after the last
            Row(5, 0.300, s, tcp_len=1448, retransmission=True)]  # after 287 ms of silence: an RTO
    inp = RunInputs("k", "h2", None, None, [], rows)
    assert _timeouts(inp, c, 0.040) == 1
    assert _timeouts(inp, c, None) is None


def test_an_extra_quic_handshake_round_trip_is_put_down_to_the_dropped_server_initial():
    """tests/data/explain/handshake-loss: the handshake of a 3 % loss h3 run (seed 7; 2 MB sweep on lab 5), the
    client side up to 30 ms after the request, the server side's first 12 packets (up to the request's arrival).
    By hand (tshark): the server's Initial with ACK+CRYPTO (the ServerHello; server-side frame 4, 1208 bytes) never
    reached the client side; the client waited from 0.047 to 44.0 ms and from 44.0 to 92.3 ms (its Handshake
    Finished, frame 7) and sent the request (frame 11) 0.4 ms later: 2 round trips where QUIC needs 1."""
    from lab.evidence.pcap import read_pcap
    from lab.explain.analyze import RunInputs, explain
    from lab.explain.path import header_extras

    d = SWEEP.parent / "handshake-loss"
    c, s = (d / "client-side.pcap").read_bytes(), (d / "server-side.pcap").read_bytes()
    e = explain(RunInputs("1/h3/curl/nginx/0", "h3", read_pcap(c), read_pcap(s),
                          parse((d / "client-side.tsv").read_text()), parse((d / "server-side.tsv").read_text()),
                          0.04, client_extras=header_extras(c), server_extras=header_extras(s)))
    hs = e.handshake
    assert hs is not None and hs.round_trips.value == 2 and hs.expected_round_trips == 1
    assert hs.handshake_ms.value == pytest.approx(92.291, abs=0.002)
    assert hs.extra_reasons == ["handshake packets dropped by the emulator before the request: 1 server->client"]
    assert e.path is not None and e.path.down is not None and e.path.up is not None
    assert (e.path.down.sent.value, e.path.down.dropped.value) == (4, 1)
    assert (e.path.up.sent.value, e.path.up.dropped.value) == (8, 0)
    assert e.reasons[0].text.startswith("handshake: 2 round trips before the request (expected 1)")


def test_packets_sent_after_the_last_one_that_arrived_are_not_judged_dropped() -> None:
    # the server's last packets (e.g. its FIN as curl exits) can leave the emulator after the client-side capture
    # ended: no later packet arrived to show the emulator let them by or not, so they are unjudged, not dropped;
    # a packet missing before one that arrived was dropped (a direction keeps its order)
    def pk(t: float, seq: int, flags: int = 0x10) -> tuple[Packet, bytes]:
        return Packet(t, "10.0.0.2", "10.0.0.1", 6, 443, 5000, b"x", 1, seq, 1, flags), b""

    sent = [pk(0.0, 1), pk(0.1, 2), pk(0.2, 3), pk(0.3, 4, 0x11), pk(0.4, 5, 0x11)]
    m = pathmod.match(sent, [pk(0.02, 1), pk(0.22, 3)])
    assert (m.dropped, m.unjudged, m.delivered) == (1, 2, 2)
    assert pathmod.agree(1, 3, m.unjudged) and pathmod.agree(1, 1, m.unjudged)  # the emulator may have dropped them
    assert not pathmod.agree(1, 4, m.unjudged)


def test_a_drop_in_the_runs_last_moments_is_allowed_for_in_the_agreement() -> None:
    # the emulator's counters are read as the transfer ends, the captures stop later: a closing ACK dropped then is
    # in the captures' count and maybe not in the counters'; it is counted (dropped) and allowed for (tail_dropped)
    def pk(t: float, seq: int) -> tuple[Packet, bytes]:
        return Packet(t, "10.0.0.2", "10.0.0.1", 6, 443, 5000, b"x", 1, seq, 1, 0x10), b""

    sent = [pk(0.0, 1), pk(0.5, 2), pk(1.95, 3), pk(1.98, 4), pk(2.0, 5)]
    m = pathmod.match(sent, [pk(0.02, 1), pk(2.02, 5)], tail_from=1.9)
    assert (m.dropped, m.unjudged, m.tail_dropped) == (3, 0, 2)
    assert pathmod.agree(m.dropped, 1, m.unjudged + m.tail_dropped)
    assert not pathmod.agree(m.dropped, 0, m.unjudged + m.tail_dropped)


# ---------------------------------------------------------------------------------------------------------------
# Handshake round trips on a slow client (the netem group in a TCG VM: curl took ~40 ms to compute its key share
# and to check the certificate, each right after its kernel's bare ACK, at 40 ms RTT: counted 4 round trips)

C, S = "10.71.1.10", "10.71.2.10"


def test_a_client_computing_after_a_bare_ack_is_not_a_round_trip():
    from lab.explain.analyze import handshake_waits
    from lab.explain.rows import Row

    rows = [Row(1, 0.000, C),                      # SYN
            Row(2, 0.040, S),                      # SYN-ACK one RTT later
            Row(3, 0.040, C),                      # the kernel's bare ACK
            Row(4, 0.085, C, tcp_len=517),         # ClientHello after 45 ms of computing
            Row(5, 0.125, S, tcp_len=1448), Row(6, 0.126, S, tcp_len=1200),  # the server's flight
            Row(7, 0.126, C),                      # bare ACK
            Row(8, 0.170, C, tcp_len=80),          # Finished after 44 ms of checking
            Row(9, 0.171, C, tcp_len=120)]         # the request
    assert handshake_waits(rows, C, 0.171, 0.040) == 2


def test_a_bare_ack_answered_by_a_held_back_flight_is_a_round_trip():
    from lab.explain.analyze import handshake_waits
    from lab.explain.rows import Row

    rows = [Row(1, 0.000, C), Row(2, 0.040, S), Row(3, 0.040, C), Row(4, 0.041, C, tcp_len=517),
            Row(5, 0.081, S, tcp_len=1448), Row(6, 0.081, C),   # the server's window full: it waits for this ACK
            Row(7, 0.121, S, tcp_len=1448), Row(8, 0.122, C, tcp_len=80), Row(9, 0.122, C, tcp_len=120)]
    assert handshake_waits(rows, C, 0.122, 0.040) == 3


def test_a_retransmitted_client_hello_after_silence_is_a_wait():
    from lab.explain.analyze import handshake_waits
    from lab.explain.rows import Row

    rows = [Row(1, 0.000, C), Row(2, 0.040, S), Row(3, 0.040, C), Row(4, 0.041, C, tcp_len=517),  # lost
            Row(5, 0.300, C, tcp_len=517, retransmission=True), Row(6, 0.340, S, tcp_len=1448),
            Row(7, 0.341, C, tcp_len=80), Row(8, 0.341, C, tcp_len=120)]
    assert handshake_waits(rows, C, 0.341, 0.040) == 3


def test_quic_ack_only_datagrams_are_bare_acks_and_undecrypted_ones_are_data():
    from lab.explain.analyze import handshake_waits
    from lab.explain.rows import Row

    def rows(frames: list[int]) -> list[Row]:
        return [Row(1, 0.000, C, udp_len=1200, long_types=[0], quic_frame_types=[6, 0]),   # Initial: CRYPTO
                Row(2, 0.040, S, udp_len=1200, long_types=[0, 2]),
                Row(3, 0.040, C, udp_len=1200, long_types=[0], quic_frame_types=frames),
                Row(4, 0.090, C, udp_len=90, long_types=[2], quic_frame_types=[6]),        # Finished, 50 ms later
                Row(5, 0.090, C, udp_len=80, short=True, quic_frame_types=[8])]           # the request
    assert handshake_waits(rows([2, 0]), C, 0.090, 0.040) == 1   # ACK + PADDING: the client was computing
    assert handshake_waits(rows([]), C, 0.090, 0.040) == 2       # frames unknown: counted, as before
