"""`quiclab calibrate`'s first estimates (lab/calibrate/estimate.py) recover a known path from a synthetic capture
(tests/pathsim.py) and tool outputs, and the scenario file they are written as loads with the sweep's own loader
(lab/plan/checks.py) into that link."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lab.calibrate import scenario_file
from lab.calibrate.estimate import WIRE_FACTOR, estimate, percentile
from lab.calibrate.measurements import Flow, Measurements
from lab.calibrate.probe import probe
from lab.calibrate.trace import from_capture, from_packets, from_rates, mean_rate, scaled
from lab.errors import UsageError
from lab.link.spec import read_trace
from lab.plan.checks import load
from tests import calibrate_inputs as inputs
from tests import pathsim

RATE, RTT, QUEUE = 4e6, 0.04, 27


def _measure(tmp_path: Path, path: pathsim.Path, seconds: float, timestamps: bool = True,
             extra: dict[str, str] | None = None) -> Measurements:
    cap = tmp_path / "d.pcap"
    cap.write_bytes(pathsim.capture(pathsim.download(path, seconds), timestamps=timestamps))
    files = [cap]
    for name, text in (extra or {}).items():
        (tmp_path / name).write_text(text)
        files.append(tmp_path / name)
    return probe(files)


@pytest.fixture(scope="module")
def overflow_only(tmp_path_factory: pytest.TempPathFactory) -> Measurements:
    return _measure(tmp_path_factory.mktemp("c"), pathsim.Path(RATE, RTT, QUEUE), 8)


def test_a_constant_link_is_recovered_and_loads_as_that_link(tmp_path, overflow_only):
    e = estimate(overflow_only, "m")
    assert e.base_rtt_s == pytest.approx(RTT, abs=1e-6) and e.rtt_s == e.base_rtt_s and e.jitter_s == 0
    assert e.down_rate_bps == pytest.approx(RATE, rel=0.03) and e.down_trace_ms is None
    assert e.down_queue_bytes == pytest.approx(QUEUE * 1500, rel=0.1)
    assert e.down_loss == 0 and any("outside overflow episodes of" in n for n in e.notes)
    out = tmp_path / "my link.toml"
    assert scenario_file.write(out, e, "m") == [out]
    s = load(out)
    assert s.name == "my-link"
    assert s.link == {"rtt": "40ms", "down": {"rate": f"{round(e.down_rate_bps / 1e6, 4):g}mbit",
                                              "queue": f"{e.down_queue_bytes}B"}}
    assert out.read_text().startswith("# The first estimates of `quiclab calibrate m`")


def test_random_loss_outside_overflow_episodes(tmp_path):
    m = _measure(tmp_path, pathsim.Path(RATE, RTT, QUEUE, loss=0.01), 8)
    e = estimate(m, "m")
    assert e.down_loss is not None and 0.005 <= e.down_loss <= 0.02
    assert e.down_loss_upper is None
    out = tmp_path / "l.toml"
    scenario_file.write(out, e, "m")
    assert load(out).link["down"]["loss"] == f"{round(e.down_loss * 100, 4):g}%"


def test_without_delay_samples_loss_is_only_an_upper_bound(tmp_path):
    m = _measure(tmp_path, pathsim.Path(RATE, RTT, QUEUE), 8, timestamps=False)
    e = estimate(m, "m")
    assert e.down_loss is None and e.down_loss_upper is not None and e.down_loss_upper > 0
    assert e.down_queue_bytes is None
    out = tmp_path / "u.toml"
    scenario_file.write(out, e, "m")
    assert set(load(out).link["down"]) == {"rate"}


def test_a_varying_rate_becomes_a_trace_the_loader_reads(tmp_path):
    def rate(t: float) -> float:
        return 6e6 if int(t / 2) % 2 == 0 else 2e6

    m = _measure(tmp_path, pathsim.Path(rate, RTT, 80), 16)
    e = estimate(m, "m")
    assert e.down_trace_ms is not None and e.down_rate_cv is not None and e.down_rate_cv >= 0.25
    out = tmp_path / "cell.toml"
    written = scenario_file.write(out, e, "m")
    assert [p.name for p in written] == ["cell.toml", "cell.down.trace"]
    assert read_trace(written[1]) == e.down_trace_ms
    link = load(out).link
    assert link["down"] == {"trace": str(written[1].resolve()), "queue": f"{e.down_queue_bytes}B"}
    # the trace carries the rate's pattern: its half seconds are at about 6 or about 2 Mbit/s (IP bytes)
    per_window = [sum(1 for t in e.down_trace_ms if w * 500 <= t < (w + 1) * 500) * 12000 / 0.5
                  for w in range(e.down_trace_ms[-1] // 500)]
    assert percentile(per_window, 90) == pytest.approx(6e6, rel=0.1)
    assert percentile(per_window, 10) == pytest.approx(2e6, rel=0.2)
    constant = estimate(m, "m", "constant")
    assert constant.down_trace_ms is None and constant.down_rate_bps is not None


def test_jitter_and_the_rtt_setting_from_idle_pings(tmp_path, overflow_only):
    m = overflow_only.model_copy(deep=True)
    (tmp_path / "p.txt").write_text(inputs.ping_text(inputs.uniform_rtts(30, 2, 400)))
    m.idle += probe([tmp_path / "p.txt"]).idle
    e = estimate(m, "m")
    assert e.jitter_s == pytest.approx(0.002, rel=0.2)
    assert e.base_rtt_s == pytest.approx(0.030, abs=0.0005) and e.base_idle
    assert e.rtt_s == pytest.approx(0.034, abs=0.001)  # the middle of the pings' range: the lab's jitter spans it
    out = tmp_path / "j.toml"
    scenario_file.write(out, e, "m")
    assert set(load(out).link) == {"rtt", "jitter", "down"}


def test_the_trace_keeps_every_opportunity():
    trace = from_rates([(0.0, 1.0, 12e6), (1.0, 1.5, 0.0), (1.5, 2.0, 1.2e6), (2.0, 2.1, 1e5)])
    assert len(trace) == 1000 + 50 + 0  # the 0.83 of the last interval is not a whole packet
    assert trace[:1000] == list(range(1, 1001))
    assert trace[1000:] == list(range(1510, 2001, 10))
    with pytest.raises(ValueError):
        from_rates([(0.0, 0.1, 1e5)])


def test_a_trace_from_packets_keeps_each_millisecond():
    """Each 1500 IP bytes delivered is an opportunity at the millisecond of the packet that completed it (at least
    the first), fractions carried: two 752-byte packets make one."""
    got = from_packets([(0.0, 1500), (0.0004, 1500), (0.0021, 752), (0.0022, 752), (0.0099, 1500), (0.0301, 3000)])
    assert got == [1, 1, 3, 10, 31, 31]
    with pytest.raises(ValueError):
        from_packets([(0.0, 900)])


def test_where_a_capture_did_not_see_the_link_its_trace_has_the_downloads_median_rate():
    """12 Mbit/s (one 1500-byte packet a ms) for 2 s, a 0.5 s stretch the capture could not see the link in, 6
    Mbit/s for 1 s: the stretch gets the median of the 0.1 s bins wholly outside it (12), not a stall."""
    packets = [(i / 1000, 1500) for i in range(2000)] + [(2.5 + i / 500, 1500) for i in range(500)]
    assert from_packets(packets)[2000] == 2500  # nothing between 2.0 and 2.5 s
    got = from_capture(packets, [(1.999, 2.5)])
    inside = [t for t in got if 2000 < t < 2500]
    assert len(inside) == pytest.approx(500, abs=2)  # 12 Mbit/s for 0.5 s
    assert len(got) == len(from_packets(packets)) + len(inside) + 1 and got == sorted(got)
    assert from_capture(packets) == from_packets(packets)


def test_scaling_a_trace_keeps_its_bursts_and_stalls():
    """The search scales a trace's mean rate: the opportunities stay where the trace had them (a burst of 6 in one
    millisecond and a 40 ms stall stay), not spread evenly over a tenth of a second."""
    burst = [t for ms in range(0, 1000, 50) for t in [ms + 5] * 6 + [ms + 45] * 2]  # 8 per 50 ms, in two bursts
    burst.append(1000)
    for factor in (0.5, 1.0, 2.0):
        got = scaled(burst, factor)
        assert mean_rate(got) == pytest.approx(mean_rate(burst) * factor, rel=0.02)
        assert set(got) <= set(burst) and got[-1] == burst[-1]  # only the trace's own milliseconds; its period
        assert max(got.count(ms) for ms in set(got)) == max(1, round(6 * factor))
    assert scaled(burst, 1.0) == burst


def test_a_varying_links_trace_is_made_from_a_captured_download():
    """A download captured packet by packet makes the trace (at the millisecond), though it was not the fastest;
    without a capture the fastest download's intervals do."""
    varying = [0.4, 8.9, 6.3, 0.5, 4.3, 4.6, 4.2, 1.4, 0.9, 0.7, 3.0]
    fast, slow = _flow("down", varying, "bbr"), _flow("down", [x * 0.7 for x in varying])
    packets = [(i * 0.004, 1500) for i in range(2000)] + [(9.0 + i * 0.001, 1500) for i in range(500)]
    slow.arrivals = packets
    e = estimate(Measurements(inputs=[], flows=[fast, slow]), "m")
    assert e.down_trace_ms == from_packets(packets) and e.down_delivery_ms == e.down_trace_ms
    assert any("captured packets" in n for n in e.notes)
    slow.arrivals = None
    assert estimate(Measurements(inputs=[], flows=[fast, slow]), "m").down_trace_ms == from_rates(
        [(a, b, r * WIRE_FACTOR) for a, b, r in fast.rate])


