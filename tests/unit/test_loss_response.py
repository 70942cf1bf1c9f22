"""Loss-response arithmetic: the link's counters per run, retransmitted bytes and bytes in flight from a capture,
a qlog and tshark's fields, and the Reno-model check (all from hand-made inputs)."""

import json
import math
from dataclasses import replace

import pytest

from lab.endpoints.sender_cc import SOURCE_CLAIM, SOURCE_NETNS
from lab.evidence.loss_response import TSHARK_FIELDS, qlog_response, tcp_response, tshark_quic_response
from lab.evidence.pcap import PROTO_TCP, Packet
from lab.link.counters import Counters, parse_linkem
from lab.results.schema import RunRecord
from lab.stats import cc_check
from lab.stats.models import mathis_goodput_bps

METRICS = """# HELP quiclab_link_packets_total x
quiclab_link_packets_total{direction="downlink",protocol="tcp"} 90
quiclab_link_packets_total{direction="downlink",protocol="udp"} 5
quiclab_link_packets_total{direction="uplink",protocol="tcp"} 40
quiclab_link_bytes_total{direction="downlink",protocol="tcp"} 130000
quiclab_link_bytes_total{direction="downlink",protocol="udp"} 1000
quiclab_link_bytes_total{direction="uplink",protocol="tcp"} 2400
quiclab_link_received_packets_total{direction="downlink",protocol="tcp"} 100
quiclab_link_received_packets_total{direction="downlink",protocol="udp"} 6
quiclab_link_received_packets_total{direction="uplink",protocol="tcp"} 41
quiclab_link_drops_total{direction="downlink",cause="loss"} 8
quiclab_link_drops_total{direction="downlink",cause="queue"} 3
quiclab_link_drops_total{direction="downlink",cause="outage"} 0
quiclab_link_drops_total{direction="uplink",cause="loss"} 1
quiclab_link_drops_total{direction="uplink",cause="queue"} 0
quiclab_link_drops_total{direction="other",cause="loss"} 7
quiclab_link_queue_packets{direction="downlink"} 26
"""


def test_linkem_counters_per_direction_and_their_difference() -> None:
    snap = parse_linkem(METRICS)
    assert snap.down == Counters(bytes=131000, packets=95, received=106, loss_drops=8, queue_drops=3,
                                 outage_drops=0)
    assert snap.up == Counters(bytes=2400, packets=40, received=41, loss_drops=1, queue_drops=0, outage_drops=None)
    later = parse_linkem(METRICS.replace("} 8\n", "} 18\n").replace("} 100\n", "} 300\n"))
    delta = later - snap
    assert (delta.down.received, delta.down.loss_drops, delta.down.queue_drops) == (200, 10, 0)
    assert delta.down.loss_rate == pytest.approx(10 / 200)
    assert Counters(bytes=1, packets=1).loss_rate is None  # netem: unknown, not zero


SERVER, CLIENT, PORT, CPORT = "10.71.2.10", "10.71.1.10", 443, 50000
ISN = 2**32 - 1000  # the sequence numbers wrap during the transfer


def seg(t: float, offset: int, length: int) -> Packet:
    return Packet(t, SERVER, CLIENT, PROTO_TCP, PORT, CPORT, b"", length, (ISN + 1 + offset) % 2**32, 0, 0x18)


def ack(t: float, offset: int) -> Packet:
    return Packet(t, CLIENT, SERVER, PROTO_TCP, CPORT, PORT, b"", 0, 7, (ISN + 1 + offset) % 2**32, 0x10)


def test_tcp_retransmitted_bytes_and_bytes_in_flight_from_sequence_numbers() -> None:
    synack = Packet(0.0, SERVER, CLIENT, PROTO_TCP, PORT, CPORT, b"", 0, ISN, 1, 0x12)
    packets = [synack, ack(0.01, 0),
               seg(0.1, 0, 1000), seg(0.1, 1000, 1000), seg(0.1, 2000, 1000),  # 3000 new
               ack(0.2, 1000),  # the second segment was lost: duplicate ACKs
               ack(0.21, 1000),
               seg(0.3, 1000, 1000),  # its retransmission
               seg(0.3, 3000, 1000),  # new
               seg(0.4, 500, 1000),   # half old (500-1000 then 1000-1500: all below 4000) -> 1000 old
               ack(0.5, 4000)]
    r = tcp_response(packets, SERVER, PORT)
    assert r is not None
    assert (r.data_packets, r.data_bytes, r.retx_packets, r.retx_bytes) == (6, 6000, 2, 2000)
    assert r.retx_fraction == pytest.approx(2000 / 6000)
    assert [x[2] for x in r.sent] == [False, False, False, True, False, True]
    # in flight: highest sent - highest cumulative ACK, at each data segment
    assert [v for _, v in r.in_flight] == [1000, 2000, 3000, 2000, 3000, 3000]
    assert tcp_response([synack], SERVER, PORT) is None  # no data: nothing to say


