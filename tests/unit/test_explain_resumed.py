"""lab/explain/resumed.py (the resumed connection of a resume/0rtt run, timed: sessions.json) and its table in
docs/seeds.md (lab/docgen/zero_rtt.py): on tshark's rows of four real runs of the bolina-0rtt sweep
(tests/data/explain/sessions, README there: the figures below were read off those rows by hand, frame numbers
given), and on small synthetic rows for the rules (the amplification limit, the rounds, bytes counted once)."""

from __future__ import annotations

import gzip
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from lab.docgen import zero_rtt
from lab.explain import folder as explain_folder
from lab.explain import resumed
from lab.explain.rows import Row, parse
from lab.report.report import load_sweep
from lab.results import publish
from lab.results.schema import RunRecord

DATA = Path(__file__).parents[1] / "data" / "explain"
SESSIONS = DATA / "sessions"
C, S = "10.71.1.10", "10.71.2.11"


def _record(key: str) -> RunRecord:
    records, _ = load_sweep(SESSIONS)
    return next(r for r in records if r.run_key == key)


def _rows(key: str, side: str) -> list[Row]:
    d = SESSIONS / "evidence" / key.replace("/", "_")
    return parse(gzip.decompress((d / f"{side}-side.tsv.gz").read_bytes()).decode())


def _timed(key: str) -> resumed.SessionTimeline:
    return resumed.timeline(_record(key), _rows(key, "client"), _rows(key, "server"))


# ---------------------------------------------------------------------------------------------------------------
# the real runs


def test_0rtt_at_200ms_the_request_left_at_t0_and_the_first_flight_stopped_at_the_amplification_limit():
    t = _timed("22/h3/gtlsclient/ngtcp2/4")
    assert t.status == "timed" and t.connections == 2 and t.connection == 1
    # frame 218: the client's Initial + 0-RTT (stream 0, 50 bytes) in one datagram: the request at t0
    assert t.early_data and t.request_packets == "0-RTT" and t.request_ms == 0.0
    # frames 219-221 at 201.079 ms: 458 + 1156 + 1156 response bytes in three 1208-byte datagrams (payload 3 x 1200)
    assert t.first_response_ms == pytest.approx(201.079)
    assert t.rounds[0].k == 1 and t.rounds[0].response_bytes == 2770 and t.rounds[0].server_bytes == 3600
    a = t.amplification
    assert a is not None
    assert (a.received_bytes, a.sent_bytes, a.limit_bytes, a.response_bytes) == (1200, 3600, 3600, 2770)
    assert a.limited and a.validated_ms == pytest.approx(302.086)  # server side frame 222: the client's Handshake
    # frame 222 (client Finished) at 201.914 ms, frame 225 (HANDSHAKE_DONE) at 402.64 ms
    assert t.client_finished_ms == pytest.approx(201.914) and t.handshake_done_ms == pytest.approx(402.64)
    # by 2 RTT: up to frame 238's stream offset 15217 + 1159 = 16376 bytes; all 250018 (250 kB and HTTP/3 framing)
    assert t.bytes_by_round(2) == 16376
    assert t.response_bytes == 250018 and t.rounds[-1].response_bytes_by == 250018 and t.rounds[-1].k == 6
    assert t.last_response_ms == pytest.approx(1210.971)


def test_resumed_at_200ms_the_request_waited_one_round_trip_and_the_server_was_not_limited():
    t = _timed("14/h3/gtlsclient/ngtcp2/0")
    assert t.status == "timed" and not t.early_data and t.request_packets == "1-RTT"
    # frame 223: the client's Handshake (Finished) coalesced with the 1-RTT request, one RTT after t0
    assert t.request_ms == pytest.approx(201.862) and t.client_finished_ms == pytest.approx(201.862)
    # frame 227: HANDSHAKE_DONE with the response's first 822 bytes, two RTTs after t0
    assert t.first_response_ms == pytest.approx(402.797) and t.handshake_done_ms == pytest.approx(402.797)
    assert t.bytes_by_round(1) == 0 and t.bytes_by_round(2) == 11253
    a = t.amplification
    assert a is not None and (a.sent_bytes, a.limit_bytes, a.response_bytes, a.limited) == (1200, 3600, 0, False)
    assert t.response_bytes == 250018 and t.rounds[-1].k == 6