def test_no_rtt_at_all_is_refused_naming_the_folder():
    flow = Flow(source="r.json", label="iperf3 cubic", duration_s=5, bytes=5_000_000, rate=[(0, 5, 8e6)])
    with pytest.raises(UsageError, match=r"^folder: no RTT sample at all"):
        estimate(Measurements(inputs=[], flows=[flow]), "folder")
    flow.rtt = [(1.0, 0.05)]
    e = estimate(Measurements(inputs=[], flows=[flow]), "folder")
    assert e.base_rtt_s == 0.05 and e.down_rate_bps == pytest.approx(8e6 * WIRE_FACTOR)
    assert "no sample without load" in e.notes[0]


def test_on_a_link_whose_rate_varies_the_idle_rtts_spread_is_not_jitter(tmp_path):
    """The same idle pings as above beside a download whose rate swings 6 <-> 2 Mbit/s: the spread is waiting for a
    link that slows down (the rate's variation, a trace or not), not a delay on every packet; beside a steady
    download it is jitter."""
    def rate(t: float) -> float:
        return 6e6 if int(t / 2) % 2 == 0 else 2e6

    m = _measure(tmp_path, pathsim.Path(rate, RTT, 80), 16)
    (tmp_path / "p.txt").write_text(inputs.ping_text(inputs.uniform_rtts(30, 2, 400)))
    m.idle += probe([tmp_path / "p.txt"]).idle
    for mode in ("auto", "constant"):
        e = estimate(m, "m", mode)
        assert e.jitter_s == 0.0 and e.rtt_s == e.base_rtt_s, mode
        assert any(n.startswith("jitter: none") for n in e.notes)
    out = tmp_path / "v.toml"
    scenario_file.write(out, estimate(m, "m", "constant"), "m")
    assert "jitter" not in load(out).link