def qlog(*events: dict[str, object]) -> str:
    head = {"qlog_format": "JSON-SEQ", "qlog_version": "0.3", "trace": {}}
    return "".join("\x1e" + json.dumps(e) + "\n" for e in (head, *events))


def sent(t: float, *frames: tuple[int, int, int]) -> dict[str, object]:
    return {"time": t, "name": "transport:packet_sent",
            "data": {"frames": [{"frame_type": "ack"},
                                *({"frame_type": "stream", "stream_id": s, "offset": o, "length": n}
                                  for s, o, n in frames)]}}


def test_quic_retransmitted_stream_bytes_and_cwnd_from_a_qlog() -> None:
    text = qlog(
        {"time": 0, "name": "transport:packet_sent", "data": {"frames": [{"frame_type": "crypto"}]}},  # not data
        sent(10, (0, 0, 1200)), sent(10, (0, 1200, 1200)), sent(11, (3, 0, 20), (0, 2400, 1000)),
        {"time": 50, "name": "recovery:metrics_updated", "data": {"congestion_window": 12000, "bytes_in_flight": 3420}},
        sent(60, (0, 1200, 1200)),  # stream 0's second packet again
        sent(61, (3, 0, 20), (0, 3400, 500)),  # stream 3 again (20 old), 500 new on stream 0
        {"time": 62, "name": "recovery:metrics_updated", "data": {"congestion_window": 6000}},
    ) + '\x1e{"time": 70, "name": "transport:packet_se'  # a record cut short when the server stopped
    r = qlog_response(text)
    assert r is not None
    assert (r.data_packets, r.data_bytes, r.retx_packets, r.retx_bytes) == (5, 5140, 2, 1220)
    assert r.cwnd == [(0.05, 12000.0), (0.062, 6000.0)] and r.in_flight == [(0.05, 3420.0)]
    assert qlog_response(qlog()) is None


def tline(t: float, src: str, size: int, forms: str, pns: str, sids: str = "", offs: str = "", lens: str = "",
          acks: str = "") -> str:
    return "\t".join([f"{t}", src, str(size), forms, pns, sids, offs, lens, acks])


def test_quic_from_tsharks_decrypted_fields() -> None:
    assert len(TSHARK_FIELDS) == 9
    text = "\n".join([
        tline(0.0, SERVER, 1200, "1;1", "0;0"),  # Initial + Handshake, no stream data
        tline(0.1, CLIENT, 1200, "1;1", "5;0", acks="99;0"),  # a long-header ACK: not of 1-RTT packets
        tline(0.2, SERVER, 1200, "0", "1", "0;3", "0;0", "1000;10"),
        tline(0.2, SERVER, 1200, "0", "2", "0", "1000", "1000"),
        tline(0.2, SERVER, 1200, "0", "3", "0", "2000", "1000"),
        tline(0.3, CLIENT, 50, "0", "9", acks="1"),  # ACK up to packet 1
        tline(0.4, SERVER, 1200, "0", "4", "0", "1000", "1000"),  # packet 2's data again
        tline(0.4, SERVER, 1200, "0", "5", "0;0", "2500", ""),  # fields that do not line up: skipped
    ])
    r = tshark_quic_response(text, SERVER)
    assert r is not None
    assert (r.data_packets, r.data_bytes, r.retx_packets, r.retx_bytes) == (4, 4010, 1, 1000)
    assert [v for _, v in r.in_flight] == [1200, 2400, 3600, 3600]  # packets 2, 3, 4 after the ACK of 1