@pytest.mark.parametrize(("key", "early"), [("8/h3/gtlsclient/ngtcp2/0", False), ("16/h3/gtlsclient/ngtcp2/0", True)])
def test_at_20ms_the_same_story(key: str, early: bool):
    t = _timed(key)
    assert t.status == "timed" and t.early_data is early and t.response_bytes == 250018
    assert t.bytes_by_round(1) == (2770 if early else 0)
    assert t.amplification is not None and t.amplification.limited is early


def test_without_the_server_side_capture_there_is_no_amplification_figure():
    key = "22/h3/gtlsclient/ngtcp2/4"
    t = resumed.timeline(_record(key), _rows(key, "client"), [])
    assert t.status == "timed" and t.amplification is None and t.bytes_by_round(1) == 2770


def test_only_quic_resume_and_0rtt_runs_are_timed():
    r = _record("22/h3/gtlsclient/ngtcp2/4")
    assert resumed.applies(r)
    assert resumed.applies(replace(r, workload="resume:250kB"))
    assert not resumed.applies(replace(r, workload="bulk"))
    assert not resumed.applies(replace(r, protocol="h1"))
    assert not resumed.applies(replace(r, workload="nonsense"))


# ---------------------------------------------------------------------------------------------------------------
# the rules, on synthetic rows


def _row(n: int, t: float, src: str, size: int = 1208, **kw: object) -> Row:
    return Row(number=n, time=t, src=src, udp_len=size, quic_conn=kw.pop("conn", 1), **kw)  # type: ignore[arg-type]


def _hello(n: int, t: float, conn: int, **kw: object) -> Row:
    return _row(n, t, C, hs_types=[1], long_types=[0, *kw.pop("extra_long", [])], conn=conn, **kw)


def _record_at(rtt_s: float | None, workload: str = "0rtt:10kB") -> RunRecord:
    return replace(_record("22/h3/gtlsclient/ngtcp2/4"), rtt_s=rtt_s, workload=workload)


def _data(n: int, t: float, off: int, length: int, size: int = 1208, **kw: object) -> Row:
    kw.setdefault("quic_frame_types", [0x0E])
    return _row(n, t, S, size, stream_ids=[0], stream_offsets=[off], stream_lengths=[length], short=True, **kw)


def test_a_server_that_sent_less_than_a_datagram_below_its_limit_is_not_limited():
    rows = [_hello(1, 0.0, 0), _hello(2, 1.0, 1),
            _data(3, 1.001, 0, 1000, size=2 * 1200 + 8),  # (UDP length: payload + its 8-byte header)
            _row(4, 1.2, C, long_types=[2])]  # the client's Handshake: the address is validated
    a = resumed.amplification(rows, C, 1.0)
    assert a is not None and (a.received_bytes, a.sent_bytes, a.limit_bytes) == (1200, 2400, 3600)
    assert not a.limited  # 1200 bytes of room: one more full datagram would have fit
    rows[2] = _data(3, 1.001, 0, 1000, size=2 * 1200 + 8 + 1)
    assert resumed.amplification(rows, C, 1.0).limited  # type: ignore[union-attr]


def test_bytes_received_after_the_handshake_packet_do_not_count_and_no_handshake_means_no_figure():
    rows = [_hello(1, 0.0, 0), _hello(2, 1.0, 1), _row(3, 1.2, C, long_types=[2]), _data(4, 1.3, 0, 1000)]
    a = resumed.amplification(rows, C, 1.0)
    assert a is not None and a.sent_bytes == 0 and a.validated_ms == pytest.approx(200.0)
    assert resumed.amplification(rows[:2], C, 1.0) is None
    assert resumed.amplification(rows[1:2], C, 1.0) is None  # one connection: no resumed one


def test_rounds_split_at_half_rtts_and_count_each_byte_once():
    rtt = 0.1
    client = [_hello(1, 0.0, 0), _hello(2, 1.0, 1, extra_long=[1], stream_ids=[0], stream_lengths=[40],
                                         quic_frame_types=[0x0A])]
    server = [_data(3, 1.101, 0, 1000),            # round 1
              _data(4, 1.149, 1000, 1000),         # round 1 (before 1.5 RTT)
              _data(5, 1.151, 2000, 1000),         # round 2
              _data(6, 1.201, 1000, 1000),         # round 2: re-sent, no new byte
              _data(7, 1.349, 3000, 500)]          # round 3 (2.5 RTT <= t < 3.5 RTT)
    t = resumed.timeline(_record_at(rtt), client + server, [])
    assert t.status == "timed" and t.early_data and t.request_ms == 0.0
    assert [(r.k, r.response_bytes, r.response_bytes_by, r.server_packets) for r in t.rounds] == [
        (1, 2000, 2000, 2), (2, 1000, 3000, 2), (3, 500, 3500, 1)]
    assert t.response_bytes == 3500 and t.first_response_ms == pytest.approx(101.0)
    assert t.last_response_ms == pytest.approx(349.0)
    assert t.rounds[1].server_bytes == 2 * 1200  # the flight counts every datagram, re-sent ones too


