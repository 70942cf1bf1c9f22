"""`quiclab explain --qlog` (issue 25 point 3): qlog 0.3 JSON-SEQ reconstructed from the router's decrypted
client-side capture, on the committed captures of tests/data/explain with tshark's decoded output committed beside
them (`client-side.qlog.json`: `lab.explain.qlog.decoded`'s output), so no docker and no tshark are needed.

The counts the tests check against are taken from the pcap itself (lab/evidence/pcap.py) and from tshark's
independent field output (`client-side.tsv`, one line per datagram, its QUIC packet numbers `;`-joined)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from lab.evidence.pcap import read_pcap
from lab.explain import qlog
from lab.explain.rows import parse
from tests.explain_data import copied_sweep, run

DATA = Path(__file__).parents[1] / "data" / "explain"
SWEEP = DATA / "sweep"
H3 = SWEEP / "evidence" / "0_h3_curl_nginx_0"


def _decoded(d: Path, name: str = "client-side.qlog.json") -> list[dict]:
    return json.loads((d / name).read_text())


@pytest.fixture(scope="module")
def h3() -> list[dict]:
    return qlog.loads(qlog.dumps(qlog.records(_decoded(H3), title="t")))


def test_json_seq_with_a_qlog_0_3_header_first():
    text = qlog.dumps(qlog.records(_decoded(H3), title="nginx h3"))
    parts = text.split("\x1e")
    assert parts[0] == "" and all(p.endswith("\n") and p.count("\n") == 1 for p in parts[1:])
    head = json.loads(parts[1])
    assert head["qlog_version"] == "0.3" and head["qlog_format"] == "JSON-SEQ" and head["title"] == "nginx h3"
    trace = head["trace"]
    assert trace["vantage_point"] == {"type": "network", "name": "quiclab router, client side", "flow": "client"}
    common = trace["common_fields"]
    assert common["ODCID"] == "759cc506559153f0"  # the DCID of the client's first Initial (tshark: 75:9c:c5:...)
    assert common["time_format"] == "relative" and common["reference_time"] == pytest.approx(1795507224816.702)


def test_packet_counts_agree_with_the_pcap(h3):
    events = h3[1:]
    pcap = [p for p in read_pcap((H3 / "client-side.pcap").read_bytes()) if p.proto == 17]
    client = pcap[0].src
    # every datagram of the capture is in the qlog, each on its side (36 + 58 = the pcap's 94)
    by_name = Counter(e["name"] for e in events)
    datagrams = {n: {e["data"]["datagram_id"] for e in events if e["name"] == n} for n in by_name}
    assert len(datagrams["transport:packet_sent"]) == sum(1 for p in pcap if p.src == client) == 36
    assert len(datagrams["transport:packet_received"]) == sum(1 for p in pcap if p.src != client) == 58
    # one event per QUIC packet: as many as tshark's field output numbers (coalesced packets counted each)
    rows = parse((H3 / "client-side.tsv").read_text())
    assert len(events) == sum(len(r.pns) for r in rows) == 96
    assert by_name == {"transport:packet_sent": 37, "transport:packet_received": 59}
    sent_pns = sorted(e["data"]["header"]["packet_number"] for e in events
                      if e["name"] == "transport:packet_sent" and e["data"]["header"]["packet_type"] == "1RTT")
    assert sent_pns == sorted(pn for r in rows if r.src == client and r.short for pn in r.pns[-1:])


def test_stream_frames_carry_the_response_to_its_fin(h3):
    got = [f for e in h3[1:] if e["name"] == "transport:packet_received" for f in e["data"]["frames"]
           if f["frame_type"] == "stream" and f["stream_id"] == 0]
    assert len(got) >= 50 and all({"offset", "length", "fin"} <= f.keys() for f in got)
    # 60 kB body + HTTP/3 HEADERS and DATA frame headers; nginx ends the stream with an empty FIN frame
    assert max(f["offset"] + f["length"] for f in got) == 60171
    assert [f for f in got if f["fin"]] == [{"frame_type": "stream", "stream_id": 0, "offset": 60171, "length": 0,
                                             "fin": True}]
    request = [f for e in h3[1:] if e["name"] == "transport:packet_sent" for f in e["data"]["frames"]
               if f["frame_type"] == "stream" and f["stream_id"] == 0]
    assert request == [{"frame_type": "stream", "stream_id": 0, "offset": 0, "length": 39, "fin": True}]


def test_times_are_ms_from_the_first_packet_with_sub_ms_precision(h3):
    times = [e["time"] for e in h3[1:]]
    assert times[0] == 0.0 and times == sorted(times)
    assert any(t != int(t) for t in times)
    assert times[1] == pytest.approx(0.033)  # the client's second Initial, 33 us after the first


def test_frames_as_tshark_decodes_them(h3):
    kinds = Counter(f["frame_type"] for e in h3[1:] for f in e["data"]["frames"])
    assert {"stream", "ack", "crypto", "padding", "handshake_done", "new_connection_id", "connection_close",
            "ping"} <= kinds.keys()
    first = h3[1]["data"]
    assert first["header"] == {"packet_type": "initial", "packet_number": 0, "dcid": "759cc506559153f0"}
    assert first["frames"] == [{"frame_type": "crypto", "offset": 0, "length": 1158}]
    # the downlink drop of this run (server packet 43) is the client's ACK hole
    acks = [f["acked_ranges"] for e in h3[1:] if e["name"] == "transport:packet_sent" for f in e["data"]["frames"]
            if f["frame_type"] == "ack" and len(f["acked_ranges"]) > 1]
    assert acks[0] == [[44, 44], [0, 42]]
    coalesced = [e for e in h3[1:] if e["data"].get("is_coalesced")]
    assert {e["data"]["header"]["packet_type"] for e in coalesced} >= {"initial", "handshake"}


def test_ack_ranges_follow_rfc9000_gaps():
    f = {"quic.frame_type": "0x02", "quic.ack.largest_acknowledged": "10", "quic.ack.first_ack_range": "2",
         "quic.ack.gap": ["1", "0"], "quic.ack.ack_range": ["3", "0"]}
    assert qlog.frame(f)["acked_ranges"] == [[8, 10], [2, 5], [0, 0]]


def test_the_handshake_loss_capture_shows_the_lost_initial_as_an_ack_hole():
    recs = qlog.records(_decoded(DATA / "handshake-loss"), title="t")
    acks = [f["acked_ranges"] for e in recs[1:] if e["name"] == "transport:packet_sent"
            for f in e["data"]["frames"] if f["frame_type"] == "ack"]
    assert [[2, 2], [0, 0]] in acks  # the server's Initial 1 never reached the client


def test_undecryptable_capture_says_why():
    with pytest.raises(qlog.NoQlog, match="does not decrypt the capture's 1-RTT packets"):
        qlog.records(_decoded(H3, "client-side.nokeys.qlog.json"), title="t")
    with pytest.raises(qlog.NoQlog, match="no QUIC packet"):
        qlog.records([], title="t")


def test_slim_keeps_fields_and_drops_bytes():
    raw = [{"_source": {"layers": {
        "frame": {"frame.number": "1", "frame.time_epoch": "1.5"}, "ip": {"ip.src": "a", "ip.dst": "b"},
        "udp": {"udp.length": "50"},
        "quic": {"quic.short": {"quic.packet_number": "4", "quic.protected_payload": "aa:bb"},
                 "quic.frame": {"quic.frame_type": "0x08", "quic.stream.stream_id": "0", "quic.stream_data": "cc"}}}}},
           {"_source": {"layers": {"frame": {}, "ip": {}, "tcp": {}}}}]
    (p,) = qlog.slim(raw)
    assert p == {"frame.number": "1", "frame.time_epoch": "1.5", "ip.src": "a", "ip.dst": "b", "udp.length": "50",
                 "quic.connection.number": None, "quic": [{"quic.short": {"quic.packet_number": "4"},
                           "quic.frame": {"quic.frame_type": "0x08", "quic.stream.stream_id": "0"}}]}


# ---- through the CLI ----------------------------------------------------------------------------------------------

@pytest.fixture
def sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(qlog, "decoded", lambda pcap, keylog: _decoded(pcap.parent))
    return copied_sweep(tmp_path, monkeypatch)


def test_cli_writes_the_h3_run_and_skips_the_tcp_run(sweep, tmp_path, capsys):
    out_dir = tmp_path / "qlogs"
    assert run([str(sweep), "--qlog", str(out_dir)]) == 0
    out = capsys.readouterr().out
    assert "0/h2/curl/nginx/0: skipped: an h2 run is TCP, not QUIC" in out
    assert "0/h3/curl/nginx/0: qlog" in out
    text = (out_dir / "0_h3_curl_nginx_0.sqlog").read_text()
    assert text.startswith('\x1e{"qlog_version":"0.3","qlog_format":"JSON-SEQ"')
    recs = qlog.loads(text)
    assert recs[0]["title"] == "quiclab explain-fixture 0/h3/curl/nginx/0"
    assert {e["name"] for e in recs[1:]} == {"transport:packet_sent", "transport:packet_received"}
    assert not (sweep / "evidence" / "0_h3_curl_nginx_0" / "explain.json").exists()  # --qlog writes qlog only


def test_cli_run_without_keys_says_why_not_a_crash(sweep, tmp_path, capsys):
    (sweep / "evidence" / "0_h3_curl_nginx_0" / "keys.log").unlink()
    assert run([str(sweep), "--qlog", str(tmp_path / "q"), "--run", "0/h3/curl/nginx/0"]) == 0
    out = capsys.readouterr().out
    assert "0/h3/curl/nginx/0: cannot write qlog: no TLS key log (keys.log)" in out
    assert not (tmp_path / "q" / "0_h3_curl_nginx_0.sqlog").exists()


def test_one_trace_per_quic_connection():
    packets = _decoded(H3)
    assert [len(c) for c in qlog.connections(packets)] == [94]
    second = [{**p, "quic.connection.number": "1"} for p in packets[:5]]
    tail = {**packets[5], "quic.connection.number": None}  # unreadable: goes with the connection before it
    conns = qlog.connections(packets[:10] + second + [tail])
    assert [len(c) for c in conns] == [10, 6] and conns[1][-1] is tail


def test_cli_writes_one_file_per_connection(sweep, tmp_path, monkeypatch, capsys):
    def two(pcap, keylog):
        packets = _decoded(pcap.parent)
        return packets + [{**p, "quic.connection.number": "1"} for p in packets]

    monkeypatch.setattr(qlog, "decoded", two)
    assert run([str(sweep), "--qlog", str(tmp_path / "q"), "--run", "0/h3/curl/nginx/0"]) == 0
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == ["0_h3_curl_nginx_0_conn1.sqlog",
                                                                  "0_h3_curl_nginx_0_conn2.sqlog"]
    second = qlog.loads((tmp_path / "q" / "0_h3_curl_nginx_0_conn2.sqlog").read_text())
    assert second[0]["title"].endswith("connection 2 of 2") and len(second) == 97


@pytest.mark.parametrize(("fields", "expected"), [
    ({"quic.frame_type": "0x10", "quic.md.maximum_data": "1048576"}, {"frame_type": "max_data", "maximum": 1048576}),
    ({"quic.frame_type": "0x11", "quic.msd.stream_id": "0", "quic.msd.maximum_stream_data": "65536"},
     {"frame_type": "max_stream_data", "stream_id": 0, "maximum": 65536}),
    ({"quic.frame_type": "0x13", "quic.ms.max_streams": "103"},
     {"frame_type": "max_streams", "stream_type": "unidirectional", "maximum": 103}),
    ({"quic.frame_type": "0x14", "quic.sb.stream_data_limit": "9000"}, {"frame_type": "data_blocked", "limit": 9000}),
    ({"quic.frame_type": "0x15", "quic.sdb.stream_id": "4", "quic.sb.stream_data_limit": "7"},
     {"frame_type": "stream_data_blocked", "stream_id": 4, "limit": 7}),
    ({"quic.frame_type": "0x16", "quic.sib.stream_limit": "100"},
     {"frame_type": "streams_blocked", "stream_type": "bidirectional", "limit": 100}),
    ({"quic.frame_type": "0x04", "quic.rsts.stream_id": "8", "quic.rsts.application_error_code": "268",
      "quic.rsts.final_size": "0"}, {"frame_type": "reset_stream", "stream_id": 8, "error_code": 268, "final_size": 0}),
    ({"quic.frame_type": "0x1c", "quic.cc.error_code": "10", "quic.cc.frame_type": "0x08",
      "quic.cc.reason_phrase": "bad"},
     {"frame_type": "connection_close", "error_space": "transport", "error_code": 10, "raw_error_code": 10,
      "reason": "bad", "trigger_frame_type": 8}),
    ({"quic.frame_type": "0x31", "quic.dg.length": "20"}, {"frame_type": "datagram", "length": 20}),
    ({"quic.frame_type": "0x0a", "quic.stream.stream_id": "2", "quic.stream.length": "3"},
     {"frame_type": "stream", "stream_id": 2, "offset": 0, "length": 3, "fin": False}),
    ({"quic.frame_type": "0x40"}, {"frame_type": "unknown", "raw_frame_type": 64}),
])
def test_frames_by_tshark_field_name(fields, expected):
    """Field names as tshark 4.4 (the router's) names them (`tshark -G fields`)."""
    assert qlog.frame(fields) == expected


def test_cli_json_lists_files_and_reasons(sweep, tmp_path, capsys):
    assert run([str(sweep), "--qlog", str(tmp_path / "q"), "--json"]) == 0
    got = {r["run_key"]: r for r in json.loads(capsys.readouterr().out)}
    assert got["0/h3/curl/nginx/0"]["qlog"] == [str(tmp_path / "q" / "0_h3_curl_nginx_0.sqlog")]
    assert got["0/h2/curl/nginx/0"]["qlog"] == [] and got["0/h2/curl/nginx/0"]["why"].startswith("skipped:")