def test_a_tail_of_slow_replies_is_not_jitter(tmp_path, overflow_only):
    """A jitter-free path whose pings mostly sit within 0.7 ms of the base and a few replies come late (a host that
    did not schedule them at once): the pings of the benchmark's hidden link 4 (30 ms, no jitter; p25 30.2, p75 30.8,
    p95 51.4 ms; results/reference/calibrate-20261126), where the p5..p95 rule gave 7.8 ms of jitter and a link
    setting of 45.6 ms that the search never undid; and a host busy with two labs, where more than a quarter came
    late (a 93.8 ms link: p25 93.9, p50 94.2, p75 96.6 ms: 2.3 ms by the interquartile range). The lower half's
    spread gives none: the link's rtt is the base."""
    shapes = {"few late": [30.1 + 0.7 * ((i * 7) % 45) / 44 for i in range(45)] + [38.0, 45.5, 51.4, 62.0, 75.7],
              "a third late": [93.8 + 0.5 * ((i * 7) % 33) / 32 for i in range(33)]
              + [96.0 + 4 * i for i in range(17)]}
    for name, rtts in shapes.items():
        m = overflow_only.model_copy(deep=True)
        (tmp_path / "p.txt").write_text(inputs.ping_text(rtts))
        m.idle = probe([tmp_path / "p.txt"]).idle
        e = estimate(m, "m")
        assert e.base_rtt_s == pytest.approx(min(rtts) / 1000, abs=1e-6), name
        assert e.jitter_s == 0.0 and e.rtt_s == e.base_rtt_s, name