def record(**kw: object) -> RunRecord:
    base = dict(sweep="s", run_key="0/h1/curl/nginx/0", point=0, point_label="loss=2%", x_name="loss_pct", x=2.0,
                protocol="h1", client="curl", server="nginx", repeat=0, order=0, seed=1, shaper="linkem",
                rate_bps=20e6, rtt_s=0.04, loss_pct=2.0, jitter_s=0.0, link="{}", size_bytes=2_000_000,
                status="ok", failure="", http_version="1.1", bytes=2_000_000, sha256_ok=True, handshake_s=None,
                ttfb_s=None, total_s=1.0, goodput_bps=2.5e6, wall_s=1.0, overhead_s=0.0,
                wire_down_bytes=1500 * 980, wire_up_bytes=1000, wire_overhead=1.0, cc_client="bbr",
                cc_server="reno", started_at="t", cc_sender="reno", cc_sender_source="netns",
                link_down_sent_pkts=1000, link_down_loss_drops=20, link_down_queue_drops=0)
    base.update(kw)
    return RunRecord(**base)  # type: ignore[arg-type]


def test_the_mathis_prediction_uses_the_runs_observed_loss_and_segment_size() -> None:
    r = record()
    pred = cc_check.predict(r)
    assert pred is not None
    assert pred.loss_p == pytest.approx(0.02)
    assert pred.mss_bytes == pytest.approx(1500 - 52)  # 980 delivered full packets less TCP/IP headers
    assert pred.goodput_bps == pytest.approx(1448 * 8 / 0.04 * math.sqrt(1.5) / math.sqrt(0.02))
    assert pred.goodput_bps == pytest.approx(mathis_goodput_bps(1448, 0.04, 0.02))
    quic = cc_check.predict(record(protocol="h3"))
    assert quic is not None and quic.mss_bytes == pytest.approx(1500 - 28)
    # without the link's counters, the configured loss and a full-size packet
    bare = cc_check.predict(record(link_down_sent_pkts=None, link_down_loss_drops=None, wire_down_bytes=None))
    assert bare is not None and bare.loss_p == pytest.approx(0.02) and bare.mss_bytes == 1448
    assert cc_check.predict(record(loss_pct=0.0, link_down_loss_drops=0)) is None  # no loss, no prediction


def honest(ratios: list[float], point: int = 0, **kw: object) -> list[RunRecord]:
    """Reno runs read back from the namespace whose goodput is `ratios` x the model."""
    model = cc_check.predict(record(point=point))
    assert model is not None
    base: dict[str, object] = dict(point=point, point_label=f"p{point}", cc_sender_source=SOURCE_NETNS)
    base.update(kw)
    return [record(repeat=i, goodput_bps=model.goodput_bps * f, **base) for i, f in enumerate(ratios)]  # type: ignore[arg-type]


def threshold(value: float) -> cc_check.Threshold:
    return cc_check.Threshold(value=value, honest_max=value / cc_check.MARGIN, at="p0", groups=1, runs=5, flagged=0,
                              run_min=0.5, run_max=1.5, source="validate-reno")


def test_the_threshold_is_twice_the_highest_honest_median_of_the_folder_and_nothing_else() -> None:
    """Derived from the runs, not typed: host-bound runs and senders not read back (a registry claim) stay out."""
    runs = honest([0.9, 1.0, 1.1]) + honest([1.3, 1.5, 1.7], point=1)
    runs += honest([3.0, 3.0, 3.0], point=2, host_bound="host CPUs 100% busy")  # the host held the flow
    runs += honest([9.0, 9.0, 9.0], point=3, server="nginx", protocol="h3", cc_sender="newreno (nginx QUIC, fixed)",
                   cc_sender_source=SOURCE_CLAIM)  # the claim under test, not an honest sender
    t = cc_check.derive_threshold(runs, "validate-reno")
    assert t is not None
    assert t.honest_max == pytest.approx(1.5) and t.value == pytest.approx(cc_check.MARGIN * 1.5)
    assert (t.groups, t.runs, t.flagged, t.at) == (2, 6, 3, "p1 HTTP/1.1 curl→nginx")
    assert (t.run_min, t.run_max) == (pytest.approx(0.9), pytest.approx(1.7))
    assert cc_check.derive_threshold(runs[6:], "x") is None  # nothing honest left: no threshold
    assert "3.00x" in cc_check.note(t) and "1.50" in cc_check.note(t)
    assert "No Reno/NewReno claim is judged" in cc_check.note(None)


