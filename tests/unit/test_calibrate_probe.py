"""`quiclab probe`'s reading (lab/calibrate): synthetic captures of downloads through a known path (tests/pathsim.py)
and the tools' outputs (tests/calibrate_inputs.py) become flows and RTT samples that show that path, and each form
says what it cannot tell."""

from __future__ import annotations

import statistics
from dataclasses import replace
from pathlib import Path

import pytest

from lab.calibrate import measurements
from lab.calibrate.pcapfile import Segment
from lab.calibrate.probe import probe
from lab.calibrate.tcpflows import bulk_flows
from lab.errors import UsageError
from tests import calibrate_inputs as inputs
from tests import pathsim

LINK = pathsim.Path(rate_bps=4e6, rtt_s=0.04, queue_packets=27)
PAYLOAD_RATE = 4e6 * pathsim.MSS / pathsim.WIRE


@pytest.fixture(scope="module")
def download() -> list[pathsim.Record]:
    return pathsim.download(LINK, 6)


def _file(tmp_path: Path, name: str, content: str | bytes) -> Path:
    p = tmp_path / name
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content)
    return p


@pytest.mark.parametrize("pcapng", [False, True], ids=["pcap", "pcapng"])
def test_a_capture_of_a_download_shows_its_rate_rtt_and_retransmissions(tmp_path, download, pcapng):
    m = probe([_file(tmp_path, "d.pcap", pathsim.capture(download, pcapng=pcapng))])
    [flow] = m.flows
    assert flow.direction == "down" and flow.label == "tcp 10.2.0.2:443 > 10.1.0.2:40000"
    late = [r for a, _, r in flow.rate if a >= 2]
    assert statistics.median(late) == pytest.approx(PAYLOAD_RATE, rel=0.03)
    assert [i.kind for i in m.idle] == ["handshake"] and m.idle[0].rtt_s == [pytest.approx(0.04, abs=1e-6)]
    rtts = [r for _, r in flow.rtt]
    assert len(rtts) > 1000
    assert min(rtts) == pytest.approx(0.04 + 1500 * 8 / 4e6, abs=0.0015)  # one packet's serialisation, 1 ms clock
    assert max(rtts) == pytest.approx(0.04 + 27 * 1500 * 8 / 4e6, abs=0.004)  # the full queue
    highest, retx = 0, 0  # the data that arrived below the highest byte already seen: repeats and hole fills
    for r in download:
        if r.from_server and r.payload:
            retx += highest and r.seq < highest
            highest = max(highest, r.seq + r.payload)
    assert flow.retransmits == retx > 0
    assert any("queue size" in c for c in m.can_tell)
    assert any("random loss apart from queue overflow" in c for c in m.can_tell)


def test_a_capture_without_timestamps_cannot_tell_random_loss_from_overflow(tmp_path, download):
    """The issue's example: one download (its sender's congestion control unknown) without delay samples."""
    m = probe([_file(tmp_path, "d.pcap", pathsim.capture(download, timestamps=False))])
    [flow] = m.flows
    assert flow.rtt == [] and flow.retransmits
    said = " ".join(m.cannot_tell)
    assert "random loss apart from queue overflow" in said and "the queue size" in said
    assert "does not say which congestion control" in said
    assert not any("random loss apart" in c for c in m.can_tell)


def test_a_server_side_capture_is_read_from_its_own_vantage(tmp_path, download):
    """The same transfer seen from the sender's end: the handshake's long gap is SYN/ACK -> ACK there; the flow is
    then an upload from that host's point of view."""
    half = LINK.rtt_s / 2
    moved = [replace(r, t=r.t - half if r.from_server else r.t + half) for r in download]
    moved.sort(key=lambda r: r.t)
    m = probe([_file(tmp_path, "s.pcap", pathsim.capture(moved))])
    assert m.flows[0].direction == "up"
    assert m.idle[0].rtt_s == [pytest.approx(0.04, abs=1e-6)]