def test_poisson_upper_bounds_are_the_exact_ones() -> None:
    from lab.calibrate.estimate import poisson_upper

    assert poisson_upper(0, 0.05) == pytest.approx(-math.log(0.05), rel=1e-6)  # 2.996
    assert poisson_upper(3, 0.025) == pytest.approx(8.767, abs=0.001)  # the tables' 97.5 % bound for 3
    assert poisson_upper(100, 0.025) == pytest.approx(121.6, abs=0.1)
    with pytest.raises(ValueError):
        poisson_upper(-1, 0.05)


def _timed(cc: str, retx_times: list[float], mbit: float = 10.0) -> Flow:
    return Flow(source=f"{cc}.json", label=f"iperf3 {cc}", cc=cc, duration_s=10, bytes=int(mbit * 1e6 / 8 * 10),
                rate=[(i, i + 1, mbit * 1e6) for i in range(10)], rtt=[(i + 0.5, 0.15) for i in range(10)],
                retransmits=len(retx_times), retransmit_times_s=retx_times)


def test_random_loss_is_bounded_by_the_retransmissions_after_start_up() -> None:
    """Every randomly lost segment is sent again: the download with the fewest retransmissions after its start-up
    bounds random loss from above (95 %, over both downloads); its slow start's overshoot does not count. The shape
    of the benchmark's link 9 (0.098 % loss): BBR 3 retransmissions after start-up, cubic 101 in its overshoot and
    23 after; the old split gave 0.028 %."""
    from lab.calibrate.estimate import loss_bounds, poisson_upper, steady_retransmissions

    bbr = _timed("bbr", [2.5, 5.5, 7.5])
    cubic = _timed("cubic", [1.5] * 101 + [2.5] * 16 + [3.5] * 7)
    segments = 10e6 * 8 / 8 / 1448  # 8 s after start-up at 10 Mbit/s
    assert steady_retransmissions(bbr) == (3, pytest.approx(segments))
    assert steady_retransmissions(cubic) == (23, pytest.approx(segments))
    point, upper = loss_bounds([cubic, bbr])
    assert point == pytest.approx(3 / segments)
    assert upper == pytest.approx(poisson_upper(3, 0.025) / segments)  # 0.127 %: above the true 0.098 %
    e = estimate(Measurements(inputs=[], flows=[cubic, bbr]), "m")
    assert (e.down_loss_steady, e.down_loss_max) == (point, upper)
    assert any(n.startswith("random loss at most") for n in e.notes)
    assert loss_bounds([bbr.model_copy(update={"retransmit_times_s": None})]) is None  # not timed: no bound
    five = Flow(source="c.json", label="iperf3 cubic", cc="cubic", duration_s=5, bytes=6_250_000,
                rate=[(i, i + 1, 10e6) for i in range(5)], rtt=[(i + 0.5, 0.15) for i in range(5)],
                retransmits=9, retransmit_times_s=[0.5] * 4 + [1.5] * 4 + [3.5])
    assert steady_retransmissions(five) == (1, pytest.approx(3 * 10e6 / 8 / 1448))  # as its rate: from 2 s