def test_a_request_in_1rtt_packets_and_no_configured_rtt_uses_the_handshake_rtt():
    client = [_hello(1, 0.0, 0), _hello(2, 1.0, 1),
              _row(3, 1.05, C, long_types=[2], hs_types=[20]),
              _row(4, 1.05, C, short=True, stream_ids=[0], stream_lengths=[40], quic_frame_types=[0x0A])]
    server = [_row(5, 1.05, S, long_types=[0, 2]), _data(6, 1.1, 0, 500, quic_frame_types=[0x1E, 0x0E])]
    t = resumed.timeline(_record_at(None, "resume:1kB"), client + server, [])
    assert t.request_packets == "1-RTT" and t.request_ms == pytest.approx(50.0)
    assert t.handshake_rtt_ms == pytest.approx(50.0) and t.handshake_done_ms == pytest.approx(100.0)
    assert t.client_finished_ms == pytest.approx(50.0)
    assert [r.k for r in t.rounds] == [1, 2] and t.bytes_by_round(2) == 500  # RTT 50 ms: 100 ms is round 2


def test_what_cannot_be_timed_says_why():
    one = resumed.timeline(_record_at(0.1), [_hello(1, 0.0, 0)], [])
    assert one.status == "not timed" and "1 QUIC connection" in one.why
    no_request = resumed.timeline(_record_at(0.1), [_hello(1, 0.0, 0), _hello(2, 1.0, 1)], [])
    assert no_request.status == "not timed" and "no request" in no_request.why
    assert resumed.timeline(_record_at(0.1), [], []).why == "the client-side capture has no packets"


def test_stream_offsets_line_up_by_the_frame_types_when_some_frames_carry_none():
    # real row (22/4 client side, frame 219): five STREAM frames 3, 11, 7, 7, 0; only the fourth (type 0x0e) has
    # an offset; before, the row's STREAM data read as none and the first 458 response bytes were lost
    r = next(x for x in _rows("22/h3/gtlsclient/ngtcp2/4", "client") if x.number == 219)
    assert r.streams() == [(3, 0, 18), (11, 0, 1), (7, 0, 1), (7, 1, 21), (0, 0, 458)]
    assert Row(number=1, time=0.0, src=C, stream_ids=[0, 4], stream_offsets=[5],
               stream_lengths=[1, 2]).streams() == []  # without the types nothing can be lined up


# ---------------------------------------------------------------------------------------------------------------
# the folder, publishing and the docs


def test_explain_writes_sessions_json_for_a_0rtt_quic_run_and_not_for_a_bulk_one(tmp_path: Path):
    sweep = DATA / "sweep"  # a bulk h2/h3 fixture with captures: made a 0rtt run, its one connection is not timed
    records, _ = load_sweep(sweep)
    h3 = next(r for r in records if r.protocol == "h3")
    h2 = next(r for r in records if r.protocol == "h2")
    dest = tmp_path / "sweep"
    shutil.copytree(sweep, dest)
    early = replace(h3, workload="0rtt:60kB")
    explain_folder.explain_folder(dest, [early, h2], None,
                                  lambda pcap, keys: pcap.with_suffix(".tsv").read_text(encoding="utf-8"))
    d3, d2 = explain_folder.evidence_dir(dest, early), explain_folder.evidence_dir(dest, h2)
    assert d3 is not None and d2 is not None
    t = resumed.SessionTimeline.model_validate_json((d3 / resumed.SESSIONS_JSON).read_text())
    assert t.status == "not timed" and "expected 2 (the first, then the resumed one)" in t.why
    assert (d3 / "explain.json").is_file() and not (d2 / resumed.SESSIONS_JSON).exists()


def test_a_sweeps_end_says_it_timed_the_resume_and_0rtt_runs(tmp_path: Path):
    records, _ = load_sweep(DATA / "sweep")
    dest = tmp_path / "sweep"
    shutil.copytree(DATA / "sweep", dest)
    records = [replace(r, workload="resume:60kB") if r.protocol == "h3" else r for r in records]
    line = explain_folder.after_sweep(dest, records, lambda pcap, keys: pcap.with_suffix(".tsv").read_text())
    assert line is not None and "sessions.json for the 1 resume/0rtt QUIC runs" in line