def test_ping_irtt_and_two_iperf3_senders(tmp_path):
    rtts = inputs.uniform_rtts(30, 2, 200)
    files = [_file(tmp_path, "ping.txt", inputs.ping_text(rtts[:100], stamps=True)),
             _file(tmp_path, "irtt.json", inputs.irtt_json(rtts[100:], lost=3)),
             _file(tmp_path, "cubic.json", inputs.iperf3_json("cubic", [9.0] * 10, [45.0] * 10, [2] * 10)),
             _file(tmp_path, "bbr.json", inputs.iperf3_json("bbr", [9.5] * 10, [33.0] * 10, [0] * 10))]
    m = probe(files)
    assert [i.kind for i in m.inputs] == ["ping", "irtt", "iperf3", "iperf3"]
    assert m.idle_rtts(series_only=True) == pytest.approx([r / 1000 for r in rtts], abs=1e-6)
    assert [(f.cc, f.direction, f.retransmits) for f in m.flows] == [("cubic", "up", 20), ("bbr", "up", 0)]
    assert m.flows[0].rtt[0] == (0.5, pytest.approx(0.045))
    said = " ".join(m.can_tell)
    assert "the jitter" in said and "2 senders: bbr, cubic" in said
    assert any("downlink's rate: no download" in c for c in m.cannot_tell)


def test_iperf3_reverse_is_a_download_without_the_senders_view(tmp_path):
    m = probe([_file(tmp_path, "r.json", inputs.iperf3_json("cubic", [8.0] * 5, reverse=True))])
    [flow] = m.flows
    assert flow.direction == "down" and flow.rtt == [] and flow.retransmit_times_s is None
    assert any("no RTT samples under load" in c for c in m.cannot_tell)


@pytest.mark.parametrize("test", ["tcp_download", "rrul"])
def test_flent_files_give_idle_and_loaded_rtt(tmp_path, test):
    m = probe([_file(tmp_path, f"{test}.flent.gz", inputs.flent_gz(test, 20.0, 70.0, 12.0))])
    [flow] = m.flows
    assert flow.cc == "cubic" and flow.duration_s == pytest.approx(20, abs=0.3)
    assert {r for _, _, r in flow.rate} == {12e6}
    assert len(flow.rtt) == 100 and all(r == pytest.approx(0.07) for _, r in flow.rtt)
    assert m.idle[0].kind == "flent" and set(m.idle[0].rtt_s) == {0.02}
    assert any("flent does not" in c for c in m.cannot_tell)


def test_a_trace_is_the_recorded_capacity(tmp_path):
    m = probe([_file(tmp_path, "cell.up", "1\n1\n2\n3\n5\n")])
    assert [(t.direction, t.trace_ms) for t in m.traces] == [("up", [1, 1, 2, 3, 5])]


def test_the_folder_round_trips(tmp_path, download):
    m = probe([_file(tmp_path, "d.pcap", pathsim.capture(download))])
    measurements.write(tmp_path / "folder", m)
    assert measurements.read(tmp_path / "folder") == m
    (tmp_path / "folder" / measurements.FILE).write_text('{"version": 1, "inputs": [], "flows": [{"x": 1}]}')
    with pytest.raises(UsageError, match=r"measurements.json: missing field 'flows.source'"):
        measurements.read(tmp_path / "folder")


def test_a_client_side_capture_keeps_each_data_packets_arrival(tmp_path, download):
    """At the receiver's side a capture holds what the link delivered packet by packet (IP bytes, retransmissions
    included): the rate trace's finest record; the connection's ports name it."""
    m = probe([_file(tmp_path, "d.pcap", pathsim.capture(download))])
    [flow] = m.flows
    data = [r for r in download if r.from_server and r.payload]
    assert flow.ports == (443, 40000)
    assert flow.arrivals is not None and len(flow.arrivals) == len(data)
    assert [b for _, b in flow.arrivals] == [r.payload + pathsim.WIRE - pathsim.MSS for r in data]
    assert [t for t, _ in flow.arrivals] == [pytest.approx(r.t - data[0].t, abs=1e-6) for r in data]