def test_the_lab_search_starts_within_the_evidence() -> None:
    """The split of retransmissions gave link 4 of the benchmark 0.195 % (true 0.053 %; the bound 0.065 %): the
    search's start is held at the bound, its first losses are the bound's ladder, and without timed retransmissions
    the search keeps its own grid and the lab's limit."""
    from lab.calibrate import fit as fits
    from lab.calibrate.search import MAX_LOSS, Limits, loss_ladder

    bbr = _timed("bbr", [2.5, 5.5, 7.5])
    cubic = _timed("cubic", [1.5] * 101 + [2.5] * 16 + [3.5] * 7)
    e = estimate(Measurements(inputs=[], flows=[cubic, bbr]), "m").model_copy(update={"down_loss": 0.00195})
    assert e.down_loss_max is not None and e.down_loss_steady is not None and e.down_loss_max < 0.00195
    assert fits.start(e, "m").loss == e.down_loss_max
    assert not e.base_idle  # its base is from samples under load: no lower bound on the RTT
    assert fits.search_range(e) == (loss_ladder(e.down_loss_steady, e.down_loss_max),
                                   Limits(max_loss=e.down_loss_max, max_rtt_s=e.rtt_s))
    plain = e.model_copy(update={"down_loss_max": None, "down_loss_steady": None})
    assert fits.search_range(plain) == (None, Limits(MAX_LOSS, e.rtt_s)) and fits.start(plain, "m").loss == 0.00195
    # an RTT below the lab's smallest (a loopback path) bounds the search at the lab's limit, not with an error
    assert fits.search_range(plain.model_copy(update={"rtt_s": 0.00002}))[1].max_rtt_s == 0.0001
    # a base without load (ping): the setting at most it and at least it less RTT_SLACK_S, within the lab's limits
    idle = plain.model_copy(update={"base_idle": True})
    assert fits.search_range(idle)[1] == Limits(MAX_LOSS, e.rtt_s, e.rtt_s - fits.RTT_SLACK_S)
    assert fits.search_range(idle.model_copy(update={"rtt_s": 0.001}))[1].min_rtt_s == 0.0001


def _flow(direction: str, mbits: list[float], cc: str = "cubic") -> Flow:
    return Flow(source=f"{cc}-{direction}.json", label=f"iperf3 {cc}", cc=cc,
                direction="up" if direction == "up" else "down", duration_s=len(mbits),
                bytes=int(sum(mbits) * 1e6 / 8), rate=[(i, i + 1, r * 1e6) for i, r in enumerate(mbits)],
                rtt=[(i + 0.5, 0.08) for i in range(len(mbits))])


def _mbit_per_second(trace_ms: list[int]) -> list[float]:
    return [sum(1 for t in trace_ms if s * 1000 < t <= (s + 1) * 1000) * 12000 / 1e6
            for s in range(math.ceil(trace_ms[-1] / 1000))]