def test_publishing_keeps_sessions_json():
    assert resumed.SESSIONS_JSON in publish.KEPT_EVIDENCE


def _folder_with_timelines(tmp_path: Path) -> tuple[Path, list[RunRecord]]:
    dest = tmp_path / "bolina-0rtt"
    shutil.copytree(SESSIONS, dest)
    records, _ = load_sweep(dest)
    for r in records:
        d = explain_folder.evidence_dir(dest, r)
        assert d is not None
        explain_folder.write(d, _timed(r.run_key))
    return dest, records


def test_the_docs_table_and_sentence_come_from_the_runs_timelines(tmp_path: Path):
    dest, records = _folder_with_timelines(tmp_path)
    text = "\n".join(zero_rtt.section(dest, records, "results/reference/bolina-0rtt"))
    assert ("| HTTP/3 gtlsclient→ngtcp2 | 20 ms | 1 / 1 | 22 / 0 | 42 / 21 | 42 / 42 | 0.0 / 2.8 | 11.3 / 16.4 | "
            "131 / 126 | 7 / 6 | 1 of 1 |") in text
    assert ("| HTTP/3 gtlsclient→ngtcp2 | 200 ms | 1 / 1 | 202 / 0 | 403 / 201 | 403 / 403 | 0.0 / 2.8 | 11.3 / 16.4 | "
            "1270 / 1211 | 6 / 6 | 1 of 1 |") in text
    assert "At 200 ms RTT (`results/reference/bolina-0rtt/`), 0-RTT sent the request 202 ms earlier" in text
    assert "at the limit in 1 of 1 runs" in text and "its last byte 59 ms earlier" in text


def test_without_timelines_the_docs_say_which_commands_make_them(tmp_path: Path):
    dest = tmp_path / "bolina-0rtt"
    shutil.copytree(SESSIONS, dest, ignore=shutil.ignore_patterns("*.gz"))
    records, _ = load_sweep(dest)
    text = "\n".join(zero_rtt.section(dest, records, "results/reference/bolina-0rtt"))
    assert "No run of `results/reference/bolina-0rtt/` carries sessions.json yet" in text
    assert "uv run quiclab explain results/atlas/bolina-0rtt/" in text and "|" not in text


def test_the_explain_command_line_of_a_timeline():
    line = resumed.summary(_timed("22/h3/gtlsclient/ngtcp2/4"))
    assert line.startswith("22/h3/gtlsclient/ngtcp2/4: resumed connection: request at 0 ms (0-RTT), first response "
                           "byte at 201 ms")
    assert "2770 response bytes by 1 RTT" in line and "sent 3600 of its 3600-byte limit (at the limit)" in line
    assert "not timed" in resumed.summary(resumed.timeline(_record_at(0.1), [], []))


def test_the_sentence_says_and_not_but_when_the_servers_were_not_held(tmp_path: Path):
    early = _timed("22/h3/gtlsclient/ngtcp2/4")
    assert early.amplification is not None
    free = early.model_copy(update={"amplification": early.amplification.model_copy(update={"limited": False})})
    text = zero_rtt.sentence(200.0, [_timed("14/h3/gtlsclient/ngtcp2/0")], [free], "x")
    assert "; and that round brought 2.8 kB" in text and "at the limit in 0 of 1 runs;" in text
    assert "the rest waited" not in text


def test_the_second_connection_is_not_taken_for_a_resend_of_the_first():
    """explain.json's loss figures over a run of two connections (both number their stream 0 from offset 0): in
    run 22/4 nothing was dropped and nothing re-sent; before, the second connection's 250 kB counted as re-sent."""
    from lab.explain.analyze import RunInputs, _losses

    rows = _rows("22/h3/gtlsclient/ngtcp2/4", "server")
    inp = RunInputs(run_key="22/h3/gtlsclient/ngtcp2/4", protocol="h3", client_side=None, server_side=None,
                    client_rows=[], server_rows=rows)
    arrived: list[float | None] = [0.0] * (max(r.number for r in rows) + 1)  # every packet reached the client
    loss = _losses(inp, "quic", C, arrived, rows[0].time, 0.2).record
    assert loss.data_packets.value == 365  # both connections' data packets, the coalesced first ones included
    assert loss.retransmissions.value == 0 and loss.bytes_retransmitted.value == 0