def test_a_reno_claim_is_refuted_only_when_its_whole_ci_lies_above_the_threshold() -> None:
    t = threshold(2.5)
    near = honest([0.9, 1.0, 1.1])
    far = honest([5.0, 5.0, 5.0, 5.0, 5.0], point=1)
    mixed = honest([0.5, 5.0, 5.0, 5.0, 5.0], point=2)  # median 5.0, but the n=5 CI (the range) reaches 0.5
    cubic = honest([5.0] * 3, point=3, cc_sender="cubic")
    checks = {c.point_label: c for c in cc_check.checks([*near, *far, *mixed, *cubic], t)}
    assert checks["p0"].verdict == "consistent with Reno" and checks["p0"].ratio == pytest.approx(1.0)
    assert checks["p1"].verdict.startswith("REFUTED") and checks["p1"].ratio_ci is not None
    assert checks["p2"].ratio == pytest.approx(5.0) and not checks["p2"].verdict.startswith("REFUTED")
    assert "not refuted" in checks["p2"].verdict
    assert checks["p3"].verdict == "not Reno (model for reference)"
    assert all(c.verdict.startswith("not judged") for c in cc_check.checks(far, None))  # no reference folder
    cols, rows = cc_check.table(list(checks.values()))
    assert len(rows) == 4 and len(cols) == len(rows[0])


def test_a_point_where_the_link_rate_binds_is_not_judged() -> None:
    # 0.1 % loss on 40 ms: Mathis ~11 Mbit/s > half of 5 Mbit/s: the link's rate, not loss, limits the flow
    r = record(link_down_loss_drops=1, rate_bps=5e6, goodput_bps=4.5e6)
    (check,) = cc_check.checks([r], threshold(2.5))
    assert check.rate_limited and check.verdict == "rate-limited (not judged)"


def test_failed_and_timed_out_runs_count_censored_in_every_column() -> None:
    """A run that did not complete is a result, its goodput known only to lie below size / its own end; it enters
    the ratio, its CI and the goodput column alike, each printed as the bound it is; a run that never ran
    (unsupported) is none."""
    t = threshold(2.5)
    assert cc_check.checks([record(status="unsupported")], t) == []
    assert cc_check.checks([replace(record(), goodput_bps=None)], t) == []
    model = cc_check.predict(record())
    assert model is not None
    slow = record(repeat=2, status="timeout", goodput_bps=None, total_s=60.0, timeout_s=60.0, size_bytes=10_000_000)
    (c,) = cc_check.checks([record(repeat=0, goodput_bps=model.goodput_bps * 0.9),
                            record(repeat=1, goodput_bps=model.goodput_bps * 1.0), slow], t)
    assert (c.n, c.censored) == (3, 1) and c.ratio == pytest.approx(0.9) and c.ratio_bound == ""  # worst rank
    row = cc_check.table([c])[1][0]
    assert row[8].startswith("<") and row[8] == f"<{10_000_000 * 8 / 60 / model.goodput_bps:.2f}\u20131.00"
    # most runs censored: median, goodput and CI are bounds below, and a bound below never refutes a Reno claim
    fast = [record(repeat=0, goodput_bps=model.goodput_bps * 5)]
    timeouts = [replace(slow, repeat=i) for i in (1, 2)]
    (c,) = cc_check.checks([*fast, *timeouts], t)
    assert c.ratio_bound == "<" and c.verdict == "consistent with Reno" and c.censored == 2
    row = cc_check.table([c])[1][0]
    assert row[3] == "3 (2)" and row[7].startswith("<")
    assert row[6] == "<1.33"  # 10 MB / 60 s; goodput: the censored median's bound, not the ok run's


def test_an_aborted_run_is_censored_at_its_own_end_in_the_claim_check() -> None:
    """connectify-cc: nginx's QUIC run aborted after 65.9 s of a 150 s timeout; its goodput is below
    size / 65.9 s, not below size / 150 s."""
    model = cc_check.predict(record())
    assert model is not None
    ok = [record(repeat=i, goodput_bps=model.goodput_bps * f) for i, f in enumerate((1.0, 1.1, 1.2, 1.3))]
    aborted = record(repeat=4, status="failed", goodput_bps=None, total_s=65.9, timeout_s=150.0)
    (c,) = cc_check.checks([*ok, aborted], threshold(2.5))
    assert c.ratio_ci is not None
    assert c.ratio_ci.lo.bound == "<" and c.ratio_ci.lo.value == pytest.approx(2_000_000 * 8 / 65.9 / model.goodput_bps)


def test_other_traffic_on_the_link_during_a_run_is_told_apart() -> None:
    before = parse_linkem(METRICS)
    assert before.by_protocol == {"tcp": 141, "udp": 6}
    quiet = parse_linkem(METRICS.replace('"tcp"} 100\n', '"tcp"} 1400\n'))
    assert (quiet - before).foreign("tcp") == 0
    noisy = parse_linkem(METRICS.replace('"udp"} 6\n', '"udp"} 60\n'))
    assert (noisy - before).foreign("tcp") == 54 and (noisy - before).foreign("udp") == 0