def test_a_server_side_capture_has_no_arrivals(tmp_path, download):
    half = LINK.rtt_s / 2
    moved = sorted((replace(r, t=r.t - half if r.from_server else r.t + half) for r in download), key=lambda r: r.t)
    [flow] = probe([_file(tmp_path, "s.pcap", pathsim.capture(moved))]).flows
    assert flow.direction == "up" and flow.arrivals is None


@pytest.mark.parametrize("port", [40000, 40001], ids=["same connection", "another connection"])
def test_a_capture_of_an_iperf3_download_is_joined_to_its_file(tmp_path, download, port):
    """The capture and the iperf3 file of one download (the same ports) are one flow: the file's congestion control
    and sender's view with the capture's arrivals, counted once. Another connection's capture stays a flow."""
    run = _file(tmp_path, "bbr.json", inputs.iperf3_json("bbr", [3.8] * 6, reverse=True, connected=(port, 443)))
    m = probe([run, _file(tmp_path, "bbr.pcap", pathsim.capture(download))])
    if port == 40000:
        [flow] = m.flows
        assert flow.cc == "bbr" and flow.source == str(run) and flow.arrivals
        assert "joined" in m.inputs[1].note
    else:
        assert [f.cc for f in m.flows] == ["bbr", None] and m.flows[0].arrivals is None
        assert "joined" not in m.inputs[1].note


def _segments(gaps: dict[int, tuple[float, float]]) -> list[Segment]:
    """A download of 600 full segments, one per ms at the receiver, 20 ms one way; before segment i in `gaps`
    (idle_s, down_s): the sender idle for idle_s (its next segment meets an empty queue), then the link down for
    down_s (the segments sent meanwhile wait). TSval: the sender's clock at 1000 Hz from 7,000,000."""
    server, client = ("10.2.0.2", 443), ("10.1.0.2", 40000)
    out, t_recv, t_send = [], 1.0, 0.98
    for i in range(600):
        idle, down = gaps.get(i, (0.0, 0.0))
        t_send += idle
        t_recv = max(t_recv + 0.001, t_send + 0.02) + down
        out.append(Segment(t_recv, server, client, 1000 + i * 1448, 1, 0x10, 1448, 7_000_000 + int(t_send * 1000),
                           1, wire=1500))
        t_send = max(t_send + 0.001, t_recv - 0.02 - down)
    return out


def test_the_stretches_a_capture_cannot_see_the_link_in_are_told_by_the_timestamps():
    """A gap with the queue empty (the sender idle: the next segment arrives at the base delay) is unseen; a gap
    where the link was down (the segments waited: the next arrives late by the gap) is the link's own."""
    [flow] = bulk_flows(_segments({100: (0.3, 0.0), 400: (0.0, 0.3)}), "x.pcap").flows
    assert flow.unseen is not None and len(flow.unseen) == 1
    (a, b), = flow.unseen
    assert a == pytest.approx(0.099, abs=0.002) and b == pytest.approx(0.099 + 0.3, abs=0.003)
    [plain] = bulk_flows(_segments({}), "x.pcap").flows
    assert plain.unseen == []
    no_ts = [replace(s, tsval=None) for s in _segments({100: (0.3, 0.0)})]
    assert bulk_flows(no_ts, "x.pcap").flows[0].unseen is None


def test_a_gzipped_capture_reads_as_the_capture(tmp_path, download):
    """`tcpdump -w - | gzip`: the same flows; cut short, one line naming the file."""
    import gzip

    raw = pathsim.capture(download)
    plain = probe([_file(tmp_path, "d.pcap", raw)])
    packed = probe([_file(tmp_path, "d.pcap.gz", gzip.compress(raw))])
    assert packed.flows[0].arrivals == plain.flows[0].arrivals and packed.inputs[0].kind == "pcap"
    with pytest.raises(UsageError, match=r"^.*cut\.pcap\.gz: a gzipped capture cut short or damaged"):
        probe([_file(tmp_path, "cut.pcap.gz", gzip.compress(raw)[:2000])])