def test_a_rate_trace_begins_where_its_download_began_and_a_varying_upload_is_one_too() -> None:
    """The shape of the ATT recording's link (results/reference/calibrate-20261126-2, link 0): a download that got
    9 Mbit/s in its second second and then little; an upload stalled 3-5 s in. The down trace keeps the start-up
    seconds (from after them it began 2 s late, past the high rate a loss-based sender's window grows in), and the
    upload becomes the uplink's trace with its stall (unmeasured, the uplink was unlimited and ACKs never waited)."""
    down = [0.4, 8.9, 6.3, 0.0, 4.3, 4.6, 4.2, 1.4, 0.9, 0.7]
    up = [3.0, 0.5, 2.0, 0.0, 0.0, 1.5, 2.5, 2.0, 2.2, 1.8]
    m = Measurements(inputs=[], flows=[_flow("down", down, "bbr"), _flow("down", [x * 0.7 for x in down]),
                                       _flow("up", up)])
    e = estimate(m, "m")
    assert e.down_trace_ms is not None and e.up_trace_ms is not None
    assert _mbit_per_second(e.down_trace_ms) == pytest.approx([x * WIRE_FACTOR for x in down], abs=0.02)
    assert _mbit_per_second(e.up_trace_ms)[:5] == pytest.approx([x * WIRE_FACTOR for x in up[:5]], abs=0.02)
    assert e.up_rate_bps == pytest.approx(len(e.up_trace_ms) * 12000 / (e.up_trace_ms[-1] / 1000))
    tables = scenario_file.link_tables(e, {"down": Path("d.trace"), "up": Path("u.trace")})
    assert tables[2] == {"trace": str(Path("u.trace").resolve())}  # what the search's candidates put in force
    steady_up = estimate(Measurements(inputs=[], flows=[_flow("down", down, "bbr"), _flow("up", [2.0] * 10)]), "m")
    assert steady_up.up_trace_ms is None and steady_up.up_rate_bps == pytest.approx(2e6 * WIRE_FACTOR)
    assert estimate(Measurements(inputs=[], flows=[_flow("down", down)]), "m").up_rate_bps is None
    # --rate auto keeps both shapes for the lab search (fit.shapes); a shape the user asked for has no other
    assert e.down_delivery_ms == e.down_trace_ms and e.down_median_bps == pytest.approx(2.8e6 * WIRE_FACTOR)
    assert steady_up.down_delivery_ms == e.down_delivery_ms and steady_up.down_median_bps is not None
    assert estimate(m, "m", "constant").down_delivery_ms is None and estimate(m, "m", "trace").down_median_bps is None


def test_an_uploads_rate_is_what_the_receiver_got() -> None:
    """iperf3's client of an upload is its sender: its intervals count what it wrote into its socket, which runs on
    through an uplink's stall; with --get-server-output (a server run with --json) the receiver's intervals are
    the rate."""
    import json

    from lab.calibrate.tools import iperf3_flow

    doc = json.loads(inputs.iperf3_json("cubic", [4.0] * 6, rtts_ms=[80] * 6, retransmits=[0] * 6))
    doc["server_output_json"] = json.loads(inputs.iperf3_json("cubic", [4.0, 4.0, 0.0, 0.0, 4.0, 4.0]))
    flow = iperf3_flow(doc, "up.json")
    assert flow.direction == "up" and [r for _, _, r in flow.rate] == [4e6, 4e6, 0.0, 0.0, 4e6, 4e6]
    assert flow.rtt  # the sender's RTT stays the client's own
    doc.pop("server_output_json")
    assert [r for _, _, r in iperf3_flow(doc, "up.json").rate] == [4e6] * 6


def test_repeated_runs_of_one_sender_read_the_queue_together() -> None:
    """The queue is the highest p95 over senders, a sender's repeated runs pooled: one run whose stalls read as a
    deep queue (ATT's recording: BBR runs of 90, 343 and 85 kB) no longer sets it alone."""
    from lab.calibrate.estimate import queue_size

    def run(cc: str, rise_ms: float) -> Flow:
        rtts = [(0.5 + 0.1 * k, 0.050 + (rise_ms if k % 10 == 0 else 5) / 1000) for k in range(100)]
        return Flow(source=f"{cc}.json", label=f"iperf3 {cc}", cc=cc, duration_s=10.0, bytes=10_000_000,
                    rate=[(float(t), t + 1.0, 8e6) for t in range(10)], rtt=rtts)

    flows = [run("bbr", 20), run("bbr", 20), run("bbr", 300), run("cubic", 10)]
    size, _ = queue_size(flows, 0.050) or (0.0, 0.0)
    alone, _ = queue_size(flows[2:3], 0.050) or (0.0, 0.0)
    assert alone > 250e-3 * 1e6  # the outlying run alone: its 10 % of samples 300 ms up (at 1 MB/s)
    assert size < 0.1 * alone  # pooled with the other two, its tail is under the p95