def test_a_run_disturbed_by_another_command_is_the_labs_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    from lab.errors import EnvironmentFailure
    from lab.link import linkem
    from lab.link.model import Link
    from lab.link.spec import parse_link
    from lab.protocols import Protocol
    from lab.run import probes

    mine = parse_link({"rtt": "40ms", "loss": "2%"})
    before = parse_linkem(METRICS)
    monkeypatch.setattr(linkem, "current", lambda: mine)
    probes.disturbed("linkem", mine, before, before, Protocol.H1, 2_000_000)  # nothing else happened
    probes.disturbed("netem", mine, None, None, Protocol.H1, 2_000_000)  # netem: nothing to tell it by
    udp = parse_linkem(METRICS.replace('"udp"} 6\n', '"udp"} 600\n'))
    with pytest.raises(EnvironmentFailure, match="594 packets of other traffic"):
        probes.disturbed("linkem", mine, before, udp, Protocol.H1, 2_000_000)
    big = parse_linkem(METRICS.replace('"tcp"} 100\n', '"tcp"} 20000\n')  # a 30 MB TCP download meanwhile
                       .replace('"downlink",protocol="tcp"} 130000\n', '"downlink",protocol="tcp"} 30130000\n'))
    # as many packets, but small ones (quiche's server to quiche's client): the run's own sender, not a download
    small = parse_linkem(METRICS.replace('"tcp"} 100\n', '"tcp"} 20000\n')
                         .replace('"downlink",protocol="tcp"} 130000\n', '"downlink",protocol="tcp"} 3130000\n'))
    probes.disturbed("linkem", mine, before, small, Protocol.H1, 2_000_000)
    with pytest.raises(EnvironmentFailure, match="other traffic"):
        probes.disturbed("linkem", mine, before, big, Protocol.H1, 2_000_000)
    probes.disturbed("linkem", mine, before, big, Protocol.H1, 20_000_000)  # ... but not for a 20 MB run
    # a sender that does not back off, re-sending what a full queue dropped: the emulator's drops are its own
    import dataclasses

    dropped = dataclasses.replace(big, down=dataclasses.replace(big.down, queue_drops=(big.down.queue_drops or 0)
                                                                 + 20_000))
    probes.disturbed("linkem", mine, before, dropped, Protocol.H1, 2_000_000)
    reordering = parse_link({"rate": "40mbit", "delay": "40ms", "jitter": "10ms", "reorder": "yes"})
    monkeypatch.setattr(linkem, "current", lambda: reordering)
    probes.disturbed("linkem", reordering, before, big, Protocol.H1, 2_000_000)  # a sender's spurious retransmissions
    with pytest.raises(EnvironmentFailure, match="594 packets of other traffic"):  # ... other protocols still
        probes.disturbed("linkem", reordering, before, udp, Protocol.H1, 2_000_000)
    monkeypatch.setattr(linkem, "current", lambda: mine)
    monkeypatch.setattr(linkem, "current", lambda: Link())  # someone's test reset the link
    with pytest.raises(EnvironmentFailure, match="the link was changed during the run"):
        probes.disturbed("linkem", mine, before, before, Protocol.H1, 2_000_000)


def test_a_view_that_does_not_cover_the_object_is_not_recorded(tmp_path) -> None:
    from lab.endpoints.registry import registry
    from lab.evidence import sender_view
    from lab.evidence.capture import Evidence
    from lab.protocols import Protocol

    log = tmp_path / "server-abc.sqlog"
    log.write_text(qlog(sent(1, (0, 0, 1200)), sent(2, (0, 1200, 1200)), sent(3, (0, 1200, 1200))))
    ngtcp2 = registry().server("ngtcp2")
    ev = Evidence(tmp_path, tmp_path, files=[log])
    r = sender_view.analyse(ev, ngtcp2, Protocol.H3, 443, 2400)
    assert r is not None and (r.data_bytes, r.retx_bytes) == (3600, 1200) and not ev.problems
    assert sender_view.analyse(ev, ngtcp2, Protocol.H3, 443, 2401) is None  # 2400 new bytes < the object
    assert "less than the 2401-byte object: not recorded" in ev.problems[0]
