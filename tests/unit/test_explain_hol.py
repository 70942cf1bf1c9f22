"""Head-of-line per stream (lab/explain/hol.py) and QUIC probe timeouts (lab/explain/analyze.py), on rows made by
hand so that every figure can be counted by hand; the real page-load capture is checked in
tests/unit/test_explain_pages.py."""

from __future__ import annotations

import pytest

from lab.explain import hol, limits
from lab.explain.analyze import RunInputs, _quic_timeouts
from lab.explain.rows import BASE_FIELDS, FIELDS, Row, parse

S, C = "10.0.2.10", "10.0.1.10"


def seg(n: int, t: float, a: int, length: int, h2: list[tuple[int, int]] | None = None, src: str = S) -> Row:
    """A TCP segment of bytes [a, a + length) (tshark's relative seq starts at 1), completing the HTTP/2 frames
    `h2` ((type, stream id))."""
    h2 = h2 or []
    return Row(number=n, time=t, src=src, tcp_len=length, tcp_seq=a + 1, h2_types=[x for x, _ in h2],
               h2_stream_ids=[s for _, s in h2])


# server-side (in order): stream 1 owns bytes 0-999, stream 3 1000-1999, stream 5 2000-2999; each frame is
# dissected in the segment that completes it
SERVER = [seg(1, 0.0, 0, 500), seg(2, 0.0, 500, 500, [(0, 1)]), seg(3, 0.0, 1000, 500),
          seg(4, 0.0, 1500, 500, [(0, 3)]), seg(5, 0.0, 2000, 500), seg(6, 0.0, 2500, 500, [(0, 5)]),
          seg(7, 0.09, 500, 500)]  # the re-send of 500-999 (dissected at its first copy: no frames here)
# client-side: 500-999 dropped by the emulator, its re-send arrives at 0.200
CLIENT = [seg(1, 0.100, 0, 500), seg(2, 0.110, 1000, 500), seg(3, 0.111, 1500, 500), seg(4, 0.112, 2000, 500),
          seg(5, 0.113, 2500, 500), seg(6, 0.200, 500, 500)]


def test_the_stream_map_charges_segments_to_the_frames_they_complete():
    smap = hol.h2_stream_map(SERVER, C)
    assert smap is not None
    assert [(a, b, sorted(s)) for a, b, s in smap.ranges] == [
        (0, 500, [1]), (500, 1000, [1]), (1000, 1500, [3]), (1500, 2000, [3]), (2000, 2500, [5]), (2500, 3000, [5])]
    assert smap.overlaps(900, 1100) == [(1, 100), (3, 100)]


def test_a_tcp_hole_holds_every_http2_stream_above_it():
    h = hol.tcp_hol(CLIENT, SERVER, C)
    assert h is not None and h.level == "tcp byte stream"
    assert (h.holes.value, h.streams.value, h.streams_held.value, h.bytes_held.value) == (1, 3, 2, 2000)
    per = {s.stream_id: s for s in h.per_stream}
    assert per[1].bytes_held == 0 and per[1].hole_fill_delay_ms == 0.0  # its own bytes were the hole
    # stream 3: 1000-1499 arrived at 110 ms, 1500-1999 at 111 ms, both delivered at 200 ms
    assert per[3].bytes_held == 1000 and per[3].hole_fill_delay_ms == pytest.approx(90.0)
    assert per[3].mean_wait_ms == pytest.approx(89.5) and per[3].holes == 1
    assert per[5].bytes_held == 1000 and per[5].hole_fill_delay_ms == pytest.approx(88.0)
    assert h.longest_hole_fill_delay_ms.value == pytest.approx(90.0)


def test_in_order_arrivals_hold_nothing():
    h = hol.tcp_hol(sorted(CLIENT, key=lambda r: r.tcp_seq), SERVER, C)
    assert h is not None and h.holes.value == 0 and h.bytes_held.value == 0


def test_a_retransmission_covering_held_bytes_releases_them():
    client = [seg(1, 0.1, 0, 500), seg(2, 0.11, 1000, 500), seg(3, 0.2, 500, 1500)]  # re-send covers 500-1999
    h = hol.tcp_hol(client, SERVER, C)
    assert h is not None
    per = {s.stream_id: s for s in h.per_stream}
    assert per[3].bytes_held == 500 and per[3].hole_fill_delay_ms == pytest.approx(90.0)


def test_one_stream_is_not_a_multi_object_run():
    server = [seg(1, 0.0, 0, 500), seg(2, 0.0, 500, 500, [(1, 1), (0, 1)])]
    assert hol.tcp_hol(CLIENT[:1], server, C) is None
    assert hol.head_of_line("h1", CLIENT, SERVER, C) == (None, "")
    none, why = hol.head_of_line("h2", CLIENT, [], C)
    assert none is None and "server-side capture" in why


def frame(n: int, t: float, sid: int, off: int, length: int) -> Row:
    return Row(number=n, time=t, src=S, short=True, pns=[n], stream_ids=[sid], stream_offsets=[off],
               stream_lengths=[length], udp_len=length + 40)


def test_a_quic_hole_holds_only_its_own_stream():
    rows = [frame(1, 0.110, 0, 500, 500), frame(2, 0.111, 4, 0, 500), frame(3, 0.112, 4, 500, 500),
            frame(4, 0.200, 0, 0, 500), frame(5, 0.201, 3, 0, 20)]  # a control stream (id 3) is not a request
    h = hol.quic_hol(rows, C)
    assert h is not None and h.level == "quic stream"
    assert (h.holes.value, h.streams.value, h.streams_held.value, h.bytes_held.value) == (1, 2, 1, 500)
    per = {s.stream_id: s for s in h.per_stream}
    assert per[0].hole_fill_delay_ms == pytest.approx(90.0) and per[0].response_bytes == 1000
    assert per[4].bytes_held == 0


def quic(n: int, t: float, src: str, pn: int, acked: list[int] | None = None) -> Row:
    return Row(number=n, time=t, src=src, short=True, pns=[pn], acked=acked or [], udp_len=1200)


def inputs(rows: list[Row]) -> RunInputs:
    return RunInputs(run_key="0/h3/curl/nginx/0", protocol="h3", client_side=None, server_side=None,
                     client_rows=[], server_rows=rows)


def test_a_send_after_a_silent_rtt_with_bytes_in_flight_is_a_probe_timeout():
    rows = [quic(1, 0.0, S, 0), quic(2, 0.001, S, 1), quic(3, 0.2, S, 2)]  # silent 199 ms, 0 and 1 unacked
    assert _quic_timeouts(inputs(rows), C, 0.04) == 1


def test_an_ack_clocked_send_or_nothing_in_flight_is_no_timeout():
    acked = [quic(1, 0.0, S, 0), quic(2, 0.1, C, 0, [0]), quic(3, 0.2, S, 1)]  # everything acknowledged
    assert _quic_timeouts(inputs(acked), C, 0.04) == 0
    clocked = [quic(1, 0.0, S, 0), quic(2, 0.001, S, 1), quic(3, 0.1995, C, 0, [0]), quic(4, 0.2, S, 2)]
    assert _quic_timeouts(inputs(clocked), C, 0.04) == 0  # sent 0.5 ms after an ACK arrived: its answer
    assert _quic_timeouts(inputs(clocked), C, None) is None


def test_older_tshark_output_without_the_added_columns_still_reads():
    line = "\t".join(["7", "1.5", S, "100", "1"] + [""] * (BASE_FIELDS - 5))
    (row,) = parse(line)
    assert row.tcp_len == 100 and row.h2_stream_ids == [] and row.tcp_stream is None
    cols = ["7", "1.5", S, "100", "1"] + [""] * (len(FIELDS) - 5)
    cols[FIELDS.index("quic.frame_type")], cols[FIELDS.index("tcp.ack")] = "0x10;0x08", "2001"
    row = parse("\t".join(cols))[0]
    assert (row.quic_frame_types, row.tcp_ack) == ([16, 8], 2001)


def ack(n: int, t: float, upto: int, window: int) -> Row:
    """A client ACK in the server-side capture: relative ack `upto` (next byte expected), advertised `window`."""
    return Row(number=n, time=t, src=C, tcp_ack=upto, tcp_window=window)


def test_tcp_sending_time_split_into_receiver_application_and_sender_limited():
    rows = [seg(1, 0.00, 0, 1000), seg(2, 0.01, 1000, 1000),  # 2000 in flight, window 2500: receiver-limited
            ack(3, 0.05, 2001, 2500),  # all acknowledged: nothing in flight, idle until the next data
            seg(4, 0.09, 2000, 1000), ack(5, 0.10, 2001, 60000),  # 1000 in flight, window open: sender
            seg(6, 0.13, 3000, 1000)]
    sh = limits.tcp([ack(0, 0.0, 1, 2500), *rows], C)
    assert sh is not None and sh.seconds == pytest.approx(0.13)
    # receiver 0.01-0.05 (after seg 2: 2000 + 1000 > 2500; after seg 1: 1000 + 1000 <= 2500 is sender 0-0.01),
    # application 0.05-0.09, sender 0.09-0.13 and 0-0.01
    assert (sh.receiver, sh.application, sh.sender) == pytest.approx((0.04 / 0.13, 0.04 / 0.13, 0.05 / 0.13))


def quicpkt(n: int, t: float, src: str, pn: int, frames: list[int], acked: list[int] | None = None,
            stream: bool = False) -> Row:
    return Row(number=n, time=t, src=src, short=True, pns=[pn], acked=acked or [], quic_frame_types=frames,
               stream_ids=[0] if stream else [], stream_offsets=[0] if stream else [],
               stream_lengths=[100] if stream else [])


def test_quic_sending_time_split_into_receiver_application_and_sender_limited():
    rows = [quicpkt(1, 0.00, S, 0, [0x08], stream=True),
            quicpkt(2, 0.02, S, 1, [0x08, 0x15], stream=True),  # STREAM_DATA_BLOCKED: receiver-limited
            quicpkt(3, 0.06, C, 0, [0x02, 0x11], acked=[1]),  # MAX_STREAM_DATA, all acked: idle
            quicpkt(4, 0.08, S, 2, [0x02]),  # an ACK-only packet is not in flight
            quicpkt(5, 0.10, S, 3, [0x08], stream=True)]
    sh = limits.quic(rows, C)
    assert sh is not None and sh.seconds == pytest.approx(0.10)
    assert (sh.sender, sh.receiver, sh.application) == pytest.approx((0.2, 0.4, 0.4))


def test_the_client_is_who_sent_the_clienthello_not_whoever_came_first():
    """A capture may begin with the previous run's server still sending to a client that left."""
    from lab.explain.rows import client_of

    stray = Row(number=1, time=0.0, src=S, udp_len=1200, short=True, pns=[900])
    hello = Row(number=2, time=0.5, src=C, udp_len=1200, long_types=[0], hs_types=[1])
    assert client_of([stray, hello]) == C
    assert client_of([stray]) == S and client_of([]) is None  # no ClientHello: the first sender, as before
